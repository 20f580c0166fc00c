"""Metrics on accuracy matrices: pure functions that never mutate their inputs.

An accuracy matrix `A` is T x T: `A[t, u]` is the test accuracy on task u after training task t (0-based
here; stages and tasks are 1-based in stored results). Entries above the diagonal are NaN (not measured).
Peers disagree on what "forgetting" means; every variant here is named for what it computes.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def accuracy_matrix(rows: pd.DataFrame) -> np.ndarray:
    """The T x T matrix of one run from its long-format rows (columns stage, task, accuracy; 1-based).

    T is the largest stage; missing entries (and the upper triangle) are NaN.
    """
    return next(iter(accuracy_matrices(rows.assign(run_id="run")).values()))


def accuracy_matrices(frame: pd.DataFrame) -> dict[str, np.ndarray]:
    """The T x T accuracy matrix of every run in `frame` (long rows: run_id, stage, task, accuracy), by run id.

    One vectorised assignment for all runs; T is each run's largest stage or task, missing entries are NaN.
    """
    if frame.empty:
        return {}
    codes, run_ids = pd.factorize(frame["run_id"], sort=True)
    stages, tasks = frame["stage"].to_numpy(int), frame["task"].to_numpy(int)
    size = int(max(stages.max(), tasks.max()))
    cube = np.full((len(run_ids), size, size), np.nan)
    cube[codes, stages - 1, tasks - 1] = frame["accuracy"].to_numpy(float)
    sizes = np.zeros(len(run_ids), dtype=int)
    np.maximum.at(sizes, codes, np.maximum(stages, tasks))
    return {run_id: cube[i, : sizes[i], : sizes[i]] for i, run_id in enumerate(run_ids)}


def run_matrices(frame: pd.DataFrame) -> dict[str, np.ndarray]:
    """The accuracy matrix of every run in `frame`, by run id (see `accuracy_matrices`)."""
    return accuracy_matrices(frame)


def is_complete_matrix(matrix: np.ndarray) -> bool:
    """True if every entry on and below the diagonal is a finite number."""
    return bool(np.isfinite(matrix[np.tril_indices(matrix.shape[0])]).all())


def random_reference(random_matrix: np.ndarray) -> np.ndarray:
    """A_R^u, the stratified random classifier's accuracy on task u: the mean of column u over t >= u.

    The random classifier is re-drawn at each stage, so averaging its column reduces the noise of the
    reference (the reference code used one draw).
    """
    return np.nanmean(np.where(np.tril(np.ones_like(random_matrix, dtype=bool)), random_matrix, np.nan), axis=0)


def forgetting_ratio_matrix(accuracy: np.ndarray, joint: np.ndarray, random: np.ndarray) -> np.ndarray:
    """rho^{u<=t} = (A^{u<=t} - A_R^u) / (A_J^{u<=t} - A_R^u) - 1 (the paper's Eq. for the forgetting ratio).

    Args:
        accuracy: T x T accuracy matrix of the approach.
        joint: T x T accuracy matrix of the joint (multitask) reference, same seed.
        random: length-T accuracies of the random stratified reference per task (see `random_reference`).

    Returns:
        T x T matrix, NaN above the diagonal and where the joint and random references are equal.
    """
    denominator = joint - random[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = (accuracy - random[None, :]) / denominator - 1.0
    ratio = np.where(np.isclose(denominator, 0.0), np.nan, ratio)
    return np.where(np.tril(np.ones_like(ratio, dtype=bool)), ratio, np.nan)


def forgetting_ratio(accuracy: np.ndarray, joint: np.ndarray, random: np.ndarray) -> np.ndarray:
    """rho^{<=t} = (1/t) sum_{u<=t} rho^{u<=t}, one value per stage t (length T)."""
    ratio = forgetting_ratio_matrix(accuracy, joint, random)
    return np.array([ratio[t, : t + 1].mean() for t in range(ratio.shape[0])])


def average_accuracy(accuracy: np.ndarray) -> np.ndarray:
    """A^{<=t} = (1/t) sum_{u<=t} A^{u<=t}, the mean accuracy over the tasks seen so far, per stage t."""
    return np.array([accuracy[t, : t + 1].mean() for t in range(accuracy.shape[0])])


def backward_transfer(accuracy: np.ndarray) -> float:
    """BWT = 1/(T-1) sum_{u<T} (A^{u<=T} - A^{u<=u}) (Lopez-Paz & Ranzato 2017); negative means forgetting.

    NaN for a single task.
    """
    size = accuracy.shape[0]
    if size < 2:
        return float("nan")
    final, diagonal = accuracy[size - 1, : size - 1], np.diag(accuracy)[: size - 1]
    return float((final - diagonal).mean())


def max_previous_forgetting(accuracy: np.ndarray) -> float:
    """Forgetting as in Chaudhry et al. (2018): 1/(T-1) sum_{u<T} max_{t<T} (A^{u<=t}) - A^{u<=T}.

    The drop from the best accuracy a task ever had to its accuracy at the end; NaN for a single task.
    """
    size = accuracy.shape[0]
    if size < 2:
        return float("nan")
    best = np.array([np.nanmax(accuracy[u: size - 1, u]) for u in range(size - 1)])
    return float((best - accuracy[size - 1, : size - 1]).mean())
