"""Regression tests built from hand-made inputs, each aimed at a line that a one-line change could break unseen."""

from __future__ import annotations

import numpy as np
import pytest

from clbench import metrics

NAN = np.nan

# ---------------------------------------------------------------- max-previous forgetting

# stage t (rows) x task u (columns); each old task's column goes up and then down, or down and then up
UP_AND_DOWN = np.array([
    [0.50, NAN, NAN, NAN],
    [0.70, 0.60, NAN, NAN],
    [0.60, 0.90, 0.40, NAN],
    [0.55, 0.30, 0.80, 0.90],
])


def test_max_previous_forgetting_takes_the_best_earlier_stage_not_the_first_or_the_last() -> None:
    # task 0: best before the end 0.70 (stage 1, neither its first nor the last earlier stage), final 0.55
    # task 1: best 0.90 (stage 2), final 0.30; task 2: only 0.40 before the end, final 0.80 (it improved)
    expected = ((0.70 - 0.55) + (0.90 - 0.30) + (0.40 - 0.80)) / 3
    assert metrics.max_previous_forgetting(UP_AND_DOWN) == pytest.approx(expected)


def test_max_previous_forgetting_ignores_stages_before_a_task_was_learned() -> None:
    """Accuracies above the diagonal (a task evaluated before it was trained) are not a 'best'."""
    evaluated_early = np.where(np.isnan(UP_AND_DOWN), 0.99, UP_AND_DOWN)
    expected = ((0.70 - 0.55) + (0.90 - 0.30) + (0.40 - 0.80)) / 3
    assert metrics.max_previous_forgetting(evaluated_early) == pytest.approx(expected)
