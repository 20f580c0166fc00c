"""Table objects: the forgetting-ratio (or accuracy) report, the summary, the training-time table, and
their text cells."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from clbench import metrics
from clbench.errors import ResultsError
from clbench.report.formatting import Table, format_seeds, plain
from clbench.report.loading import DOMAIN, REFERENCES, Results, load_results
from clbench.report.monitoring import monitoring_table_notes
from clbench.report.statistics import (
    METRIC_SYMBOLS,
    METRICS,
    PERCENT_METRICS,
    UNAVAILABLE_METRICS,
    Cell,
    run_values,
    summarize,
)
from clbench.results import BENCH_COLUMNS, BENCH_FOLDER, TEST


@dataclass
class Report:
    """A table: one row per approach (label), one column per stage, plus notes on what was left out."""

    benchmark: str
    metric: str
    stages: list[int]
    rows: list[tuple[str, list[Cell]]] = field(default_factory=list)
    seeds: dict[str, list[int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    evaluation: str = "task-aware"
    unmeasured: dict[str, str] = field(default_factory=dict)  # label -> why it has no number ("needs the task id")
    split: str = TEST
    memory: dict[str, str] = field(default_factory=dict)  # label -> "samples / bytes" kept, when a run replays


def build_report(results_dir: Path, benchmark: str, metric: str = "forgetting-ratio",
                 include_references: bool = False, *, seeds: Sequence[int] | None = None,
                 results: Results | None = None) -> Report:
    """The per-stage table of `metric` (one of `METRICS`) for one benchmark's results.

    `results` (from `load_results`) avoids reading the folder again when several tables are built. A metric of
    `UNAVAILABLE_METRICS` (fwt) raises a ResultsError saying why, never a number.
    """
    if metric in UNAVAILABLE_METRICS:
        raise ResultsError(f"--metric {metric}: {UNAVAILABLE_METRICS[metric]}")
    if metric not in METRICS:
        raise ResultsError(f"metric {metric!r}: use one of {', '.join(METRICS)}")
    results = results if results is not None else load_results(results_dir, benchmark, seeds)
    report = Report(benchmark, metric, [], evaluation=results.evaluation, split=results.split)
    report.notes += (scenario_notes(results) + split_notes(results) + incomplete_notes(results)
                     + class_loss_notes(results))
    if results.frame.empty and results.split != TEST and not results.runs.empty:
        report.notes.append(f"no finished run of {benchmark} has {results.split} rows (runs stored before results "
                            f"schema 3 have test rows only): re-run them with --force")
        return report
    if results.frame.empty:
        chosen = f" with --seeds {format_seeds(results.seed_filter)}" if results.seed_filter is not None else ""
        report.notes.append(f"no finished runs of {benchmark}{chosen} in {results.results_dir}: run `clbench train "
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
    report.unmeasured = unmeasured_labels(results, keep, set(per_label))
    report.memory = memory_column(results, per_label)
    shown_as_text = {f"left out {run_id}: {results.evaluation}: " for run_id, run in results.info.items()
                     if run["label"] in report.unmeasured}
    report.notes = [note for note in report.notes if not any(note.startswith(text) for text in shown_as_text)]
    report.notes += seed_coverage_notes(report.seeds)
    report.notes += monitoring_table_notes(results)
    return report


def memory_column(results: Results, per_label: dict[str, list[np.ndarray]]) -> dict[str, str]:
    """Label -> "samples / bytes" each approach kept after its last task (mean over seeds), for every row, when
    any run of the benchmark keeps samples (a replay method); {} otherwise (no column)."""
    rows = results.rows if results.rows is not None else results.frame
    if "memory_samples" not in rows or not (rows["memory_samples"].fillna(0) > 0).any():
        return {}
    last = rows[rows["stage"] == rows.groupby("run_id")["stage"].transform("max")]
    kept = last.groupby("run_id")[["memory_samples", "memory_bytes"]].first()
    column = {}
    for label in per_label:
        run_ids = [run_id for run_id, run in results.info.items() if run["label"] == label and run_id in kept.index]
        values = kept.loc[run_ids].dropna()
        column[label] = "–" if values.empty else (f"{values['memory_samples'].mean():.0f} / "
                                                  f"{format_memory(summarize(values['memory_bytes']))}")
    return column


def unmeasured_labels(results: Results, include_references: bool, shown: set[str]) -> dict[str, str]:
    """Label -> why its runs have no number in the chosen evaluation ("needs the task id", or stored before
    task-agnostic evaluation), for the labels with no row in the table: shown as text, never as a number."""
    found: dict[str, str] = {}
    for run_id, run in results.info.items():
        reason = results.unmeasured(run_id)
        if reason and run["label"] not in shown and (include_references or run["method"] not in REFERENCES):
            found.setdefault(run["label"], reason)
    return dict(sorted(found.items()))


def _sort_value(cell: Cell) -> float:
    return -math.inf if math.isnan(cell.mean) else cell.mean


def scenario_notes(results: Results) -> list[str]:
    """A note saying that the domain scenario's runs have one evaluation, when the benchmark has any (`DOMAIN`)."""
    domain = [run for run in results.info.values() if run.get("scenario") == DOMAIN]
    if not domain:
        return []
    which = "every run" if len(domain) == len(results.info) else f"{len(domain)} of {len(results.info)} runs"
    return [f"scenario domain ({which}): one head shared by every task and no task id, so task-aware and "
            f"task-agnostic accuracy are one number, stored once and shown under either --evaluation"]


