"""`clbench report --continual`: the continual evaluation's metrics after the last task, one row per approach, beside
the end-of-task accuracy; its figure, every task's accuracy over the steps of the whole sequence, one panel per
approach (`--plot`, the HTML page). The curves come from `curve.parquet` (`training.eval_every`,
`clbench.run.curve`); the metrics from `clbench.curve_metrics` through the registry (`run_values`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from clbench import metrics
from clbench.errors import ResultsError
from clbench.metric_registry import METRICS, split_refusal
from clbench.report.cells import format_cell, sort_value
from clbench.report.formatting import Table
from clbench.report.loading import REFERENCES, Results
from clbench.report.notes import complete_runs, references_only_note, run_notes
from clbench.report.statistics import NO_CURVE, Cell, run_curve, run_values, summarize
from clbench.results import CURVE_FILE

CONTINUAL_METRICS = ("min-accuracy", "worst-case-accuracy", "windowed-forgetting", "stability-gap", "gap-recovery")
"""The columns of `--continual`, after A^{<=T}; `--summary` shows the first two where a run has a curve."""

NO_CURVE_NOTE = ("{labels}: no continual-evaluation curve (–): train with `--set training.eval_every=K` (e.g. 50; "
                 "`training.eval_subset` test images per task, 500 by default)")


@dataclass
class ContinualRow:
    label: str
    accuracy: Cell
    values: dict[str, Cell]
    seeds: list[int]


@dataclass
class ContinualReport:
    benchmark: str
    stages: int
    rows: list[ContinualRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def last_values(results: Results, names: tuple[str, ...], notes: list[str],
                include_references: bool = False) -> dict[str, dict[str, float]]:
    """metric -> run id -> its value after the run's last task (`include_references`: joint's and random's too); why
    a run has none goes to `notes` (the runs without a curve in one note naming the option: `no_curve_note`)."""
    found: dict[str, dict[str, float]] = {}
    quiet: list[str] = []
    for name in names:
        values = run_values(results, name, quiet, include_references)
        found[name] = {run_id: float(value[-1]) for run_id, value in values.items()}
    notes += sorted({note for note in quiet if not note.endswith(NO_CURVE)})
    return found


def no_curve_note(results: Results, run_ids: list[str]) -> list[str]:
    """The note naming the approaches (labels) with runs that have no curve; [] when every run has one."""
    labels = sorted({results.info[run_id]["label"] for run_id in run_ids if run_curve(results, run_id) is None
                     and results.damage_of(run_id, CURVE_FILE) is None})  # a damaged curve has its own note
    return [NO_CURVE_NOTE.format(labels=", ".join(labels))] if labels else []


def build_continual(results: Results, include_references: bool = False) -> ContinualReport:
    """A^{<=T} and the continual metrics after the last task per approach (mean over seeds); joint and random as
    rows with `include_references` (`--references`, as in the per-stage table). A ResultsError (exit 2) for a split
    the curves do not hold (`clbench.metric_registry.split_refusal`)."""
    refusal = split_refusal(CONTINUAL_METRICS, results.split, "--continual")
    if refusal is not None:
        raise ResultsError(refusal)
    report = ContinualReport(results.benchmark, int(results.frame["stage"].max()) if not results.frame.empty else 0)
    report.notes += run_notes(results)
    run_ids = [run_id for run_id in complete_runs(results, report.notes)
               if include_references or results.info[run_id]["method"] not in REFERENCES]
    values = last_values(results, CONTINUAL_METRICS, report.notes, include_references)
    per_label: dict[str, list[str]] = {}
    for run_id in run_ids:
        per_label.setdefault(results.info[run_id]["label"], []).append(run_id)
    for label, runs in per_label.items():
        cells = {name: summarize(values[name][run_id] for run_id in runs if run_id in values[name])
                 for name in CONTINUAL_METRICS}
        accuracy = summarize(metrics.average_accuracy(results.matrices[run_id])[-1] for run_id in runs)
        report.rows.append(ContinualRow(label, accuracy, cells, sorted(int(results.info[r]["seed"]) for r in runs)))
    report.rows.sort(key=lambda row: (sort_value(row.accuracy), row.label))
    report.notes += no_curve_note(results, run_ids)
    report.notes += references_only_note(results, include_references, set(per_label))
    return report


def continual_table(report: ContinualReport, ci: bool = False) -> Table:
    head = ["approach", f"A<={report.stages}", *(METRICS[name].symbol for name in CONTINUAL_METRICS), "seeds"]
    rows = [[row.label, format_cell(row.accuracy, "percent", ci),
             *(format_cell(row.values[name], METRICS[name].unit, ci) for name in CONTINUAL_METRICS),
             str(len(row.seeds))] for row in report.rows]
    notes = [*report.notes, "min-ACC, WC-ACC, WF10 and the gap in accuracy points, recovery in optimiser steps "
                            "(De Lange et al. 2023; the Reports page defines each)"]
    return Table(head, rows, title=f"{report.benchmark}: continual evaluation after the last task", notes=notes)


def continual_csv(report: ContinualReport, ci: bool = False) -> str:
    """Tidy CSV: one row per (approach, quantity: accuracy or a continual metric's name) after the last task, raw
    fractions (steps for gap-recovery)."""
    records = []
    for row in report.rows:
        for quantity, cell in (("accuracy", row.accuracy), *row.values.items()):
            records.append({"benchmark": report.benchmark, "approach": row.label, "quantity": quantity,
                            "stage": report.stages, "mean": cell.mean, "std": cell.std, "seeds": cell.n,
                            **({"ci95": cell.half_width} if ci else {})})
    columns = ["benchmark", "approach", "quantity", "stage", "mean", "std", "seeds"] + (["ci95"] if ci else [])
    return pd.DataFrame(records, columns=columns).to_csv(index=False)


def curves_by_label(results: Results, include_references: bool = False) -> dict[str, tuple[int, pd.DataFrame]]:
    """label -> (seed, curve) of each approach's run with the lowest seed that has a curve (the figure's panel);
    joint's and random's too with `include_references`."""
    chosen: dict[str, tuple[int, pd.DataFrame]] = {}
    for run_id, run in sorted(results.info.items(), key=lambda item: int(item[1]["seed"])):
        if (run["method"] in REFERENCES and not include_references) or run["label"] in chosen:
            continue
        curve = run_curve(results, run_id)
        if curve is not None:
            chosen[run["label"]] = (int(run["seed"]), curve)
    return chosen


def plot_continual(results: Results, directory: Path, include_references: bool = False) -> list[Path]:
    """`<benchmark>-continual.png/.pdf`: each task's accuracy over the optimiser steps of the sequence, task
    boundaries dotted, one panel per approach (and reference, with `include_references`); nothing when no run has a
    curve."""
    panels = curves_by_label(results, include_references)
    if not panels:
        return []
    from matplotlib.figure import Figure

    from clbench.report.figures import PALETTE, save, slug

    figure = Figure(figsize=(4.2 * len(panels), 3.2))
    axes = figure.subplots(1, len(panels), squeeze=False, sharey=True)[0]
    for ax, (label, (seed, curve)) in zip(axes, panels.items(), strict=True):
        for task, points in curve.sort_values("step", kind="stable").groupby("task"):
            ax.plot(points["step"], 100 * points["accuracy"], color=PALETTE[(int(task) - 1) % len(PALETTE)],
                    linewidth=1.0, label=f"task {int(task)}")
        for step in curve[curve["at"] == "end"].groupby("stage")["step"].max().iloc[:-1]:
            ax.axvline(step, color="#7f7f7f", linestyle=":", linewidth=0.8)
        ax.set_title(f"{label} (seed {seed})", fontsize=9)
        ax.set_xlabel("optimiser step")
    axes[0].set_ylabel("test accuracy [%]")
    axes[-1].legend(fontsize=7, loc="lower left")
    return save(figure, directory, f"{slug(results.benchmark)}-continual")
