"""Metrics on accuracy matrices: pure functions that never mutate their inputs.

An accuracy matrix `A` is T x T: `A[t, u]` is the test accuracy on task u after training task t (0-based
here; stages and tasks are 1-based in stored results). Entries above the diagonal are NaN (not measured).
Peers disagree on what "forgetting" means; every variant here is named for what it computes. The forgetting of
task u after the last stage T, as each peer's code computes it (A^{u<=l}: the accuracy on task u after stage l):

| peer (file read, commit)                      | max over stages l of A^{u<=l}, minus A^{u<=T}  | mean over  |
|-----------------------------------------------|------------------------------------------------|------------|
| clbench `forgetting` (`forgetting_by_stage`)  | u <= l < T: earlier stages only (Chaudhry 2018)| u < T      |
| FACIL src/main_incremental.py (e09d2c8)       | l < T: `acc_taw[:t, u].max(0) - acc_taw[t, u]` | u < T      |
| clbench `forgetting-mammoth`                  | u-1 <= l <= T: every stage, the last included  | u < T      |
| Mammoth utils/metrics.py `forgetting`,        | every row (stage), the last included, and the  | u < T      |
| utils/training.py (e75a491)                   | evaluation just before u is learned            |            |
| RaptorMai/online-continual-learning           | every stage, the last included (every task is  | every u    |
| experiment/metrics.py (6175ca0)               | evaluated at every stage, before it is learned)| (u = T too)|
| Avalanche avalanche/evaluation/metrics/       | no max: A^{u<=u} (right after learning u)      | u < T      |
| forgetting_bwt.py `StreamForgetting`,         | minus A^{u<=T}, i.e. -BWT's terms              |            |
| evaluation/functional.py (eb075be3)           |                                                |            |
| GMvandeVen/continual-learning main.py,        | none: average accuracy only                    |            |
| eval/evaluate.py (e6d795a)                    |                                                |            |
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

    One vectorised assignment for all runs; T is each run's largest stage or task, missing entries are NaN. Of
    results-schema-2 rows only those of learned tasks are taken (stages t >= 1, tasks u <= t: stage 0 and the rows
    above the diagonal are not part of this matrix), and rows of both evaluations, or of both splits (results
    schema 3: test and validation), are refused (ValueError): select one first, never a mix.
    """
    if "evaluation" in frame and frame["evaluation"].nunique() > 1:
        raise ValueError("rows of both evaluations (task-aware and task-agnostic): select one before building "
                         "accuracy matrices")
    if "split" in frame and frame["split"].nunique() > 1:
        raise ValueError("rows of both splits (test and validation): select one (`clbench.results.select_split`) "
                         "before building accuracy matrices")
    if not frame.empty and (frame["stage"] < 1).any() | (frame["task"] > frame["stage"]).any():
        frame = frame[(frame["stage"] >= 1) & (frame["task"] <= frame["stage"])]
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


def diverged_stage(stages: np.ndarray, losses: np.ndarray) -> int | None:
    """The first stage at which a run's evaluation loss is not finite, when every loss at initialisation (stage 0)
    is: where its network diverged (NaN or infinite weights give a NaN or infinite loss on every later evaluation).
    None: no such stage, or a run without a finite loss at initialisation (the random reference records none).
    `stages` and `losses`: one value per row of the run, (N,) each."""
    stages, losses = np.asarray(stages), np.asarray(losses, dtype=float)
    at_start = losses[stages == 0]
    if at_start.size == 0 or not np.isfinite(at_start).all():
        return None
    broken = stages[~np.isfinite(losses)]
    return int(broken.min()) if broken.size else None


def random_reference(random_matrix: np.ndarray, per_stage: bool = False) -> np.ndarray:
    """A_R, the stratified random classifier's accuracy, from the random run's T x T matrix.

    Task-aware (the default; the paper's A_R^u, Serra et al. 2018, Sec. 4 "Experiments", Eq. `eq:accuracy`: "a
    random stratified classifier using the class information of task tau"): one value per task u, the mean of
    column u over t >= u (length T). The classifier guesses among task u's own classes at every stage, so its
    accuracy on u does not depend on t, and averaging its re-drawn column reduces the noise (the reference code
    used one draw). The domain scenario (one head, the same classes in every task) is the same case.

    `per_stage` (the task-agnostic evaluation): A_R^{u<=t}, the random run's accuracy on task u at stage t itself
    (T x T, NaN above the diagonal). There the classifier guesses among every class seen so far, so its chance
    level falls as tasks are added (1/2, 1/4, ... of task u's images for 2 classes a task), and a reference taken
    at another stage would no longer be the chance level of the stage it is compared at.
    """
    lower = np.where(np.tril(np.ones_like(random_matrix, dtype=bool)), random_matrix, np.nan)
    return lower if per_stage else np.nanmean(lower, axis=0)


