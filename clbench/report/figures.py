"""Figures from report objects, as PNG and PDF: the paper's forgetting curves, accuracy against training FLOPs,
and the helpers every figure uses (palette, file names, saving). HAT's monitoring figures are in
`clbench.approaches.hat.figures`.

matplotlib through its object API on an Agg canvas (no pyplot, no global backend or style change), imported
only by `clbench report --plot`. Every function takes what `clbench.report` built and returns the files it
wrote, `<directory>/<benchmark>-<figure>[-<config>].png` and `.pdf`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from clbench.metric_registry import METRICS
from clbench.report.comparison import format_p
from clbench.report.ranking import MetricRanks, Ranking
from clbench.report.statistics import Cell
from clbench.report.tables import Report

if TYPE_CHECKING:  # summary -> continual -> figures: the type only
    from clbench.report.summary import Summary

log = logging.getLogger(__name__)

# matplotlib's tab10 then the lighter half of tab20: the curve colour of the i-th table row.
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#c7c7c7",
           "#dbdb8d", "#9edae5")
FORMATS = ("png", "pdf")
DPI = 150
MAX_CURVES = 12


def colours(labels: Sequence[str]) -> dict[str, str]:
    """The colour of every label, in order (the palette repeats after 20)."""
    return {label: PALETTE[i % len(PALETTE)] for i, label in enumerate(labels)}


def slug(text: str) -> str:
    """A file-name-safe form of a label: `hat (c=0.1, smax=25)` -> `hat-c=0.1-smax=25`."""
    return re.sub(r"[^A-Za-z0-9.=+-]+", "-", text).strip("-") or "figure"


def save(figure: Figure, directory: Path, stem: str) -> list[Path]:
    """Write `figure` as `<directory>/<stem>.png` and `.pdf`; returns the paths."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    FigureCanvasAgg(figure)
    paths = []
    for suffix in FORMATS:
        path = directory / f"{stem}.{suffix}"
        figure.savefig(path, dpi=DPI, bbox_inches="tight")
        paths.append(path)
    return paths


def figure_and_axes(width: float = 6.4, height: float = 4.0) -> tuple[Figure, Axes]:
    """A matplotlib figure (no pyplot) of `width` x `height` inches with one subplot."""
    figure = Figure(figsize=(width, height))
    return figure, figure.add_subplot()


# ---------------------------------------------------------------------------------------------- curves

def curve_rows(report: Report, max_curves: int = MAX_CURVES) -> list[tuple[str, list[Cell]]]:
    """The rows to draw: all of them, or, past `max_curves` (a hyper-parameter grid), one per method.

    A method's row is then its config with the most seeds (ties: the best last-stage value).
    """
    if len(report.rows) <= max_curves:
        return list(report.rows)
    best: dict[str, tuple[str, list[Cell]]] = {}
    for label, cells in report.rows:  # sorted by the last stage, best last
        method = label.split(" (", 1)[0]
        kept = best.get(method)
        if kept is None or len(report.seeds.get(label, [])) >= len(report.seeds.get(kept[0], [])):
            best[method] = (label, cells)
    chosen = {label for label, _ in best.values()}
    log.warning("%d rows: the figure draws one config per method (%d curves)", len(report.rows), len(chosen))
    return [row for row in report.rows if row[0] in chosen][-max_curves:]


