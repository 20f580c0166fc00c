"""`clbench evaluate` recomputes, from the checkpoints, the very rows `clbench train` stored: for every built-in
approach, in both scenarios, every (stage, task, evaluation, split)'s accuracy and loss bit for bit (the test rows
and the validation rows).

A checkpoint that leaves out state the prediction needs (iCaRL's class means, HAT's masks, PackNet's owners, a
replay memory) makes `evaluate` disagree with `train` here. The library function is the one `clbench evaluate`
calls (`clbench.run.evaluate.reevaluate`), on a tiny synthetic benchmark.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
from synthetic import TINY_TRAINING, synthetic_loader, tiny_spec

from clbench.approaches.registry import REGISTRY
from clbench.errors import SpecError
from clbench.run.engine import execute
from clbench.run.evaluate import reevaluate
from clbench.run.plan import plan_runs

CPU = torch.device("cpu")
ONE_EPOCH = replace(TINY_TRAINING, max_epochs=1)
BUILT_INS = sorted(name for name, cls in REGISTRY.items() if cls.__module__.startswith("clbench."))


def numbers(rows: list[dict[str, Any]]) -> dict[tuple[int, int, str, str], str]:
    """(stage, task, evaluation, split) -> [accuracy, loss, n_test] as JSON text (exact floats; random's NaN loss
    equals itself)."""
    found = {(row["stage"], row["task"], row["evaluation"], row["split"]):
             json.dumps([row["accuracy"], row["loss"], row["n_test"]]) for row in rows}
    assert len(found) == len(rows)  # one row per cell
    return found


@pytest.mark.parametrize("scenario", ["task", "class"])
@pytest.mark.parametrize("method", BUILT_INS)
def test_evaluate_reproduces_the_rows_train_stored(method: str, scenario: str, tmp_path: Path) -> None:
    loader = synthetic_loader(n_train=64, n_test=32)
    if scenario == "class" and REGISTRY[method].refuses_class:  # gpm: refused before any run, nothing to evaluate
        with pytest.raises(SpecError, match="data.scenario=class"):
            plan_runs(tiny_spec("mlp", n_tasks=2, training=ONE_EPOCH, scenario=scenario), [method], [0], tmp_path)
        return
    [plan] = plan_runs(tiny_spec("mlp", n_tasks=2, training=ONE_EPOCH, scenario=scenario), [method], [0], tmp_path)
    trained = execute(plan, device=CPU, loader=loader)
    evaluated = reevaluate(plan, device=CPU, loader=loader)
    # after each of the 2 tasks, and at initialisation (PathNet: not before a task is learned): every checkpoint read
    stages = {0, 1, 2} if REGISTRY[method].predicts_unlearned_tasks else {1, 2}
    assert {row["stage"] for row in evaluated} == stages
    assert {row["split"] for row in evaluated} == {"test", "validation"}
    assert numbers(evaluated) == numbers(trained.rows)