def chance_varies_by_stage(evaluation: str, scenario: str | None) -> bool:
    """True where A_R is taken per stage (`random_reference(..., per_stage=True)`): the task-agnostic evaluation,
    whose chance level falls as classes are added; False for the paper's A_R^u (task-aware) and for the domain
    scenario (one head over the same classes at every stage, stored under either evaluation's name)."""
    return evaluation == "task-agnostic" and scenario != "domain"


# How many standard errors the joint reference must beat the random one by for a forgetting ratio to be defined.
REFERENCE_GAP_STANDARD_ERRORS = 3.0


def reference_gap_margin(joint: np.ndarray, random: np.ndarray, n_test: np.ndarray,
                         standard_errors: float = REFERENCE_GAP_STANDARD_ERRORS) -> np.ndarray:
    """The smallest A_J - A_R that is clearly positive: k sqrt(A_J (1 - A_J) / n_u + A_R (1 - A_R) / n_u).

    The standard error of the difference of two accuracies measured on task u's n_u test samples (binomial),
    times k = `standard_errors` (3: a gap below it is within the test set's noise of none). Where n_u is unknown
    (NaN, results written before `n_test` was stored) the margin is 0: only a positive gap is then required.

    Args:
        joint: T x T accuracies of the joint reference.
        random: length-T A_R^u, or T x T A_R^{u<=t} (see `random_reference`).
        n_test: length-T number of test samples of each task u.
    """
    chance = chance_matrix(random, joint.shape)
    spread = joint * (1.0 - joint) / n_test[None, :] + chance * (1.0 - chance) / n_test[None, :]
    margin = standard_errors * np.sqrt(np.clip(spread, 0.0, None))
    return np.where(np.isnan(margin) & ~np.isnan(joint), 0.0, margin)


