"""tools/time_split.py counts each (run, stage) once: its timings are repeated on every row of the stage."""

from __future__ import annotations

import math

import pandas as pd
from toolloader import load_tool


def test_training_per_method_and_evaluation_count_each_stage_of_each_run_once() -> None:
    rows = pd.DataFrame(
        [  # run, method, stage, train seconds, eval seconds; each stage on two rows (two tasks or splits)
            ("a", "hat", 0, math.nan, 0.5), ("a", "hat", 0, math.nan, 0.5),
            ("a", "hat", 1, 3.0, 1.0), ("a", "hat", 1, 3.0, 1.0),
            ("b", "hat", 1, 2.0, 0.25), ("b", "hat", 1, 2.0, 0.25),
            ("c", "sgd", 1, 7.0, 2.0), ("c", "sgd", 2, 1.0, 4.0), ("c", "sgd", 2, 1.0, 4.0),
        ], columns=["run_id", "method", "stage", "stage_train_seconds", "stage_eval_seconds"])
    training, evaluation = load_tool("time_split").time_split(rows)
    assert list(training.items()) == [("sgd", 8.0), ("hat", 5.0)]  # slowest first
    assert evaluation == 0.5 + 1.0 + 0.25 + 2.0 + 4.0