def plot_curves(report: Report, directory: Path, ci: bool = False, other: Report | None = None) -> list[Path]:
    """rho^{<=t} (or A^{<=t}) against t for every row of `report`, with a band of +- std (or the 95% CI).

    The paper's forgetting-curve figure (see `curve_rows` for grids); nothing is written for an empty report.
    `other`: the same table in the other evaluation (task-aware / task-agnostic), drawn dashed in the same
    colours, so both evaluations of every run are in one figure.
    """
    if not report.rows:
        return []
    rows = curve_rows(report)
    figure, axes = figure_and_axes(7.0, 4.2)
    palette = colours([label for label, _ in rows])
    stages = np.array(report.stages, dtype=float)
    metric = METRICS[report.metric]
    scale = 100.0 if metric.percent else 1.0
    for label, cells in rows:
        mean = np.array([cell.mean for cell in cells]) * scale
        spread = np.array([cell.half_width if ci else cell.std for cell in cells]) * scale
        spread = np.nan_to_num(spread)
        axes.fill_between(stages, mean - spread, mean + spread, color=palette[label], alpha=0.15, linewidth=0)
        axes.plot(stages, mean, color=palette[label], marker="o", linewidth=2.2,
                  label=f"{label} ({report.evaluation})" if other is not None else label)
    for label, cells in dict(other.rows if other is not None else []).items():
        if label in palette:
            mean = np.array([cell.mean for cell in cells]) * scale
            axes.plot(stages[: len(mean)], mean, color=palette[label], marker="s", linewidth=1.4, linestyle="--",
                      label=f"{label} ({other.evaluation})")
    name = metric.symbol.replace("rho", r"\rho")
    symbol = rf"${name}^{{\leq t}}$" + (" [%]" if metric.percent else "")
    axes.set_xlabel("t (tasks learned)")
    axes.set_ylabel(symbol)
    axes.set_xticks(stages)
    band = "95% CI" if ci else "± std"
    axes.set_title(f"{report.benchmark}: {symbol} (mean, band {band} over seeds)", fontsize=10)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    return save(figure, directory, f"{report.benchmark}-{report.metric}")


# ---------------------------------------------------------------------------------------------- critical difference

def plot_critical_differences(ranking: Ranking, directory: Path) -> list[Path]:
    """One critical-difference diagram (Demsar 2006, Fig. 1) per metric with a Friedman test: the average rank of
    every approach on an axis (1, the best, on the left), the Nemenyi CD as a bar above it, and a thick line under
    each group of approaches whose ranks differ by less than CD (not told apart). Files
    `<directory>/compare-<metric>-cd.png` and `.pdf`."""
    return [path for ranks in ranking.metrics if ranks.test is not None
            for path in plot_critical_difference(ranks, ranking.approaches, directory)]


def plot_critical_difference(ranks: MetricRanks, approaches: Sequence[str], directory: Path) -> list[Path]:
    """The critical-difference diagram of one metric (see `plot_critical_differences`)."""
    assert ranks.test is not None
    k = len(approaches)
    average = ranks.test.ranks
    order = np.argsort(average, kind="stable")
    half = (k + 1) // 2  # the better half is labelled on the left, the rest on the right
    figure, axes = figure_and_axes(7.0, 1.2 + 0.25 * half)
    axes.set_xlim(0.5, k + 0.5)
    axes.set_ylim(-0.5 * half - 0.3, 1.6)
    axes.axis("off")
    axes.plot([1, k], [0, 0], color="black", linewidth=1)
    for tick in range(1, k + 1):
        axes.plot([tick, tick], [0, 0.12], color="black", linewidth=1)
        axes.text(tick, 0.2, str(tick), ha="center", va="bottom", fontsize=8)
    cd = ranks.critical_difference
    axes.plot([1, 1 + cd], [1.2, 1.2], color="black", linewidth=2)
    axes.text(1 + cd / 2, 1.3, f"CD = {cd:.2f}", ha="center", va="bottom", fontsize=8)
    for position, index in enumerate(order):
        left = position < half
        depth = -0.5 - 0.5 * (position if left else k - 1 - position)
        edge = 0.6 if left else k + 0.4
        axes.plot([average[index], average[index], edge], [0, depth, depth], color="black", linewidth=0.8)
        axes.text(edge - 0.05 if left else edge + 0.05, depth, f"{approaches[index]} ({average[index]:.2f})",
                  ha="right" if left else "left", va="center", fontsize=8)
    for row, (low, high) in enumerate(_cliques(sorted(average), cd)):
        axes.plot([low - 0.03, high + 0.03], [-0.2 - 0.12 * row] * 2, color="#d62728", linewidth=3)
    p_value = format_p(ranks.test.f_p)
    axes.set_title(f"{ranks.metric}: average ranks over {len(ranks.benchmarks)} benchmarks (Iman-Davenport p "
                   f"{'< ' + p_value[1:] if p_value.startswith('<') else '= ' + p_value}, Nemenyi 5%)", fontsize=9)
    return save(figure, directory, f"compare-{ranks.metric}-cd")


