"""A run's checkpoints: saved after every task, resumed from (the last readable one), loaded, and the rows of
an earlier results schema upgraded on resume.

A checkpoint holds the approach state, torch's global (and CUDA) random stream and the rows so far, so that a
resumed run continues exactly as an uninterrupted one would have.
"""

from __future__ import annotations

import io
import logging
import pickle
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from clbench.approaches.base import Approach
from clbench.data.batches import TaskSequence
from clbench.errors import ClbenchError
from clbench.results import SCHEMA_VERSION, SPLITS, TEST, VALIDATION, DamagedFileError
from clbench.run.plan import RunPlan
from clbench.run.rows import evaluate_stage_rows, store_monitoring
from clbench.run_files import (
    CHECKPOINT_FOLDER,
    damaged_paths,
    forget_run_file,
    read_run_file_bytes,
    run_file_problem,
    write_run_file,
)

log = logging.getLogger(__name__)


def checkpoint_path(run_dir: Path, stage: int) -> Path:
    return Path(run_dir) / CHECKPOINT_FOLDER / f"stage-{stage + 1:02d}.pt"


def save_checkpoint(run_dir: Path, stage: int, approach: Approach, rows: list[dict[str, Any]],
                    curve: dict[str, Any] | None = None) -> None:
    """The approach state, the global random streams and the rows so far after task `stage`, atomically; `curve`:
    the continual evaluation's state (`clbench.run.curve.CurveRecorder.state`), when it is on."""
    payload = {"stage": stage, "approach": approach.state(), "rows": rows, "torch_rng": torch.get_rng_state()}
    if curve is not None:
        payload["curve"] = curve
    if approach.device.type == "cuda":
        payload["cuda_rng"] = torch.cuda.get_rng_state(approach.device)
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    write_run_file(checkpoint_path(run_dir, stage), buffer.getvalue())


