"""Tables from stored results: what a researcher puts in a paper, computed from the results folder.

Torch-free (numpy, pandas, pyarrow). One benchmark's runs are loaded once (`load_results`: the accuracy files read by
a small thread pool) and shared by every table and plot:

- `build_report`: forgetting ratio rho^{<=t} (or mean accuracy A^{<=t}) per approach and stage;
- `build_summary`: after the last task T, A^{<=T}, backward transfer and max-previous forgetting, with the
  parameter count (the paper's permuted / split MNIST tables);
- `build_time_report`: training time (total, per epoch, per batch) and the bench's per-batch forward and
  forward+backward times (the paper's training-time table);
- `build_hat_report`: HAT's monitoring tables (capacity per layer, weight reuse) and the smax x c sensitivity.

Cells are mean (std) over seeds (sample std, ddof=1) or, asked for, mean +- the half-width of the Student-t 95%
confidence interval of the mean. Runs are grouped by (method, config hash); a method with several configs is
labelled by what differs between them. Incomplete runs, partial matrices and missing references are never
averaged silently: they are listed in the notes with the command that fixes them.
"""

from __future__ import annotations

import html
import json
import math
import os
import shlex
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from clbench import metrics
from clbench.errors import ResultsError
from clbench.results import ACCURACY_FILE, RUN_FILE, SCHEMA_VERSION, check_schema

if TYPE_CHECKING:
    import pyarrow as pa

REFERENCES = ("joint", "random")
FORMATS = ("markdown", "csv", "latex", "html")
METRICS = ("forgetting-ratio", "accuracy")
BENCH_FOLDER = "_bench"
CONFIDENCE = 0.95

# The columns of accuracy.parquet that the report reads, with the type each is cast to (a column that is all
# null in one file, or absent from an older one, reads as null).
READ_COLUMNS = (
    ("schema_version", "int64"), ("run_id", "string"), ("benchmark", "string"), ("variant", "string"),
    ("method", "string"), ("seed", "int64"), ("config_hash", "string"), ("data_hash", "string"),
    ("reference_hash", "string"),
    ("hyperparameters", "string"), ("overrides", "string"), ("stage", "int64"), ("task", "int64"),
    ("task_name", "string"), ("accuracy", "double"), ("stage_epochs", "double"), ("stage_batches", "double"),
    ("stage_train_seconds", "double"), ("device", "string"),
)
IDENTITY = ("benchmark", "variant", "method", "seed", "config_hash", "data_hash", "reference_hash", "hyperparameters",
            "overrides")
# What a run shares with each reference (besides the seed): `joint` is trained, so it must share the run's data,
# network and benchmark protocol (`reference_hash`); `random` trains nothing, so the data (`data_hash`) is enough.
REFERENCE_KEYS = {"joint": "reference_hash", "random": "data_hash"}
CAPACITY_COLUMNS = (("run_id", "string"), ("seed", "int64"), ("stage", "int64"), ("mask", "string"),
                    ("layer", "string"), ("used", "int64"), ("weights", "int64"), ("fraction", "double"))
REUSE_COLUMNS = (("run_id", "string"), ("seed", "int64"), ("stage", "int64"), ("task", "int64"),
                 ("later_task", "int64"), ("shared", "int64"), ("used", "int64"), ("fraction", "double"))


# ---------------------------------------------------------------------------------------------- statistics

@dataclass(frozen=True)
class Cell:
    """Mean, sample standard deviation (ddof=1; NaN for one seed) and number of seeds of one table cell."""

    mean: float
    std: float
    n: int

    @property
    def half_width(self) -> float:
        """Half-width of the Student-t 95% confidence interval of the mean: t_{0.975, n-1} s / sqrt(n).

        NaN for fewer than two values.
        """
        if self.n < 2 or not math.isfinite(self.std):
            return float("nan")
        return student_t_quantile(0.5 + CONFIDENCE / 2, self.n - 1) * self.std / math.sqrt(self.n)


