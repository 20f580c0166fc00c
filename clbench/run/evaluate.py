"""`clbench evaluate`: a trained run's test and validation rows recomputed from its checkpoints."""

from __future__ import annotations

import shlex
from typing import Any

import torch

from clbench.approaches.registry import method_argument
from clbench.data.tasks import DatasetLoader
from clbench.errors import ClbenchError
from clbench.results import EVALUATION_FILE, RUN_FILE, DamagedFileError, machine_provenance, utc_now
from clbench.run.checkpoints import checkpoint_path, load_checkpoint
from clbench.run.engine import build_approach
from clbench.run.locking import held_lock, lock_holder
from clbench.run.plan import RunPlan
from clbench.run.rows import evaluate_stage_rows, write_rows
from clbench.run.shared_tasks import SharedTasks
from clbench.run_files import CHECKPOINT_FOLDER, read_run_json, run_file_problem
from clbench.spec import command_argument


def reevaluate(plan: RunPlan, *, device: torch.device, loader: DatasetLoader,
               shared: SharedTasks | None = None) -> list[dict[str, Any]]:
    """Recompute the test and validation rows of every stage from the run's checkpoints (`clbench evaluate`);
    `shared`: the task sequence of the last run evaluated, used when this run's data is the same. Holds the run's
    lock (a run being trained is refused); its files are read through `clbench.run_files` (DamagedFileError naming a
    damaged one)."""
    if not (plan.run_dir / RUN_FILE).is_file():
        raise ClbenchError(f"no run at {plan.run_dir}: train it first with `{train_command(plan)}`")
    with held_lock(plan.run_dir) as locked:
        if not locked:
            raise ClbenchError(f"{plan.run_id} is being trained ({lock_holder(plan.run_dir)}): evaluate it when it "
                               f"has finished")
        return _reevaluate_locked(plan, device, loader, shared)


def _reevaluate_locked(plan: RunPlan, device: torch.device, loader: DatasetLoader,
                       shared: SharedTasks | None) -> list[dict[str, Any]]:
    try:
        stored = read_run_json(plan.run_dir / RUN_FILE)
        damaged = [problem for path in sorted((plan.run_dir / CHECKPOINT_FOLDER).glob("stage-*.pt"))
                   if (problem := run_file_problem(path)) is not None]
    except DamagedFileError as error:
        damaged = [str(error)]
    if damaged:
        raise DamagedFileError(f"{'; '.join(damaged)}: `{train_command(plan)}` remakes it from the run's last good "
                               f"checkpoint, then evaluate it again")
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


def train_command(plan: RunPlan) -> str:
    """The `clbench train` command of one run, with its `--set` options, into its results folder."""
    sets = "".join(f" --set {shlex.quote(text)}" for text in plan.overrides)
    return (f"clbench train {command_argument(plan.spec)} -m {shlex.quote(method_argument(plan.method))} --seeds "
            f"{plan.seed}{sets} --results {shlex.quote(str(plan.run_dir.parents[3]))}")