def class_loss_notes(results: Results) -> list[str]:
    """A note when class-scenario runs of both `training.class_loss` values are shown together (their numbers
    come from two protocols: the cross-entropy over the classes seen so far, or over every output), naming which
    approach's runs used which."""
    runs = results.runs
    if runs.empty or "class_loss" not in runs:
        return []
    chosen = runs[runs["scenario"] == "class"]
    losses = {loss: sorted(set(group["label"])) for loss, group in chosen.groupby("class_loss")}
    if len(losses) < 2:
        return []
    named = "; ".join(f"{loss} ({CLASS_LOSS_WORDS.get(str(loss), loss)}): {', '.join(labels)}"
                      for loss, labels in sorted(losses.items()))
    return [f"class-scenario runs of two training losses are shown together (training.class_loss): {named}; "
            f"compare runs of one loss, e.g. re-run the others with --set training.class_loss=..."]


CLASS_LOSS_WORDS = {"seen": "cross-entropy over the classes seen so far",
                    "all": "cross-entropy over every output"}


def split_notes(results: Results) -> list[str]:
    """A note saying which data the numbers are measured on, when it is not the test sets (`--split`)."""
    if results.split == TEST:
        return []
    return [f"split: {results.split} (each task's validation split, held out of its training data by the protocol; "
            f"not the test set)"]


def incomplete_notes(results: Results) -> list[str]:
    """A note naming the seeds `--seeds` asked for that no run has, and one per run that started but has no
    accuracy file, with the command that re-runs it."""
    notes = seed_filter_notes(results)
    for run in results.incomplete:
        reason = f" ({run['error']})" if run.get("error") else ""
        notes.append(f"left out {run['run_id']}: {run['status']}{reason}; re-run `clbench train "
                     f"{results.command_name} -m {run['method']} --seeds {run['seed']}` (with the same --set options)")
    return notes + damaged_notes(results)


def damaged_notes(results: Results) -> list[str]:
    """One note per run left out because a file of it is damaged, naming the file and the command that re-runs
    it (from its last readable checkpoint)."""
    notes = []
    for folder, problem in results.damaged:
        method, seed = folder.parent.parent.name, folder.name.removeprefix("seed-")
        notes.append(f"left out {results.benchmark}/{method}/{folder.parent.name}/{folder.name}: {problem}; "
                     f"`clbench train {results.command_name} -m {method} --seeds {seed}` (with the same --set "
                     f"options) re-runs it from its last readable checkpoint")
    return notes


def seed_filter_notes(results: Results) -> list[str]:
    """`--seeds 1,9: no run of mnist2 has seed 9 ...` when the filter names seeds that no run has."""
    missing = results.missing_seeds
    if not missing or results.seed_filter is None:
        return []
    there = format_seeds(results.seeds_present) if results.seeds_present else "none"
    return [f"--seeds {format_seeds(results.seed_filter)}: no run of {results.benchmark} has "
            f"{_plural(len(missing), 'seed')} {format_seeds(missing)} in {results.results_dir} (seeds there: {there})"]


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


@dataclass(frozen=True)
class SummaryRow:
    """One approach after the last task: A^{<=T}, backward transfer, max-previous forgetting (fractions)."""

    label: str
    parameters: int | None
    accuracy: Cell
    backward_transfer: Cell
    forgetting: Cell
    seeds: list[int]
    learning_accuracy: Cell = Cell(float("nan"), float("nan"), 0)
    forward_transfer: Cell = Cell(float("nan"), float("nan"), 0)  # empty without stage-0 rows
    intransigence: Cell = Cell(float("nan"), float("nan"), 0)  # empty without a matching joint reference
    memory_bytes: Cell = Cell(float("nan"), float("nan"), 0)  # extra memory after the last task (schema 2)


@dataclass
class Summary:
    """The paper's permuted / split MNIST table, plus BWT and forgetting: one row per approach."""

    benchmark: str
    stages: int
    rows: list[SummaryRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    unmeasured: dict[str, str] = field(default_factory=dict)  # label -> why no number ("needs the task id")


def build_summary(results: Results, include_references: bool = True) -> Summary:
    """A^{<=T}, BWT and max-previous forgetting per approach (mean over seeds), with `parameters` from run.json."""
    summary = Summary(results.benchmark, int(results.frame["stage"].max()) if not results.frame.empty else 0)
    summary.notes += (scenario_notes(results) + split_notes(results) + incomplete_notes(results)
                      + class_loss_notes(results))
    per_label: dict[str, list[str]] = {}
    quiet: list[str] = []  # why a run has no FWT or I: said by `--metric fwt` / `--metric intransigence`
    transfer = run_values(results, "fwt", quiet, True)
    intransigence = run_values(results, "intransigence", quiet, True)
    memory = last_memory_bytes(results)
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
            sorted(int(results.info[run_id]["seed"]) for run_id in run_ids),
            summarize(metrics.learning_accuracy(m)[-1] for m in matrices),
            summarize(transfer[run_id][-1] for run_id in run_ids if run_id in transfer),
            summarize(intransigence[run_id][-1] for run_id in run_ids if run_id in intransigence),
            summarize(memory[run_id] for run_id in run_ids if run_id in memory)))
        if len({m.shape[0] for m in matrices}) > 1:
            summary.notes.append(f"{label}: runs have different numbers of tasks; A^<=T is each run's last stage")
    summary.rows.sort(key=lambda row: (_sort_value(row.accuracy), row.label))
    summary.notes += seed_coverage_notes({row.label: row.seeds for row in summary.rows})
    summary.unmeasured = unmeasured_labels(results, include_references, set(per_label))
    return summary


