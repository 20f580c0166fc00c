"""The validation winner against the point the test split would have chosen, per tuned file (`report --tuning`):
the choice is made on validation only, and the report warns where test would have chosen another point."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from clbench.tuning.scoring import TEST, PointScore, TuningError, best_point, score_points
from clbench.tuning.tuned_file import TunedChoice, file_sha256, grid_end_notes, read_tuned_file, tuned_sha256


@dataclass(frozen=True)
class WinnerComparison:
    """The validation winner against the point the test split would have chosen (`report --tuning`).

    Attributes:
        validation: the point chosen on validation.
        test_scores: every grid point scored on test, in the grid's order (NaN with a `problem` where missing).
        test: the point the test split would choose under the same rule and tie rule; None when a point has no
            test score (then `missing` lists them and there is nothing to compare).
    """

    validation: PointScore
    test_scores: tuple[PointScore, ...]
    test: PointScore | None

    @property
    def missing(self) -> list[PointScore]:
        return [point for point in self.test_scores if not point.scored]

    @property
    def disagrees(self) -> bool:
        """True when choosing on test would have picked another point (a warning for the report)."""
        return self.test is not None and self.test.values != self.validation.values


def compare_winners(validation: PointScore, test_scores: Sequence[PointScore]) -> WinnerComparison:
    """The test winner (same tie rule) next to the validation winner; no test winner unless every point has a test
    score."""
    complete = bool(test_scores) and all(point.scored for point in test_scores)
    return WinnerComparison(validation, tuple(test_scores), best_point(test_scores) if complete else None)


def compare_with_test(rows: pd.DataFrame, choice: TunedChoice) -> WinnerComparison:
    """Score the choice's grid on the test rows (same method, seed, rule, evaluation, options) and compare winners.

    The rows never change the choice: the validation winner is the one the tuned file holds.
    """
    chosen = next(point for point in choice.points if point.values == choice.chosen)
    try:
        test_scores = score_points(rows, choice.method, choice.grid, choice.rule, choice.evaluation,
                                   choice.tuning_seed, choice.overrides, split=TEST)
    except TuningError:
        test_scores = [PointScore(point.values, math.nan, problem=f"point {point.label} has no test rows")
                       for point in choice.points]
    return compare_winners(chosen, test_scores)


def tuning_points(rows: pd.DataFrame, paths: Sequence[Path]) -> tuple[pd.DataFrame, list[str]]:
    """For `report --tuning`: one row per tuned file and grid point (file, method, rule, evaluation, tuning_seed,
    point, validation_score, test_score, chosen, test_choice, tuned_seeds: the seeds of the runs in `rows` that
    `clbench train --tuned` trained with the file), and notes: a file that cannot be used, a chosen value at an end
    of its grid (`grid_end_notes`), and each file whose test split would have chosen another point
    (`compare_with_test`), or that has no test score for some points."""
    table: list[dict[str, Any]] = []
    notes: list[str] = []
    for path in paths:
        try:
            choice = read_tuned_file(path)
        except TuningError as error:
            notes.append(str(error))
            continue
        comparison = compare_with_test(rows, choice)
        identities = [tuned_sha256(path), file_sha256(path)]  # the bytes': runs stored before tuned_sha256
        tuned = rows[rows["tuned_sha256"].isin(identities)] if "tuned_sha256" in rows else rows.iloc[0:0]
        seeds = ",".join(str(int(seed)) for seed in sorted(tuned["seed"].unique()))
        for point, test in zip(choice.points, comparison.test_scores):
            table.append({"file": Path(path).name, "method": choice.method, "rule": choice.rule,
                          "evaluation": choice.evaluation, "tuning_seed": choice.tuning_seed, "point": point.label,
                          "validation_score": point.score, "test_score": test.score,
                          "chosen": point.values == choice.chosen,
                          "test_choice": comparison.test is not None and point.values == comparison.test.values,
                          "tuned_seeds": seeds})
        chosen = ", ".join(choice.chosen_overrides)
        notes += [f"{note} ({Path(path).name})" for note in grid_end_notes(choice)]
        if comparison.disagrees:
            assert comparison.test is not None
            notes.append(f"{choice.method} ({Path(path).name}): the test split would have chosen "
                         f"{comparison.test.label}, not {chosen}; the choice is made on validation only (report the "
                         f"validation winner's test numbers)")
        elif comparison.missing:
            notes.append(f"{choice.method} ({Path(path).name}): {len(comparison.missing)} grid points have no test "
                         f"score at seed {choice.tuning_seed} ({comparison.missing[0].problem}); no test winner to "
                         f"compare with")
    return pd.DataFrame(table, columns=TUNING_POINT_COLUMNS), notes


TUNING_POINT_COLUMNS = ("file", "method", "rule", "evaluation", "tuning_seed", "point", "validation_score",
                        "test_score", "chosen", "test_choice", "tuned_seeds")
