"""The results store: one folder per run, tidy long-format Parquet, atomic writes, provenance.

Layout: `<results>/<benchmark>/<method>/<config hash>/seed-<seed>/`
- `accuracy.parquet`: one row per (stage t, task u, evaluation, split) of a finished run (the columns are
  `COLUMNS`): stage 0 is the network at initialisation, every task is evaluated at every stage, `evaluation` is
  task-aware (the task's own head) or task-agnostic (argmax over the classes of tasks 1..max(t, u)), `split` is
  `test` (the task's test set) or `validation` (the validation split the protocol held out of its training set);
  `n_test` is the number of samples of the row's split that were evaluated; schema 1 files hold only the
  task-aware test rows of tasks u <= t, t >= 1, schema 1 and 2 files only test rows (no `split` column);
  `tuned_sha256` and `tuned_seed` (`TUNED_COLUMNS`) name the tuned file a `clbench train --tuned` run applied,
  null otherwise (and read as null from files written before them); `class_loss` is the run's
  `training.class_loss` (read as `seen` from files written before it);
- `run.json`: the resolved config, the command's overrides, provenance and status (`RunStatus`: running,
  complete, failed, interrupted);
  provenance includes `approach_origin` (also a JSON column of the rows): `{"kind": "built-in", "module"}`, a
  plugin file's `path` and `sha256`, a plugin `module`, or an entry point's `distribution` and `version`;
- `<table>.parquet`: approach monitoring tables (e.g. HAT's masks), with the run's identity columns;
- `checkpoints/stage-XX.pt`: the approach state after each task (for `evaluate` and resuming);
- `manifest.json`: the size and sha256 of each file above as written (`clbench.run_files`: the rule every run file
  is written and read through).
Torch-free: `report` reads results without importing torch.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import tempfile
from collections.abc import Iterable
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import Any

import pandas as pd

import clbench
from clbench.errors import EXIT_FAILURE, ResultsError

SCHEMA_VERSION = 3
# 1: task-aware rows of stages 1..T, tasks u <= t. 2: adds `evaluation` (task-aware / task-agnostic) and
# `scenario` (task / class), the stage-0 rows (at initialisation) and every task at every stage, and the memory
# the approach kept after the stage (`memory_samples`, `memory_bytes`: `Approach.memory_usage`). 3: adds `split`
# (test / validation): every cell also evaluated on the task's validation split, `n_test` counting the samples
# of the row's split (schema 1 and 2 rows are test rows).
READABLE_SCHEMA_VERSIONS = (1, 2, 3)
EVALUATIONS = ("task-aware", "task-agnostic")
TEST, VALIDATION = SPLITS = ("test", "validation")
SCENARIOS = ("task", "class")
ACCURACY_FILE = "accuracy.parquet"
CURVE_FILE = "curve.parquet"  # `training.eval_every`: the continual evaluation's points (`clbench.run.curve`)
EVALUATION_FILE = "evaluation.parquet"  # `clbench evaluate`: the same schema, recomputed from checkpoints
RUN_FILE = "run.json"


class RunStatus(str, Enum):
    """A run's status: what its run.json says (running, complete, failed, interrupted) and what a command reports
    of it (`clbench.run.engine.RunOutcome`: done, skipped, locked, failed, interrupted). A `str`, so run.json and
    the outcomes hold the plain strings."""

    RUNNING = "running"  # run.json while the run executes
    COMPLETE = "complete"  # run.json once its rows are written
    DONE = "done"  # an outcome: executed to the end by this command
    SKIPPED = "skipped"  # an outcome: finished earlier (not forced)
    LOCKED = "locked"  # an outcome: another process holds the run's lock
    FAILED = "failed"  # run.json and outcome: an error stopped it
    INTERRUPTED = "interrupted"  # run.json and outcome: Ctrl-C (or a cancelled Ray task) stopped it

    __str__ = str.__str__  # the value in str() and f-strings, as for a plain string

IDENTITY_COLUMNS = ["run_id", "benchmark", "variant", "method", "seed", "config_hash", "data_hash"]
COLUMNS = [
    "schema_version", *IDENTITY_COLUMNS, "reference_hash", "hyperparameters", "overrides", "approach_origin",
    "scenario", "class_loss", "evaluation", "split", "stage", "task", "task_name", "accuracy", "loss", "n_test",
    "stage_epochs", "stage_best_epoch", "stage_batches", "stage_train_seconds", "stage_eval_seconds",
    "memory_samples", "memory_bytes",
    "stage_train_flops", "stage_eval_flops", "stage_step_flops", "stage_stream_batches", "stage_unit_flops",
    "clbench_version", "git_commit", "torch_version", "cuda_version", "device", "hostname",
    "started_utc", "finished_utc", "tuned_sha256", "tuned_seed",
]

# `clbench train --tuned FILE`: the tuned file's sha256 and the seed the grid was trained on (`clbench.tuning`);
# missing (null) in every other run, and in files written before these columns (read as missing). Not part of the
# config hash. Same schema version: the columns are optional, and a reader that does not know them ignores them.
TUNED_COLUMNS = ("tuned_sha256", "tuned_seed")
# `training.class_loss` of the run's approach (seen / all: the class scenario's cross-entropy over the classes seen
# so far, or over every output); missing (read as `seen`, the only loss before it) in files written before it.
CLASS_LOSS_COLUMN, CLASS_LOSS_DEFAULT = "class_loss", "seen"

# The compute of each stage (`clbench.approaches.flops`, `clbench.compute`): the FLOPs of its training (steps,
# validation, the approach's own work) and of its evaluation, the cost of one of its training steps, and in the
# real-time protocol (`training.realtime`) the batches its stream offered (`stage_batches`: those trained) and the
# stream's unit (SGD's step FLOPs); null where not counted (stage 0's training, `clbench evaluate`) and in files
# written before them. Same schema version: optional columns, as the tuned ones.
COMPUTE_COLUMNS = ("stage_train_flops", "stage_eval_flops", "stage_step_flops", "stage_stream_batches",
                   "stage_unit_flops")

BENCH_FOLDER = "_bench"  # <results>/_bench/<benchmark>-<UTC timestamp>.parquet (`clbench bench`)
BENCH_COLUMNS = (  # every column a bench file has, in order (`clbench.run.bench.bench_rows`)
    "benchmark", "method", "device", "batch_size", "forward_ms", "forward_backward_ms", "epoch_seconds",
    "peak_memory_mb", "clbench_version", "torch_version", "measured_utc", "data", "n_batches", "hostname",
)


def utc_now(timespec: str = "seconds") -> str:
    """The current time as ISO 8601 UTC (`timespec` as `datetime.isoformat`: "milliseconds" for bench rows)."""
    return datetime.now(timezone.utc).isoformat(timespec=timespec)


def run_directory(results_dir: Path, benchmark: str, method: str, config_hash: str, seed: int) -> Path:
    """`<results>/<benchmark>/<method>/<config hash>/seed-<seed>`, checked to lie inside `results_dir`."""
    return inside(results_dir, Path(results_dir) / benchmark / method / config_hash / f"seed-{seed}")


def check_results_folder(results_dir: Path) -> Path:
    """`results_dir` if it is a folder this process can write into, or can create; ResultsError naming it otherwise.

    Checked when a command starts, so that a `--results` that is a file or read-only fails once, not in every run.
    """
    return check_output_path(results_dir, "--results", folder=True)


def check_output_path(path: Path, option: str, folder: bool = False) -> Path:
    """`path` if this process can write it, as a file or (`folder`) a folder, creating what is missing on its way;
    ResultsError naming `option`, the path and what is wrong otherwise.

    Every command checks its output paths with this before any work, so that a bad one fails in one line rather than
    after training or rendering. Permissions say nothing for root, so the nearest existing folder is also probed by
    creating (and removing) an empty temporary file in it: that catches a read-only file system, an immutable
    folder, /proc and the like.
    """
    path = Path(path)
    if path.exists() and folder and not path.is_dir():
        raise ResultsError(f"{option} {path} is a file, not a folder; give a folder (it is created if missing)")
    if path.exists() and not folder and path.is_dir():
        raise ResultsError(f"{option} {path} is a folder, not a file: a file is written there")
    start = path.absolute() if folder else path.absolute().parent
    existing = next(parent for parent in (start, *start.parents) if parent.exists())
    if not existing.is_dir():
        raise ResultsError(f"{option} {path} cannot be created: {existing} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ResultsError(f"{option} {path} is not writable: no permission to write in {existing}")
    try:
        handle, probe = tempfile.mkstemp(dir=existing, prefix=".clbench-write-check-")
    except OSError as error:
        raise ResultsError(f"{option} {path} is not writable: cannot create a file in {existing} "
                           f"({error.strerror or error})") from None
    os.close(handle)
    os.unlink(probe)
    return path


def inside(root: Path, path: Path) -> Path:
    """`path`, after checking that it lies inside `root` (ResultsError otherwise).

    clbench writes only inside the results folder and the data folder. The check is lexical (`..` resolved,
    symbolic links not followed), so a results folder whose benchmark folders are links elsewhere still works.
    """
    root_text, path_text = os.path.abspath(root), os.path.abspath(path)
    if os.path.commonpath([root_text, path_text]) != root_text or path_text == root_text:
        raise ResultsError(f"{path} is not inside {root}: clbench writes only inside the results and data "
                           f"folders (a benchmark, approach or table name with '..' or '/'?)")
    return Path(path)


def git_commit() -> str | None:
    """The commit of the clbench source tree (with `+dirty` if modified), or None outside a git checkout."""
    root = Path(clbench.__file__).resolve().parent.parent
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                                timeout=5, check=True).stdout.strip()
        # --no-optional-locks: reading the state writes no .git/index.lock into the checkout (it only refreshes
        # git's stat cache, which nothing here needs)
        dirty = subprocess.run(["git", "--no-optional-locks", "status", "--porcelain", "--untracked-files=no"],
                               cwd=root, capture_output=True, text=True, timeout=5, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{commit}+dirty" if dirty else commit


def machine_provenance(device: str, torch_version: str, cuda_version: str | None) -> dict[str, Any]:
    """Versions and machine of a run."""
    return {"clbench_version": clbench.__version__, "git_commit": git_commit(), "torch_version": torch_version,
            "cuda_version": cuda_version, "device": device, "hostname": platform.node(),
            "python_version": platform.python_version()}


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write a file via a temporary file in the same folder and a rename: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, 0o644)  # mkstemp creates 0600; results are meant to be shared
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_json(path: Path, data: dict[str, Any]) -> None:
    atomic_write_bytes(path, (json.dumps(data, indent=2, sort_keys=True, default=str) + "\n").encode())


def write_parquet(path: Path, frame: pd.DataFrame, metadata: dict[str, Any] | None = None) -> None:
    """Write a DataFrame as Parquet atomically; `metadata` goes into the file's key-value metadata."""
    atomic_write_bytes(path, parquet_bytes(frame, metadata))