def resume_from_checkpoint(run_dir: Path, approach: Approach, n_tasks: int, damaged: list[str] | None = None,
                           upgrade: RowUpgrade | None = None,
                           curve: Callable[[dict[str, Any] | None], None] | None = None,
                           ) -> tuple[int, list[dict[str, Any]]]:
    """Restore the state after the last finished task; returns (first stage to train, rows so far).

    Restores the approach (network, extra state, batch generator) and torch's global (and CUDA) generator as
    they were when that task's checkpoint was written, so the next task starts exactly as it would have. A
    checkpoint that cannot be read (truncated) is named (logged, and appended to `damaged`) and the previous
    stage's is used instead; the stages after it are trained again. A checkpoint written before results schema 3
    (schema 1: task-aware rows of u <= t only; schema 2: test rows only) has its rows completed by
    `upgrade(stage, old rows)` (called before the approach's state is loaded: the approach is still at
    initialisation). `curve` receives the checkpoint's continual-evaluation state (None if it kept none).
    """
    found = last_readable_checkpoint(run_dir, n_tasks, damaged if damaged is not None else [])
    if found is None:
        return 0, []
    stage, checkpoint = found
    rows = list(checkpoint["rows"])
    if checkpoint["stage"] != stage:
        raise ClbenchError(f"checkpoint {checkpoint_path(run_dir, stage)} does not hold stages 1..{stage + 1}: "
                           f"re-run with --force")
    schema_1 = bool(rows) and "evaluation" not in rows[0]
    if rows and "split" not in rows[0]:
        if upgrade is None or (schema_1 and len(rows) != (stage + 1) * (stage + 2) // 2):
            raise ClbenchError(f"checkpoint {checkpoint_path(run_dir, stage)} was written by an earlier clbench and "
                               f"cannot be completed: re-run with --force")
        rows = upgrade(stage, rows)
    if not set(range(1, stage + 2)) <= {row["stage"] for row in rows} <= set(range(stage + 2)):
        raise ClbenchError(f"checkpoint {checkpoint_path(run_dir, stage)} does not hold stages 0..{stage + 1}: "
                           f"re-run with --force")
    approach.load_state(checkpoint["approach"])
    if curve is not None:
        curve(checkpoint.get("curve"))
    torch.set_rng_state(checkpoint["torch_rng"])
    if "cuda_rng" in checkpoint and approach.device.type == "cuda":
        torch.cuda.set_rng_state(checkpoint["cuda_rng"], approach.device)
    return stage + 1, rows


RowUpgrade = Callable[[int, list[dict[str, Any]]], list[dict[str, Any]]]


STAGE_LOG_KEYS = ("stage_epochs", "stage_best_epoch", "stage_batches", "stage_train_seconds", "stage_train_flops",
                  "stage_step_flops", "stage_stream_batches", "stage_unit_flops")


def upgraded_rows(plan: RunPlan, approach: Approach, tasks: TaskSequence, stage: int,
                  old_rows: list[dict[str, Any]], header: dict[str, Any]) -> list[dict[str, Any]]:
    """Schema-3 rows of stages 0..stage+1 for a run whose checkpoints hold rows of an earlier schema (an unfinished
    run of an earlier clbench): stage 0 from `approach` at initialisation, each later stage re-evaluated from its
    checkpoint, with the training log (epochs, batches, seconds) of the old rows. Schema 1 (task-aware rows of
    u <= t): every row re-evaluated. Schema 2 (every test row): its test rows kept as stored (marked `split: test`),
    the validation rows added. Leaves `approach` at checkpoint `stage`."""
    schema_2 = "evaluation" in old_rows[0]
    splits = (VALIDATION,) if schema_2 else SPLITS

    def stage_rows(done: int) -> list[dict[str, Any]]:  # the old rows kept (schema 2), then the evaluated ones
        kept = [{**row, "schema_version": SCHEMA_VERSION, "split": TEST} for row in old_rows
                if schema_2 and row["stage"] == done + 1]
        log_fields = next(({key: row.get(key) for key in STAGE_LOG_KEYS} for row in old_rows
                           if row["stage"] == done + 1), {}) if done >= 0 else {}
        return kept + [{**row, **log_fields} for row in evaluate_stage_rows(plan, approach, tasks, done, None, header,
                                                                        splits)]

    rows = stage_rows(-1)
    for done in range(stage + 1):
        approach.load_state(load_checkpoint(plan.run_dir, done)["approach"])
        rows.extend(stage_rows(done))
    return rows


def remake_monitoring(plan: RunPlan, approach: Approach, tasks: TaskSequence, stages: int,
                      header: dict[str, Any]) -> None:
    """Write the approach's monitoring tables of stages 0..stages-1 again, each from its stage's checkpoint (a run
    resumed with a damaged monitoring table: `clbench.run_files`). Leaves `approach` at checkpoint `stages - 1`,
    the one it was resumed from, with torch's random streams as they were."""
    streams = torch.get_rng_state(), torch.cuda.get_rng_state(approach.device) if approach.device.type == "cuda" \
        else None
    for path, _ in damaged_paths(plan.run_dir, ("monitoring",)):  # made again from stage 1, not appended to
        forget_run_file(path)
    for stage in range(stages):
        approach.load_state(load_checkpoint(plan.run_dir, stage)["approach"])
        store_monitoring(plan, approach, tasks, stage, header)
    torch.set_rng_state(streams[0])
    if streams[1] is not None:
        torch.cuda.set_rng_state(streams[1], approach.device)


def last_readable_checkpoint(run_dir: Path, n_tasks: int,
                             damaged: list[str]) -> tuple[int, dict[str, Any]] | None:
    """(stage, checkpoint) of the last good checkpoint before the first damaged one (`clbench.run_files`: the stages
    from the damaged one on are trained again, which remakes it), or None; damaged ones are appended to `damaged`
    (unless named there already) and logged."""
    first_bad = n_tasks
    for stage in range(n_tasks):
        path = checkpoint_path(run_dir, stage)
        problem = run_file_problem(path) if path.is_file() else None
        if problem is not None:
            _name_damaged(f"checkpoint {problem}", path, damaged)
            first_bad = stage
            break
    for stage in reversed(range(first_bad)):
        if not checkpoint_path(run_dir, stage).is_file():
            continue
        try:
            return stage, load_checkpoint(run_dir, stage)
        except DamagedFileError as error:
            _name_damaged(str(error), checkpoint_path(run_dir, stage), damaged)
    return None


def _name_damaged(problem: str, path: Path, damaged: list[str]) -> None:
    log.warning("%s; falling back to the previous stage's checkpoint", problem)
    if not any(str(path) in known for known in damaged):
        damaged.append(problem)


def load_checkpoint(run_dir: Path, stage: int) -> dict[str, Any]:
    """The checkpoint after task `stage`; ClbenchError if there is none, DamagedFileError naming it if it cannot
    be read (truncated, emptied, not the bytes written: `clbench.run_files.read_run_file_bytes`; not a checkpoint)."""
    path = checkpoint_path(run_dir, stage)
    if not path.is_file():
        raise ClbenchError(f"no checkpoint {path}: train the run first (`clbench train`)")
    try:
        data = read_run_file_bytes(path)
    except DamagedFileError as error:
        raise DamagedFileError(f"checkpoint {error}") from None
    try:
        return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, OSError, ValueError, pickle.UnpicklingError, zipfile.BadZipFile) as error:
        raise DamagedFileError(f"checkpoint {path} is damaged: {type(error).__name__}: "
                               f"{str(error).splitlines()[0] if str(error) else 'unreadable'}") from None
