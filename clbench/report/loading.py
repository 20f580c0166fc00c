"""Loading a results folder: run folders, schema checks, row labels (torch-free); the files are read through the
rule of `clbench.run_files` (`clbench.report.reading`)."""

from __future__ import annotations

import dataclasses
import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from clbench import metrics
from clbench.errors import ResultsError
from clbench.report.formatting import format_seeds
from clbench.report.labels import method_labels
from clbench.report.reading import FileDamage, damaged_beside, read_parquet_files, read_run_files
from clbench.results import (
    ACCURACY_FILE,
    CLASS_LOSS_DEFAULT,
    EVALUATIONS,
    READABLE_SCHEMA_VERSIONS,
    RUN_FILE,
    SPLITS,
    TEST,
    DamagedFileError,
    check_schema,
    read_run_file,
    runs_evaluation,
    select_split,
)

REFERENCES = ("joint", "random")
DOMAIN = "domain"
"""The domain scenario (`data.scenario: domain`): one head shared by every task and no task id, so a run's task-aware
and task-agnostic accuracies are one number. The engine stores it once, as task-aware rows; `load_results` gives a
domain run's rows the evaluation asked for, so it is shown (and matched with its domain references) under either
`--evaluation`, and the tables say so in a note (`clbench.report.notes.scenario_notes`)."""




READ_COLUMNS = (
    ("schema_version", "int64"), ("run_id", "string"), ("benchmark", "string"), ("variant", "string"),
    ("method", "string"), ("seed", "int64"), ("config_hash", "string"), ("data_hash", "string"),
    ("reference_hash", "string"),
    ("hyperparameters", "string"), ("overrides", "string"), ("stage", "int64"), ("task", "int64"),
    ("task_name", "string"), ("accuracy", "double"), ("stage_epochs", "double"), ("stage_batches", "double"),
    ("stage_train_seconds", "double"), ("device", "string"), ("scenario", "string"),
    ("class_loss", "string"), ("evaluation", "string"),
    ("memory_samples", "double"), ("memory_bytes", "double"), ("split", "string"), ("tuned_sha256", "string"),
    ("tuned_seed", "double"), ("n_test", "double"), ("loss", "double"),
    ("stage_train_flops", "double"), ("stage_eval_flops", "double"), ("stage_step_flops", "double"),
    ("stage_stream_batches", "double"), ("stage_unit_flops", "double"),
)


IDENTITY = ("benchmark", "variant", "method", "seed", "config_hash", "data_hash", "reference_hash", "hyperparameters",
            "overrides", "scenario", "class_loss", "schema_version")
TASK_AWARE, TASK_AGNOSTIC = EVALUATIONS


