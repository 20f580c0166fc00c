"""Approach-owned monitoring sections of `clbench report` (`--monitoring`: every present approach's; `--hat`:
HAT's alone, through the same reporter).

An approach declares its reporter as an import string `"package.module:ClassName"` in its class attribute
`monitoring_reporter` (see `clbench.approaches.base.Approach`); the engine copies it into every run.json, so
`report` finds every approach's reporter, built-in or plugin, without importing the approach (or torch). A
reporter module must not import torch: it imports what it needs from `clbench.report` (the names that
`clbench.api` exports for reporters). Two tables keep older results folders reporting: `MOVED_REPORTERS`
(strings of reporters that have moved since) and `LEGACY_REPORTERS` (built-in methods whose runs were stored
before run.json named their reporter); a new approach needs neither.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from clbench.errors import ResultsError
from clbench.report.formatting import Table, format_seeds, plain
from clbench.report.loading import Results
from clbench.report.reading import read_parquet_files

RUN_JSON_KEY = "monitoring_reporter"

# Built-in method -> its reporter, for runs whose run.json names none (stored before clbench recorded the string,
# or before the method had a reporter). Frozen: a method added since records its string; a test checks these
# against what the approach classes declare.
LEGACY_REPORTERS = {"hat": "clbench.approaches.hat.report:HatReporter",
                    "mas": "clbench.approaches.importance.report:PenaltyReporter",
                    "packnet": "clbench.approaches.packnet.report:PackNetReporter",
                    "si": "clbench.approaches.importance.report:PenaltyReporter"}

# Reporter strings that results written by older clbench versions store in run.json -> where the reporter is now
# (each built-in method's reporter moved into its folder under clbench/approaches/). `load_reporter` follows them,
# so old results folders still report.
MOVED_REPORTERS = {
    "clbench.hat_report:HatReporter": "clbench.approaches.hat.report:HatReporter",
    "clbench.packnet_report:PackNetReporter": "clbench.approaches.packnet.report:PackNetReporter",
    "clbench.penalty_report:PenaltyReporter": "clbench.approaches.importance.report:PenaltyReporter",
}


class MonitoringReporter:
    """One approach's monitoring tables (and figures) from a results folder; subclass it and override.

    Attributes:
        method: the approach name whose runs this reporter reads (one reporter instance per method present).
    """

    def __init__(self, method: str) -> None:
        self.method = method

    def tables(self, results: Results) -> list[Table]:
        """The tables to print (each with its title and notes); none by default."""
        return []

    def table_notes(self, results: Results) -> list[str]:
        """Warnings that belong under the main `report --table` (a reader of the numbers must see them); none
        by default. Keep them short and name the `--monitoring` table that explains them."""
        return []

    def last_stage_rows(self, results: Results, table: str,
                        columns: Sequence[tuple[str, str]]) -> pd.DataFrame:
        """The rows of `<table>.parquet` from each run of this method at its last stored stage, with each run's
        `label`; runs without the file are skipped (`columns`: (name, dtype) pairs, as `read_parquet_files`)."""
        paths = [results.folder(run_id) / f"{table}.parquet" for run_id, run in results.info.items()
                 if run["method"] == self.method and f"{table}.parquet" in results.files.get(run_id, set())]
        frame = read_parquet_files(paths, columns)
        if not frame.empty:
            frame = frame[frame["stage"] == frame.groupby("run_id")["stage"].transform("max")]
        labels = {run_id: run["label"] for run_id, run in results.info.items()}
        return frame.assign(label=frame["run_id"].map(labels).astype(object))

    def csv(self, results: Results) -> str:
        """Tidy CSV of the raw numbers behind `tables` ("" when the reporter has none)."""
        return ""

    def plots(self, results: Results, folder: Path) -> list[Path]:
        """Write the figures into `folder` and return their paths (none by default)."""
        return []


def reporter_string(results: Results, method: str) -> str | None:
    """The import string of `method`'s reporter: the first of its runs' run.json that names one (what the approach
    declared when it ran), else `LEGACY_REPORTERS` (runs stored before run.json named it)."""
    for run_id, run in results.info.items():
        stored = results.run_file(run_id) if run["method"] == method else None
        declared = stored.get(RUN_JSON_KEY) if stored else None
        if declared:
            return str(declared)
    return LEGACY_REPORTERS.get(method)


def load_reporter(target: str, method: str) -> MonitoringReporter:
    """Import `target` ("module:Class", or a moved one's old string) and build the reporter of `method`; a clear
    error when it cannot."""
    target = MOVED_REPORTERS.get(target, target)
    module_name, _, class_name = target.partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), class_name) if class_name else None
    except (ImportError, AttributeError) as error:
        raise ResultsError(f"monitoring reporter {target!r} of method {method!r} cannot be imported ({error}); "
                           f"install the package that provides it, or leave out --monitoring") from error
    if not (isinstance(cls, type) and issubclass(cls, MonitoringReporter)):
        raise ResultsError(f"monitoring reporter {target!r} of method {method!r} is not a 'module:Class' naming a "
                           "subclass of clbench.report.monitoring.MonitoringReporter")
    return cls(method)


def method_reporter(results: Results, method: str) -> MonitoringReporter | None:
    """The reporter of `method` (`reporter_string`: what its runs' run.json names, else `LEGACY_REPORTERS`), or None
    when it declares none; found whether or not `results` has runs of it (its tables then say there are none)."""
    target = reporter_string(results, method)
    return None if target is None else load_reporter(target, method)


def monitoring_reporters(results: Results) -> list[MonitoringReporter]:
    """A reporter for every method in `results` that declares one, in method-name order."""
    methods = sorted({str(run["method"]) for run in results.info.values()})
    return [load_reporter(target, method) for method in methods
            if (target := reporter_string(results, method)) is not None]


def monitoring_table_notes(results: Results) -> list[str]:
    """The `table_notes` of every present approach's reporter, for the main table; a reporter that cannot be
    imported is named instead (its warnings would be missing), so the main table never fails because of it."""
    notes: list[str] = []
    for method in sorted({str(run["method"]) for run in results.info.values()}):
        target = reporter_string(results, method)
        if target is None:
            continue
        try:
            notes += load_reporter(target, method).table_notes(results)
        except ResultsError as error:
            notes.append(f"{error}; its warnings for the table are missing")
    return notes


class LayerShareReporter(MonitoringReporter):
    """A reporter of one table of per-layer, per-task counts (`used` of `weights`), shown after the last task as the
    % of each layer per task, mean over seeds, one table per config (PackNet's owned weights, SupSup's masks).

    A subclass names `table` (the stored file's stem), `what` (the title's words for the share) and, where a task
    number means something else, `task_header`."""

    table: str = ""
    what: str = ""
    COLUMNS = (("run_id", "string"), ("seed", "int64"), ("stage", "int64"), ("task", "int64"), ("layer", "string"),
               ("used", "int64"), ("weights", "int64"))

    def task_header(self, task: int) -> str:
        """The column of task `task` (1-based)."""
        return f"task {task}"

    def shares(self, results: Results) -> pd.DataFrame:
        """The last stage's rows of every run of this method, with `fraction` = used / weights and `label`."""
        frame = self.last_stage_rows(results, self.table, self.COLUMNS)
        return frame.assign(fraction=frame["used"] / frame["weights"].where(frame["weights"] > 0))

    def tables(self, results: Results) -> list[Table]:
        frame = self.shares(results)
        tables = []
        for label, group in frame.groupby("label", sort=True):
            means = group.groupby(["layer", "task"])["fraction"].mean()
            tasks = sorted(int(task) for task in group["task"].unique())
            layers = list(dict.fromkeys(group["layer"]))  # in the order the method stores them, `total` last
            header = ["layer", *[self.task_header(task) for task in tasks]]
            rows = [[layer, *[plain(100 * means.get((layer, task), float("nan")), 1) for task in tasks]]
                    for layer in layers]
            title = (f"{label}: % of each layer's {self.what} after task {int(group['stage'].max())}, mean over "
                     f"seeds {format_seeds(int(seed) for seed in group['seed'].unique())}")
            tables.append(Table(header, rows, title))
        return tables

    def csv(self, results: Results) -> str:
        frame = self.shares(results)
        summary = frame.groupby(["label", "stage", "layer", "task"], sort=True)["fraction"].agg(["mean", "count"])
        return summary.reset_index().rename(columns={"label": "approach", "count": "n"}).to_csv(index=False)
