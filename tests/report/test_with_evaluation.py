"""`with_evaluation`: the other evaluation's metrics from rows already read equal `load_results` reading them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from resultbuilders import write_run

from clbench.report.loading import load_results, other_evaluation, with_evaluation


def results_folder(root: Path) -> Path:
    write_run(root, "sgd", 0, [[0.9], [0.6, 0.8]], agnostic=[[0.7], [0.3, 0.5]], initial=[0.1, 0.2])
    write_run(root, "sgd", 1, [[0.8], [0.5, 0.9]], agnostic=[[0.6], [0.2, 0.4]], initial=[0.2, 0.1])
    write_run(root, "hat", 0, [[0.95], [0.9, 0.85]])  # task-aware rows only
    write_run(root, "er", 0, [[0.7], [0.6, 0.65]], scenario="domain", initial=[0.5, 0.5])
    return root


def test_the_other_evaluation_is_what_loading_it_gives(tmp_path: Path) -> None:
    root = results_folder(tmp_path)
    for chosen, other in (("task-aware", "task-agnostic"), ("task-agnostic", "task-aware")):
        derived = with_evaluation(load_results(root, "b", evaluation=chosen), other)
        read = load_results(root, "b", evaluation=other)
        assert derived.evaluation == other
        pd.testing.assert_frame_equal(derived.frame, read.frame)
        pd.testing.assert_frame_equal(derived.rows, read.rows)
        assert derived.matrices.keys() == read.matrices.keys()
        assert all(np.array_equal(derived.matrices[key], read.matrices[key], equal_nan=True) for key in read.matrices)
        for run_id in read.info:
            assert derived.unmeasured(run_id) == read.unmeasured(run_id)
            ours, theirs = derived.full_matrix(run_id), read.full_matrix(run_id)
            assert (ours is None) == (theirs is None)
            if ours is not None:
                assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(ours, theirs))
    # sgd's task-agnostic accuracy after task 2 on task 1, by hand
    agnostic = with_evaluation(load_results(root, "b"), "task-agnostic")
    sgd0 = next(run_id for run_id in agnostic.info if run_id.startswith("b/sgd/") and run_id.endswith("seed-0"))
    assert agnostic.matrices[sgd0][1, 0] == 0.3


def test_other_evaluation_needs_rows_of_both(tmp_path: Path) -> None:
    write_run(tmp_path, "hat", 0, [[0.95], [0.9, 0.85]])
    assert other_evaluation(load_results(tmp_path, "b")) is None
    root = results_folder(tmp_path / "both")
    other = other_evaluation(load_results(root, "b"))
    assert other is not None and other.evaluation == "task-agnostic"
