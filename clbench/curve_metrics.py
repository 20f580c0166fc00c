"""Metrics of the continual evaluation's curve (`training.eval_every`, `clbench.run.curve`): pure functions of one
run's curve in one evaluation, each returning one value per stage t (length T, NaN where undefined).

The curve is a DataFrame with a row per point and task: `step` (optimiser steps of the whole sequence), `stage`
(1-based, the task being learned), `task` (1-based), `at` (`step`: every K steps during training; `end`: the
task's final weights, at its last step, the end-of-task rows' weights) and `accuracy`. a_u(n) below is task u's
accuracy at point n, points in order of step (a task's `end` point after its last `step` point); |T_u| is the end of
task u (its `end` point).

Sources: De Lange, van de Ven and Tuytelaars, "Continual evaluation for lifelong learning: identifying the stability
gap", ICLR 2023, Section 3 (min-ACC, WC-ACC, WF^w; the equations' numbers are not cited: the paper's text
could not be read here, so each definition follows the authors' code), read in the authors' code
(Mattdl/ContinualEvaluation `src/eval/continual_eval_metrics.py`, bae2a58:
`TaskTrackingMINAccuracyPluginMetric`, `WCACCPluginMetric`, `WindowedForgettingPluginMetric`).
The paper evaluates every iteration; clbench every K steps, so a window of w evaluations spans w K steps.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

WINDOW = 10
"""WF^w's window, in evaluations: the authors' `WindowedForgettingPluginMetric(window_size=10)` (WF^10)."""

GAP_PART = 0.5
"""The stability gap's part of a new task: its first half of optimiser steps, where the drop is sought."""

RECOVERY_TOLERANCE = 0.01
"""A task has recovered when its accuracy is back within 1 point of its accuracy at the task boundary (on 500
images, 5 of them)."""

_AT_ORDER = {"step": 0, "end": 1}


def ordered(curve: pd.DataFrame) -> pd.DataFrame:
    """The curve's points in order: by step, a task's `end` point after the `step` point of the same step."""
    order = curve["at"].map(_AT_ORDER)
    return curve.assign(_order=order).sort_values(["step", "_order"], kind="stable").drop(columns="_order")


def stage_count(curve: pd.DataFrame) -> int:
    return int(curve["stage"].max()) if len(curve) else 0


def end_accuracy(curve: pd.DataFrame, stage: int, task: int) -> float:
    """a_task(|T_stage|): the task's accuracy at the end point of `stage` (NaN if there is none)."""
    rows = curve[(curve["at"] == "end") & (curve["stage"] == stage) & (curve["task"] == task)]
    return float(rows["accuracy"].iloc[-1]) if len(rows) else float("nan")


def min_accuracy(curve: pd.DataFrame) -> np.ndarray:
    """min-ACC^{<=t} = 1/(t-1) sum_{u<t} min_{|T_u| < n <= |T_t|} a_u(n): each earlier task's lowest accuracy after
    it was learned, up to the end of task t, averaged (De Lange et al. 2023's min-ACC_{T_k}; the
    authors' `TaskTrackingMINAccuracyPluginMetric` takes the minimum over the evaluations while another task is
    learned; NaN at t = 1)."""
    size = stage_count(curve)
    values = np.full(size, np.nan)
    for stage in range(2, size + 1):
        lows = [curve[(curve["task"] == task) & (curve["stage"] > task) & (curve["stage"] <= stage)]["accuracy"].min()
                for task in range(1, stage)]
        values[stage - 1] = float(np.mean(lows))
    return values


def worst_case_accuracy(curve: pd.DataFrame) -> np.ndarray:
    """WC-ACC^{<=t} = 1/t a_t(|T_t|) + (1 - 1/t) min-ACC^{<=t}: the current task's accuracy at its end and the
    earlier tasks' minima (De Lange et al. 2023's WC-ACC; the authors' `WCACCPluginMetric.update_WCACC`: the mean
    of the current task's accuracy and the other tasks' minima); at t = 1, a_1(|T_1|)."""
    size = stage_count(curve)
    lows = min_accuracy(curve)
    values = np.full(size, np.nan)
    for stage in range(1, size + 1):
        current = end_accuracy(curve, stage, stage)
        values[stage - 1] = current if stage == 1 else current / stage + (1 - 1 / stage) * lows[stage - 1]
    return values


