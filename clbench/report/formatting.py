"""The text side of every report table: `Table` (formatted cells, a title, notes) and number formats.

What a monitoring reporter builds its tables with (`clbench.api` exports `Table`, `plain` and `format_seeds`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass
class Table:
    """A formatted table (text cells) with an optional title and its notes."""

    header: list[str]
    rows: list[list[str]]
    title: str | None = None
    notes: list[str] = field(default_factory=list)


def format_seeds(seeds: Iterable[int]) -> str:
    """`0-2,5` for [0, 1, 2, 5]."""
    ranges: list[list[int]] = []
    for seed in sorted(set(seeds)):
        if ranges and ranges[-1][1] == seed - 1:
            ranges[-1][1] = seed
        else:
            ranges.append([seed, seed])
    return ",".join(str(low) if low == high else f"{low}-{high}" for low, high in ranges)


def plain(value: float, digits: int = 2) -> str:
    """`value` with `digits` decimals (`0.25`, `12.5` with 1), `–` when it is not finite (NaN: no value)."""
    return "–" if not math.isfinite(value) else f"{value:.{digits}f}"
