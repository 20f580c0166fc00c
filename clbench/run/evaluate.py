"""`clbench evaluate`: a trained run's test and validation rows recomputed from its checkpoints."""

from __future__ import annotations

import shlex
from typing import Any

import torch

from clbench.approaches.registry import method_argument
from clbench.data.tasks import DatasetLoader
from clbench.errors import ClbenchError
from clbench.results import EVALUATION_FILE, machine_provenance, read_run_file, utc_now
from clbench.run.checkpoints import checkpoint_path, load_checkpoint
from clbench.run.engine import build_approach
from clbench.run.plan import RunPlan
from clbench.run.rows import evaluate_stage_rows, write_rows
from clbench.run.shared_tasks import SharedTasks
from clbench.spec import command_argument


def reevaluate(plan: RunPlan, *, device: torch.device, loader: DatasetLoader,
               shared: SharedTasks | None = None) -> list[dict[str, Any]]:
    """Recompute the test and validation rows of every stage from the run's checkpoints (`clbench evaluate`);
    `shared`: the task sequence of the last run evaluated, used when this run's data is the same."""
    stored = read_run_file(plan.run_dir)
    if stored is None:
        results_dir = shlex.quote(str(plan.run_dir.parents[3]))
        raise ClbenchError(f"no run at {plan.run_dir}: train it first with `clbench train "
                           f"{command_argument(plan.spec)} -m {shlex.quote(method_argument(plan.method))} "
                           f"--seeds {plan.seed} --results "
                           f"{results_dir}` (with the same --set options)")
    tasks = (shared or SharedTasks()).tasks_for(plan, loader, device)
    approach = build_approach(plan, tasks, device)
    header = {**stored, **machine_provenance(str(device), str(torch.__version__), torch.version.cuda),
              "started_utc": utc_now()}
    if not checkpoint_path(plan.run_dir, 0).is_file():
        raise ClbenchError(f"no checkpoint in {plan.run_dir / 'checkpoints'}: train the run first")
    rows = evaluate_stage_rows(plan, approach, tasks, -1, None, header)  # at initialisation: the seeded network
    for stage in range(len(tasks)):
        if not checkpoint_path(plan.run_dir, stage).is_file():
            break
        approach.load_state(load_checkpoint(plan.run_dir, stage)["approach"])
        rows.extend(evaluate_stage_rows(plan, approach, tasks, stage, None, header))
    write_rows(plan, EVALUATION_FILE, rows)
    return rows