def largest_windowed_drop(accuracies: np.ndarray, window: int = WINDOW) -> float:
    """max(0, max_{i<j, j-i<window} a_i - a_j): the largest drop within `window` consecutive evaluations (the
    authors' `max_consec_delta_from_window` over every window, floored at 0 as their `max_forgetting` starts)."""
    largest = 0.0
    for first in range(len(accuracies)):
        later = accuracies[first + 1:first + window]
        if len(later):
            largest = max(largest, float(accuracies[first] - later.min()))
    return largest


def windowed_forgetting(curve: pd.DataFrame, window: int = WINDOW) -> np.ndarray:
    """WF^w^{<=t} = 1/t sum_{u<=t} max_{i<j, j-i<w} (a_u(n_i) - a_u(n_j)) over task u's points up to the end of task t
    (from its own training on), w = `WINDOW` evaluations (De Lange et al. 2023's WF^w, per task in the authors'
    `WindowedForgettingPluginMetric`; the mean over the tasks is clbench's)."""
    points = ordered(curve)
    size = stage_count(curve)
    values = np.full(size, np.nan)
    for stage in range(1, size + 1):
        seen = points[points["stage"] <= stage]
        drops = [largest_windowed_drop(seen[seen["task"] == task]["accuracy"].to_numpy(), window)
                 for task in range(1, stage + 1)]
        values[stage - 1] = float(np.mean(drops))
    return values


def gap(curve: pd.DataFrame, stage: int, task: int) -> tuple[float, float]:
    """(depth, steps to recover) of task `task`'s stability gap while task `stage` is learned (task < stage).

    depth = max(0, a_u(|T_{t-1}|) - min a_u(n)) over the `step` points n of the first `GAP_PART` of task t's steps:
    the largest drop below the accuracy at the task boundary. Steps to recover: from the boundary to the first point of
    task t, at or after that minimum, where a_u >= a_u(|T_{t-1}|) - `RECOVERY_TOLERANCE`; 0 without a drop, NaN when
    it does not recover before task t ends.
    """
    boundary = end_accuracy(curve, stage - 1, task)
    if np.isnan(boundary):  # no end point of the previous task (a curve cut short): no boundary to measure from
        return float("nan"), float("nan")
    points = ordered(curve[(curve["stage"] == stage) & (curve["task"] == task)])
    start = int(curve[(curve["stage"] == stage - 1) & (curve["at"] == "end")]["step"].max())
    length = int(points["step"].max()) - start if len(points) else 0
    early = points[(points["at"] == "step") & (points["step"] <= start + GAP_PART * length)]
    if not len(early) or early["accuracy"].min() >= boundary:
        return 0.0, 0.0
    lowest = int(early["accuracy"].to_numpy().argmin())
    after = points.iloc[points.index.get_indexer([early.index[lowest]])[0]:]
    back = after[after["accuracy"] >= boundary - RECOVERY_TOLERANCE]
    steps = float(back["step"].iloc[0] - start) if len(back) else float("nan")
    return float(boundary - early["accuracy"].min()), steps


def stability_gap(curve: pd.DataFrame) -> np.ndarray:
    """1/(t-1) sum_{u<t} depth_u(t): the mean depth of the earlier tasks' stability gaps while task t is learned
    (`gap`; NaN at t = 1)."""
    return _mean_over_earlier(curve, 0)


def gap_recovery_steps(curve: pd.DataFrame) -> np.ndarray:
    """The mean steps to recover (`gap`) of the earlier tasks that recovered while task t was learned (NaN at t = 1
    and where none recovered)."""
    return _mean_over_earlier(curve, 1)


def _mean_over_earlier(curve: pd.DataFrame, which: int) -> np.ndarray:
    size = stage_count(curve)
    values = np.full(size, np.nan)
    for stage in range(2, size + 1):
        found = [gap(curve, stage, task)[which] for task in range(1, stage)]
        kept = [value for value in found if not np.isnan(value)]
        values[stage - 1] = float(np.mean(kept)) if kept else np.nan
    return values


def unrecovered_notes(run_id: str, curve: pd.DataFrame) -> list[str]:
    """One note per run naming the (earlier task u, new task t) pairs whose gap did not recover before task t ended
    (left out of the mean steps to recover); [] when every gap recovered."""
    late = [f"{task} in {stage}" for stage in range(2, stage_count(curve) + 1) for task in range(1, stage)
            if np.isnan(gap(curve, stage, task)[1])]
    if not late:
        return []
    return [f"{run_id}: not recovered from the stability gap before the new task ended (task u in task t, left out "
            f"of the mean steps to recover): {', '.join(late)}"]