@dataclass
class Results:
    """One benchmark's stored runs, loaded once and shared by every table and plot.

    Attributes:
        frame: the accuracy rows every metric is computed from (the `READ_COLUMNS`): the chosen `split` and
            `evaluation`, learned tasks only (stages t >= 1, tasks u <= t).
        rows: every accuracy row of the chosen `split` of the finished runs: both evaluations, stage 0 (at
            initialisation) and the tasks not learned yet (u > t); schema-1 rows read as task-aware, scenario task,
            schema-1 and -2 rows as test rows; a domain run's rows read as the chosen evaluation (`DOMAIN`).
        runs: one row per finished run (whether or not it has rows of the chosen split), indexed by run id, with
            its identity columns plus `folder` (its run folder) and `label` (the row label of its approach and
            config in every table).
        matrices: the T x T accuracy matrix of every finished run, by run id.
        incomplete: run.json contents (run_id, status, error, method, seed, overrides) of runs without accuracy file.
        run_files: every readable run.json, by run folder (`run_file` reads them by run id).
        damaged: (run folder, what is damaged) of the runs left out because a file cannot be read: an accuracy
            file that is truncated, empty or without rows, a run.json that is not a JSON object.
        damaged_files: the damaged files of the runs kept (`clbench.report.reading.FileDamage`: a curve, a monitoring
            table, the evaluation file, the manifest), left out of `files`, so that only what depends on them is
            left out.
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
    seed_filter: tuple[int, ...] | None = None
    seeds_present: tuple[int, ...] = ()
    run_files: dict[str, dict[str, Any]] = field(default_factory=dict)
    damaged: list[tuple[Path, str]] = field(default_factory=list)
    rows: pd.DataFrame | None = None
    evaluation: str = TASK_AWARE
    split: str = TEST
    full_matrices: dict[str, tuple[np.ndarray, np.ndarray]] | None = None  # `full_matrix`'s, built on first use
    sizes: dict[str, dict[int, float]] | None = None  # `test_sizes`' samples per run and task, built on first use
    curves: dict[str, pd.DataFrame] = field(default_factory=dict)  # `statistics.run_curve`'s files, read on first use
    damaged_files: list[FileDamage] = field(default_factory=list)

    def unmeasured(self, run_id: str) -> str | None:
        """Why a finished run has no rows of the chosen split and evaluation, in a table cell's words; None if it has
        them."""
        if run_id in self.matrices:
            return None
        if self.split != TEST and self.holds_out_no_validation(run_id):
            return "not measured (its protocol holds out no validation split: data.validation_fraction 0)"
        if self.split != TEST and int(self.info[run_id]["schema_version"]) < 3:
            return f"not measured (stored before {self.split} rows: re-run with --force)"
        if int(self.info[run_id]["schema_version"]) < 2:
            return "not measured (stored before task-agnostic evaluation: re-run with --force)"
        return "needs the task id"

    def holds_out_no_validation(self, run_id: str) -> bool:
        """Whether a run's protocol held no validation split out of its training data (its run.json's
        data.validation_fraction is 0, as in an online protocol), so that it has no validation rows at all."""
        config = (self.run_file(run_id) or {}).get("config") or {}
        return (config.get("data") or {}).get("validation_fraction") == 0

    def full_matrix(self, run_id: str) -> tuple[np.ndarray, np.ndarray] | None:
        """(T x T matrix with the tasks not learned yet, length-T accuracies at initialisation) of a run in the
        chosen evaluation, or None when it lacks the stage-0 rows (schema 1, PathNet, no such evaluation).
        Built for every run at the first call (one pass over the rows)."""
        if self.full_matrices is None:
            self.full_matrices = self._build_full_matrices()
        return self.full_matrices.get(run_id)

    def _build_full_matrices(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        rows = self.rows if self.rows is not None else self.frame
        chosen = rows[rows["evaluation"] == self.evaluation]
        found = {}
        for run_id, own in chosen.groupby("run_id", sort=False):
            size = int(own["task"].max())
            if int(own["stage"].max()) != size:
                continue
            cube = np.full((size + 1, size), np.nan)
            cube[own["stage"].to_numpy(int), own["task"].to_numpy(int) - 1] = own["accuracy"].to_numpy(float)
            if not np.isnan(cube[0]).any():
                found[str(run_id)] = (cube[1:], cube[0])
        return found

    def test_sizes(self, run_id: str, size: int) -> np.ndarray:
        """The number of samples each of a run's first `size` tasks was evaluated on in the chosen split (length
        `size`; NaN where not stored: results written before `n_test`)."""
        if self.sizes is None:
            counts = self.frame.groupby(["run_id", "task"], sort=False)["n_test"].first()
            self.sizes = {str(run): dict(zip(own.index.get_level_values("task"), own.to_numpy(float)))
                          for run, own in counts.groupby(level="run_id", sort=False)}
        own = self.sizes.get(run_id, {})
        return np.array([own.get(task, np.nan) for task in range(1, size + 1)], dtype=float)

    def run_file(self, run_id: str) -> dict[str, Any] | None:
        """The run.json of a finished run (read once by `load_results`), or None if it has none or it is damaged."""
        folder = self.folder(run_id)
        if str(folder) in self.run_files:
            return self.run_files[str(folder)]
        try:
            return read_run_file(folder)
        except DamagedFileError:
            return None

    def damage_of(self, run_id: str, name: str) -> FileDamage | None:
        """The damage of a run's file `name` (e.g. curve.parquet) that the report left out, or None."""
        folder = self.folder(run_id)
        return next((damage for damage in self.damaged_files if damage.folder == folder and damage.name == name),
                    None)

    @property
    def missing_seeds(self) -> list[int]:
        """The seeds `--seeds` asked for that no run (finished or not) of the benchmark has."""
        return sorted(set(self.seed_filter or ()) - set(self.seeds_present))

    def folder(self, run_id: str) -> Path:
        return Path(self.info[run_id]["folder"])

    @property
    def command_name(self) -> str:
        """The benchmark as printed commands name it (`clbench train <this> ...`)."""
        return shlex.quote(self.spec_argument) if self.spec_argument else self.benchmark


