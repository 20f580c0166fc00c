"""Accuracy-matrix heat maps: A[t, u] (accuracy on task u after learning task t) per approach and config, mean
over its seeds, as PNG and PDF (the HTML report's matrices section).

matplotlib through `clbench.report.figures` (object API on an Agg canvas), imported only when figures are drawn.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from clbench.report.figures import figure_and_axes, save, slug
from clbench.report.formatting import format_seeds
from clbench.report.loading import Results
from clbench.report.notes import complete_runs

ANNOTATED_TASKS = 10  # matrices up to this size get each cell's value written in it


@dataclass(frozen=True)
class MeanMatrix:
    """The mean accuracy matrix of one approach/config over its complete runs (NaN above the diagonal)."""

    label: str
    matrix: np.ndarray  # (T, T): row t-1 = after task t, column u-1 = task u; fractions
    seeds: list[int]


def mean_matrices(results: Results) -> list[MeanMatrix]:
    """One mean matrix per row label of `results` (complete runs only, as the summary), in label order; runs of a
    label with fewer tasks than its largest run are padded with NaN (left out of the mean there)."""
    per_label: dict[str, list[str]] = {}
    for run_id in complete_runs(results, []):
        per_label.setdefault(str(results.info[run_id]["label"]), []).append(run_id)
    found = []
    for label, run_ids in sorted(per_label.items()):
        size = max(results.matrices[run_id].shape[0] for run_id in run_ids)
        stacked = np.full((len(run_ids), size, size), np.nan)  # (runs, T, T)
        for index, run_id in enumerate(run_ids):
            matrix = results.matrices[run_id]
            stacked[index, : matrix.shape[0], : matrix.shape[1]] = matrix
        finite = np.isfinite(stacked)
        counts = finite.sum(axis=0)
        mean = np.where(counts > 0, np.where(finite, stacked, 0.0).sum(axis=0) / np.maximum(counts, 1), np.nan)
        found.append(MeanMatrix(label, mean, sorted(int(results.info[run_id]["seed"]) for run_id in run_ids)))
    return found


def plot_matrix(matrix: MeanMatrix, directory: Path, stem: str, evaluation: str) -> list[Path]:
    """A heat map of `matrix` in percent (0-100, the upper triangle blank), each cell annotated up to
    `ANNOTATED_TASKS` tasks; writes `<directory>/<stem>.png` and `.pdf`."""
    size = matrix.matrix.shape[0]
    side = min(1.5 + 0.35 * size, 7.0)
    figure, axes = figure_and_axes(side + 0.8, side)
    values = np.ma.masked_invalid(100.0 * matrix.matrix)
    image = axes.imshow(values, cmap="viridis", vmin=0.0, vmax=100.0, aspect="equal")
    if size <= ANNOTATED_TASKS:
        for (row, column), value in np.ndenumerate(100.0 * matrix.matrix):
            if np.isfinite(value):
                axes.text(column, row, f"{value:.0f}", ha="center", va="center", fontsize=8,
                          color="white" if value < 60 else "black")
    ticks = np.arange(size)
    axes.set_xticks(ticks, [str(u + 1) for u in ticks])
    axes.set_yticks(ticks, [str(t + 1) for t in ticks])
    axes.set_xlabel("task u")
    axes.set_ylabel("after learning task t")
    axes.set_title(f"{matrix.label}\n{evaluation}, seeds {format_seeds(matrix.seeds)}", fontsize=9)
    figure.colorbar(image, ax=axes, fraction=0.046, pad=0.04, label="accuracy [%]")
    return save(figure, directory, stem)


def plot_matrices(results: Results, directory: Path) -> list[tuple[str, Path]]:
    """(label, PNG path) of the heat map of every approach/config of `results` (`mean_matrices`)."""
    drawn = []
    for index, matrix in enumerate(mean_matrices(results)):
        stem = f"{results.benchmark}-matrix-{index:02d}-{slug(matrix.label)}"
        paths = plot_matrix(matrix, directory, stem, results.evaluation)
        drawn.append((matrix.label, next(path for path in paths if path.suffix == ".png")))
    return drawn
