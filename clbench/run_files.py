"""The one rule for the files of a run folder: every file is written through `write_run_file`, which records its
size and sha256 in the folder's `manifest.json`, and read through `read_run_file_bytes` (or checked by
`run_file_problem`), which refuses a file whose bytes are not the ones recorded (torch-free).

`RUN_FILE_KINDS` is the registry of the files a run folder holds: `run.json`, `accuracy.parquet`, `curve.parquet`,
the approaches' monitoring tables (`<table>.parquet`), `evaluation.parquet` (`clbench evaluate`) and the checkpoints
(`checkpoints/stage-XX.pt`). Each kind says what depends on it (what a report leaves out when it is damaged) and
which command remakes it; every file a run writes belongs to one kind (a test walks trained run folders for it).

Atomic with its record: the manifest is written first, its entry holding the new content's size and sha256 and the
previous content's, then the file (temporary file + rename). A process killed between the two leaves either content
in place, and either matches the manifest: a file is damaged only when its bytes are neither. The run's lock
(`clbench.run.locking`) keeps two writers out of one folder.

A file the manifest does not list (a run folder written before the manifest, or a manifest that is itself damaged)
is checked by its form alone: a Parquet file must have a readable footer (and rows, for the kinds that need them), a
JSON file must hold an object, a checkpoint must be a whole zip archive.
"""

from __future__ import annotations

import fnmatch
import hashlib
import io
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from clbench.results import (
    ACCURACY_FILE,
    CURVE_FILE,
    EVALUATION_FILE,
    RUN_FILE,
    DamagedFileError,
    atomic_write_bytes,
    inside,
    parquet_bytes,
)

MANIFEST_FILE = "manifest.json"
MANIFEST_FORMAT = 1
CHECKPOINT_FOLDER = "checkpoints"


@dataclass(frozen=True)
class RunFileKind:
    """One kind of file in a run folder.

    Attributes:
        name: the kind's name (as the docs and tests say it).
        pattern: the file's path in the run folder, as a glob (`fnmatch`) on its POSIX relative path.
        form: parquet, json or checkpoint: how a file the manifest does not list is checked.
        remade_by: the command that remakes it: `train` (from the run's last good checkpoint) or `evaluate`.
        leaves_out: what a report leaves out while it is damaged.
        needs_rows: a Parquet file of this kind without rows is damaged (a run always writes some).
    """

    name: str
    pattern: str
    form: str
    remade_by: str
    leaves_out: str
    needs_rows: bool = False


RUN_FILE_KINDS: tuple[RunFileKind, ...] = (
    RunFileKind("run", RUN_FILE, "json", "train", "the run"),
    RunFileKind("accuracy", ACCURACY_FILE, "parquet", "train", "the run", needs_rows=True),
    RunFileKind("curve", CURVE_FILE, "parquet", "train", "the run's continual-evaluation metrics", needs_rows=True),
    RunFileKind("evaluation", EVALUATION_FILE, "parquet", "evaluate", "nothing (`report` does not read it)",
                needs_rows=True),
    RunFileKind("checkpoint", f"{CHECKPOINT_FOLDER}/stage-*.pt", "checkpoint", "train",
                "nothing (`evaluate` and a resumed run read it)"),
    RunFileKind("monitoring", "*.parquet", "parquet", "train", "the run's rows of that monitoring table"),
)
"""Every kind of file a run folder holds, most specific pattern first (`run_file_kind` takes the first match)."""

NOT_RUN_FILES = (MANIFEST_FILE, ".lock", "logs/*")
"""What else a run folder holds: the manifest itself, the lock, the training logs (`--log`: read by TensorBoard,
W&B or a spreadsheet, not by clbench; a resumed run writes them again)."""


def run_file_kind(relative: str | Path) -> RunFileKind | None:
    """The kind of the file at `relative` (a path inside a run folder), or None for what is not a run file."""
    text = PurePosixPath(Path(relative)).as_posix()
    if "/" in text and not text.startswith(f"{CHECKPOINT_FOLDER}/"):
        return None
    return next((kind for kind in RUN_FILE_KINDS if fnmatch.fnmatchcase(text, kind.pattern)), None)


def _relative(run_dir: Path, path: Path) -> str:
    return Path(path).relative_to(run_dir).as_posix()