def summarize(values: Iterable[float]) -> Cell:
    """The Cell of the finite values among `values` (NaN values are not counted)."""
    finite = [float(v) for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return Cell(float("nan"), float("nan"), 0)
    std = float(np.std(finite, ddof=1)) if len(finite) > 1 else float("nan")
    return Cell(float(np.mean(finite)), std, len(finite))


def student_t_two_sided(t: float, df: int) -> float:
    """P(|T| <= t) for Student's t with integer df >= 1 (Abramowitz & Stegun 26.7.3, exact finite series)."""
    theta = math.atan(abs(t) / math.sqrt(df))
    cosine, sine = math.cos(theta), math.sin(theta)
    if df % 2:  # odd: 2/pi [theta + sin cos (1 + 2/3 cos^2 + (2*4)/(3*5) cos^4 + ...)], terms up to cos^{df-2}
        total, term = 0.0, cosine
        for power in range(1, df - 1, 2):
            total += term
            term *= cosine * cosine * (power + 1) / (power + 2)
        return 2.0 / math.pi * (theta + sine * total)
    total, term = 0.0, 1.0  # even: sin (1 + 1/2 cos^2 + (1*3)/(2*4) cos^4 + ...), terms up to cos^{df-2}
    for power in range(0, df - 1, 2):
        total += term
        term *= cosine * cosine * (power + 1) / (power + 2)
    return sine * total


def student_t_quantile(probability: float, df: int) -> float:
    """t_{p, df}: the p-quantile (p > 0.5) of Student's t with integer df >= 1, by bisection on its CDF."""
    if not 0.5 < probability < 1.0 or df < 1:
        raise ValueError(f"student_t_quantile needs 0.5 < p < 1 and df >= 1, got p={probability}, df={df}")
    target = 2.0 * probability - 1.0  # P(|T| <= t)
    low, high = 0.0, 1.0
    while student_t_two_sided(high, df) < target:
        high *= 2.0
    for _ in range(200):
        middle = (low + high) / 2.0
        low, high = (middle, high) if student_t_two_sided(middle, df) < target else (low, middle)
        if high - low < 1e-12:
            break
    return (low + high) / 2.0


# ---------------------------------------------------------------------------------------------- loading

@dataclass
class Results:
    """One benchmark's stored runs, loaded once and shared by every table and plot.

    Attributes:
        frame: accuracy rows of the finished runs (the `READ_COLUMNS`).
        runs: one row per finished run, indexed by run id, with its identity columns plus `folder` (its run
            folder) and `label` (the row label of its approach and config in every table).
        matrices: the T x T accuracy matrix of every finished run, by run id.
        incomplete: run.json contents (run_id, status, error, method, seed) of runs without accuracy file.
        files: the file names in every run folder, by run id (to find monitoring tables without stat calls).
        info: `runs` as one dict per run id (fast look-ups in loops over runs).
        spec_argument: how the user named the benchmark when it is not a shipped spec (its spec file, as given),
            so that the commands printed in notes work when pasted; None: the benchmark's name.
    """

    results_dir: Path
    benchmark: str
    frame: pd.DataFrame
    runs: pd.DataFrame
    matrices: dict[str, np.ndarray]
    incomplete: list[dict[str, Any]] = field(default_factory=list)
    files: dict[str, set[str]] = field(default_factory=dict)
    info: dict[str, dict[str, Any]] = field(default_factory=dict)
    spec_argument: str | None = None

    def folder(self, run_id: str) -> Path:
        return Path(self.info[run_id]["folder"])

    @property
    def command_name(self) -> str:
        """The benchmark as printed commands name it (`clbench train <this> ...`)."""
        return shlex.quote(self.spec_argument) if self.spec_argument else self.benchmark


def benchmarks_in(results_dir: Path) -> list[str]:
    """The benchmark folders of a results folder (names starting with `.` or `_`, such as `_bench`, skipped)."""
    root = Path(results_dir)
    if not root.is_dir():
        raise ResultsError(f"results folder {root} does not exist; run `clbench train ... --results {root}`")
    names = [path.name for path in _subfolders(root)]
    if not names:
        raise ResultsError(f"no results in {root}; run `clbench train BENCHMARK -m METHOD --results {root}`")
    return names


def _subfolders(path: Path) -> list[Path]:
    try:
        with os.scandir(path) as entries:
            found = [Path(entry.path) for entry in entries
                     if entry.is_dir() and not entry.name.startswith((".", "_"))]
    except FileNotFoundError:
        return []
    return sorted(found)


def run_folders(results_dir: Path, benchmark: str) -> dict[Path, set[str]]:
    """Every run folder `<benchmark>/<method>/<config hash>/seed-<seed>/` with the names of its files."""
    folders: dict[Path, set[str]] = {}
    for method in _subfolders(Path(results_dir) / benchmark):
        for config in _subfolders(method):
            for seed in _subfolders(config):
                if seed.name.startswith("seed-"):
                    with os.scandir(seed) as entries:
                        folders[seed] = {entry.name for entry in entries if entry.is_file()}
    return folders


def read_parquet_files(paths: Sequence[Path], columns: Sequence[tuple[str, str]]) -> pd.DataFrame:
    """Many Parquet files as one DataFrame, read by a small thread pool (one footer parse per file).

    Only `columns` ((name, arrow type alias) pairs) are read, each cast to its type: a column that is all null
    in one file, or absent from it, reads as null. (A thread pool over `ParquetFile.read` measured 0.37 s for
    1,000 run files against 0.64 s for one `pyarrow.dataset` read; `tools/bench_report.py`.)
    """
    import pyarrow as pa

    if not paths:
        return pd.DataFrame({name: pd.Series(dtype=_pandas_dtype(kind)) for name, kind in columns})
    schema = pa.schema([(name, pa.type_for_alias(kind)) for name, kind in columns])
    with ThreadPoolExecutor(READ_THREADS) as pool:
        tables = list(pool.map(lambda path: _read_columns(path, schema.names), paths))
    table = pa.concat_tables(tables, promote_options="permissive")  # absent columns become nulls
    arrays = [table.column(field.name).cast(field.type) if field.name in table.column_names
              else pa.nulls(table.num_rows, field.type) for field in schema]
    return pa.Table.from_arrays(arrays, schema=schema).to_pandas()


READ_THREADS = 4


def _read_columns(path: Path, names: Sequence[str]) -> pa.Table:
    """The columns `names` that one Parquet file has (its footer is parsed once)."""
    import pyarrow.parquet as pq

    parquet = pq.ParquetFile(path)
    present = set(parquet.schema_arrow.names)
    return parquet.read(columns=[name for name in names if name in present], use_threads=False,
                        use_pandas_metadata=False)


def _pandas_dtype(kind: str) -> str:
    return {"int64": "int64", "double": "float64"}.get(kind, "object")


def load_results(results_dir: Path, benchmark: str, seeds: Sequence[int] | None = None,
                 spec_argument: str | None = None) -> Results:
    """Every run of one benchmark under `results_dir` (optionally only `seeds`), schema-checked.

    `spec_argument`: the spec file the user named the benchmark by, if any (see `Results.spec_argument`).
    """
    root = Path(results_dir)
    if not root.is_dir():
        raise ResultsError(f"results folder {root} does not exist; run `clbench train ... --results {root}` first")
    folders = run_folders(root, benchmark)
    finished = [folder for folder, files in folders.items() if ACCURACY_FILE in files]
    frame = read_parquet_files([folder / ACCURACY_FILE for folder in finished], READ_COLUMNS)
    _check_schema_versions(frame, root, benchmark)
    incomplete = [_incomplete_run(folder) for folder, files in folders.items()
                  if ACCURACY_FILE not in files and RUN_FILE in files]
    if seeds is not None:
        frame = frame[frame["seed"].isin(list(seeds))].reset_index(drop=True)
        incomplete = [run for run in incomplete if run.get("seed") in set(seeds)]
    first_rows = np.unique(pd.factorize(frame["run_id"])[0], return_index=True)[1]
    runs = frame.iloc[np.sort(first_rows)][["run_id", *IDENTITY]].set_index("run_id", drop=False)
    runs = runs.sort_index()
    labels = method_labels(runs)
    runs["label"] = [labels[(method, config)] for method, config in zip(runs["method"], runs["config_hash"])]
    runs["folder"] = [str(root / benchmark / run_id.split("/", 1)[-1]) for run_id in runs.index]
    files = {run_id: folders.get(Path(folder), set()) for run_id, folder in zip(runs.index, runs["folder"])}
    info = runs.to_dict("index")
    return Results(root, benchmark, frame, runs, metrics.accuracy_matrices(frame), incomplete, files, info,
                   spec_argument)


def _check_schema_versions(frame: pd.DataFrame, root: Path, benchmark: str) -> None:
    versions = frame["schema_version"]
    if bool((versions == SCHEMA_VERSION).all()):
        return
    bad = frame[versions.isna() | (versions != SCHEMA_VERSION)]
    if not bad.empty:
        run_id = bad["run_id"].iloc[0]
        check_schema(bad[bad["run_id"] == run_id], root / benchmark / str(run_id).split("/", 1)[-1] / ACCURACY_FILE)


def _incomplete_run(folder: Path) -> dict[str, Any]:
    info = json.loads((folder / RUN_FILE).read_text())
    return {key: info.get(key) for key in ("run_id", "status", "error", "method", "seed")}


# ---------------------------------------------------------------------------------------------- labels

def method_labels(frame: pd.DataFrame) -> dict[tuple[str, str], str]:
    """A label per (method, config hash): the method, plus what differs between that method's configs.

    What differs is taken from the hyper-parameters, then (while two configs still read the same) the
    variant, then the command's `--set` options; a config that none of these tells apart is labelled by its
    config hash.
    """
    labels: dict[tuple[str, str], str] = {}
    configs = frame.drop_duplicates(["method", "config_hash"])
    for method, group in configs.groupby("method", sort=True):
        if len(group) == 1:
            labels[(method, group["config_hash"].iloc[0])] = method
            continue
        described = {row.config_hash: _config_description(row) for row in group.itertuples()}
        details = _differing(described)
        texts = {config: ", ".join(f"{key}={value}" for key, value in detail) for config, detail in details.items()}
        for config, text in texts.items():
            unique = text and list(texts.values()).count(text) == 1
            labels[(method, config)] = f"{method} ({text if unique else f'config {config}'})"
    return labels


def _config_description(row: Any) -> list[dict[str, Any]]:
    """(hyper-parameters, variant, overrides) of a config as dicts, in the order labels look at them."""
    hyperparameters = json.loads(row.hyperparameters) if isinstance(row.hyperparameters, str) else {}
    variant = getattr(row, "variant", None)
    overrides_text = getattr(row, "overrides", None)
    overrides = json.loads(overrides_text) if isinstance(overrides_text, str) else []
    settings = dict(item.split("=", 1) for item in overrides if "=" in item)
    return [hyperparameters, {"variant": variant} if isinstance(variant, str) else {}, settings]


def _differing(described: dict[str, list[dict[str, Any]]]) -> dict[str, list[tuple[str, Any]]]:
    """Per config, the (key, value) pairs that differ between configs, source after source until all differ."""
    details: dict[str, list[tuple[str, Any]]] = {config: [] for config in described}
    for source in range(3):
        parts = {config: description[source] for config, description in described.items()}
        keys = {key for part in parts.values() for key in part}
        differing = sorted(k for k in keys if len({json.dumps(p.get(k), default=str) for p in parts.values()}) > 1)
        for config, part in parts.items():
            details[config] += [(key, part.get(key)) for key in differing]
        if len({json.dumps(detail, default=str) for detail in details.values()}) == len(details):
            break
    return details


# ---------------------------------------------------------------------------------------------- main table

@dataclass
class Report:
    """A table: one row per approach (label), one column per stage, plus notes on what was left out."""

    benchmark: str
    metric: str
    stages: list[int]
    rows: list[tuple[str, list[Cell]]] = field(default_factory=list)
    seeds: dict[str, list[int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def build_report(results_dir: Path, benchmark: str, metric: str = "forgetting-ratio",
                 include_references: bool = False, *, seeds: Sequence[int] | None = None,
                 results: Results | None = None) -> Report:
    """The table of `metric` (forgetting-ratio or accuracy) for one benchmark's results.

    `results` (from `load_results`) avoids reading the folder again when several tables are built.
    """
    if metric not in METRICS:
        raise ResultsError(f"metric {metric!r}: use one of {', '.join(METRICS)}")
    results = results if results is not None else load_results(results_dir, benchmark, seeds)
    report = Report(benchmark, metric, [])
    report.notes += incomplete_notes(results)
    if results.frame.empty:
        report.notes.append(f"no finished runs of {benchmark} in {results.results_dir}: run `clbench train "
                            f"{results.command_name} -m METHOD --seeds 0-9 --results {results.results_dir}`")
        return report
    report.stages = list(range(1, int(results.frame["stage"].max()) + 1))
    keep = include_references or metric == "accuracy"
    values = run_values(results, metric, report.notes, include_references=keep)
    per_label: dict[str, list[np.ndarray]] = {}
    for run_id, curve in values.items():
        label = results.info[run_id]["label"]
        per_label.setdefault(label, []).append(curve)
        report.seeds.setdefault(label, []).append(int(results.info[run_id]["seed"]))
    for label, curves in per_label.items():
        stacked = np.vstack([np.pad(c, (0, len(report.stages) - len(c)), constant_values=np.nan) for c in curves])
        report.rows.append((label, [summarize(stacked[:, i]) for i in range(stacked.shape[1])]))
    report.rows.sort(key=lambda row: (_sort_value(row[1][-1]), row[0]))
    report.notes += seed_coverage_notes(report.seeds)
    return report


def _sort_value(cell: Cell) -> float:
    return -math.inf if math.isnan(cell.mean) else cell.mean


def incomplete_notes(results: Results) -> list[str]:
    """One note per run that started but has no accuracy file, with the command that re-runs it."""
    notes = []
    for run in results.incomplete:
        reason = f" ({run['error']})" if run.get("error") else ""
        notes.append(f"left out {run['run_id']}: {run['status']}{reason}; re-run `clbench train "
                     f"{results.command_name} -m {run['method']} --seeds {run['seed']}` (with the same --set options)")
    return notes


def complete_runs(results: Results, notes: list[str]) -> list[str]:
    """The run ids whose accuracy matrix is complete; a note for each of the others."""
    complete = []
    for run_id, matrix in results.matrices.items():
        if metrics.is_complete_matrix(matrix):
            complete.append(run_id)
        else:
            notes.append(f"left out {run_id}: its accuracy matrix is incomplete (a stage or task is missing)")
    return complete


def seed_coverage_notes(seeds: dict[str, list[int]]) -> list[str]:
    """A note naming the rows that lack seeds other rows have (their means are over different task orders)."""
    every = sorted({seed for values in seeds.values() for seed in values})
    lacking = {label: sorted(set(every) - set(values)) for label, values in seeds.items()}
    lacking = {label: missing for label, missing in lacking.items() if missing}
    if not lacking:
        return []
    if len(lacking) > 10:
        return [f"{len(lacking)} rows lack seeds that other rows have (see the seeds column)"]
    parts = "; ".join(f"{label} lacks {_plural(len(m), 'seed')} {format_seeds(m)}"
                      for label, m in sorted(lacking.items()))
    return [f"not every row has the same seeds: {parts}"]


def _plural(count: int, word: str) -> str:
    return word if count == 1 else word + "s"


def format_seeds(seeds: Iterable[int]) -> str:
    """`0-2,5` for [0, 1, 2, 5]."""
    ranges: list[list[int]] = []
    for seed in sorted(set(seeds)):
        if ranges and ranges[-1][1] == seed - 1:
            ranges[-1][1] = seed
        else:
            ranges.append([seed, seed])
    return ",".join(str(low) if low == high else f"{low}-{high}" for low, high in ranges)


def run_values(results: Results, metric: str, notes: list[str], include_references: bool = False,
               run_ids: Sequence[str] | None = None) -> dict[str, np.ndarray]:
    """rho^{<=t} or A^{<=t} (length T) of every usable run (or of `run_ids`), by run id.

    Why a run is not usable (incomplete matrix, no matching joint or random reference, several equally matching
    ones) goes to `notes`, with the command that makes what is missing.
    """
    references = reference_candidates(results) if metric == "forgetting-ratio" else {}
    values: dict[str, np.ndarray] = {}
    for run_id in results.info if run_ids is None else run_ids:
        run = results.info[run_id]
        if run["method"] in REFERENCES and not include_references:
            continue
        curve = _run_values(notes, run_id, run, results, references, metric)
        if curve is not None:
            values[run_id] = curve
    return values


def reference_candidates(results: Results) -> dict[tuple[str, str, int], list[str]]:
    """(reference method, key, seed) -> the complete reference runs with that key (`REFERENCE_KEYS`), by run id."""
    found: dict[tuple[str, str, int], list[str]] = {}
    for run_id, run in results.info.items():
        method = run["method"]
        if method in REFERENCES and _present(run[REFERENCE_KEYS[method]]) \
                and metrics.is_complete_matrix(results.matrices[run_id]):
            found.setdefault((method, run[REFERENCE_KEYS[method]], int(run["seed"])), []).append(run_id)
    return found


def _present(value: Any) -> bool:
    return isinstance(value, str) and value != ""


def match_reference(results: Results, candidates: dict[tuple[str, str, int], list[str]], method: str,
                    run: dict[str, Any]) -> tuple[np.ndarray | None, str | None]:
    """The matrix of a run's `method` reference (joint or random), or None with why not (None: no such run).

    Never chosen by order: when several runs match equally and their matrices differ, there is no answer.
    """
    key = run[REFERENCE_KEYS[method]]
    if not _present(key):
        return None, (f"it has no {REFERENCE_KEYS[method]} (written by an older clbench); re-run it with "
                      f"`--force`")
    run_ids = candidates.get((method, key, int(run["seed"])), [])
    if not run_ids:
        return None, None
    first = results.matrices[run_ids[0]]
    if all(np.array_equal(results.matrices[other], first, equal_nan=True) for other in run_ids[1:]):
        return first, None
    folders = ", ".join(str(results.folder(other)) for other in run_ids)
    return None, (f"{len(run_ids)} {method} runs match it equally and their accuracies differ ({folders}); "
                  f"keep one of them in this results folder (move the others to another `--results`)")


def _run_values(notes: list[str], run_id: str, run: dict[str, Any], results: Results,
                candidates: dict[tuple[str, str, int], list[str]], metric: str) -> np.ndarray | None:
    matrix = results.matrices[run_id]
    if not metrics.is_complete_matrix(matrix):
        notes.append(f"left out {run_id}: its accuracy matrix is incomplete (a stage or task is missing)")
        return None
    if metric == "accuracy":
        return metrics.average_accuracy(matrix)
    seed = int(run["seed"])
    matched = {method: match_reference(results, candidates, method, run) for method in REFERENCES}
    refused = [reason for _, reason in matched.values() if reason]
    if refused:
        notes.append(f"left out {run_id}: " + "; ".join(refused))
        return None
    missing = [method for method, (reference, _) in matched.items() if reference is None]
    if missing:
        notes.append(f"left out {run_id}: no {' and no '.join(missing)} reference for seed {seed} with its data, "
                     f"network and protocol (data {run['data_hash']}, reference key {run['reference_hash']}); "
                     f"make it with `{_reference_command(run, missing, results)}`")
        return None
    joint, random = matched["joint"][0], matched["random"][0]
    size = matrix.shape[0]
    if joint.shape[0] < size or random.shape[0] < size:
        notes.append(f"left out {run_id}: its references have fewer stages than the run")
        return None
    return metrics.forgetting_ratio(matrix, joint[:size, :size], metrics.random_reference(random[:size, :size]))


def _reference_command(run: dict[str, Any], missing: Sequence[str], results: Results) -> str:
    """The `clbench train` command that makes the missing references with the run's data, network, protocol."""
    overrides = " ".join(f"--set {shlex.quote(option)}" for option in json.loads(run["overrides"] or "[]")
                         if not _is_method_override(option))
    return " ".join(part for part in (f"clbench train {results.command_name} -m {','.join(missing)}",
                                      f"--seeds {int(run['seed'])}", overrides,
                                      f"--results {shlex.quote(str(results.results_dir))}") if part)


def _is_method_override(text: str) -> bool:
    """True for `--set` options that only concern approaches (not data/network/training/variant)."""
    key = text.split("=", 1)[0]
    return key.split(".")[0] not in ("data", "network", "training", "variant")


# ---------------------------------------------------------------------------------------------- summary

@dataclass(frozen=True)
class SummaryRow:
    """One approach after the last task: A^{<=T}, backward transfer, max-previous forgetting (fractions)."""

    label: str
    parameters: int | None
    accuracy: Cell
    backward_transfer: Cell
    forgetting: Cell
    seeds: list[int]


@dataclass
class Summary:
    """The paper's permuted / split MNIST table, plus BWT and forgetting: one row per approach."""

    benchmark: str
    stages: int
    rows: list[SummaryRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def build_summary(results: Results, include_references: bool = True) -> Summary:
    """A^{<=T}, BWT and max-previous forgetting per approach (mean over seeds), with `parameters` from run.json."""
    summary = Summary(results.benchmark, int(results.frame["stage"].max()) if not results.frame.empty else 0)
    summary.notes += incomplete_notes(results)
    per_label: dict[str, list[str]] = {}
    for run_id in complete_runs(results, summary.notes):
        run = results.info[run_id]
        if run["method"] not in REFERENCES or include_references:
            per_label.setdefault(run["label"], []).append(run_id)
    for label, run_ids in per_label.items():
        matrices = [results.matrices[run_id] for run_id in run_ids]
        summary.rows.append(SummaryRow(
            label, _parameter_count(results, run_ids, summary.notes),
            summarize(metrics.average_accuracy(m)[-1] for m in matrices),
            summarize(metrics.backward_transfer(m) for m in matrices),
            summarize(metrics.max_previous_forgetting(m) for m in matrices),
            sorted(int(results.info[run_id]["seed"]) for run_id in run_ids)))
        if len({m.shape[0] for m in matrices}) > 1:
            summary.notes.append(f"{label}: runs have different numbers of tasks; A^<=T is each run's last stage")
    summary.rows.sort(key=lambda row: (_sort_value(row.accuracy), row.label))
    summary.notes += seed_coverage_notes({row.label: row.seeds for row in summary.rows})
    return summary


def _parameter_count(results: Results, run_ids: Sequence[str], notes: list[str]) -> int | None:
    """`parameters` from the runs' run.json (an int, or a dict with `total`); None when no run has it."""
    counts = set()
    for run_id in run_ids:
        if RUN_FILE not in results.files.get(run_id, set()):
            continue
        value = json.loads((results.folder(run_id) / RUN_FILE).read_text()).get("parameters")
        value = value.get("total") if isinstance(value, dict) else value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            counts.add(int(value))
    if len(counts) > 1:
        notes.append(f"{results.info[run_ids[0]]['label']}: runs report different parameter counts "
                     f"{sorted(counts)}; the largest is shown")
    return max(counts) if counts else None


# ---------------------------------------------------------------------------------------------- time

BENCH_COLUMNS = ("benchmark", "method", "device", "batch_size", "forward_ms", "forward_backward_ms",
                 "epoch_seconds", "peak_memory_mb", "clbench_version", "torch_version", "measured_utc")


@dataclass(frozen=True)
class TimeRow:
    """Training time of one approach: total (s), per epoch (s), per batch (ms); bench per-batch times (ms)."""

    label: str
    total_seconds: Cell
    epoch_seconds: Cell
    batch_ms: Cell
    forward_ms: float
    forward_backward_ms: float
    seeds: list[int]


@dataclass
class TimeReport:
    """The paper's training-time table: one row per approach, slowest first."""

    benchmark: str
    rows: list[TimeRow] = field(default_factory=list)
    has_bench: bool = False
    notes: list[str] = field(default_factory=list)


def build_time_report(results: Results) -> TimeReport:
    """Total, per-epoch and per-batch training time per approach (mean over seeds) and the bench's batch times.

    From accuracy.parquet's per-stage `stage_train_seconds` (wall-clock of the task's training epochs with
    their validation passes), `stage_epochs` and `stage_batches`, summed over stages: per epoch = total /
    epochs, per batch = total / batches. Batch-F and batch-FB are the latest `<results>/_bench/*.parquet`
    measurement of the method on this benchmark.
    """
    report = TimeReport(results.benchmark)
    report.notes += incomplete_notes(results)
    complete = complete_runs(results, report.notes)
    stages = results.frame[results.frame["run_id"].isin(complete)].drop_duplicates(["run_id", "stage"])
    sums = stages.groupby("run_id")[["stage_train_seconds", "stage_epochs", "stage_batches"]].sum(min_count=1)
    timed = sums.dropna()
    untimed = sorted(set(complete) - set(timed.index))
    if untimed:
        report.notes.append(f"left out of the time table (no stage timings): {', '.join(untimed)}")
    bench = latest_bench(results.results_dir, results.benchmark)
    report.has_bench = not bench.empty
    runs = results.runs.loc[timed.index]
    for label, group in timed.groupby(runs["label"], sort=False):
        method = results.info[group.index[0]]["method"]
        measured = bench[bench["method"] == method]
        seconds = group["stage_train_seconds"]
        report.rows.append(TimeRow(
            label, summarize(seconds), summarize(seconds / group["stage_epochs"].where(group["stage_epochs"] > 0)),
            summarize(1000.0 * seconds / group["stage_batches"].where(group["stage_batches"] > 0)),
            float(measured["forward_ms"].iloc[0]) if len(measured) else float("nan"),
            float(measured["forward_backward_ms"].iloc[0]) if len(measured) else float("nan"),
            sorted(int(s) for s in runs.loc[group.index, "seed"])))
    report.rows.sort(key=lambda row: (-_sort_value(row.total_seconds), row.label))
    report.notes += seed_coverage_notes({row.label: row.seeds for row in report.rows})
    report.notes += _device_notes(results, timed.index) + _bench_notes(bench, results.results_dir, results.benchmark,
                                                                      results.command_name)
    return report


def latest_bench(results_dir: Path, benchmark: str) -> pd.DataFrame:
    """The latest bench measurement (by `measured_utc`) of every method on `benchmark`, from `<results>/_bench`."""
    paths = sorted((Path(results_dir) / BENCH_FOLDER).glob("*.parquet"))
    frames = [pd.read_parquet(path) for path in paths]
    frames = [frame for frame in frames if not frame.empty]
    if not frames:
        return pd.DataFrame(columns=list(BENCH_COLUMNS))
    bench = pd.concat(frames, ignore_index=True)
    missing = [column for column in ("benchmark", "method", "forward_ms", "forward_backward_ms") if column not in bench]
    if missing:
        raise ResultsError(f"bench results in {Path(results_dir) / BENCH_FOLDER} lack columns {missing}")
    bench = bench[bench["benchmark"] == benchmark]
    order = "measured_utc" if "measured_utc" in bench else "method"
    return bench.sort_values(order, kind="stable").groupby("method", sort=True).tail(1).reset_index(drop=True)


def _device_notes(results: Results, run_ids: Iterable[str]) -> list[str]:
    devices = results.frame.drop_duplicates("run_id").set_index("run_id").loc[list(run_ids), "device"]
    counts = devices.fillna("unknown device").value_counts().sort_index()
    if counts.empty:
        return []
    return ["training times measured on " + ", ".join(f"{device} ({n} run{'s' if n > 1 else ''})"
                                                      for device, n in counts.items())]


def _bench_notes(bench: pd.DataFrame, results_dir: Path, benchmark: str, command_name: str) -> list[str]:
    """Where batch-F / batch-FB come from: device, batch size, torch version and date (per method if they differ)."""
    if bench.empty:
        return [f"batch-F / batch-FB: no bench results for {benchmark} in {Path(results_dir) / BENCH_FOLDER}; "
                f"measure them with `clbench bench {command_name} -m METHODS --results {results_dir}`"]
    settings: dict[str, list[str]] = {}
    for row in bench.to_dict("records"):
        described = ", ".join(f"{name} {row[column]}" for column, name in (
            ("device", "on"), ("batch_size", "batch size"), ("data", "data"), ("torch_version", "torch"),
            ("measured_utc", "at")) if column in row and isinstance(row[column], (str, int, float)))
        settings.setdefault(described, []).append(str(row["method"]))
    parts = [text if len(settings) == 1 else f"{', '.join(methods)}: {text}" for text, methods in settings.items()]
    return [f"batch-F / batch-FB: per-batch forward and forward+backward time from {Path(results_dir) / BENCH_FOLDER}"
            f" ({'; '.join(parts)})"]


# ---------------------------------------------------------------------------------------------- HAT

@dataclass
class HatMonitoring:
    """HAT monitoring of one config, mean over its seeds.

    Attributes:
        capacity: columns mask (cumulative | task), stage, layer, mean, std, n: fraction of weights used.
        reuse: columns task, later_task, mean, std, n: fraction of task i's weights reused by task j.
        layers: the gated layers in network order, then `total`.
        task_names: the task names in sequence order when every seed has the same order, else None.
    """

    label: str
    seeds: list[int]
    capacity: pd.DataFrame
    reuse: pd.DataFrame
    layers: list[str]
    task_names: list[str] | None
    masks_file: Path | None


@dataclass
class Sensitivity:
    """rho^{<=T} of HAT runs of one seed over the smax x c grid (NaN where the pair was not run)."""

    seed: int
    stage: int
    smax: list[float]
    c: list[float]
    values: np.ndarray  # (len(smax), len(c))


@dataclass
class HatReport:
    benchmark: str
    configs: list[HatMonitoring] = field(default_factory=list)
    sensitivity: Sensitivity | None = None
    notes: list[str] = field(default_factory=list)


def build_hat_report(results: Results, method: str = "hat") -> HatReport:
    """HAT's capacity and weight-reuse tables per config (mean over seeds) and its smax x c sensitivity."""
    report = HatReport(results.benchmark)
    run_ids = [run_id for run_id, run in results.info.items() if run["method"] == method]
    if not run_ids:
        report.notes.append(f"no finished {method} runs of {results.benchmark} in {results.results_dir}")
        return report
    capacity = _monitoring_table(results, run_ids, "hat_capacity", CAPACITY_COLUMNS)
    reuse = _monitoring_table(results, run_ids, "hat_reuse", REUSE_COLUMNS)
    without = sorted(set(run_ids) - set(capacity["run_id"]))
    if without:
        report.notes.append(f"no hat_capacity.parquet in {', '.join(without)} (runs from before monitoring?)")
    if not reuse.empty:  # every run's pairs as of its last stage (a finished task's mask never changes)
        reuse = reuse[reuse["stage"] == reuse.groupby("run_id")["stage"].transform("max")]
    capacity_means = dict(tuple(_mean_over_seeds(capacity, ["label", "mask", "stage", "layer"]).groupby("label")))
    reuse_means = dict(tuple(_mean_over_seeds(reuse, ["label", "task", "later_task"]).groupby("label")))
    monitored = capacity.groupby("label")["run_id"].unique() if not capacity.empty else {}
    orders = _task_orders(results, list(set(capacity["run_id"])))
    layer_order = list(dict.fromkeys(capacity["layer"]))
    for label in sorted(capacity_means):
        used = sorted(monitored[label], key=lambda run_id: (int(results.info[run_id]["seed"]), run_id))
        layers = [layer for layer in layer_order if layer != "total"] + ["total"]
        layers = [layer for layer in layers if layer in set(capacity_means[label]["layer"])]
        names = {orders[run_id] for run_id in used}
        report.configs.append(HatMonitoring(
            label, sorted(int(results.info[run_id]["seed"]) for run_id in used),
            capacity_means[label].drop(columns="label").reset_index(drop=True),
            reuse_means[label].drop(columns="label").reset_index(drop=True) if label in reuse_means
            else _mean_over_seeds(reuse.iloc[:0], ["task", "later_task"]),
            layers, list(names.pop()) if len(names) == 1 and None not in names else None,
            _masks_file(results, used[0])))
    report.sensitivity = hat_sensitivity(results, method, report.notes)
    return report


def _monitoring_table(results: Results, run_ids: Iterable[str], name: str,
                      columns: Sequence[tuple[str, str]]) -> pd.DataFrame:
    """One monitoring table of many runs (with each run's `label`), from the runs that have it."""
    paths = [results.folder(run_id) / f"{name}.parquet" for run_id in run_ids
             if f"{name}.parquet" in results.files.get(run_id, set())]
    table = read_parquet_files(paths, columns)
    numerator, denominator = ("used", "weights") if name == "hat_capacity" else ("shared", "used")
    exact = table[numerator] / table[denominator].where(table[denominator] > 0)  # as float64, not float32
    table["fraction"] = exact.fillna(table["fraction"]).astype(float)
    table["label"] = table["run_id"].map({run_id: run["label"] for run_id, run in results.info.items()})
    return table


def _masks_file(results: Results, run_id: str) -> Path | None:
    return results.folder(run_id) / "hat_masks.parquet" if "hat_masks.parquet" in results.files[run_id] else None


def _mean_over_seeds(frame: pd.DataFrame, keys: list[str], value: str = "fraction") -> pd.DataFrame:
    """Mean, sample std and count of `value` over the runs, per `keys`."""
    if frame.empty:
        return pd.DataFrame({**{key: [] for key in keys}, "mean": [], "std": [], "n": []})
    grouped = frame.groupby(keys, sort=True)[value]
    table = grouped.agg(["mean", "std", "count"]).rename(columns={"count": "n"}).reset_index()
    table[["mean", "std"]] = table[["mean", "std"]].astype(float)
    return table


def _task_orders(results: Results, run_ids: Sequence[str]) -> dict[str, tuple[str, ...] | None]:
    """The task names of every run in sequence order (None if a name is missing)."""
    frame = results.frame[results.frame["run_id"].isin(run_ids)].drop_duplicates(["run_id", "task"])
    frame = frame.sort_values(["run_id", "task"])
    orders: dict[str, tuple[str, ...] | None] = {}
    for run_id, names in zip(frame["run_id"], frame["task_name"]):
        order = orders.get(run_id, ())
        orders[run_id] = None if order is None or not isinstance(names, str) else (*order, names)
    return orders


def hat_sensitivity(results: Results, method: str, notes: list[str], seed: int | None = None) -> Sensitivity | None:
    """rho^{<=T} over smax x c for `method`'s runs of one seed (default: the lowest seed with two or more configs).

    None when no seed has runs of two or more (smax, c) pairs. Configs that also differ in other
    hyper-parameters with the same (smax, c) are averaged, with a note.
    """
    grid = {}
    for run_id, run in results.info.items():
        if run["method"] != method:
            continue
        hp = json.loads(run["hyperparameters"] or "{}")
        if "smax" in hp and "c" in hp:
            grid[run_id] = (int(run["seed"]), float(hp["smax"]), float(hp["c"]))
    per_seed: dict[int, set[tuple[float, float]]] = {}
    for s, smax, c in grid.values():
        per_seed.setdefault(s, set()).add((smax, c))
    candidates = sorted(s for s, pairs in per_seed.items() if len(pairs) > 1)
    if seed is None:
        if not candidates:
            return None
        seed = candidates[0]
    chosen = [run_id for run_id, (s, _, _) in grid.items() if s == seed]
    values = run_values(results, "forgetting-ratio", notes, run_ids=chosen)
    smax_values = sorted({grid[r][1] for r in chosen})
    c_values = sorted({grid[r][2] for r in chosen})
    cells: dict[tuple[float, float], list[float]] = {}
    for run_id, curve in values.items():
        cells.setdefault(grid[run_id][1:], []).append(float(curve[-1]))
    matrix = np.full((len(smax_values), len(c_values)), np.nan)
    for (smax, c), found in cells.items():
        matrix[smax_values.index(smax), c_values.index(c)] = float(np.mean(found))
        if len(found) > 1:
            notes.append(f"sensitivity: {len(found)} {method} configs with smax={smax:g}, c={c:g} on seed {seed} "
                         f"(they differ in other hyper-parameters) are averaged")
    stage = int(results.frame["stage"].max())
    return Sensitivity(seed, stage, smax_values, c_values, matrix)


# ---------------------------------------------------------------------------------------------- text tables

@dataclass
class Table:
    """A formatted table (text cells) with an optional title and its notes."""

    header: list[str]
    rows: list[list[str]]
    title: str | None = None
    notes: list[str] = field(default_factory=list)


def format_cell(cell: Cell, metric: str, ci: bool = False) -> str:
    """`-0.06 (0.01)` for the forgetting ratio, `99.0 (0.2)` (percent) for accuracy; `–` when empty.

    With `ci`, `-0.06 ± 0.02`: the mean and the half-width of its Student-t 95% confidence interval.
    """
    scale, digits = (100.0, 1) if metric in ("accuracy", "percent") else (1.0, 2)
    return format_value(cell, scale, digits, ci)


def format_value(cell: Cell, scale: float, digits: int, ci: bool = False) -> str:
    """`mean (std)` or `mean ± half-width` of `cell` times `scale` with `digits` decimals; `–` when empty."""
    if cell.n == 0:
        return "–"
    mean = f"{cell.mean * scale:.{digits}f}"
    spread = cell.half_width if ci else cell.std
    spread_text = "–" if math.isnan(spread) else f"{spread * scale:.{digits}f}"
    return f"{mean} ± {spread_text}" if ci else f"{mean} ({spread_text})"


def header(report: Report) -> list[str]:
    symbol = "rho" if report.metric == "forgetting-ratio" else "A"
    return ["approach", *[f"{symbol}<={t}" for t in report.stages], "seeds"]


def table_rows(report: Report, ci: bool = False) -> list[list[str]]:
    return [[label, *[format_cell(cell, report.metric, ci) for cell in cells], str(len(report.seeds.get(label, [])))]
            for label, cells in report.rows]


def report_table(report: Report, ci: bool = False) -> Table:
    return Table(header(report), table_rows(report, ci), notes=list(report.notes))


def summary_table(summary: Summary, ci: bool = False) -> Table:
    rows = [[row.label, format_parameters(row.parameters), format_cell(row.accuracy, "percent", ci),
             format_cell(row.backward_transfer, "percent", ci), format_cell(row.forgetting, "percent", ci),
             str(len(row.seeds))] for row in summary.rows]
    head = ["approach", "parameters", f"A<={summary.stages}", "BWT", "forgetting", "seeds"]
    return Table(head, rows, notes=list(summary.notes))


def format_parameters(count: int | None) -> str:
    """`1.9M`, `0.1M`, `54.3k`, `980`; `–` when unknown (the paper's Parameters column)."""
    if count is None:
        return "–"
    if count >= 50_000:
        return f"{count / 1e6:.1f}M"
    if count >= 1_000:
        return f"{count / 1e3:.1f}k"
    return str(count)


def time_table(report: TimeReport, ci: bool = False) -> Table:
    largest = max((row.total_seconds.mean for row in report.rows if row.total_seconds.n), default=0.0)
    unit, scale = ("h", 1 / 3600) if largest >= 3600 else ("min", 1 / 60) if largest >= 60 else ("s", 1.0)
    head = ["approach", f"total [{unit}]", "epoch [s]", "batch [ms]"]
    head += ["batch-F [ms]", "batch-FB [ms]"] if report.has_bench else []
    rows = []
    for row in report.rows:
        cells = [row.label, format_value(row.total_seconds, scale, 2, ci), format_value(row.epoch_seconds, 1, 1, ci),
                 format_value(row.batch_ms, 1, 1, ci)]
        if report.has_bench:
            cells += [_plain(row.forward_ms, 1), _plain(row.forward_backward_ms, 1)]
        rows.append([*cells, str(len(row.seeds))])
    return Table([*head, "seeds"], rows, notes=list(report.notes))


def _plain(value: float, digits: int = 2) -> str:
    return "–" if not math.isfinite(value) else f"{value:.{digits}f}"


def hat_tables(report: HatReport) -> list[Table]:
    """Per HAT config: capacity used by a^{<=t} and by a^t per layer and stage (%), and the reuse matrix (%)."""
    tables = []
    for config in report.configs:
        seeds = (f"mean over seeds {format_seeds(config.seeds)}" if len(config.seeds) > 1
                 else f"seed {config.seeds[0]}")
        for mask, what in (("cumulative", "a^{<=t}, all tasks so far"), ("task", "a^t, task t alone")):
            tables.append(_capacity_table(config, mask, f"{config.label}: % of weights used by {what} ({seeds})"))
        if not config.reuse.empty:
            tables.append(_reuse_table(config, f"{config.label}: % of task i's weights reused by task j ({seeds})"))
    if report.sensitivity is not None:
        tables.append(sensitivity_table(report.sensitivity))
    if tables:
        tables[-1].notes += report.notes
    else:
        tables.append(Table([], [], notes=list(report.notes)))
    return tables


def _capacity_table(config: HatMonitoring, mask: str, title: str) -> Table:
    part = config.capacity[config.capacity["mask"] == mask]
    means = {(int(stage), layer): value for stage, layer, value in zip(part["stage"], part["layer"], part["mean"])}
    rows = []
    for stage in sorted({stage for stage, _ in means}):
        cells = [_plain(100 * means[(stage, layer)], 1) if (stage, layer) in means else "–" for layer in config.layers]
        rows.append([str(stage), *cells])
    notes = [_task_order_note(config)] if mask == "task" else []
    return Table(["after task", *config.layers], rows, title, [note for note in notes if note])


def _reuse_table(config: HatMonitoring, title: str) -> Table:
    reuse = {(int(i), int(j)): value for i, j, value in zip(config.reuse["task"], config.reuse["later_task"],
                                                             config.reuse["mean"])}
    size = max(j for _, j in reuse)
    rows = [[str(i), *[_plain(100 * reuse[(i, j)], 1) if (i, j) in reuse else ""
                                       for j in range(2, size + 1)]] for i in range(1, size)]
    return Table(["task i \\ j", *[str(j) for j in range(2, size + 1)]], rows, title)


def _task_order_note(config: HatMonitoring) -> str:
    if config.task_names is None:
        return f"{config.label}: the seeds have different task orders; tasks are averaged by position"
    return f"{config.label} tasks: " + ", ".join(f"{i} {name}" for i, name in enumerate(config.task_names, 1))


def sensitivity_table(sensitivity: Sensitivity) -> Table:
    rows = [[f"smax={smax:g}", *[_plain(value) for value in values]]
            for smax, values in zip(sensitivity.smax, sensitivity.values)]
    title = f"hat: rho<={sensitivity.stage} over smax x c (seed {sensitivity.seed})"
    return Table(["", *[f"c={c:g}" for c in sensitivity.c]], rows, title)


# ---------------------------------------------------------------------------------------------- rendering

def render(report: Report, fmt: str = "markdown", ci: bool = False) -> str:
    """The table as markdown, csv, latex or html text (notes follow, as a list or as comments)."""
    if fmt == "csv":
        return report_csv(report, ci)
    return render_tables([report_table(report, ci)], fmt)


def render_tables(tables: Sequence[Table], fmt: str = "markdown") -> str:
    """Markdown, LaTeX or HTML text of `tables`, each with its title before it and its notes after it."""
    if fmt not in ("markdown", "latex", "html"):
        raise ResultsError(f"format {fmt!r}: use one of {', '.join(FORMATS)}")
    blocks = [_render_one(table, fmt) for table in tables]
    return "\n\n".join(blocks) + "\n"


def _render_one(table: Table, fmt: str) -> str:
    """One table (nothing but its notes when it has no columns)."""
    if fmt == "html":
        return _render_html(table)
    prefix = "% " if fmt == "latex" else "- "
    notes = "\n".join(prefix + note for note in table.notes)
    if not table.header:
        return notes
    rows = [table.header, *table.rows]
    body = _render_latex(rows) if fmt == "latex" else _render_markdown(rows)
    title = (("% " if fmt == "latex" else "### ") + table.title + "\n\n") if table.title else ""
    return title + body + ("\n\n" + notes if notes else "")


def _render_markdown(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["| " + " | ".join(cell.ljust(w) for cell, w in zip(row, widths)) + " |" for row in rows]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


LATEX_SPECIALS = {"\\": "\\textbackslash{}", "&": "\\&", "%": "\\%", "$": "\\$", "#": "\\#", "_": "\\_",
                  "{": "\\{", "}": "\\}", "~": "\\textasciitilde{}", "^": "\\textasciicircum{}", "–": "--",
                  "±": "$\\pm$"}


def latex_escape(text: str) -> str:
    return "".join(LATEX_SPECIALS.get(char, char) for char in text)


def _latex_header(text: str) -> str:
    for symbol, latex in (("rho<=", "\\rho"), ("A<=", "A")):
        if text.startswith(symbol):
            return f"${latex}^{{\\leq {text[len(symbol):]}}}$"
    return latex_escape(text)


def _render_latex(rows: list[list[str]]) -> str:
    head = " & ".join(_latex_header(cell) for cell in rows[0])
    body = [" & ".join(latex_escape(cell) for cell in row) + " \\\\" for row in rows[1:]]
    spec = "l" + "c" * (len(rows[0]) - 1)
    return "\n".join([f"\\begin{{tabular}}{{{spec}}}", "\\toprule", head + " \\\\", "\\midrule", *body,
                      "\\bottomrule", "\\end{tabular}"])


def _html_header(text: str) -> str:
    for symbol, entity in (("rho<=", "&rho;"), ("A<=", "A")):
        if text.startswith(symbol):
            return f"{entity}<sup>&le;{html.escape(text[len(symbol):])}</sup>"
    return html.escape(text)


def _render_html(table: Table) -> str:
    lines = []
    if table.header:
        lines.append("<table>")
        if table.title:
            lines.append(f"<caption>{html.escape(table.title)}</caption>")
        lines += ["<thead>", "<tr>" + "".join(f"<th>{_html_header(c)}</th>" for c in table.header) + "</tr>",
                  "</thead>", "<tbody>"]
        lines += ["<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in table.rows]
        lines += ["</tbody>", "</table>"]
    if table.notes:
        lines += ["<ul>", *[f"<li>{html.escape(note)}</li>" for note in table.notes], "</ul>"]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------- csv (raw numbers)

def _cell_columns(cell: Cell, ci: bool) -> dict[str, Any]:
    columns: dict[str, Any] = {"mean": cell.mean, "std": cell.std, "seeds": cell.n}
    if ci:
        columns["ci95"] = cell.half_width
    return columns


def report_csv(report: Report, ci: bool = False) -> str:
    """Tidy CSV: one row per (approach, stage) with raw mean, std, seeds (and the 95% CI half-width)."""
    records = [{"benchmark": report.benchmark, "approach": label, "metric": report.metric, "stage": stage,
                **_cell_columns(cell, ci)}
               for label, cells in report.rows for stage, cell in zip(report.stages, cells)]
    columns = ["benchmark", "approach", "metric", "stage", "mean", "std", "seeds"] + (["ci95"] if ci else [])
    return pd.DataFrame(records, columns=columns).to_csv(index=False)


def summary_csv(summary: Summary, ci: bool = False) -> str:
    """Tidy CSV: one row per (approach, quantity: accuracy | backward-transfer | forgetting), fractions."""
    records = [{"benchmark": summary.benchmark, "approach": row.label, "parameters": row.parameters,
                "quantity": quantity, "stage": summary.stages, **_cell_columns(cell, ci)}
               for row in summary.rows for quantity, cell in (("accuracy", row.accuracy),
                                                               ("backward-transfer", row.backward_transfer),
                                                               ("forgetting", row.forgetting))]
    columns = ["benchmark", "approach", "parameters", "quantity", "stage", "mean", "std", "seeds"]
    frame = pd.DataFrame(records, columns=columns + (["ci95"] if ci else []))
    frame["parameters"] = frame["parameters"].astype("Int64")
    return frame.to_csv(index=False)


def time_csv(report: TimeReport, ci: bool = False) -> str:
    """Tidy CSV: one row per (approach, quantity) in seconds / milliseconds as the quantity names say."""
    records = []
    for row in report.rows:
        for quantity, cell in (("total_seconds", row.total_seconds), ("epoch_seconds", row.epoch_seconds),
                               ("batch_ms", row.batch_ms), ("batch_forward_ms", Cell(row.forward_ms, math.nan, 1)),
                               ("batch_forward_backward_ms", Cell(row.forward_backward_ms, math.nan, 1))):
            if quantity.startswith("batch_forward") and not math.isfinite(cell.mean):
                continue
            records.append({"benchmark": report.benchmark, "approach": row.label, "quantity": quantity,
                            **_cell_columns(cell, ci)})
    columns = ["benchmark", "approach", "quantity", "mean", "std", "seeds"] + (["ci95"] if ci else [])
    return pd.DataFrame(records, columns=columns).to_csv(index=False)


def hat_csv(report: HatReport) -> str:
    """Tidy CSV of the HAT tables: capacity (mask, stage, layer), reuse (task, later_task), sensitivity."""
    frames = []
    for config in report.configs:
        capacity = config.capacity.assign(table="capacity")
        reuse = config.reuse.assign(table="reuse")
        frames += [frame.assign(approach=config.label) for frame in (capacity, reuse) if not frame.empty]
    if report.sensitivity is not None:
        s = report.sensitivity
        grid = [{"table": "sensitivity", "approach": "hat", "seed": s.seed, "stage": s.stage, "smax": smax, "c": c,
                 "mean": s.values[i, j], "n": 1} for i, smax in enumerate(s.smax) for j, c in enumerate(s.c)]
        frames.append(pd.DataFrame(grid))
    columns = ["benchmark", "table", "approach", "mask", "stage", "layer", "task", "later_task", "seed", "smax", "c",
               "mean", "std", "n"]
    if not frames:
        return pd.DataFrame(columns=columns).to_csv(index=False)
    frame = pd.concat(frames, ignore_index=True).assign(benchmark=report.benchmark)
    frame = frame.reindex(columns=columns)
    for column in ("stage", "task", "later_task", "seed", "n"):
        frame[column] = frame[column].astype("Int64")
    return frame.to_csv(index=False)
