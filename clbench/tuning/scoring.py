"""Scoring grid points: the tuning rules, each point's score on one split (validation unless asked), and the
choice among the scored points (the highest; ties to the first in the grid's order)."""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from clbench import metrics
from clbench.errors import ClbenchError
from clbench.report.statistics import REFERENCE_KEYS
from clbench.results import EVALUATIONS, scenario_evaluation, select_split
from clbench.spec.grid import expand_grid, parse_grid_spec

VALIDATION, TEST = "validation", "test"
DEFAULT_RULE = "accuracy"
DEFAULT_SEED = 0
# Scores closer than this to the best tie (accuracies are in [0, 1]; a validation set of a million samples over a
# hundred tasks still moves A^{<=T} by 1e-8): floating-point noise never decides between two points.
TIE_TOLERANCE = 1e-9


class TuningError(ClbenchError):
    """Rows cannot be tuned on, or a tuned file cannot be used; the message says what to do."""


@dataclass(frozen=True)
class TuningRule:
    """How a grid point's validation score is computed from its run's accuracy matrix (higher is better).

    Attributes:
        name: the rule's name in commands and tuned files (`--rule accuracy`).
        formula: the score, as the paper writes it.
        references: the reference runs the score needs, on the same split and seed ("joint", "random").
        score: (T x T accuracy matrix, the joint's T x T matrix or None, the random's length-T A_R or None) -> score.
    """

    name: str
    formula: str
    references: tuple[str, ...]
    score: Callable[[np.ndarray, np.ndarray | None, np.ndarray | None], float]

    @property
    def needs_references(self) -> bool:
        return bool(self.references)


def _final_accuracy(matrix: np.ndarray, joint: np.ndarray | None, random: np.ndarray | None) -> float:
    return float(metrics.average_accuracy(matrix)[-1])


def _final_forgetting_ratio(matrix: np.ndarray, joint: np.ndarray | None, random: np.ndarray | None) -> float:
    assert joint is not None and random is not None  # the rule declares both references
    return float(metrics.forgetting_ratio(matrix, joint, random)[-1])


RULES = {rule.name: rule for rule in (
    TuningRule("accuracy", "A^{<=T} = (1/T) sum_{u<=T} A^{u<=T} (mean validation accuracy after the last task)",
               (), _final_accuracy),
    TuningRule("forgetting-ratio", "rho^{<=T} = (1/T) sum_{u<=T} [(A^{u<=T} - A_R^u) / (A_J^{u<=T} - A_R^u) - 1] "
               "(validation accuracies; A_J joint, A_R random reference)", ("joint", "random"),
               _final_forgetting_ratio),
)}


def tuning_rule(name: str) -> TuningRule:
    """The rule called `name`, or TuningError listing the rules."""
    if name not in RULES:
        raise TuningError(f"tuning rule {name!r}: use one of {', '.join(RULES)}")
    return RULES[name]


@dataclass(frozen=True)
class PointScore:
    """One grid point and its score on one split.

    Attributes:
        values: (key, value text) of each `--grid` option, in the grid's order (`hat.smax`, `"25"`).
        score: the rule's value on the split; NaN when it cannot be computed (then `problem` says why).
        run_id: the run the score comes from (None if there is none).
        config_hash: that run's config hash.
        problem: why there is no score, in words that end with what to do; None when there is one.
    """

    values: tuple[tuple[str, str], ...]
    score: float
    run_id: str | None = None
    config_hash: str | None = None
    problem: str | None = None

    @property
    def overrides(self) -> list[str]:
        """The point as `--set` options: `["hat.smax=25", "hat.c=0.1"]`."""
        return [f"{key}={value}" for key, value in self.values]

    @property
    def label(self) -> str:
        return ", ".join(self.overrides)

    @property
    def scored(self) -> bool:
        return self.problem is None and math.isfinite(self.score)


def grid_points(grid: Sequence[str]) -> list[tuple[tuple[str, str], ...]]:
    """The grid's points in its declared order, each as (key, value text) pairs (`expand_grid`'s order)."""
    if not grid:
        raise TuningError("tuning needs a grid: give at least one --grid KEY=V1,V2,...")
    keys = [parse_grid_spec(spec)[0] for spec in grid]
    return [tuple(zip(keys, (text.split("=", 1)[1] for text in point))) for point in expand_grid(list(grid))]