def benchmarks_in(results_dir: Path) -> list[str]:
    """The benchmark folders of a results folder (names starting with `.` or `_`, such as `_bench`, skipped)."""
    root = _results_root(results_dir)
    names = [path.name for path in _subfolders(root)]
    if not names:
        raise ResultsError(f"no results in {root}; run `clbench train BENCHMARK -m METHOD --results {root}`")
    return names


def _results_root(results_dir: Path) -> Path:
    """The results folder, or ResultsError saying that it is a file or does not exist."""
    root = Path(results_dir)
    if root.exists() and not root.is_dir():
        raise ResultsError(f"--results {root} is a file, not a results folder; give the folder `clbench train "
                           f"--results` wrote into")
    if not root.is_dir():
        raise ResultsError(f"results folder {root} does not exist; run `clbench train ... --results {root}` first")
    return root


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


def load_results(results_dir: Path, benchmark: str, seeds: Sequence[int] | None = None,
                 spec_argument: str | None = None, evaluation: str | None = TASK_AWARE,
                 split: str = TEST) -> Results:
    """Every run of one benchmark under `results_dir` (optionally only `seeds`), schema-checked; the rows
    (`Results.rows`) are those of `split` (test, or validation), the metrics' rows (`Results.frame`, `matrices`)
    those of `split` and `evaluation` (task-aware or task-agnostic; None: the one the runs' scenarios report,
    `clbench.results.runs_evaluation`, which refuses runs of scenarios that disagree).

    `spec_argument`: the spec file the user named the benchmark by, if any (see `Results.spec_argument`).
    """
    if evaluation is not None and evaluation not in EVALUATIONS:
        raise ResultsError(f"--evaluation {evaluation!r}: use one of {', '.join(EVALUATIONS)}")
    if split not in SPLITS:
        raise ResultsError(f"--split {split!r}: use one of {', '.join(SPLITS)}")
    root = _results_root(results_dir)
    folders = run_folders(root, benchmark)
    run_files, damaged = read_run_files([folder for folder, files in folders.items() if RUN_FILE in files])
    finished = [folder for folder, files in folders.items() if ACCURACY_FILE in files and folder not in damaged]
    unreadable: dict[Path, str] = {}
    frame = read_parquet_files([folder / ACCURACY_FILE for folder in finished], READ_COLUMNS, unreadable)
    damaged |= {path.parent: problem for path, problem in unreadable.items()}
    _check_schema_versions(frame, root, benchmark)
    frame["evaluation"] = frame["evaluation"].fillna(TASK_AWARE)  # schema 1: task-aware rows only
    frame["scenario"] = frame["scenario"].fillna("task")
    frame["class_loss"] = frame["class_loss"].fillna(CLASS_LOSS_DEFAULT)  # written before the column: `seen`
    frame["split"] = frame["split"].fillna(TEST)  # schema 1 and 2: test rows only
    incomplete = [_incomplete_run(run_files[str(folder)]) for folder, files in folders.items()
                  if ACCURACY_FILE not in files and str(folder) in run_files]
    present = tuple(sorted({int(seed) for seed in frame["seed"].unique()}
                           | {run["seed"] for run in incomplete if isinstance(run.get("seed"), int)}))
    if seeds is not None:
        frame = frame[frame["seed"].isin(list(seeds))].reset_index(drop=True)
        incomplete = [run for run in incomplete if run.get("seed") in set(seeds)]
        damaged = {folder: problem for folder, problem in damaged.items() if _folder_seed(folder) in set(seeds)}
    if evaluation is None:
        evaluation = runs_evaluation(frame["scenario"].unique(), str(root / benchmark))
    frame.loc[frame["scenario"] == DOMAIN, "evaluation"] = evaluation  # one evaluation, both names (`DOMAIN`)
    first_rows = np.unique(pd.factorize(frame["run_id"])[0], return_index=True)[1]
    runs = frame.iloc[np.sort(first_rows)][["run_id", *IDENTITY]].set_index("run_id", drop=False)
    runs = runs.sort_index()
    runs["folder"] = [str(root / benchmark / run_id.split("/", 1)[-1]) for run_id in runs.index]
    labels = method_labels(runs, _stored_configs(runs, run_files))
    runs["label"] = [labels[(method, config)] for method, config in zip(runs["method"], runs["config_hash"])]
    beside = damaged_beside({Path(folder): folders.get(Path(folder), set()) for folder in runs["folder"]})
    files = {run_id: folders.get(Path(folder), set()) - {damage.name for damage in beside
                                                          if damage.folder == Path(folder)}
             for run_id, folder in zip(runs.index, runs["folder"])}
    info = runs.to_dict("index")
    frame = select_split(frame, split).reset_index(drop=True)
    chosen = _learned_rows(frame, evaluation)
    return Results(root, benchmark, chosen, runs, metrics.accuracy_matrices(chosen), incomplete, files, info,
                   spec_argument, None if seeds is None else tuple(seeds), present, run_files, sorted(damaged.items()),
                   frame, evaluation, split, damaged_files=beside)