def _cliques(ranks: Sequence[float], critical_difference: float) -> list[tuple[float, float]]:
    """The maximal runs of sorted average ranks spanning less than the critical difference (the groups drawn as
    one line: not told apart), each as (lowest rank, highest rank); a run of one approach is not drawn."""
    groups: list[tuple[float, float]] = []
    for start in range(len(ranks)):
        end = start
        while end + 1 < len(ranks) and ranks[end + 1] - ranks[start] < critical_difference:
            end += 1
        if end > start and not any(low <= ranks[start] and ranks[end] <= high for low, high in groups):
            groups.append((ranks[start], ranks[end]))
    return groups


# ---------------------------------------------------------------------------------------------- compute

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")  # one per setting of an approach (`method (key=value)`)


def approach_and_setting(label: str) -> tuple[str, str]:
    """`derpp (training.realtime=true)` -> (`derpp`, `training.realtime=true`); a bare label's setting is ''."""
    found = re.fullmatch(r"(.+?) \((.+)\)", label)
    return (found[1], found[2]) if found else (label, "")


def plot_accuracy_flops(summaries: Sequence[Summary], directory: Path) -> list[Path]:
    """Accuracy after the last task against training FLOPs (`report --summary`'s A<=T and train FLOPs), one panel per
    benchmark's summary: each approach a point at its means over seeds, its bars one standard deviation each way
    (none from one seed), FLOPs on a log scale. An approach's colour is the same in every panel and its settings
    (the labels' `(key=value)`, e.g. with and without `training.realtime`) are marker shapes, named in one legend
    beside the panels. Rows without training FLOPs (the random reference: 0) are left out of the log scale. Nothing
    when no approach has FLOPs (runs of an older clbench)."""
    from matplotlib.lines import Line2D
    from matplotlib.ticker import EngFormatter, LogLocator

    drawn = [summary for summary in summaries if summary.shows_flops]
    if not drawn:
        return []
    rows = [[row for row in summary.rows if row.train_flops.n and row.accuracy.n and row.train_flops.mean > 0]
            for summary in drawn]
    parts = [approach_and_setting(row.label) for panel in rows for row in panel]
    palette = colours(list(dict.fromkeys(approach for approach, _ in parts)))
    markers = {setting: MARKERS[i % len(MARKERS)] for i, setting in enumerate(dict.fromkeys(s for _, s in parts))}
    figure = Figure(figsize=(4.6 * len(drawn) + 2.6, 4.2))
    for index, (summary, panel) in enumerate(zip(drawn, rows)):
        axes = figure.add_subplot(1, len(drawn), index + 1)
        for row in panel:
            approach, setting = approach_and_setting(row.label)
            spread = [0.0 if np.isnan(cell.std) else cell.std for cell in (row.train_flops, row.accuracy)]
            axes.errorbar(row.train_flops.mean, 100 * row.accuracy.mean, xerr=spread[0], yerr=100 * spread[1],
                          fmt=markers[setting], color=palette[approach], capsize=3, markersize=6)
        axes.set_xscale("log")
        axes.margins(x=0.08, y=0.06)  # the extreme points (SGD's, the cheapest) clear of the frame
        axes.xaxis.set_minor_locator(LogLocator(subs=(2.0, 5.0)))  # 20G, 50G, 100G, ...: a label in any decade
        for formatter in (axes.xaxis.set_major_formatter, axes.xaxis.set_minor_formatter):
            formatter(EngFormatter(sep=""))
        axes.set_xlabel("training FLOPs (all stages)")
        axes.set_ylabel(rf"$A^{{\leq {summary.stages}}}$ [%]")
        axes.set_title(summary.benchmark)
        axes.grid(True, which="both", alpha=0.3)
    handles = [Line2D([], [], color=colour, marker="o", linestyle="", label=approach)
               for approach, colour in palette.items()]
    handles += [Line2D([], [], color="grey", marker=marker, linestyle="", label=setting)
                for setting, marker in markers.items() if setting and len(markers) > 1]
    figure.legend(handles=handles, loc="center right", fontsize="small", frameon=False)
    figure.subplots_adjust(left=0.08, right=1 - 2.4 / (4.6 * len(drawn) + 2.6), wspace=0.3, bottom=0.14)
    stem = drawn[0].benchmark if len(drawn) == 1 else "benchmarks"
    return save(figure, directory, f"{slug(stem)}-accuracy-flops")
