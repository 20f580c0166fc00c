"""The continual evaluation's metrics (`clbench.curve_metrics`) on a hand-made curve, each value worked out by hand
in the comments."""

from __future__ import annotations

import math

import numpy as np
import pytest
from resultbuilders import hand_curve as curve

from clbench.curve_metrics import (
    gap,
    gap_recovery_steps,
    largest_windowed_drop,
    min_accuracy,
    stability_gap,
    unrecovered_notes,
    windowed_forgetting,
    worst_case_accuracy,
)


def test_min_accuracy() -> None:
    # t=2: task 1's lowest after task 1: min(0.6, 0.7, 0.9, 0.95, 0.92) = 0.6 (its own 0.5 at step 2 not counted)
    # t=3: task 1: min(0.6, ..., 0.5) = 0.5; task 2 (stage 3 only): 0.4; mean 0.45
    np.testing.assert_allclose(min_accuracy(curve()), [np.nan, 0.6, 0.45])


def test_worst_case_accuracy() -> None:
    # t=1: 0.9; t=2: 0.9/2 + 0.6/2 = 0.75; t=3: 0.95/3 + (2/3) 0.45 = 0.61667
    np.testing.assert_allclose(worst_case_accuracy(curve()), [0.9, 0.75, 0.95 / 3 + 0.3])


def test_largest_windowed_drop() -> None:
    assert largest_windowed_drop(np.array([0.9, 0.8, 0.5]), window=2) == pytest.approx(0.3)  # 0.8 -> 0.5
    assert largest_windowed_drop(np.array([0.9, 0.8, 0.5]), window=3) == pytest.approx(0.4)  # 0.9 -> 0.5
    assert largest_windowed_drop(np.array([0.1, 0.2, 0.3]), window=3) == 0.0  # no drop: 0, not negative
    assert largest_windowed_drop(np.array([0.4]), window=3) == 0.0


def test_windowed_forgetting() -> None:
    # t=1: task 1 only rises: 0. t=2: task 1 0.9 (end 1) -> 0.6 = 0.3, task 2 rises: mean 0.15.
    # t=3: task 1 0.95 -> 0.5 = 0.45 (3 points apart), task 2 0.9 -> 0.4 = 0.5, task 3: 0; mean 0.31667
    np.testing.assert_allclose(windowed_forgetting(curve(), window=10), [0.0, 0.15, 0.95 / 3])
    # a window of 2 (consecutive points): t=3: task 1 0.85 -> 0.5 = 0.35, task 2 0.5: mean 0.85 / 3
    assert windowed_forgetting(curve(), window=2)[2] == pytest.approx(0.85 / 3)


def test_gap_depth_and_recovery() -> None:
    frame = curve()
    # task 1 in task 2: boundary 0.9 (end of task 1, step 4); first half: steps <= 8: 0.6, 0.7; depth 0.3;
    # back to >= 0.89 at step 10: 6 steps after the boundary
    depth, steps = gap(frame, 2, 1)
    assert depth == pytest.approx(0.3) and steps == 6
    # task 1 in task 3: boundary 0.92; steps <= 16: 0.85, 0.5; depth 0.42; 0.88 < 0.91, 0.93 at step 20: 8 steps
    depth, steps = gap(frame, 3, 1)
    assert depth == pytest.approx(0.42) and steps == 8
    # task 2 in task 3: boundary 0.9; min 0.4; never back to 0.89 before task 3 ends
    depth, steps = gap(frame, 3, 2)
    assert depth == pytest.approx(0.5) and math.isnan(steps)
    np.testing.assert_allclose(stability_gap(frame), [np.nan, 0.3, 0.46])
    np.testing.assert_allclose(gap_recovery_steps(frame), [np.nan, 6.0, 8.0])  # the unrecovered task left out
    [note] = unrecovered_notes("r", frame)
    assert note.endswith("to recover): 2 in 3")


def test_no_drop_is_a_gap_of_0() -> None:
    frame = curve()
    frame.loc[(frame["stage"] == 2) & (frame["task"] == 1), "accuracy"] = 0.95
    assert gap(frame, 2, 1) == (0.0, 0.0)


def test_a_drop_in_the_second_half_is_not_the_gap() -> None:
    frame = curve()
    # task 1 in task 2: stays at 0.95 over the first half (steps <= 8), drops at step 10: forgetting, not the gap
    frame.loc[(frame["stage"] == 2) & (frame["task"] == 1), "accuracy"] = 0.95
    frame.loc[(frame["stage"] == 2) & (frame["task"] == 1) & (frame["step"] == 10), "accuracy"] = 0.2
    assert gap(frame, 2, 1) == (0.0, 0.0)
