"""Metrics against hand-computed matrices, including one built from the paper's own numbers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from clbench import metrics

NAN = np.nan
A = np.array([[0.90, NAN, NAN], [0.70, 0.80, NAN], [0.60, 0.50, 0.95]])
J = np.array([[0.90, NAN, NAN], [0.90, 0.90, NAN], [0.80, 0.90, 1.00]])
R = np.array([0.50, 0.50, 0.20])


def test_forgetting_ratio_by_hand() -> None:
    rho = metrics.forgetting_ratio_matrix(A, J, R)
    # (0.7-0.5)/(0.9-0.5)-1 = -0.5 ; (0.8-0.5)/(0.9-0.5)-1 = -0.25
    assert rho[1, 0] == pytest.approx(-0.5) and rho[1, 1] == pytest.approx(-0.25)
    # (0.6-0.5)/(0.8-0.5)-1 = -2/3 ; (0.5-0.5)/(0.4)-1 = -1 ; (0.95-0.2)/(0.8)-1 = -0.0625
    assert rho[2].tolist() == pytest.approx([-2 / 3, -1.0, -0.0625])
    assert np.isnan(rho[0, 1]) and np.isnan(rho[1, 2])
    assert metrics.forgetting_ratio(A, J, R) == pytest.approx([0.0, -0.375, (-2 / 3 - 1 - 0.0625) / 3])


def test_inputs_are_not_mutated() -> None:
    a, j, r = A.copy(), J.copy(), R.copy()
    metrics.forgetting_ratio(a, j, r)
    metrics.average_accuracy(a)
    metrics.backward_transfer(a)
    metrics.max_previous_forgetting(a)
    assert np.array_equal(a, A, equal_nan=True) and np.array_equal(j, J, equal_nan=True) and np.array_equal(r, R)


def test_reference_limits() -> None:
    """rho = 0 for the joint accuracy, rho = -1 for the random accuracy (the paper's reading of the ratio)."""
    random_like = np.where(np.isnan(J), NAN, R[None, :])
    assert metrics.forgetting_ratio(J, J, R) == pytest.approx([0, 0, 0])
    assert metrics.forgetting_ratio(random_like, J, R) == pytest.approx([-1, -1, -1])


def test_paper_numbers_split_mnist_style() -> None:
    """Split MNIST with the paper's HAT mean accuracy 99.0%: A^{<=2} = (A11 + A12) / 2."""
    matrix = np.array([[0.995, NAN], [0.991, 0.989]])
    assert metrics.average_accuracy(matrix)[-1] == pytest.approx(0.990)


def test_paper_table_mixture_hat_rho2_from_accuracies() -> None:
    """A 2-task matrix whose rho^{<=2} is HAT's -0.02 of the paper's Table 2, built by hand."""
    joint = np.array([[0.80, NAN], [0.80, 0.90]])
    random = np.array([0.10, 0.01])
    # choose A so that rho per task = -0.02 and -0.02: A = R + 0.98 (J - R)
    accuracy = np.where(np.isnan(joint), NAN, random[None, :] + 0.98 * (joint - random[None, :]))
    assert metrics.forgetting_ratio(accuracy, joint, random)[-1] == pytest.approx(-0.02)


def test_average_accuracy_bwt_and_forgetting() -> None:
    assert metrics.average_accuracy(A) == pytest.approx([0.9, 0.75, (0.6 + 0.5 + 0.95) / 3])
    assert metrics.backward_transfer(A) == pytest.approx(((0.6 - 0.9) + (0.5 - 0.8)) / 2)
    assert metrics.max_previous_forgetting(A) == pytest.approx(((0.9 - 0.6) + (0.8 - 0.5)) / 2)
    assert np.isnan(metrics.backward_transfer(A[:1, :1]))


def test_random_reference_averages_the_column() -> None:
    random_matrix = np.array([[0.5, NAN], [0.3, 0.2]])
    assert metrics.random_reference(random_matrix) == pytest.approx([0.4, 0.2])


def test_zero_denominator_gives_nan_not_inf() -> None:
    rho = metrics.forgetting_ratio_matrix(np.array([[0.5]]), np.array([[0.5]]), np.array([0.5]))
    assert np.isnan(rho[0, 0])


def test_accuracy_matrix_from_long_rows() -> None:
    rows = pd.DataFrame({"stage": [1, 2, 2], "task": [1, 1, 2], "accuracy": [0.9, 0.7, 0.8]})
    matrix = metrics.accuracy_matrix(rows)
    assert matrix[0, 0] == 0.9 and matrix[1].tolist() == [0.7, 0.8] and np.isnan(matrix[0, 1])
    assert metrics.is_complete_matrix(matrix)
    assert not metrics.is_complete_matrix(metrics.accuracy_matrix(rows.iloc[:2]))


# A 4-task matrix whose best earlier accuracy is not always the diagonal (so forgetting and -BWT differ).
B = np.array([[0.50, NAN, NAN, NAN],
              [0.80, 0.60, NAN, NAN],
              [0.70, 0.90, 0.70, NAN],
              [0.40, 0.60, 0.80, 0.90]])
# Its joint reference; the joint's later rows differ from its diagonal, a*_k is the joint right after task k.
JB = np.array([[0.90, NAN, NAN, NAN],
               [0.85, 0.80, NAN, NAN],
               [0.80, 0.75, 0.90, NAN],
               [0.70, 0.70, 0.85, 0.95]])


def test_backward_transfer_by_stage_by_hand() -> None:
    # t=2: 0.80-0.50 = 0.30 ; t=3: ((0.70-0.50) + (0.90-0.60)) / 2 = 0.25
    # t=4: ((0.40-0.50) + (0.60-0.60) + (0.80-0.70)) / 3 = 0.0
    bwt = metrics.backward_transfer_by_stage(B)
    assert np.isnan(bwt[0]) and bwt[1:].tolist() == pytest.approx([0.30, 0.25, 0.0])
    assert metrics.backward_transfer(B) == pytest.approx(0.0)
    # the 3-task A: t=2: 0.70-0.90 = -0.20 ; t=3: ((0.60-0.90) + (0.50-0.80)) / 2 = -0.30
    assert metrics.backward_transfer_by_stage(A)[1:].tolist() == pytest.approx([-0.20, -0.30])


def test_forgetting_by_stage_by_hand() -> None:
    # t=2: task 1: max(A11)=0.50 - 0.80 = -0.30
    # t=3: task 1: max(0.50, 0.80)=0.80 - 0.70 = 0.10 ; task 2: max(0.60) - 0.90 = -0.30 ; mean -0.10
    # t=4: task 1: max(0.50, 0.80, 0.70) - 0.40 = 0.40 ; task 2: max(0.60, 0.90) - 0.60 = 0.30 ;
    #      task 3: max(0.70) - 0.80 = -0.10 ; mean 0.60 / 3 = 0.20
    forgetting = metrics.forgetting_by_stage(B)
    assert np.isnan(forgetting[0]) and forgetting[1:].tolist() == pytest.approx([-0.30, -0.10, 0.20])
    assert metrics.max_previous_forgetting(B) == pytest.approx(0.20)


def test_learning_accuracy_by_hand() -> None:
    # diagonal 0.50, 0.60, 0.70, 0.90: 0.50 ; 1.10/2 = 0.55 ; 1.80/3 = 0.60 ; 2.70/4 = 0.675
    assert metrics.learning_accuracy(B).tolist() == pytest.approx([0.50, 0.55, 0.60, 0.675])


def test_intransigence_by_hand() -> None:
    # joint diagonal 0.90, 0.80, 0.90, 0.95 minus 0.50, 0.60, 0.70, 0.90 = 0.40, 0.20, 0.20, 0.05
    # means: 0.40 ; 0.60/2 = 0.30 ; 0.80/3 ; 0.85/4 = 0.2125
    assert metrics.intransigence(B, JB).tolist() == pytest.approx([0.40, 0.30, 0.80 / 3, 0.2125])
    assert metrics.intransigence(JB, JB).tolist() == pytest.approx([0, 0, 0, 0])


def test_forward_transfer_by_hand() -> None:
    whole = np.array([[0.50, 0.30, 0.20], [0.80, 0.60, 0.40], [0.70, 0.90, 0.70]])
    initial = np.array([0.10, 0.25, 0.30])
    # t=2: A^{2<=1} - b_2 = 0.30 - 0.25 = 0.05 ; t=3: (0.05 + (A^{3<=2} - b_3 = 0.40 - 0.30 = 0.10)) / 2 = 0.075
    fwt = metrics.forward_transfer_by_stage(whole, initial)
    assert np.isnan(fwt[0]) and fwt[1:].tolist() == pytest.approx([0.05, 0.075])
    # today's matrices have no entry above the diagonal: no number
    assert np.isnan(metrics.forward_transfer_by_stage(A, initial)).all()


def test_a_task_first_evaluated_at_its_own_stage() -> None:
    """Only stages from a task's own on count: accuracies above the diagonal change none of these metrics."""
    above = np.where(np.isnan(B), 0.99, B)
    for function in (metrics.backward_transfer_by_stage, metrics.forgetting_by_stage, metrics.learning_accuracy,
                     metrics.average_accuracy):
        assert np.array_equal(function(above), function(B), equal_nan=True), function.__name__
    assert metrics.intransigence(above, JB).tolist() == pytest.approx(metrics.intransigence(B, JB).tolist())


def test_a_single_task() -> None:
    """T = 1: BWT, forgetting and FWT are undefined (NaN, never 0); learning accuracy and intransigence are not."""
    one = np.array([[0.90]])
    assert np.isnan(metrics.backward_transfer_by_stage(one)).all() and np.isnan(metrics.backward_transfer(one))
    assert np.isnan(metrics.forgetting_by_stage(one)).all() and np.isnan(metrics.max_previous_forgetting(one))
    assert np.isnan(metrics.forward_transfer_by_stage(one, np.array([0.1]))).all()
    assert metrics.learning_accuracy(one).tolist() == pytest.approx([0.90])
    assert metrics.intransigence(one, np.array([[0.95]])).tolist() == pytest.approx([0.05])


def test_new_metrics_do_not_mutate_inputs() -> None:
    b, j, initial = B.copy(), JB.copy(), np.array([0.1, 0.2, 0.3, 0.4])
    metrics.backward_transfer_by_stage(b)
    metrics.forgetting_by_stage(b)
    metrics.learning_accuracy(b)
    metrics.intransigence(b, j)
    metrics.forward_transfer_by_stage(b, initial)
    assert np.array_equal(b, B, equal_nan=True) and np.array_equal(j, JB, equal_nan=True)
    assert initial.tolist() == [0.1, 0.2, 0.3, 0.4]


def test_accuracy_matrix_takes_the_learned_tasks_and_refuses_mixed_evaluations() -> None:
    rows = pd.DataFrame({"stage": [0, 0, 1, 1, 2, 2], "task": [1, 2, 1, 2, 1, 2],
                         "accuracy": [0.1, 0.2, 0.9, 0.3, 0.8, 0.95], "evaluation": ["task-aware"] * 6})
    matrix = metrics.accuracy_matrix(rows)  # stage 0 and (t=1, u=2) are not part of the T x T matrix
    assert matrix[0, 0] == 0.9 and np.isnan(matrix[0, 1]) and matrix[1].tolist() == [0.8, 0.95]
    mixed = pd.concat([rows, rows.assign(evaluation="task-agnostic")])
    with pytest.raises(ValueError, match="both evaluations"):
        metrics.accuracy_matrix(mixed)


# Mammoth's forgetting (aimagelab/mammoth utils/metrics.py at e75a491): its max also takes the current stage.
def test_mammoth_forgetting_counts_a_risen_task_as_zero() -> None:
    """[[90, -], [95, 80]]: Mammoth max(90, 95) - 95 = 0.0; clbench (Chaudhry) max(90) - 95 = -5.0."""
    matrix = np.array([[90.0, NAN], [95.0, 80.0]])
    assert metrics.mammoth_forgetting(matrix) == pytest.approx(0.0)
    assert metrics.max_previous_forgetting(matrix) == pytest.approx(-5.0)
    assert np.isnan(metrics.mammoth_forgetting_by_stage(matrix)[0])


def test_mammoth_forgetting_by_stage_by_hand() -> None:
    # the 4-task B: the max runs over the stages from the task's own up to t, t included
    # t=2: task 1: max(0.50, 0.80) - 0.80 = 0.0 (Chaudhry: -0.30)
    # t=3: task 1: max(0.50, 0.80, 0.70) - 0.70 = 0.10 ; task 2: max(0.60, 0.90) - 0.90 = 0.0 ; mean 0.05
    # t=4: task 1: max(0.50, 0.80, 0.70, 0.40) - 0.40 = 0.40 (the max at the intermediate stage 2) ;
    #      task 2: max(0.60, 0.90, 0.60) - 0.60 = 0.30 ; task 3: max(0.70, 0.80) - 0.80 = 0.0 ; mean 0.70 / 3
    forgetting = metrics.mammoth_forgetting_by_stage(B)
    assert np.isnan(forgetting[0]) and forgetting[1:].tolist() == pytest.approx([0.0, 0.05, 0.70 / 3])
    assert metrics.mammoth_forgetting(B) == pytest.approx(0.70 / 3)
    assert metrics.max_previous_forgetting(B) == pytest.approx(0.20)  # Chaudhry's task 3: 0.70 - 0.80 = -0.10


def test_mammoth_forgetting_with_the_max_at_an_intermediate_stage() -> None:
    """3 tasks, task 1 best after stage 2 (neither its own stage nor the last): both definitions agree here."""
    matrix = np.array([[60.0, NAN, NAN], [75.0, 80.0, NAN], [50.0, 70.0, 90.0]])
    # task 1: max(60, 75, 50) = 75 - 50 = 25 ; task 2: max(80, 70) = 80 - 70 = 10 ; mean 17.5
    assert metrics.mammoth_forgetting(matrix) == pytest.approx(17.5)
    assert metrics.max_previous_forgetting(matrix) == pytest.approx(17.5)
    # stage 2: task 1 rose (60 -> 75): Mammoth 75 - 75 = 0, Chaudhry 60 - 75 = -15
    assert metrics.mammoth_forgetting_by_stage(matrix)[1] == pytest.approx(0.0)
    assert metrics.forgetting_by_stage(matrix)[1] == pytest.approx(-15.0)


def test_mammoth_and_chaudhry_agree_when_no_task_rises() -> None:
    """The 3-task A never improves on a task after learning it: both give ((0.9-0.6) + (0.8-0.5)) / 2 = 0.30."""
    assert metrics.mammoth_forgetting_by_stage(A)[1:].tolist() == pytest.approx([0.90 - 0.70, 0.30])
    assert metrics.forgetting_by_stage(A)[1:].tolist() == pytest.approx([0.90 - 0.70, 0.30])


def test_mammoth_forgetting_takes_the_accuracy_just_before_learning() -> None:
    """Mammoth's loop appends task u's accuracy just before learning it to the previous stage's row (A^{u<=u-1});
    nothing further above the diagonal is in its rows."""
    matrix = np.array([[0.50, 0.95, 0.99, 0.99],
                       [0.40, 0.60, 0.20, 0.98],
                       [0.30, 0.50, 0.70, 0.97],
                       [0.20, 0.40, 0.60, 0.80]])
    # t=2: task 1: max(0.50, 0.40) - 0.40 = 0.10 (task 2, whose 0.95 is above the diagonal, is the last: left out)
    # t=3: task 1: max(0.50, 0.40, 0.30) - 0.30 = 0.20 ; task 2: max(0.95 just before, 0.60, 0.50) - 0.50 = 0.45
    #      mean 0.325
    # t=4: task 1: 0.50 - 0.20 = 0.30 ; task 2: 0.95 - 0.40 = 0.55 ;
    #      task 3: max(0.20 just before, 0.70, 0.60) - 0.60 = 0.10 (its 0.99 two stages before never counts)
    #      mean 0.95 / 3
    assert metrics.mammoth_forgetting_by_stage(matrix)[1:].tolist() == pytest.approx([0.10, 0.325, 0.95 / 3])
    lower = np.where(np.tril(np.ones((4, 4), dtype=bool)), matrix, NAN)
    # without the entries above the diagonal: task 2: max(0.60, 0.50, 0.40) - 0.40 = 0.20 ; mean 0.60 / 3
    assert metrics.mammoth_forgetting(lower) == pytest.approx(0.60 / 3)


def test_mammoth_forgetting_per_stage_never_looks_at_later_stages() -> None:
    """Task 1 is best at the last stage: the value at stage 2 is Mammoth's on the stages <= 2 only."""
    matrix = np.array([[0.50, NAN, NAN],
                       [0.40, 0.80, NAN],
                       [0.55, 0.70, 0.90]])
    # t=2: task 1: max(0.50, 0.40) - 0.40 = 0.10 (the 0.55 of stage 3 is not there yet)
    # t=3: task 1: max(0.50, 0.40, 0.55) - 0.55 = 0.0 ; task 2: max(0.80, 0.70) - 0.70 = 0.10 ; mean 0.05
    assert metrics.mammoth_forgetting_by_stage(matrix)[1:].tolist() == pytest.approx([0.10, 0.05])


def test_mammoth_forgetting_of_a_single_task_and_inputs_untouched() -> None:
    one = np.array([[0.90]])
    assert np.isnan(metrics.mammoth_forgetting_by_stage(one)).all() and np.isnan(metrics.mammoth_forgetting(one))
    b = B.copy()
    metrics.mammoth_forgetting_by_stage(b)
    assert np.array_equal(b, B, equal_nan=True)