def _digest(data: bytes) -> dict[str, Any]:
    return {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


# ------------------------------------------------------------------------------------------------ the manifest


def read_manifest(run_dir: Path) -> dict[str, dict[str, Any]] | None:
    """The recorded files of a run folder (relative path -> {size, sha256, previous}); {} when it has no manifest;
    None when its manifest is damaged (every file is then checked by its form alone)."""
    path = Path(run_dir) / MANIFEST_FILE
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        return None
    files = data.get("files") if isinstance(data, dict) else None
    return files if isinstance(files, dict) else None


def manifest_problem(run_dir: Path) -> str | None:
    """`<manifest> is damaged: ...` when the run folder's manifest exists but cannot be read, else None."""
    if read_manifest(run_dir) is None:
        return (f"{Path(run_dir) / MANIFEST_FILE} is damaged: not a manifest of the run's files (they are checked "
                f"by their form alone until the run is trained again)")
    return None


def _write_manifest(run_dir: Path, files: dict[str, dict[str, Any]]) -> None:
    text = json.dumps({"format": MANIFEST_FORMAT, "files": dict(sorted(files.items()))}, indent=1, sort_keys=True)
    atomic_write_bytes(Path(run_dir) / MANIFEST_FILE, (text + "\n").encode())


def run_folder_of(path: Path) -> Path:
    """The run folder a run file lies in (a checkpoint's is two folders up)."""
    path = Path(path)
    return path.parent.parent if path.parent.name == CHECKPOINT_FOLDER else path.parent


# ------------------------------------------------------------------------------------------------ writing


def write_run_file(path: Path, data: bytes) -> None:
    """Write a run file atomically and record it: the manifest's entry first (the new content's size and sha256,
    with the previous content's), then the file by temporary file and rename (`atomic_write_bytes`).

    Every writer of a run folder goes through this (the run holds its lock); `path` must be a kind of
    `RUN_FILE_KINDS`."""
    path = Path(path)
    run_dir = run_folder_of(path)
    relative = _relative(run_dir, inside(run_dir, path))
    if run_file_kind(relative) is None:
        raise ValueError(f"{relative} is not a kind of run file (clbench.run_files.RUN_FILE_KINDS)")
    files = read_manifest(run_dir) or {}
    previous = files.get(relative)
    files[relative] = {**_digest(data), "previous": None if previous is None else
                       {key: previous[key] for key in ("size", "sha256") if key in previous}}
    _write_manifest(run_dir, files)
    atomic_write_bytes(path, data)


def write_run_json(path: Path, data: dict[str, Any]) -> None:
    """A run's run.json, through `write_run_file`."""
    write_run_file(path, (json.dumps(data, indent=2, sort_keys=True, default=str) + "\n").encode())


def write_run_parquet(path: Path, frame: Any, metadata: dict[str, Any] | None = None) -> None:
    """A DataFrame as a run's Parquet file, through `write_run_file`."""
    write_run_file(path, parquet_bytes(frame, metadata))


def forget_run_file(path: Path) -> None:
    """Delete a run file and its manifest entry (`train --force` throwing a run's progress away)."""
    path = Path(path)
    run_dir = run_folder_of(path)
    path.unlink(missing_ok=True)
    files = read_manifest(run_dir)
    if files and _relative(run_dir, path) in files:
        del files[_relative(run_dir, path)]
        _write_manifest(run_dir, files)


# ------------------------------------------------------------------------------------------------ reading


def read_run_file_bytes(path: Path, manifest: dict[str, dict[str, Any]] | None = None) -> bytes:
    """The bytes of a run file, checked by the rule: DamagedFileError naming it (and what is wrong) when they are
    not the bytes the manifest recorded, or, for a file it does not list, not a whole file of its kind's form.

    `manifest`: the folder's (`read_manifest`), when the caller has read it already."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as error:
        raise DamagedFileError(f"{path} is damaged: cannot be read ({error.strerror or error})") from None
    problem = bytes_problem(path, data, manifest)
    if problem is not None:
        raise DamagedFileError(f"{path} is damaged: {problem}")
    return data


def run_file_problem(path: Path, manifest: dict[str, dict[str, Any]] | None = None) -> str | None:
    """`<path> is damaged: <why>` for a run file that `read_run_file_bytes` refuses, else None."""
    try:
        read_run_file_bytes(path, manifest)
    except DamagedFileError as error:
        return str(error)
    return None


def bytes_problem(path: Path, data: bytes, manifest: dict[str, dict[str, Any]] | None = None) -> str | None:
    """Why `data`, read from the run file `path`, is not a whole file of it (None: it is)."""
    run_dir = run_folder_of(path)
    relative = _relative(run_dir, path)
    files = read_manifest(run_dir) if manifest is None else manifest
    entry = (files or {}).get(relative)
    if entry is not None:
        found = _digest(data)
        accepted = [entry, entry.get("previous") or {}]
        if any(found == {key: known.get(key) for key in ("size", "sha256")} for known in accepted):
            return None
        if found["size"] != entry.get("size"):
            return f"{found['size']} bytes, not the {entry.get('size')} written (truncated or emptied?)"
        return "its content is not the one written (its sha256 differs from the run's manifest)"
    kind = run_file_kind(relative)
    return form_problem(data, kind.form if kind else "", bool(kind and kind.needs_rows))


def form_problem(data: bytes, form: str, needs_rows: bool = False) -> str | None:
    """Why `data` is not a whole file of `form` (parquet, json, checkpoint), or None: the check of a file that no
    manifest lists."""
    if not data:
        return "it is empty (0 bytes)"
    if form == "json":
        try:
            parsed = json.loads(data)
        except (UnicodeDecodeError, ValueError) as error:
            return f"not readable JSON ({error})"
        return None if isinstance(parsed, dict) else f"a JSON {type(parsed).__name__}, not an object"
    if form == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            rows = pq.ParquetFile(pa.BufferReader(data)).metadata.num_rows
        except (OSError, ValueError, pa.ArrowException) as error:
            return f"not a readable Parquet file ({error})"
        return "it has no rows" if needs_rows and rows == 0 else None
    if form == "checkpoint":
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                broken = archive.testzip()
        except (zipfile.BadZipFile, OSError, ValueError, EOFError) as error:
            return f"not a whole checkpoint ({error})"
        return None if broken is None else f"not a whole checkpoint ({broken} fails its CRC)"
    return None


def run_files_in(run_dir: Path) -> list[Path]:
    """The run files (`RUN_FILE_KINDS`) a run folder holds, sorted."""
    run_dir = Path(run_dir)
    found = [path for path in [*run_dir.glob("*"), *(run_dir / CHECKPOINT_FOLDER).glob("*")]
             if path.is_file() and run_file_kind(_relative(run_dir, path)) is not None]
    return sorted(found)


def damaged_files(run_dir: Path, kinds: tuple[str, ...] | None = None, thorough: bool = True) -> list[str]:
    """`<file> is damaged: <why>` for every run file of the folder (of `kinds`, default all) that the rule refuses,
    the manifest first if it is damaged. `thorough=False` checks a checkpoint the manifest lists by its size alone
    (a resumed run and `evaluate` read it through the rule anyway)."""
    found = [problem] if (problem := manifest_problem(run_dir)) else []
    return found + [problem for _, problem in damaged_paths(run_dir, kinds, thorough)]


def damaged_paths(run_dir: Path, kinds: tuple[str, ...] | None = None,
                  thorough: bool = True) -> list[tuple[Path, str]]:
    """(path, `<file> is damaged: <why>`) of the run files `damaged_files` names (the manifest aside)."""
    run_dir = Path(run_dir)
    manifest = read_manifest(run_dir)
    found: list[tuple[Path, str]] = []
    for path in run_files_in(run_dir):
        kind = run_file_kind(_relative(run_dir, path))
        assert kind is not None
        if kinds is not None and kind.name not in kinds:
            continue
        entry = (manifest or {}).get(_relative(run_dir, path))
        if kind.form == "checkpoint" and not thorough and entry is not None:
            size = path.stat().st_size
            sizes = {entry.get("size"), (entry.get("previous") or {}).get("size")}
            if size not in sizes:
                found.append((path, f"{path} is damaged: {size} bytes, not the {entry.get('size')} written "
                                    f"(truncated or emptied?)"))
            continue
        problem = run_file_problem(path, manifest)
        if problem is not None:
            found.append((path, problem))
    return found


TRAIN_KINDS = tuple(kind.name for kind in RUN_FILE_KINDS if kind.remade_by == "train")
"""The kinds `clbench train` makes: a run with one of them damaged is unfinished (`is_complete`)."""


def is_complete(run_dir: Path) -> bool:
    """The run finished: it has its accuracy.parquet and no file `train` makes is damaged (`damaged_files` of
    `TRAIN_KINDS`, checkpoints by size): a damaged run is unfinished, and `train` remakes it without --force."""
    return (Path(run_dir) / ACCURACY_FILE).is_file() and not damaged_files(run_dir, TRAIN_KINDS, thorough=False)


def read_run_json(path: Path, manifest: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """A run.json through the rule (`read_run_file_bytes`): its JSON object, or DamagedFileError naming it."""
    data = read_run_file_bytes(path, manifest)
    try:
        parsed = json.loads(data)
    except (UnicodeDecodeError, ValueError) as error:
        raise DamagedFileError(f"{path} is damaged: not readable JSON ({error})") from None
    if not isinstance(parsed, dict):
        raise DamagedFileError(f"{path} is damaged: a JSON {type(parsed).__name__}, not an object")
    return parsed


def previous_run_json(run_dir: Path) -> dict[str, Any]:
    """The run.json an earlier attempt left in `run_dir`: {} when there is none or it is damaged (`damaged_files`
    names it)."""
    path = Path(run_dir) / RUN_FILE
    if not path.is_file():
        return {}
    try:
        return read_run_json(path)
    except DamagedFileError:
        return {}


def read_run_parquet(path: Path, columns: list[str] | None = None) -> Any:
    """A run's Parquet file through the rule (`read_run_file_bytes`) as a DataFrame (of `columns`, default all)."""
    import pandas as pd

    return pd.read_parquet(io.BytesIO(read_run_file_bytes(path)), columns=columns)


def record_again(run_dir: Path) -> None:
    """A damaged manifest made again from the run files that pass their form's check (`form_problem`), so that
    the files a resumed run keeps are recorded again; the others are left out of it (the run remakes them)."""
    run_dir = Path(run_dir)
    if read_manifest(run_dir) is not None:
        return
    files = {}
    for path in run_files_in(run_dir):
        data, kind = path.read_bytes(), run_file_kind(_relative(run_dir, path))
        if kind is not None and form_problem(data, kind.form, kind.needs_rows) is None:
            files[_relative(run_dir, path)] = {**_digest(data), "previous": None}
    _write_manifest(run_dir, files)
