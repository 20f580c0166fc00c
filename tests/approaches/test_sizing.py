"""Width matching (clbench.nets.sizing) on hand-made step functions."""

from __future__ import annotations

import pytest

from clbench.nets.sizing import WidthMatch, match_scale, match_widths, scaled_widths


def test_scaled_widths_round_and_stay_positive() -> None:
    assert scaled_widths((64, 128, 2048), 0.258) == (17, 33, 528)
    assert scaled_widths((10, 3), 0.01) == (1, 1)
    assert scaled_widths((100,), 1.0) == (100,)


def steps_of_ten(scale: float) -> int:
    """A step function like a parameter count: 10 per unit of width round(10 * scale)."""
    return 10 * round(10 * scale)


@pytest.mark.parametrize(("target", "nearest", "expected"), [
    (37, True, 40),  # 30 and 40 bracket 37: 40 is closer
    (33, True, 30),
    (35, True, 30),  # a tie goes to the smaller network
    (37, False, 30),  # the largest count not above the target
    (40, True, 40),  # reachable exactly
])
def test_match_scale_brackets_the_step(target: int, nearest: bool, expected: int) -> None:
    scale, count = match_scale(target, steps_of_ten, low=0.01, high=8.0, nearest=nearest)
    assert count == expected == steps_of_ten(scale)


def test_match_scale_outside_the_range_returns_the_nearest_end() -> None:
    assert match_scale(5, steps_of_ten, low=1.0, high=2.0) == (1.0, 100)
    assert match_scale(10_000, steps_of_ten, low=1.0, high=2.0) == (2.0, 200)


def linear_count(widths: tuple[int, ...]) -> int:
    """A first layer 100x as expensive per unit as the last, like an MLP on 784 pixels."""
    first, last = widths
    return 100 * first + last


def test_match_widths_uniform_when_close_enough() -> None:
    match = match_widths(1010, linear_count, (10, 10))
    assert match == WidthMatch((10, 10), 1010, 1010)
    assert match.relative_error == 0.0


def test_match_widths_widens_the_last_layer_when_uniform_steps_are_coarse() -> None:
    # uniform: (5, 5) = 505 or (6, 6) = 606; neither within 0.5% of 555 -> keep (5, .) and widen the last layer
    match = match_widths(555, linear_count, (10, 10))
    assert match.widths == (5, 55)
    assert match.parameters == 555 == linear_count(match.widths)


def test_match_widths_keeps_uniform_when_refinement_does_not_help() -> None:
    # the last layer cannot move the count (cost 0): stage 2 is no better, so the nearest uniform widths stay
    match = match_widths(560, lambda widths: 100 * widths[0], (10, 10))
    assert match.widths == (6, 6) and match.parameters == 600
    assert match.relative_error == pytest.approx(40 / 560)
