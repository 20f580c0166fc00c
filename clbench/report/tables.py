"""The per-stage table of `clbench report`: forgetting ratio rho^{<=t} (or another metric) per approach and
stage, mean over seeds, with the notes on what was left out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from clbench.errors import ResultsError
from clbench.metric_registry import METRICS
from clbench.report.cells import format_cell, format_memory, sort_value
from clbench.report.formatting import Table, format_seeds
from clbench.report.loading import Results, load_results
from clbench.report.monitoring import monitoring_table_notes
from clbench.report.notes import (
    no_split_rows_note,
    references_only_note,
    run_notes,
    seed_coverage_notes,
    unmeasured_labels,
)
from clbench.report.statistics import Cell, run_values, summarize
from clbench.results import TEST


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
    """The per-stage table of `metric` (a name in `clbench.metric_registry.METRICS`) for one benchmark's results.

    `results` (from `load_results`) avoids reading the folder again when several tables are built. Another name
    raises a ResultsError listing the metrics.
    """
    if metric not in METRICS:
        raise ResultsError(f"metric {metric!r}: use one of {', '.join(METRICS)}")
    results = results if results is not None else load_results(results_dir, benchmark, seeds)
    report = Report(benchmark, metric, [], evaluation=results.evaluation, split=results.split)
    report.notes += run_notes(results)
    if results.frame.empty and results.split != TEST and not results.runs.empty:
        report.notes.append(no_split_rows_note(results))
        return report
    if results.frame.empty:
        chosen = f" with --seeds {format_seeds(results.seed_filter)}" if results.seed_filter is not None else ""
        report.notes.append(f"no finished runs of {benchmark}{chosen} in {results.results_dir}: run `clbench train "
                            f"{results.command_name} -m METHOD --seeds 0-9 --results {results.results_dir}`")
        return report
    report.stages = list(range(1, int(results.frame["stage"].max()) + 1))
    keep = include_references or METRICS[metric].lists_references
    values = run_values(results, metric, report.notes, include_references=keep)
    per_label: dict[str, list[np.ndarray]] = {}
    for run_id, curve in values.items():
        label = results.info[run_id]["label"]
        per_label.setdefault(label, []).append(curve)
        report.seeds.setdefault(label, []).append(int(results.info[run_id]["seed"]))
    for label, curves in per_label.items():
        report.rows.append((label, stage_cells(curves, len(report.stages))))
    report.rows.sort(key=lambda row: (sort_value(row[1][-1]), row[0]))
    report.unmeasured = unmeasured_labels(results, keep, set(per_label))
    report.memory = memory_column(results, per_label)
    shown_as_text = {f"left out {run_id}: {results.evaluation}: " for run_id, run in results.info.items()
                     if run["label"] in report.unmeasured}
    report.notes = [note for note in report.notes if not any(note.startswith(text) for text in shown_as_text)]
    report.notes += seed_coverage_notes(report.seeds)
    report.notes += references_only_note(results, keep, set(per_label) | set(report.unmeasured))
    report.notes += monitoring_table_notes(results)
    report.notes = list(dict.fromkeys(report.notes))  # a damaged file is named once, whichever metric needs it
    return report


def stage_cells(curves: Sequence[np.ndarray], n_stages: int) -> list[Cell]:
    """One Cell per stage over the runs (seeds) of a row: empty (`–`) at a stage where a run that reached it has no
    value (an undefined forgetting ratio), so that a mean is never taken over the defined seeds only; a run with
    fewer stages counts only at its own."""
    cells = []
    for stage in range(n_stages):
        reached = np.array([curve[stage] for curve in curves if stage < len(curve)], dtype=float)
        cells.append(summarize(reached) if np.isfinite(reached).all() else Cell(float("nan"), float("nan"), 0))
    return cells


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


def header(report: Report) -> list[str]:
    symbol = METRICS[report.metric].symbol
    memory = ["memory (samples / bytes)"] if report.memory else []
    return ["approach", *[f"{symbol}<={t}" for t in report.stages], *memory, "seeds"]


def table_rows(report: Report, ci: bool = False) -> list[list[str]]:
    def memory(label: str) -> list[str]:
        return [report.memory.get(label, "–")] if report.memory else []

    rows = [[label, *[format_cell(cell, METRICS[report.metric].unit, ci) for cell in cells], *memory(label),
             str(len(report.seeds.get(label, [])))] for label, cells in report.rows]
    return rows + [[label, *[reason.split(" (")[0]] * len(report.stages), *memory(label), "-"]
                   for label, reason in report.unmeasured.items()]


def report_table(report: Report, ci: bool = False) -> Table:
    notes = list(report.notes)
    if report.evaluation != "task-aware":
        chance = ("; A_R^{u<=t} is the random run's accuracy on task u at stage t, the chance level of that stage"
                  if "random" in METRICS[report.metric].inputs else "")
        notes.insert(0, f"evaluation: {report.evaluation} (argmax over every class seen so far, no task id){chance}")
    notes += [f"{label}: {reason}" for label, reason in report.unmeasured.items() if "(" in reason]
    return Table(header(report), table_rows(report, ci), notes=notes)
