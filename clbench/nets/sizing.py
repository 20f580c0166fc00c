"""Choosing layer widths so that a network has (about) as many parameters as a target.

The HAT paper compares approaches at equal parameter counts: PathNet's modules and PNN's columns are narrowed
or widened until the whole network (heads included) matches the base network. The reference hard-coded width
multipliers for its AlexNet-like net (PathNet with M = 16, N = 3: 0.258; PNN: 1.117 / T per column); clbench
finds them for any body and task count with `match_widths`, from a function that counts the parameters of the
network with given widths (e.g. `clbench.approaches.pathnet.network.pathnet_parameter_count`, arithmetic on the
layer plan).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class WidthMatch:
    """The chosen width per layer, the parameter count it gives, and the target."""

    widths: tuple[int, ...]
    parameters: int
    target: int

    @property
    def relative_error(self) -> float:
        """(parameters - target) / target."""
        return (self.parameters - self.target) / self.target


def scaled_widths(widths: Sequence[int], scale: float) -> tuple[int, ...]:
    """Each width times `scale`, rounded to the nearest integer, at least 1."""
    return tuple(max(1, round(scale * width)) for width in widths)


def match_scale(target: int, count: Callable[[float], int], low: float = 1e-3, high: float = 8.0,
                steps: int = 48, nearest: bool = True) -> tuple[float, int]:
    """A multiplier in [low, high] and its count: the count closest to `target` (or the largest <= it).

    `count(scale)` must be non-decreasing in `scale` (a step function, since widths are rounded). Bisection
    brackets the step where the count crosses the target: `below` counts <= target < `above`'s count. With
    `nearest`, the closer side wins (ties: the smaller network); otherwise `below` (the largest count that does
    not exceed the target). Outside the reachable range, the nearest end is returned. 48 halvings of [low, high]
    resolve any integer width step.
    """
    below, above = low, high
    below_count, above_count = count(below), count(above)
    if below_count >= target:
        return below, below_count
    if above_count <= target:
        return above, above_count
    for _ in range(steps):
        middle = (below + above) / 2
        middle_count = count(middle)
        if middle_count <= target:
            below, below_count = middle, middle_count
        else:
            above, above_count = middle, middle_count
    if not nearest or target - below_count <= above_count - target:
        return below, below_count
    return above, above_count


def match_widths(target: int, count: Callable[[tuple[int, ...]], int], base: Sequence[int],
                 tolerance: float = 0.005, low: float = 1e-3, high: float = 8.0) -> WidthMatch:
    """Widths (one per layer, `base` scaled by one multiplier) whose parameter count is closest to `target`.

    Stage 1 scales every layer by one multiplier. If the closest count is still off by more than `tolerance`
    (relative; narrow nets have coarse steps, e.g. PathNet on the 784-100-100 MLP: +3.9%), stage 2 keeps the
    largest uniform widths that stay below the target and widens the last layer alone, whose steps are finer.

    Args:
        target: the parameter count to match (e.g. the base network's, heads included).
        count: the parameter count of the network built with the given widths; non-decreasing in each width.
        base: the base network's width per layer (the multiplier's unit).
        tolerance: relative error accepted from stage 1.
        low, high: the search range of the multipliers.
    """
    base = tuple(base)

    def uniform(scale: float) -> int:
        return count(scaled_widths(base, scale))

    scale, parameters = match_scale(target, uniform, low, high)
    best = WidthMatch(scaled_widths(base, scale), parameters, target)
    if abs(best.relative_error) <= tolerance or len(base) < 2:
        return best
    below_scale, _ = match_scale(target, uniform, low, high, nearest=False)
    inner = scaled_widths(base[:-1], below_scale)

    def last_only(last_scale: float) -> int:
        return count((*inner, *scaled_widths(base[-1:], last_scale)))

    last_scale, refined = match_scale(target, last_only, low, high)
    if abs(refined - target) < abs(parameters - target):
        return WidthMatch((*inner, *scaled_widths(base[-1:], last_scale)), refined, target)
    return best

