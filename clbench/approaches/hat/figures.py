"""HAT's monitoring figures, as PNG and PDF: capacity, layer use, weight reuse, attention and the smax x c
sensitivity, from `clbench.approaches.hat.report.HatReport` (`clbench report --hat --plot DIR`).

matplotlib through its object API on an Agg canvas (no pyplot, no global backend or style change), imported
only when figures are asked for; the palette, file names and saving are `clbench.report.figures`'. Every
function returns the files it wrote, `<directory>/<benchmark>-<figure>[-<config>].png` and `.pdf`.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.image import AxesImage

from clbench.report.figures import PALETTE, figure_and_axes, save, slug
from clbench.run_files import read_run_parquet

if TYPE_CHECKING:  # HatReporter.plots imports this module: the report's types are only annotations here
    from clbench.approaches.hat.report import HatMonitoring, HatReport, Sensitivity

log = logging.getLogger(__name__)

MAX_HAT_CONFIGS = 8


def plot_hat(report: HatReport, directory: Path, max_configs: int = MAX_HAT_CONFIGS) -> list[Path]:
    """Capacity, layer use, weight reuse and attention figures per HAT config, and the sensitivity heat map.

    With more than `max_configs` configs (a hyper-parameter grid), only the `max_configs` with the most
    seeds get the per-config figures.
    """
    configs = sorted(report.configs, key=lambda config: (-len(config.seeds), config.label))
    if len(configs) > max_configs:
        log.warning("%d HAT configs: monitoring figures for the %d with the most seeds only", len(configs),
                    max_configs)
    paths: list[Path] = []
    for config in configs[:max_configs]:
        stem = f"{report.benchmark}-{slug(config.label)}"
        paths += plot_capacity(config, directory, f"{stem}-capacity")
        paths += plot_layer_use(config, directory, f"{stem}-layers")
        if not config.reuse.empty:
            paths += plot_reuse(config, directory, f"{stem}-reuse")
        if config.masks_file is not None:
            paths += plot_attention(config, directory, f"{stem}-attention")
    if report.sensitivity is not None:
        paths += plot_sensitivity(report.sensitivity, directory, f"{report.benchmark}-hat-sensitivity")
    return paths


def _capacity_series(config: HatMonitoring, mask: str, layer: str) -> tuple[np.ndarray, np.ndarray]:
    part = config.capacity[(config.capacity["mask"] == mask) & (config.capacity["layer"] == layer)]
    part = part.sort_values("stage")
    return part["stage"].to_numpy(float), 100.0 * part["mean"].to_numpy(float)


def plot_capacity(config: HatMonitoring, directory: Path, stem: str) -> list[Path]:
    """Network capacity used after every task (the paper's capacity figure; dashed lines: task switches)."""
    figure, axes = figure_and_axes()
    stages, cumulative = _capacity_series(config, "cumulative", "total")
    _, own = _capacity_series(config, "task", "total")
    axes.plot(stages, cumulative, color=PALETTE[0], marker="o", linewidth=2.2, label=r"$a^{\leq t}$: all tasks so far")
    axes.plot(stages, own, color=PALETTE[1], marker="s", linewidth=1.5, label=r"$a^t$: task $t$ alone")
    for switch in stages[:-1]:
        axes.axvline(switch + 0.5, color="grey", linestyle="--", linewidth=0.8)
    axes.set_xticks(stages)
    axes.set_xlabel("task t")
    axes.set_ylabel("weights used [%]")
    axes.set_ylim(0, max(5.0, float(np.nanmax(cumulative)) * 1.1) if len(cumulative) else 100)
    axes.set_title(f"{config.label}: network capacity used ({_seeds_text(config)})", fontsize=10)
    axes.legend(fontsize=8, frameon=False)
    return save(figure, directory, stem)


def plot_layer_use(config: HatMonitoring, directory: Path, stem: str) -> list[Path]:
    """Weights used per layer: lines with the cumulative attention of past tasks, bars without (task t alone)."""
    figure, axes = figure_and_axes(7.0, 4.0)
    layers = [layer for layer in config.layers if layer != "total"]
    width = 0.8 / max(1, len(layers))
    for i, layer in enumerate(layers):
        colour = PALETTE[i % len(PALETTE)]
        stages, cumulative = _capacity_series(config, "cumulative", layer)
        own_stages, own = _capacity_series(config, "task", layer)
        axes.bar(own_stages - 0.4 + width * (i + 0.5), own, width=width, color=colour, alpha=0.45)
        axes.plot(stages, cumulative, color=colour, marker="o", linewidth=2.0, label=layer)
    axes.set_xticks(sorted(set(config.capacity["stage"].astype(int))))
    axes.set_xlabel("task t")
    axes.set_ylabel("weights used [%]")
    masks = r"lines $a^{\leq t}$, bars $a^t$"
    axes.set_title(f"{config.label}: layer use, {masks} ({_seeds_text(config)})", fontsize=10)
    axes.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    return save(figure, directory, stem)


def reuse_matrix(config: HatMonitoring) -> np.ndarray:
    """(T-1, T-1) percentages: row i (task 1..T-1), column j (task 2..T); NaN where j <= i."""
    size = int(config.reuse["later_task"].max())
    matrix = np.full((size - 1, size - 1), np.nan)
    for task, later, mean in zip(config.reuse["task"], config.reuse["later_task"], config.reuse["mean"]):
        matrix[int(task) - 1, int(later) - 2] = 100.0 * float(mean)
    return matrix


def plot_reuse(config: HatMonitoring, directory: Path, stem: str) -> list[Path]:
    """The weight-reuse heat map: % of task i's weights that task j > i also uses."""
    matrix = reuse_matrix(config)
    size = matrix.shape[0] + 1
    figure, axes = figure_and_axes(1.2 + 0.6 * size, 0.9 + 0.55 * size)
    image = axes.imshow(np.ma.masked_invalid(matrix), cmap="viridis", vmin=0, vmax=100)
    _annotate(axes, image, matrix, "{:.0f}")
    axes.set_xticks(range(size - 1), [str(j) for j in range(2, size + 1)])
    axes.set_yticks(range(size - 1), [str(i) for i in range(1, size)])
    axes.set_xlabel("later task j")
    axes.set_ylabel("task i")
    axes.set_title(f"{config.label}: weight reuse [%]", fontsize=10)
    figure.colorbar(image, ax=axes, fraction=0.046, pad=0.04)
    return save(figure, directory, stem)


def plot_attention(config: HatMonitoring, directory: Path, stem: str) -> list[Path]:
    """The attention a^t of every gated unit (rows: tasks, one panel per layer) of the config's first seed."""
    assert config.masks_file is not None
    masks = read_run_parquet(config.masks_file, columns=["task", "layer", "unit", "attention"])
    layers = list(dict.fromkeys(masks["layer"]))
    figure = Figure(figsize=(7.0, 1.0 + 1.1 * len(layers)))
    for index, layer in enumerate(layers, 1):
        axes = figure.add_subplot(len(layers), 1, index)
        part = masks[masks["layer"] == layer]
        table = part.pivot_table(index="task", columns="unit", values="attention", aggfunc="mean")
        image = axes.imshow(table.to_numpy(float), aspect="auto", cmap="magma", vmin=0, vmax=1,
                            interpolation="nearest")
        axes.set_yticks(range(len(table.index)), [str(task) for task in table.index], fontsize=7)
        axes.set_ylabel(layer, fontsize=8)
        axes.set_xticks([])
    figure.suptitle(f"{config.label}: attention " r"$a^t$" f" per unit (seed {config.seeds[0]})", fontsize=10)
    figure.colorbar(image, ax=figure.axes, fraction=0.03, pad=0.02)
    return save(figure, directory, stem)


def plot_sensitivity(sensitivity: Sensitivity, directory: Path, stem: str) -> list[Path]:
    """The heat map of rho^{<=T} over smax (rows) x c (columns) on one seed (the paper's hyper-parameter figure)."""
    values = sensitivity.values
    figure, axes = figure_and_axes(1.6 + 0.7 * len(sensitivity.c), 1.2 + 0.45 * len(sensitivity.smax))
    finite = values[np.isfinite(values)]
    low, high = (float(finite.min()), float(finite.max())) if finite.size else (-1.0, 0.0)
    image = axes.imshow(np.ma.masked_invalid(values), cmap="RdYlGn", vmin=min(low, -0.01), vmax=max(high, 0.0),
                        aspect="auto")
    _annotate(axes, image, values, "{:.2f}")
    axes.set_xticks(range(len(sensitivity.c)), [f"{c:g}" for c in sensitivity.c])
    axes.set_yticks(range(len(sensitivity.smax)), [f"{s:g}" for s in sensitivity.smax])
    axes.set_xlabel("c")
    axes.set_ylabel("smax")
    axes.set_title(rf"hat: $\rho^{{\leq {sensitivity.stage}}}$ (seed {sensitivity.seed})", fontsize=10)
    figure.colorbar(image, ax=axes, fraction=0.046, pad=0.04)
    return save(figure, directory, stem)


def _annotate(axes: Axes, image: AxesImage, values: np.ndarray, template: str) -> None:
    """Write every finite value on its heat-map cell, black on light colours and white on dark ones."""
    for (row, column), value in np.ndenumerate(values):
        if math.isfinite(value):
            red, green, blue, _ = image.cmap(image.norm(value))
            light = 0.299 * red + 0.587 * green + 0.114 * blue > 0.5
            axes.text(column, row, template.format(value), ha="center", va="center", fontsize=7,
                      color="black" if light else "white")


def _seeds_text(config: HatMonitoring) -> str:
    count = len(config.seeds)
    return f"mean over {count} seeds" if count > 1 else f"seed {config.seeds[0]}"