def last_memory_bytes(results: Results) -> dict[str, float]:
    """Run id -> the bytes it kept besides its network after its last task (`memory_bytes`; none in schema 1)."""
    rows = results.rows if results.rows is not None else results.frame
    last = rows[rows["stage"] == rows.groupby("run_id")["stage"].transform("max")]
    return last.groupby("run_id")["memory_bytes"].first().dropna().to_dict()


def _parameter_count(results: Results, run_ids: Sequence[str], notes: list[str]) -> int | None:
    """`parameters` from the runs' run.json (an int, or a dict with `total`); None when no run has it."""
    counts = set()
    for run_id in run_ids:
        value = (results.run_file(run_id) or {}).get("parameters")
        value = value.get("total") if isinstance(value, dict) else value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            counts.add(int(value))
    if len(counts) > 1:
        notes.append(f"{results.info[run_ids[0]]['label']}: runs report different parameter counts "
                     f"{sorted(counts)}; the largest is shown")
    return max(counts) if counts else None


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


def format_cell(cell: Cell, metric: str, ci: bool = False) -> str:
    """`-0.06 (0.01)` for the forgetting ratio, `99.0 (0.2)` (percent) for accuracy and the other metrics in
    accuracy points (`PERCENT_METRICS`, and "percent"); `–` when empty.

    With `ci`, `-0.06 ± 0.02`: the mean and the half-width of its Student-t 95% confidence interval.
    """
    scale, digits = (100.0, 1) if metric in (*PERCENT_METRICS, "percent") else (1.0, 2)
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
    symbol = METRIC_SYMBOLS.get(report.metric, "A")
    memory = ["memory (samples / bytes)"] if report.memory else []
    return ["approach", *[f"{symbol}<={t}" for t in report.stages], *memory, "seeds"]


def table_rows(report: Report, ci: bool = False) -> list[list[str]]:
    def memory(label: str) -> list[str]:
        return [report.memory.get(label, "–")] if report.memory else []

    rows = [[label, *[format_cell(cell, report.metric, ci) for cell in cells], *memory(label),
             str(len(report.seeds.get(label, [])))] for label, cells in report.rows]
    return rows + [[label, *[reason.split(" (")[0]] * len(report.stages), *memory(label), "-"]
                   for label, reason in report.unmeasured.items()]


def report_table(report: Report, ci: bool = False) -> Table:
    notes = list(report.notes)
    if report.evaluation != "task-aware":
        notes.insert(0, f"evaluation: {report.evaluation} (argmax over every class seen so far, no task id)")
    notes += [f"{label}: {reason}" for label, reason in report.unmeasured.items() if "(" in reason]
    return Table(header(report), table_rows(report, ci), notes=notes)


def summary_table(summary: Summary, ci: bool = False) -> Table:
    rows = [[row.label, format_parameters(row.parameters), format_cell(row.accuracy, "percent", ci),
             format_cell(row.backward_transfer, "percent", ci), format_cell(row.forgetting, "percent", ci),
             format_cell(row.learning_accuracy, "percent", ci), format_cell(row.forward_transfer, "percent", ci),
             format_cell(row.intransigence, "percent", ci), format_memory(row.memory_bytes),
             str(len(row.seeds))] for row in summary.rows]
    head = ["approach", "parameters", f"A<={summary.stages}", "BWT", "forgetting", "LA", "FWT", "I", "memory",
            "seeds"]
    rows += [[label, "", *[reason.split(" (")[0]] * 6, "", "-"] for label, reason in summary.unmeasured.items()]
    return Table(head, rows, notes=list(summary.notes))


def format_memory(cell: Cell) -> str:
    """The mean extra memory of an approach: `1.2 MB`, `15.3 kB`, `0 B`; `–` when unknown (schema-1 runs)."""
    if cell.n == 0:
        return "–"
    for unit, size in (("MB", 1e6), ("kB", 1e3)):
        if cell.mean >= size:
            return f"{cell.mean / size:.1f} {unit}"
    return f"{cell.mean:.0f} B"


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
            cells += [plain(row.forward_ms, 1), plain(row.forward_backward_ms, 1)]
        rows.append([*cells, str(len(row.seeds))])
    return Table([*head, "seeds"], rows, notes=list(report.notes))