def chance_matrix(random: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """A_R as a T x T matrix: a length-T A_R^u repeated over the stages, a T x T A_R^{u<=t} as it is."""
    return np.broadcast_to(random[None, :], shape) if random.ndim == 1 else random


def undefined_ratio_cells(joint: np.ndarray, random: np.ndarray, margin: np.ndarray | None = None) -> np.ndarray:
    """Where on and below the diagonal rho^{u<=t} is undefined: A_J^{u<=t} - A_R is not above `margin` (0 if None).

    A joint reference at or below chance leaves nothing for the ratio to measure against: a near-zero or negative
    denominator turns the test set's noise into any number (+7.3 for the random run itself, 123 for iCaRL).
    """
    gap = joint - chance_matrix(random, joint.shape)
    limit = np.zeros_like(gap) if margin is None else margin
    with np.errstate(invalid="ignore"):
        undefined = ~(gap > limit) | np.isclose(gap, 0.0)
    return undefined & np.tril(np.ones_like(undefined, dtype=bool))


def forgetting_ratio_matrix(accuracy: np.ndarray, joint: np.ndarray, random: np.ndarray,
                            margin: np.ndarray | None = None) -> np.ndarray:
    """rho^{u<=t} = (A^{u<=t} - A_R) / (A_J^{u<=t} - A_R) - 1 (the paper's Eq. `eq:accuracy`, Sec. 4).

    Args:
        accuracy: T x T accuracy matrix of the approach.
        joint: T x T accuracy matrix of the joint (multitask) reference, same seed.
        random: the random stratified reference (see `random_reference`): length-T A_R^u (task-aware, the
            paper's), or T x T A_R^{u<=t} (task-agnostic: the chance level of each stage).
        margin: T x T smallest clearly positive A_J - A_R (`reference_gap_margin`); None: any positive gap.

    Returns:
        T x T matrix, NaN above the diagonal and where the ratio is undefined (`undefined_ratio_cells`).
    """
    chance = chance_matrix(random, accuracy.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = (accuracy - chance) / (joint - chance) - 1.0
    ratio = np.where(undefined_ratio_cells(joint, random, margin), np.nan, ratio)
    return np.where(np.tril(np.ones_like(ratio, dtype=bool)), ratio, np.nan)


def forgetting_ratio(accuracy: np.ndarray, joint: np.ndarray, random: np.ndarray,
                     margin: np.ndarray | None = None) -> np.ndarray:
    """rho^{<=t} = (1/t) sum_{u<=t} rho^{u<=t}, one value per stage t (length T); NaN at a stage where any
    rho^{u<=t} is undefined (never a mean over the defined tasks only)."""
    ratio = forgetting_ratio_matrix(accuracy, joint, random, margin)
    return np.array([ratio[t, : t + 1].mean() for t in range(ratio.shape[0])])


def average_accuracy(accuracy: np.ndarray) -> np.ndarray:
    """A^{<=t} = (1/t) sum_{u<=t} A^{u<=t}, the mean accuracy over the tasks seen so far, per stage t."""
    return np.array([accuracy[t, : t + 1].mean() for t in range(accuracy.shape[0])])


def backward_transfer_by_stage(accuracy: np.ndarray) -> np.ndarray:
    """BWT^{<=t} = 1/(t-1) sum_{u<t} (A^{u<=t} - A^{u<=u}), one value per stage t (length T); NaN at t = 1.

    Backward transfer of Lopez-Paz & Ranzato (2017, "Gradient Episodic Memory for Continual Learning":
    BWT = 1/(T-1) sum_{i=1}^{T-1} R_{T,i} - R_{i,i}), taken at every stage t as if the sequence ended there:
    the accuracy on each earlier task now minus right after learning it. Negative means forgetting. Undefined
    (NaN, not 0) for t = 1, where there is no earlier task.
    """
    values = np.full(accuracy.shape[0], np.nan)
    for t in range(1, accuracy.shape[0]):
        values[t] = float((accuracy[t, :t] - np.diag(accuracy)[:t]).mean())
    return values


def backward_transfer(accuracy: np.ndarray) -> float:
    """BWT = 1/(T-1) sum_{u<T} (A^{u<=T} - A^{u<=u}) (Lopez-Paz & Ranzato 2017); negative means forgetting.

    The last stage of `backward_transfer_by_stage`; NaN for a single task.
    """
    return float(backward_transfer_by_stage(accuracy)[-1])


def forgetting_by_stage(accuracy: np.ndarray) -> np.ndarray:
    """F^{<=t} = 1/(t-1) sum_{u<t} [ max_{u<=l<t} A^{u<=l} - A^{u<=t} ], one value per stage t; NaN at t = 1.

    The forgetting measure of Chaudhry et al. (2018, "Riemannian Walk for Incremental Learning: Understanding
    Forgetting and Intransigence": f_j^k = max_{l in {1..k-1}} a_{l,j} - a_{k,j} for j < k, and
    F_k = 1/(k-1) sum_{j<k} f_j^k): the best earlier accuracy on each task minus its accuracy now, averaged over
    the tasks before the last. Positive means forgetting. Choice where the paper is ambiguous: its max runs over
    every earlier stage l, but a task is not learned before its own stage, so only the stages l >= u (from the
    task's own stage on) count; an accuracy stored above the diagonal (a task evaluated before it is learned)
    is never taken. Undefined (NaN) for t = 1.
    """
    values = np.full(accuracy.shape[0], np.nan)
    for t in range(1, accuracy.shape[0]):
        best = np.array([accuracy[u:t, u].max() for u in range(t)])
        values[t] = float((best - accuracy[t, :t]).mean())
    return values


def max_previous_forgetting(accuracy: np.ndarray) -> float:
    """Forgetting as in Chaudhry et al. (2018): 1/(T-1) sum_{u<T} max_{u<=t<T} (A^{u<=t}) - A^{u<=T}.

    The drop from the best accuracy a task ever had to its accuracy at the end (the last stage of
    `forgetting_by_stage`); NaN for a single task.
    """
    return float(forgetting_by_stage(accuracy)[-1])


def mammoth_forgetting_by_stage(accuracy: np.ndarray) -> np.ndarray:
    """F_M^{<=t} = 1/(t-1) sum_{u<t} [ max_{u-1<=l<=t} A^{u<=l} - A^{u<=t} ], one value per stage t; NaN at t = 1.

    The forgetting of Mammoth (aimagelab/mammoth, utils/metrics.py `forgetting` at e75a491):
    `maxx = np.max(results, axis=0)` over the rows of its accuracy matrix (one row per stage, the last included),
    then `mean(maxx[i] - results[-1][i] for i < n_tasks - 1)`. Unlike `forgetting_by_stage` (Chaudhry et al.,
    earlier stages only), the max also runs over the current stage t, so a task whose accuracy rose counts 0,
    never negative: A = [[90, -], [95, 80]] gives F_M = 95 - 95 = 0 here, F = 90 - 95 = -5 there. Positive
    means forgetting; the last task is left out of the mean, as there.

    What Mammoth's training loop puts in its rows is reproduced too (utils/training.py at e75a491): with
    `--enable_other_metrics` (which forgetting needs) it evaluates each task u once just before learning it
    and appends that accuracy to the previous stage's row (`results[cur_task - 1] + accs[0]`, for forward
    transfer), so the max also sees A^{u<=u-1}, the entry just above the diagonal, where `accuracy` has it
    (finite); entries further above the diagonal are never taken (Mammoth's rows do not have them). Mammoth pads
    its unmeasured entries with 0.0, which never raises a max of accuracies (>= 0); here they are NaN and left
    out. The value at stage t is what Mammoth computes on the sub-matrix of stages <= t, i.e. had the run
    stopped after task t (its last row then has no entry above the diagonal). Mammoth's accuracies are in
    percent, these in the units of `accuracy` (fractions in stored results; the report prints them x 100).
    Undefined (NaN) for t = 1, where Mammoth's mean is over no task.
    """
    size = accuracy.shape[0]
    values = np.full(size, np.nan)
    for t in range(1, size):
        best = np.array([_mammoth_best(accuracy, u, t) for u in range(t)])
        values[t] = float((best - accuracy[t, :t]).mean())
    return values


def _mammoth_best(accuracy: np.ndarray, task: int, stage: int) -> float:
    """max_{u-1<=l<=t} A^{u<=l} of `task` u over stages up to `stage` t (0-based), the entry just above the
    diagonal only where it is finite."""
    column = accuracy[task : stage + 1, task]
    before = accuracy[task - 1, task] if task > 0 else np.nan
    return float(np.max(np.append(column, before) if np.isfinite(before) else column))


def mammoth_forgetting(accuracy: np.ndarray) -> float:
    """Mammoth's forgetting of the whole sequence: 1/(T-1) sum_{u<T} max_{u-1<=l<=T} (A^{u<=l}) - A^{u<=T}.

    The last stage of `mammoth_forgetting_by_stage`; NaN for a single task.
    """
    return float(mammoth_forgetting_by_stage(accuracy)[-1])


def intransigence(accuracy: np.ndarray, joint: np.ndarray) -> np.ndarray:
    """I^{<=t} = 1/t sum_{k<=t} (A_J^{k<=k} - A^{k<=k}), one value per stage t (length T).

    The intransigence of Chaudhry et al. (2018, Riemannian Walk: I_k = a*_k - a_{k,k}, with a*_k the
    accuracy on task k of a reference model trained on the data of tasks 1..k together): here a*_k is the joint
    (multitask) reference's A_J^{k<=k}, the same run as the forgetting ratio's A_J. Choice where the paper
    leaves it open: the paper defines I_k per task; the value at stage t is its mean over the tasks learned so
    far, k <= t. Positive means the approach learns a new task worse than joint training does.

    Args:
        accuracy: T x T accuracy matrix of the approach.
        joint: T x T accuracy matrix of the joint reference, same seed.
    """
    gap = np.diag(joint) - np.diag(accuracy)
    return np.array([gap[: t + 1].mean() for t in range(accuracy.shape[0])])


def learning_accuracy(accuracy: np.ndarray) -> np.ndarray:
    """LA^{<=t} = 1/t sum_{k<=t} A^{k<=k}, one value per stage t (length T).

    The learning accuracy of Riemer et al. (2019, "Learning to Learn without Forgetting by Maximizing Transfer
    and Minimizing Interference", MER: the average accuracy on each task right after learning it),
    taken at every stage t over the tasks learned so far.
    """
    diagonal = np.diag(accuracy)
    return np.array([diagonal[: t + 1].mean() for t in range(accuracy.shape[0])])


def forward_transfer_by_stage(accuracy: np.ndarray, initial: np.ndarray) -> np.ndarray:
    """FWT^{<=t} = 1/(t-1) sum_{1<u<=t} (A^{u<=u-1} - b_u), one value per stage t; NaN at t = 1.

    Forward transfer of Lopez-Paz & Ranzato (2017, GEM: FWT = 1/(T-1) sum_{i=2}^{T} R_{i-1,i} - b_i,
    with b_i the accuracy on task i at random initialisation): the accuracy on each task just before learning
    it, against the accuracy of the untrained network. It needs the entries above the diagonal (A^{u<=u-1})
    and the accuracies at initialisation (stage 0); where either is missing (NaN) the value is NaN.

    Args:
        accuracy: T x T accuracy matrix of the approach, with the entries just above the diagonal.
        initial: length-T accuracies b_u of the network at initialisation, before any training.
    """
    size = accuracy.shape[0]
    before = np.array([accuracy[u - 1, u] for u in range(1, size)]) - initial[1:]
    values = np.full(size, np.nan)
    for t in range(1, size):
        values[t] = float(before[:t].mean())
    return values


def cumulative_flops(flops: np.ndarray) -> np.ndarray:
    """The training FLOPs up to each stage t: sum_{s<=t} flops[s] (length T; NaN from a stage whose count is
    missing on)."""
    return np.cumsum(np.asarray(flops, dtype=float))
