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