def _stored_configs(runs: pd.DataFrame, run_files: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The resolved config of each config hash, from the first of its runs whose run.json has one (`method_labels`
    reads what a `--set` key that a config does not set is there)."""
    found: dict[str, dict[str, Any]] = {}
    for config_hash, folder in zip(runs["config_hash"], runs["folder"]):
        config = run_files.get(folder, {}).get("config")
        if config_hash not in found and isinstance(config, dict):
            found[config_hash] = config
    return found


def _learned_rows(rows: pd.DataFrame, evaluation: str) -> pd.DataFrame:
    """The metrics' rows: `evaluation`'s rows of the tasks learned so far (stages t >= 1, tasks u <= t)."""
    learned = (rows["stage"] >= 1) & (rows["task"] <= rows["stage"]) & (rows["evaluation"] == evaluation)
    return rows[learned].reset_index(drop=True)


def with_evaluation(results: Results, evaluation: str) -> Results:
    """The same runs with `evaluation`'s metrics, from the rows already read (what `load_results` with that
    `evaluation` gives, without reading the files again)."""
    if evaluation == results.evaluation or results.rows is None:
        return results
    rows = results.rows.copy()
    rows.loc[rows["scenario"] == DOMAIN, "evaluation"] = evaluation  # one evaluation, both names (`DOMAIN`)
    chosen = _learned_rows(rows, evaluation)
    return dataclasses.replace(results, frame=chosen, matrices=metrics.accuracy_matrices(chosen), rows=rows,
                               evaluation=evaluation, full_matrices=None, sizes=None)


def other_evaluation(results: Results) -> Results | None:
    """The same runs in the evaluation not chosen, when their rows have both (the curves' dashed lines); else
    None. A domain run has one evaluation (`DOMAIN`), shown once: it has no rows here, so no second curve."""
    if results.rows is None or not set(EVALUATIONS) <= set(results.rows["evaluation"].unique()):
        return None
    other = with_evaluation(results, next(name for name in EVALUATIONS if name != results.evaluation))
    assert other.rows is not None
    rows = other.rows[other.rows["scenario"] != DOMAIN]
    chosen = _learned_rows(rows, other.evaluation)
    return dataclasses.replace(other, frame=chosen, matrices=metrics.accuracy_matrices(chosen), rows=rows)


def _check_schema_versions(frame: pd.DataFrame, root: Path, benchmark: str) -> None:
    versions = frame["schema_version"]
    readable = versions.isin(list(READABLE_SCHEMA_VERSIONS))
    if bool(readable.all()):
        return
    bad = frame[~readable]
    if not bad.empty:
        run_id = bad["run_id"].iloc[0]
        check_schema(bad[bad["run_id"] == run_id], root / benchmark / str(run_id).split("/", 1)[-1] / ACCURACY_FILE)


def nothing_to_report(results_dir: Path, benchmarks: Sequence[str], seeds: Sequence[int] | None = None) -> str | None:
    """Why a report of `benchmarks` (at `seeds`, or every seed) would be empty, in one line that says what to do, or
    None when one of them has a finished run (a run folder with an accuracy file) to report. Reads folder names
    only: `clbench report` refuses an empty report before loading anything."""
    root = _results_root(results_dir)
    reasons = [_nothing_of(root, name, seeds) for name in benchmarks]
    if not reasons or any(reason is None for reason in reasons):
        return None
    if len(reasons) == 1:
        return reasons[0]
    chosen = f" with --seeds {format_seeds(seeds)}" if seeds is not None else ""
    return (f"no benchmark in {root} ({', '.join(benchmarks)}) has a finished run{chosen}; train one with "
            f"`clbench train BENCHMARK -m METHOD --results {root}`")


def _nothing_of(root: Path, benchmark: str, seeds: Sequence[int] | None) -> str | None:
    """`nothing_to_report` of one benchmark."""
    folders = run_folders(root, benchmark)
    train = f"`clbench train {shlex.quote(benchmark)} -m METHOD --seeds {format_seeds(seeds or [0])} --results {root}`"
    if not folders:
        names = [path.name for path in _subfolders(root)]
        there = f"benchmarks there: {', '.join(names)}" if names else "it holds no benchmark"
        if not _trainable(benchmark):
            return (f"no runs of {benchmark} in {root} ({there}), and no benchmark is named {benchmark}: "
                    f"`clbench list` shows the shipped ones")
        return f"no runs of {benchmark} in {root} ({there}); train them with {train}"
    chosen = [folder for folder in folders if seeds is None or _folder_seed(folder) in set(seeds)]
    if any(ACCURACY_FILE in folders[folder] for folder in chosen):
        return None
    if seeds is not None and not chosen:
        present = sorted({seed for folder in folders if (seed := _folder_seed(folder)) is not None})
        return (f"no run of {benchmark} has --seeds {format_seeds(seeds)} in {root} (seeds there: "
                f"{format_seeds(present) or 'none'}); train them with {train}")
    at = f" with --seeds {format_seeds(seeds)}" if seeds is not None else ""
    methods = ",".join(sorted({folder.parent.parent.name for folder in chosen}))
    again = (f"`clbench train {shlex.quote(benchmark)} -m {shlex.quote(methods)} --seeds "
             f"{format_seeds(_folder_seed(folder) or 0 for folder in chosen)} --results {root}`")
    return (f"no finished run of {benchmark}{at} in {root}: {len(chosen)} started and did not finish; {again} "
            f"(with the same --set options) resumes them")


def _trainable(benchmark: str) -> bool:
    """True when `clbench train BENCHMARK` can find the benchmark: a shipped spec, or a spec file that exists."""
    from clbench.spec import benchmark_names

    return benchmark in benchmark_names() or Path(benchmark).is_file() or Path(f"{benchmark}.yaml").is_file()


def _folder_seed(folder: Path) -> int | None:
    """The seed of a run folder `.../seed-<seed>`."""
    text = folder.name.removeprefix("seed-")
    return int(text) if text.isdigit() else None


def _incomplete_run(info: dict[str, Any]) -> dict[str, Any]:
    return {key: info.get(key) for key in ("run_id", "status", "error", "method", "seed", "overrides")}
