"""Reading a results folder's run files for `report`, every one through the rule of `clbench.run_files` (torch-free):
the run.json files, the accuracy files and the monitoring tables, read by a small thread pool; and the other files a
report reads (the curve, the monitoring tables, the evaluation file, the manifest) checked once when the results
are loaded, so that a damaged one leaves out only what depends on it (`FileDamage`).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from clbench.results import ACCURACY_FILE, RUN_FILE, DamagedFileError
from clbench.run_files import (
    MANIFEST_FILE,
    RunFileKind,
    manifest_problem,
    read_manifest,
    read_run_file_bytes,
    read_run_json,
    run_file_kind,
    run_file_problem,
)

if TYPE_CHECKING:
    import pyarrow as pa

READ_THREADS = 4


@dataclass(frozen=True)
class FileDamage:
    """A damaged file of a run the report keeps: what depends on it is left out (`kind.leaves_out`), the rest of the
    run is reported. `kind` is None for the run's manifest (its files are then checked by their form alone)."""

    folder: Path
    name: str
    problem: str
    kind: RunFileKind | None

    @property
    def leaves_out(self) -> str:
        return self.kind.leaves_out if self.kind is not None else "nothing (its files are checked by their form)"

    @property
    def remade_by(self) -> str:
        return self.kind.remade_by if self.kind is not None else "train"


def read_parquet_files(paths: Sequence[Path], columns: Sequence[tuple[str, str]],
                       damaged: dict[Path, str] | None = None) -> pd.DataFrame:
    """Many run files (Parquet) as one DataFrame, read by a small thread pool (one footer parse per file), each
    through the rule of `clbench.run_files` (its bytes checked against the run's manifest, or by their form).

    Only `columns` ((name, arrow type alias) pairs) are read, each cast to its type: a column that is all null
    in one file, or absent from it, reads as null. (A thread pool over `ParquetFile.read` measured 0.37 s for
    1,000 run files against 0.64 s for one `pyarrow.dataset` read; `tools/bench_report.py`.) With `damaged`, a
    damaged file is left out and recorded there (path -> what is wrong); without it, DamagedFileError names it.
    """
    import pyarrow as pa

    schema = pa.schema([(name, pa.type_for_alias(kind)) for name, kind in columns])
    with ThreadPoolExecutor(READ_THREADS) as pool:
        read = list(pool.map(lambda path: _read_or_problem(path, schema.names), paths))
    tables = []
    for path, (table, problem) in zip(paths, read):
        if problem is not None and damaged is None:
            raise DamagedFileError(problem)
        if problem is not None and damaged is not None:
            damaged[path] = problem
        elif table is not None:
            tables.append(table)
    if not tables:
        return pd.DataFrame({name: pd.Series(dtype=_pandas_dtype(kind)) for name, kind in columns})
    table = pa.concat_tables(tables, promote_options="permissive")  # absent columns become nulls
    arrays = [table.column(field.name).cast(field.type) if field.name in table.column_names
              else pa.nulls(table.num_rows, field.type) for field in schema]
    return pa.Table.from_arrays(arrays, schema=schema).to_pandas()


def _read_or_problem(path: Path, names: Sequence[str]) -> tuple[pa.Table | None, str | None]:
    """(table, None), or (None, what is wrong) when the file is damaged (`clbench.run_files.read_run_file_bytes`)."""
    import pyarrow as pa

    try:
        return _read_columns(read_run_file_bytes(path), names), None
    except DamagedFileError as error:
        return None, str(error)
    except (OSError, ValueError, pa.ArrowException) as error:
        return None, f"{path} is damaged: not a readable Parquet file ({error})"


def _read_columns(data: bytes, names: Sequence[str]) -> pa.Table:
    """The columns `names` that one Parquet file (its bytes) has (its footer is parsed once)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    parquet = pq.ParquetFile(pa.BufferReader(data))
    present = set(parquet.schema_arrow.names)
    return parquet.read(columns=[name for name in names if name in present], use_threads=False,
                        use_pandas_metadata=False)


def _pandas_dtype(kind: str) -> str:
    return {"int64": "int64", "double": "float64"}.get(kind, "object")


def read_run_files(folders: Sequence[Path]) -> tuple[dict[str, dict[str, Any]], dict[Path, str]]:
    """The run.json of each folder (by folder, as text), read by a thread pool through the rule, and the damaged
    ones (folder -> what is wrong: not the bytes written, not JSON, not a JSON object)."""
    def read(folder: Path) -> dict[str, Any] | str:
        try:
            return read_run_json(folder / RUN_FILE)
        except DamagedFileError as error:
            return str(error)

    with ThreadPoolExecutor(READ_THREADS) as pool:
        contents = list(pool.map(read, folders))
    parsed = {str(folder): content for folder, content in zip(folders, contents) if isinstance(content, dict)}
    damaged = {folder: content for folder, content in zip(folders, contents) if isinstance(content, str)}
    return parsed, damaged


BESIDE_ROWS = (ACCURACY_FILE, RUN_FILE)
"""The files `load_results` reads itself (a damaged one leaves the run out); every other run file of a finished run
is checked by `damaged_beside`."""


def damaged_beside(folders: dict[Path, set[str]]) -> list[FileDamage]:
    """The damaged files among the run files of `folders` (folder -> its file names) other than `BESIDE_ROWS`, and
    each damaged manifest, checked by a thread pool through the rule: what a report leaves out while they are."""
    def check(item: tuple[Path, set[str]]) -> list[FileDamage]:
        folder, names = item
        manifest = read_manifest(folder)
        found = [FileDamage(folder, MANIFEST_FILE, problem, None)] if (problem := manifest_problem(folder)) else []
        for name in sorted(names - set(BESIDE_ROWS)):
            kind = run_file_kind(name)
            problem = run_file_problem(folder / name, manifest) if kind is not None else None
            if problem is not None:
                found.append(FileDamage(folder, name, problem, kind))
        return found

    with ThreadPoolExecutor(READ_THREADS) as pool:
        return [damage for found in pool.map(check, folders.items()) for damage in found]
