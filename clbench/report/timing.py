"""The training-time table of `clbench report --time`: total, per epoch and per batch per approach, and the
bench's per-batch forward and forward+backward times (the paper's training-time table)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from clbench.errors import ResultsError
from clbench.report.cells import format_value, sort_value
from clbench.report.formatting import Table, plain
from clbench.report.loading import Results
from clbench.report.notes import complete_runs, incomplete_notes, seed_coverage_notes
from clbench.report.statistics import Cell, summarize
from clbench.results import BENCH_COLUMNS, BENCH_FOLDER


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
    report.rows.sort(key=lambda row: (-sort_value(row.total_seconds), row.label))
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
            cells += [plain(row.forward_ms, 1), plain(row.forward_backward_ms, 1)]
        rows.append([*cells, str(len(row.seeds))])
    return Table([*head, "seeds"], rows, notes=list(report.notes))