def score_points(rows: pd.DataFrame, method: str, grid: Sequence[str], rule: str = DEFAULT_RULE,
                 evaluation: str = EVALUATIONS[0], seed: int = DEFAULT_SEED, overrides: Sequence[str] = (),
                 split: str = VALIDATION) -> list[PointScore]:
    """Every grid point of `method` scored by `rule` on `split` (validation unless asked), in the grid's order.

    A point's run is the run of `method` at `seed` whose `--set` options are exactly `overrides` followed by the
    point's `KEY=VALUE` (as `clbench train --grid` stores them). A point without such a run, with an incomplete
    matrix, with several such runs or without its references gets a NaN score and a `problem`. With no row of
    `split` at all the whole call is refused (TuningError): there is no fallback to another split.
    """
    chosen_rule = tuning_rule(rule)
    if evaluation not in EVALUATIONS:
        raise TuningError(f"evaluation {evaluation!r}: use one of {', '.join(EVALUATIONS)}")
    points = grid_points(grid)
    own = select_split(rows, split)
    own = own[(own["seed"] == seed) & (own["evaluation"] == evaluation)]
    runs = own[own["method"] == method]
    if runs.empty:
        raise TuningError(_no_rows_message(rows, method, seed, split, evaluation))
    by_overrides: dict[tuple[str, ...], list[str]] = {}
    for run_id, text in runs.drop_duplicates("run_id")[["run_id", "overrides"]].itertuples(index=False):
        by_overrides.setdefault(tuple(json.loads(text) if isinstance(text, str) else []), []).append(str(run_id))
    matrices = metrics.accuracy_matrices(runs)
    references = {name: own[own["method"] == name] for name in chosen_rule.references}
    return [_score_point(point, by_overrides.get((*overrides, *(f"{k}={v}" for k, v in point)), []), runs,
                         matrices, references, chosen_rule, split, seed) for point in points]


def _no_rows_message(rows: pd.DataFrame, method: str, seed: int, split: str, evaluation: str) -> str:
    names = rows["benchmark"].dropna().unique() if "benchmark" in rows else []
    benchmark = shlex.quote(str(names[0])) if len(names) == 1 else "BENCHMARK"
    if split == VALIDATION and ("split" not in rows or not (rows["split"] == VALIDATION).any()):
        return (f"no validation rows in these results (they hold test accuracies only: written before validation "
                f"evaluation, or trained without a validation split); tune on validation with `clbench tune "
                f"{benchmark} -m {method} --grid KEY=V1,V2,...`: a test accuracy is never used to choose")
    return (f"no {split} rows of {method} at seed {seed} ({evaluation}); train the grid with `clbench tune "
            f"{benchmark} -m {method} --grid KEY=V1,V2,... --seed {seed}`")


def _score_point(point: tuple[tuple[str, str], ...], run_ids: list[str], runs: pd.DataFrame,
                 matrices: dict[str, np.ndarray], references: dict[str, pd.DataFrame], rule: TuningRule,
                 split: str, seed: int) -> PointScore:
    label = ", ".join(f"{key}={value}" for key, value in point)
    if not run_ids:
        return PointScore(point, math.nan, problem=f"point {label} has no {split} rows at seed {seed}; train it")
    if len(run_ids) > 1:
        return PointScore(point, math.nan, problem=f"point {label} has {len(run_ids)} runs at seed {seed} "
                          f"({', '.join(sorted(run_ids))}); keep one of them in this results folder")
    run_id = run_ids[0]
    run = runs[runs["run_id"] == run_id].iloc[0]
    found = PointScore(point, math.nan, run_id, str(run["config_hash"]))
    matrix = matrices.get(run_id)
    if matrix is None or not metrics.is_complete_matrix(matrix):
        return _with_problem(found, f"run {run_id} ({label}) has an incomplete {split} accuracy matrix; re-run it")
    matched = {}
    for name, frame in references.items():
        reference, problem = _reference_matrix(frame, name, run, split, matrix.shape[0])
        if problem is not None:
            return _with_problem(found, f"run {run_id} ({label}): {problem}")
        matched[name] = reference
    joint = matched.get("joint")
    if "random" not in matched:
        return PointScore(point, rule.score(matrix, joint, None), run_id, found.config_hash)
    # A_R per stage in the task-agnostic evaluation, the paper's A_R^u otherwise (`clbench.metrics.random_reference`)
    per_stage = metrics.chance_varies_by_stage(run["evaluation"], run.get("scenario"))
    random = metrics.random_reference(matched["random"], per_stage=per_stage)
    problem = _undefined_ratio(joint, random, runs[runs["run_id"] == run_id])
    if problem is not None:
        return _with_problem(found, f"run {run_id} ({label}): {problem}")
    return PointScore(point, rule.score(matrix, joint, random), run_id, found.config_hash)


def _undefined_ratio(joint: np.ndarray | None, random: np.ndarray, rows: pd.DataFrame) -> str | None:
    """Why the forgetting ratio after the last task is undefined for a point (its joint reference does not clearly
    beat the random one on some task, `clbench.metrics.undefined_ratio_cells`), or None."""
    if joint is None:
        return None
    size = joint.shape[0]
    counts = rows[rows["stage"] == size].groupby("task")["n_test"].first() if "n_test" in rows else pd.Series()
    n_test = np.array([counts.get(task, np.nan) for task in range(1, size + 1)], dtype=float)
    margin = metrics.reference_gap_margin(joint, random, n_test)
    undefined = metrics.undefined_ratio_cells(joint, random, margin)[-1]
    if not undefined.any():
        return None
    task = int(np.argmax(undefined))
    chance = metrics.chance_matrix(random, joint.shape)[-1, task]
    return (f"the forgetting ratio is undefined after the last task: on task {task + 1} the joint reference "
            f"({joint[-1, task]:.3f}) does not beat the random one ({chance:.3f}) by more than "
            f"{metrics.REFERENCE_GAP_STANDARD_ERRORS:g} standard errors; choose by `--select accuracy`")