def parquet_bytes(frame: pd.DataFrame, metadata: dict[str, Any] | None = None) -> bytes:
    """A DataFrame as the bytes of a Parquet file, with clbench's schema version and `metadata` in its metadata."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(frame, preserve_index=False)
    extra = {b"clbench": json.dumps({"schema_version": SCHEMA_VERSION, **(metadata or {})}, default=str).encode()}
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), **extra})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


SCENARIO_EVALUATIONS = {"task": "task-aware", "class": "task-agnostic", "domain": "task-aware"}
"""The evaluation a scenario's comparison reports, the default of `tune`, `report`, `evaluate` and `train`'s lines:
task-aware where the task id is given (the paper's), task-agnostic in the class scenario (class-incremental), and
the domain scenario's one evaluation (stored under the name task-aware)."""


def scenario_evaluation(scenario: str | None) -> str:
    """The evaluation of `SCENARIO_EVALUATIONS` for a run's scenario (None, for results written before the
    scenario was stored: task)."""
    return SCENARIO_EVALUATIONS.get(scenario or "task", EVALUATIONS[0])


def runs_evaluation(scenarios: Iterable[str | None], where: str) -> str:
    """The one evaluation the scenarios of a set of runs agree on (`scenario_evaluation`; a domain run agrees with
    either, results without runs read as task); ResultsError naming the scenarios found in `where` when they
    disagree, saying to pass `--evaluation`."""
    found = sorted({scenario or "task" for scenario in scenarios})
    chosen = sorted({scenario_evaluation(scenario) for scenario in found if scenario != "domain"})
    if len(chosen) > 1:
        own = ", ".join(f"{scenario}: {scenario_evaluation(scenario)}" for scenario in found)
        raise ResultsError(f"{where} holds runs of the {' and '.join(found)} scenarios, whose comparisons report "
                           f"different evaluations ({own}); pass --evaluation task-aware or --evaluation "
                           f"task-agnostic")
    return chosen[0] if chosen else EVALUATIONS[0]


def row_split(row: dict[str, Any]) -> str:
    """The split of one stored row (a row without `split`, written before results schema 3, is a test row)."""
    split = row.get("split")
    return split if isinstance(split, str) else TEST


def select_split(frame: pd.DataFrame, split: str = TEST) -> pd.DataFrame:
    """The rows of `frame` evaluated on `split` (test or validation), every column kept; rows without a `split`
    (results schema 1 and 2, written before validation rows) are test rows. ValueError for another split name.

    Every reader of accuracy rows goes through this (or `row_split` for rows as dicts): test rows unless told.
    """
    if split not in SPLITS:
        raise ValueError(f"split {split!r}: use one of {', '.join(SPLITS)}")
    if "split" not in frame:
        return frame if split == TEST else frame.iloc[0:0]
    return frame[frame["split"].fillna(TEST) == split]


def accuracy_frame(rows: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """Rows -> a DataFrame with exactly `COLUMNS`, in order (missing columns are an error, but for the nullable
    `TUNED_COLUMNS`, `class_loss` and `COMPUTE_COLUMNS`, missing in rows written before them: filled as missing)."""
    frame = pd.DataFrame(list(rows))
    for column in (*TUNED_COLUMNS, CLASS_LOSS_COLUMN, *COMPUTE_COLUMNS):
        if column not in frame.columns:
            frame[column] = None
    missing = [column for column in COLUMNS if column not in frame.columns]
    if missing:
        raise ValueError(f"accuracy rows lack columns {missing}")
    frame["tuned_sha256"] = frame["tuned_sha256"].astype("string")
    frame["tuned_seed"] = frame["tuned_seed"].astype("Int64")
    frame[CLASS_LOSS_COLUMN] = frame[CLASS_LOSS_COLUMN].astype("string")
    for column in COMPUTE_COLUMNS:
        frame[column] = frame[column].astype("Int64")
    return frame[COLUMNS]


class DamagedFileError(ResultsError):
    """A results file (run.json, a Parquet file, a checkpoint) exists but cannot be read; the message names it."""

    exit_code = EXIT_FAILURE  # the command was right, the stored file is not (`clbench.errors`)


def read_run_file(run_dir: Path) -> dict[str, Any] | None:
    """A run folder's run.json; None if it has none; DamagedFileError naming it if it is not a JSON object."""
    path = Path(run_dir) / RUN_FILE
    if not path.is_file():
        return None
    return parse_run_file(path)


def parse_run_file(path: Path) -> dict[str, Any]:
    """The JSON object in `path`, or DamagedFileError naming the file (truncated, not JSON, not an object)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise DamagedFileError(f"{path} is damaged: not readable JSON ({error})") from None
    if not isinstance(data, dict):
        raise DamagedFileError(f"{path} is damaged: a JSON {type(data).__name__}, not an object")
    return data


def check_schema(frame: pd.DataFrame, path: Path) -> None:
    versions = set(frame["schema_version"].unique()) if "schema_version" in frame else {None}
    unknown = versions - set(READABLE_SCHEMA_VERSIONS)
    readable = ", ".join(map(str, READABLE_SCHEMA_VERSIONS))
    if unknown:
        raise ResultsError(
            f"{path}: results schema version {sorted(map(str, unknown))} is not one this clbench "
            f"({clbench.__version__}) reads (it reads {readable}); use the clbench version that wrote it, "
            f"or re-run the experiment"
        )
