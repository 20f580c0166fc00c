"""Every registered approach runs a tiny 3-task benchmark (MLP and conv) and fills its accuracy matrix.

Each built-in run is also held to a golden record (`tests/golden/runs.json`): its config, data and reference
hashes, and every stored accuracy and loss, bit for bit (on one CPU thread, as `conftest.py` sets). A change
that alters a built-in's identity or numbers (a refactor that should be a pure move, a new spec field that
should keep old hashes) fails here. The numbers are compared only under the torch version that recorded them
(kernels differ between versions); the hashes always. Re-record, after checking that the change is meant:
`CLBENCH_RECORD_GOLDEN=1 python -m pytest tests/core/test_contract.py`.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from synthetic import TINY_TRAINING, synthetic_loader, tiny_spec

from clbench.approaches import REGISTRY
from clbench.metrics import accuracy_matrix, is_complete_matrix
from clbench.run.engine import execute, plan_runs

FAST = replace(TINY_TRAINING, max_epochs=2)


@pytest.mark.parametrize("network", ["mlp", "alexnet"])
@pytest.mark.parametrize("method", sorted(REGISTRY))
def test_every_approach_fills_the_lower_triangle(method: str, network: str, tmp_path: Path) -> None:
    spec = tiny_spec(network, training=FAST)
    [plan] = plan_runs(spec, [method], [0], tmp_path)
    outcome = execute(plan, device=torch.device("cpu"), loader=synthetic_loader(n_train=160, n_test=60))
    frame = pd.DataFrame(outcome.rows)
    learned = frame[(frame["evaluation"] == "task-aware") & (frame["task"] <= frame["stage"]) & (frame["stage"] >= 1)]
    matrix = accuracy_matrix(learned)
    assert matrix.shape == (3, 3) and is_complete_matrix(matrix)
    assert np.isnan(matrix[np.triu_indices(3, 1)]).all()
    assert frame["accuracy"].notna().all() and (frame["scenario"] == "task").all()
    cls = REGISTRY[method]
    evaluations = {"task-aware"} | ({"task-agnostic"} if not cls.needs_task_id else set())
    assert set(frame["evaluation"]) == evaluations
    for evaluation in evaluations:  # the whole matrix: stages 0..3 (0: at initialisation) x tasks 1..3
        cells = set(zip(*frame.loc[frame["evaluation"] == evaluation, ["stage", "task"]].to_numpy().T))
        whole = {(t, u) for t in range(4) for u in range(1, 4)}
        assert cells == (whole if cls.predicts_unlearned_tasks else {(t, u) for t, u in whole if u <= t})
    if REGISTRY[method].__module__.startswith("clbench."):
        check_golden(f"{method}/{network}", golden_record(outcome))


GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "runs.json"


def golden_record(outcome) -> dict:  # type: ignore[no-untyped-def]
    """What must not change for a built-in run: its identity hashes and every stored (stage, task) number."""
    plan = outcome.plan
    rows = sorted((row for row in outcome.rows  # the numbers of schema 1: task-aware, learned tasks
                   if row["evaluation"] == "task-aware" and 1 <= row["task"] <= row["stage"]),
                  key=lambda row: (row["stage"], row["task"]))
    return {"config_hash": plan.config_hash, "data_hash": plan.data_hash, "reference_hash": plan.reference_hash,
            "torch": torch.__version__,
            "rows": [[row["stage"], row["task"], row["accuracy"], row["loss"]] for row in rows]}


def check_golden(key: str, record: dict) -> None:
    stored = json.loads(GOLDEN.read_text()) if GOLDEN.is_file() else {}
    if os.environ.get("CLBENCH_RECORD_GOLDEN"):
        stored[key] = record
        GOLDEN.write_text(json.dumps(dict(sorted(stored.items())), indent=1) + "\n")
        return
    assert key in stored, f"no golden record for {key}: record it with CLBENCH_RECORD_GOLDEN=1 (see the docstring)"
    expected = stored[key]
    identity = ("config_hash", "data_hash", "reference_hash")
    assert {name: record[name] for name in identity} == {name: expected[name] for name in identity}, key
    if expected["torch"] == record["torch"]:
        assert json.dumps(record["rows"]) == json.dumps(expected["rows"]), key  # as text: NaN (random's loss) == NaN