def _with_problem(point: PointScore, problem: str) -> PointScore:
    return PointScore(point.values, math.nan, point.run_id, point.config_hash, problem)


def _reference_matrix(frame: pd.DataFrame, name: str, run: pd.Series, split: str,
                      size: int) -> tuple[np.ndarray | None, str | None]:
    """The T x T matrix of the run's `name` reference on `split` (same seed, same `REFERENCE_KEYS` value), or None
    and why not. Several matching runs are used only when their matrices are equal (never chosen by order)."""
    key = REFERENCE_KEYS[name]
    value = run[key]
    if not isinstance(value, str) or not value:
        return None, f"it has no {key} (written by an older clbench); re-run it with --force"
    matching = frame[frame[key] == value]
    found = [matrix for matrix in metrics.accuracy_matrices(matching).values()
             if metrics.is_complete_matrix(matrix) and matrix.shape[0] >= size]
    if not found:
        return None, (f"no complete {name} reference on {split} at seed {int(run['seed'])} with its {key} "
                      f"{value}; train it with `clbench tune` (it trains the references the rule needs)")
    if any(not np.array_equal(other, found[0], equal_nan=True) for other in found[1:]):
        return None, (f"{len(found)} {name} references match it and their {split} accuracies differ; keep one of "
                      f"them in this results folder")
    return found[0][:size, :size], None


def grid_ends(grid: Sequence[str], chosen: Sequence[tuple[str, str]],
              special: Mapping[str, Collection[float]] | None = None) -> list[tuple[str, str, str, list[str]]]:
    """(key, chosen value, "lowest" or "highest", the key's values) of each numeric `--grid` key of two or more
    values whose chosen value is the smallest or largest of them: the best value may lie beyond the grid there.
    Keys with a value that is not a number (`true`, `[100,100]`) have no ends and are left out. `special`: per key
    the values that mean something other than their number (BiC's lamb -1: lambda = old / seen classes; a field's
    `special`), which are no end of the grid: a chosen one has no note, and the ends are those of the others."""
    values = dict(parse_grid_spec(spec) for spec in grid)
    ends = []
    for key, value in chosen:
        meant = set((special or {}).get(key, ()))
        numbers = [_number(text) for text in values.get(key, [])]
        if any(number is None for number in numbers):
            continue
        picked = _number(value)
        numbers = [number for number in numbers if number not in meant]
        if len(numbers) < 2 or picked in meant:
            continue
        if picked == min(numbers):  # type: ignore[type-var]
            ends.append((key, value, "lowest", values[key]))
        elif picked == max(numbers):  # type: ignore[type-var]
            ends.append((key, value, "highest", values[key]))
    return ends


def _number(text: str) -> float | None:
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def tuning_evaluation(rows: pd.DataFrame, method: str, scenario: str | None,
                      asked: str | None = None) -> tuple[str, list[str]]:
    """The evaluation `method`'s points are scored in, and notes for the tuning table: `asked` (`--evaluation`) if
    given, noted when it is not the one the scenario's comparison reports; else the scenario's
    (`clbench.results.scenario_evaluation`), or task-aware, noted, for a method that stores no rows of it (one that
    needs the task id)."""
    own = scenario_evaluation(scenario)
    if asked is not None:
        return asked, ([] if asked == own or scenario == "domain" else [
            f"{method}: chosen by {asked} (--evaluation); the {scenario or 'task'} scenario's comparison reports "
            f"{own}"])
    stored = rows[rows["method"] == method]["evaluation"] if "evaluation" in rows else pd.Series(dtype=object)
    if (stored == own).any() or not (stored == EVALUATIONS[0]).any():
        return own, []
    return EVALUATIONS[0], [f"{method} stores {EVALUATIONS[0]} rows only (it needs the task id): chosen by "
                            f"{EVALUATIONS[0]}, not the {own} evaluation the {scenario} scenario reports"]


def select(points: Sequence[PointScore]) -> PointScore:
    """The point with the highest score; ties (within `TIE_TOLERANCE`) go to the first in the grid's order.

    Every point must be scored: a point without a score refuses the choice (TuningError with its `problem`),
    never a choice among the others.
    """
    if not points:
        raise TuningError("no grid points to choose from")
    unscored = [point for point in points if not point.scored]
    if unscored:
        why = unscored[0].problem or f"point {unscored[0].label} has no finite score"
        more = f" (and {len(unscored) - 1} more points)" if len(unscored) > 1 else ""
        raise TuningError(f"cannot choose: {why}{more}")
    return best_point(points)


def best_point(points: Sequence[PointScore]) -> PointScore:
    """The first of `points` (in grid order) whose score is within `TIE_TOLERANCE` of the best (all scored)."""
    best = max(point.score for point in points)
    return next(point for point in points if point.score >= best - TIE_TOLERANCE)
