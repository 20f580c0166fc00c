"""How a table cell is written: `mean (std)` or `mean ± half-width` of a `Cell`, memory and parameter counts, and
the order rows are sorted in."""

from __future__ import annotations

import math

from clbench.compute import flops_prefix, format_flops
from clbench.metric_registry import FLOPS, PERCENT, STEPS, UNITS
from clbench.report.statistics import Cell


def format_cell(cell: Cell, unit: str, ci: bool = False) -> str:
    """A cell in a metric's `unit` (`clbench.metric_registry.UNITS`): `-0.06 (0.01)` as a `ratio` (the forgetting
    ratio), `99.0 (0.2)` in `percent` (accuracy points: accuracy, BWT, ...), `120 (15)` in `steps`; `–` when empty.

    With `ci`, `-0.06 ± 0.02`: the mean and the half-width of its Student-t 95% confidence interval.
    """
    if unit not in UNITS:
        raise ValueError(f"format_cell: unit {unit!r}, not one of {', '.join(UNITS)}")
    if unit == FLOPS:
        return format_flops_cell(cell)
    scale, digits = (100.0, 1) if unit == PERCENT else (1.0, 0) if unit == STEPS else (1.0, 2)
    return format_value(cell, scale, digits, ci)


def format_value(cell: Cell, scale: float, digits: int, ci: bool = False) -> str:
    """`mean (std)` or `mean ± half-width` of `cell` times `scale` with `digits` decimals; `–` when empty."""
    if cell.n == 0:
        return "–"
    mean = f"{cell.mean * scale:.{digits}f}"
    spread = cell.half_width if ci else cell.std
    spread_text = "–" if math.isnan(spread) else f"{spread * scale:.{digits}f}"
    return f"{mean} ± {spread_text}" if ci else f"{mean} ({spread_text})"


def format_flops_cell(cell: Cell) -> str:
    """FLOPs with a prefix and their spread in the same one: `1.25 GFLOP (0.01)`; `–` when empty."""
    if cell.n == 0:
        return "–"
    if math.isnan(cell.std):
        return format_flops(cell.mean)
    prefix, size = flops_prefix(cell.mean)
    return f"{cell.mean / size:.2f} {prefix}FLOP ({cell.std / size:.2f})"


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


def sort_value(cell: Cell) -> float:
    return -math.inf if math.isnan(cell.mean) else cell.mean
