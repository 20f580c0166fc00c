"""A run's accuracy rows: each stage's evaluations as long-format rows, encoded and written to the run folder,
and the approach's monitoring tables stored beside them.

`evaluate_stage` evaluates every task after a stage on a split; `accuracy_row` is one stored row (the results'
schema, `clbench.results`); `write_rows` stamps the finishing time and writes a Parquet file atomically.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from clbench.approaches.base import Approach
from clbench.approaches.datatypes import TASK_AWARE, Evaluation, TaskLog
from clbench.approaches.registry import origin_of
from clbench.data.batches import TaskSequence
from clbench.results import (
    COMPUTE_COLUMNS,
    SCHEMA_VERSION,
    SPLITS,
    TEST,
    accuracy_frame,
    inside,
    parquet_bytes,
    row_split,
    scenario_evaluation,
    utc_now,
)
from clbench.run.plan import RunPlan
from clbench.run_files import read_run_file_bytes, write_run_file, write_run_parquet


def learned_accuracies(stage_rows: Sequence[dict[str, Any]], evaluation: str = TASK_AWARE) -> list[float]:
    """The test accuracies in `evaluation` of the tasks learned so far (u <= t), in task order, from one stage's
    rows: their mean is A^{<=t}, what `report --metric accuracy` and `evaluate` show for the stage."""
    return [row["accuracy"] for row in stage_rows
            if row["evaluation"] == evaluation and row_split(row) == TEST and row["task"] <= row["stage"]]


def shown_evaluation(plan: RunPlan) -> str:
    """The evaluation of `train`'s line after each task: the one the run's scenario reports
    (`clbench.results.scenario_evaluation`), task-aware for an approach that needs the task id (it stores no
    other)."""
    return TASK_AWARE if plan.approach.cls.needs_task_id else scenario_evaluation(plan.spec.data.scenario)


def evaluated_tasks(approach: Approach, n_tasks: int, stage: int) -> range:
    """The tasks evaluated after task `stage` (0-based; -1: at initialisation): every task, or only the learned
    ones for an approach that cannot predict an unlearned task (PathNet)."""
    return range(n_tasks) if approach.predicts_unlearned_tasks else range(stage + 1)


def evaluate_stage(approach: Approach, tasks: TaskSequence, stage: int,
                   split: str = TEST) -> list[tuple[int, str, Evaluation, float]]:
    """(task, evaluation, result, seconds) of every task evaluated after task `stage` (0-based; -1: at
    initialisation) on `split` (each task's test set, or its validation split), in task order, each task's
    evaluations from one pass (`Approach.evaluate_task`: inference mode, on the approach's device), whose
    seconds each of them carries.

    Task-agnostic candidates: the classes of tasks 0..max(stage, u) (every class seen so far, and the task's own
    classes when it is not learned yet, so that its accuracy is not 0 by construction).
    """
    results = []
    for task in evaluated_tasks(approach, len(tasks), stage):
        start = time.perf_counter()
        data = tasks[task].test if split == TEST else tasks[task].valid
        if split != TEST and len(data) == 0:
            continue  # no validation split (`data.validation_fraction: 0`): no validation rows
        evaluations = approach.evaluate_task(data, task, max(stage, task) + 1)
        seconds = time.perf_counter() - start
        results.extend((task, name, evaluation, seconds) for name, evaluation in evaluations.items())
    return results


def evaluate_stage_rows(plan: RunPlan, approach: Approach, tasks: TaskSequence, stage: int,
                        task_log: TaskLog | None, header: dict[str, Any],
                        splits: Sequence[str] = SPLITS) -> list[dict[str, Any]]:
    """The rows of one stage: every evaluated task on each of `splits` (test rows first, in task order, then the
    validation rows). `stage_eval_seconds` is the time of all of the stage's evaluations."""
    with approach.flops.counted() as counted:  # the evaluation's FLOPs: `stage_eval_flops`
        evaluations = [(split, evaluation) for split in splits
                       for evaluation in evaluate_stage(approach, tasks, stage, split)]
    # a task's evaluations come from one pass and carry its time each: counted once per task and split
    eval_seconds = sum({(split, task): seconds for split, (task, *_, seconds) in evaluations}.values())
    memory = approach.memory_usage() if stage >= 0 else (0, 0)
    return [{**accuracy_row(plan, header, stage, task, tasks[task].name, name, result, task_log, eval_seconds,
                            memory, split), "stage_eval_flops": counted.flops}
            for split, (task, name, result, _) in evaluations]


def encoded_rows(plan: RunPlan, rows: list[dict[str, Any]]) -> tuple[str, bytes]:
    """Stamp the rows with the finishing time and encode them as a results Parquet file: (the time, its bytes)."""
    finished = utc_now()
    for row in rows:
        row.update(finished_utc=finished, tuned_sha256=plan.tuned_sha256, tuned_seed=plan.tuned_seed)
    return finished, parquet_bytes(accuracy_frame(rows), {"run_id": plan.run_id})


def write_rows(plan: RunPlan, file_name: str, rows: list[dict[str, Any]]) -> str:
    """Stamp the rows with the finishing time and write them to the run folder (atomically and recorded:
    `clbench.run_files.write_run_file`); returns the time."""
    finished, encoded = encoded_rows(plan, rows)
    write_run_file(plan.run_dir / file_name, encoded)
    return finished


def accuracy_row(plan: RunPlan, header: dict[str, Any], stage: int, task: int, task_name: str, evaluation: str,
                 result: Evaluation, task_log: TaskLog | None, eval_seconds: float,
                 memory: tuple[int, int] = (0, 0), split: str = TEST) -> dict[str, Any]:
    """One long-format result row (`stage` 0-based here, -1 at initialisation; stored 1-based, 0 at
    initialisation; `task` 0-based here, stored 1-based; `n_test`: the samples of `split` evaluated)."""

    return {
        "schema_version": SCHEMA_VERSION, "run_id": plan.run_id, "benchmark": plan.spec.name,
        "variant": plan.spec.variant, "method": plan.method, "seed": plan.seed, "config_hash": plan.config_hash,
        "data_hash": plan.data_hash, "reference_hash": plan.reference_hash,
        "hyperparameters": json.dumps(plan.config["hyperparameters"], sort_keys=True),
        "overrides": json.dumps(list(plan.overrides)),
        "approach_origin": json.dumps(header.get("approach_origin") or origin_of(plan.method), sort_keys=True),
        "scenario": plan.spec.data.scenario, "class_loss": plan.approach.training.class_loss,
        "evaluation": evaluation, "split": split, "stage": stage + 1,
        "task": task + 1,
        "task_name": task_name, "accuracy": float(result.accuracy), "loss": float(result.loss),
        "n_test": int(result.n),
        "stage_epochs": task_log.epochs if task_log else None,
        "stage_best_epoch": task_log.best_epoch if task_log else None,
        "stage_batches": task_log.batches if task_log else None,
        "stage_train_seconds": task_log.seconds if task_log else None, "stage_eval_seconds": eval_seconds,
        "memory_samples": int(memory[0]), "memory_bytes": int(memory[1]),
        **{key: (task_log.compute if task_log else {}).get(key) for key in COMPUTE_COLUMNS},  # eval: the caller's
        **{key: header[key] for key in ("clbench_version", "git_commit", "torch_version", "cuda_version",
                                         "device", "hostname", "started_utc")},
        "finished_utc": None,
    }


def store_monitoring(plan: RunPlan, approach: Approach, tasks: TaskSequence, stage: int,
                     header: dict[str, Any]) -> None:
    """Append the approach's monitoring tables for this stage to `<table>.parquet` in the run folder (the earlier
    stages' rows read and written through `clbench.run_files`)."""
    import io

    import pandas as pd

    for name, table_rows in approach.monitoring(stage, tasks).items():
        frame = pd.DataFrame(table_rows)
        frame.insert(0, "stage", stage + 1)
        for column in ("seed", "method", "benchmark", "run_id"):
            frame.insert(0, column, header[column])
        path = monitoring_path(plan.run_dir, name)
        if path.is_file() and stage > 0:
            previous = pd.read_parquet(io.BytesIO(read_run_file_bytes(path)))
            frame = pd.concat([previous[previous["stage"] < stage + 1], frame], ignore_index=True)
        write_run_parquet(path, frame, {"run_id": plan.run_id, "table": name})


def monitoring_path(run_dir: Path, table: str) -> Path:
    """`<run_dir>/<table>.parquet`; a table name that breaks the name rule (e.g. `../x`) is an error."""
    from clbench.spec import check_name

    check_name(table, "a monitoring table name (the keys `Approach.monitoring` returns)")
    return inside(run_dir, Path(run_dir) / f"{table}.parquet")
