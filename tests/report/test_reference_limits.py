"""The forgetting ratio's references in both evaluations: the random run scores rho = -1 and the joint run 0 at
every stage; a joint reference that does not clearly beat chance leaves the cell undefined (`–`), never a number.
Every expected value is computed by hand in the comments."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from resultbuilders import write_run

from clbench import metrics
from clbench.report.loading import load_results
from clbench.report.tables import build_report, table_rows
from clbench.tuning import scoring

NAN = np.nan
# Class-incremental, 2 classes a task: the random run's task-agnostic accuracy on task 1 falls as classes are added
# (1/2, 1/4, 1/6), its task-aware accuracy stays at 1/2.
RANDOM_AWARE = [[0.50], [0.50, 0.50], [0.50, 0.50, 0.50]]
RANDOM_AGNOSTIC = [[0.50], [0.25, 0.25], [0.17, 0.16, 0.17]]
JOINT_AWARE = [[0.99], [0.98, 0.99], [0.97, 0.98, 0.99]]
JOINT_AGNOSTIC = [[0.99], [0.90, 0.92], [0.85, 0.88, 0.90]]


def lower(rows: list[list[float]]) -> np.ndarray:
    return np.array([row + [NAN] * (len(rows) - len(row)) for row in rows])


def test_per_stage_random_reference_is_the_random_matrix_itself() -> None:
    random = lower(RANDOM_AGNOSTIC)
    per_stage = metrics.random_reference(random, per_stage=True)
    assert np.array_equal(per_stage, random, equal_nan=True)
    assert metrics.random_reference(random) == pytest.approx([(0.50 + 0.25 + 0.17) / 3, (0.25 + 0.16) / 2, 0.17])


@pytest.mark.parametrize("aware", [True, False], ids=["task-aware", "task-agnostic"])
def test_random_scores_minus_one_and_joint_zero_at_every_stage(aware: bool) -> None:
    random_matrix = lower(RANDOM_AWARE if aware else RANDOM_AGNOSTIC)
    joint = lower(JOINT_AWARE if aware else JOINT_AGNOSTIC)
    random = metrics.random_reference(random_matrix, per_stage=not aware)
    assert metrics.forgetting_ratio(random_matrix, joint, random) == pytest.approx([-1.0, -1.0, -1.0])
    assert metrics.forgetting_ratio(joint, joint, random) == pytest.approx([0.0, 0.0, 0.0])


def test_the_column_mean_would_not_score_the_task_agnostic_random_run_minus_one() -> None:
    """What the per-stage reference fixes: with the column mean, random's own rho^{<=2} is
    mean((0.25 - 0.3067) / (0.90 - 0.3067) - 1, (0.25 - 0.205) / (0.92 - 0.205) - 1) = -1.0163, not -1."""
    random_matrix, joint = lower(RANDOM_AGNOSTIC), lower(JOINT_AGNOSTIC)
    column_mean = metrics.random_reference(random_matrix)
    wrong = metrics.forgetting_ratio(random_matrix, joint, column_mean)[1]
    by_hand = ((0.25 - 0.92 / 3) / (0.90 - 0.92 / 3) - 1 + (0.25 - 0.205) / (0.92 - 0.205) - 1) / 2
    assert wrong == pytest.approx(by_hand) and abs(wrong + 1) > 0.01


def test_margin_is_three_standard_errors_of_the_two_accuracies() -> None:
    # n = 100: 3 sqrt(0.5 * 0.5 / 100 + 0.4 * 0.6 / 100) = 3 sqrt(0.0049) = 0.21
    margin = metrics.reference_gap_margin(np.array([[0.5]]), np.array([0.4]), np.array([100.0]))
    assert margin[0, 0] == pytest.approx(0.21)
    # the gap 0.1 is below it: undefined; with n = 10,000 the margin is 0.021 and the gap is clear
    assert metrics.undefined_ratio_cells(np.array([[0.5]]), np.array([0.4]), margin)[0, 0]
    wide = metrics.reference_gap_margin(np.array([[0.5]]), np.array([0.4]), np.array([10_000.0]))
    assert wide[0, 0] == pytest.approx(0.021)
    assert not metrics.undefined_ratio_cells(np.array([[0.5]]), np.array([0.4]), wide)[0, 0]
    # unknown sample counts (older results): margin 0, only a positive gap is needed
    assert metrics.reference_gap_margin(np.array([[0.5]]), np.array([0.4]), np.array([NAN]))[0, 0] == 0.0


def test_a_joint_at_or_below_chance_gives_no_number() -> None:
    accuracy = lower([[0.90], [0.60, 0.80]])
    joint = lower([[0.95], [0.137, 0.90]])  # task 1 at stage 2: joint 0.137 against chance 0.25
    random = lower([[0.50], [0.25, 0.25]])
    ratio = metrics.forgetting_ratio(accuracy, joint, metrics.random_reference(random, per_stage=True))
    # t1: (0.90 - 0.5) / (0.95 - 0.5) - 1 = -1/9; t2: undefined, not the mean over task 2 alone
    assert ratio[0] == pytest.approx(0.4 / 0.45 - 1) and np.isnan(ratio[1])


def write_references(folder: Path, seed: int, n_test: int | None = 1000, joint_agnostic: list | None = None) -> None:
    write_run(folder, "joint", seed, JOINT_AWARE, agnostic=joint_agnostic or JOINT_AGNOSTIC, scenario="class",
              n_test=n_test)
    write_run(folder, "random", seed, RANDOM_AWARE, agnostic=RANDOM_AGNOSTIC, scenario="class", n_test=n_test)


@pytest.mark.parametrize("evaluation", ["task-aware", "task-agnostic"])
def test_the_report_scores_its_references_minus_one_and_zero(tmp_path: Path, evaluation: str) -> None:
    for seed in (0, 1):
        write_references(tmp_path, seed)
    results = load_results(tmp_path, "b", evaluation=evaluation)
    rows = dict(build_report(tmp_path, "b", "forgetting-ratio", include_references=True, results=results).rows)
    assert [cell.mean for cell in rows["random"]] == pytest.approx([-1.0, -1.0, -1.0])
    assert [cell.mean for cell in rows["joint"]] == pytest.approx([0.0, 0.0, 0.0])
    assert [cell.n for cell in rows["random"]] == [2, 2, 2]


def test_task_agnostic_rho_of_an_approach_by_hand(tmp_path: Path) -> None:
    write_references(tmp_path, 0)
    write_run(tmp_path, "sgd", 0, JOINT_AWARE, agnostic=[[0.99], [0.0, 0.92], [0.0, 0.0, 0.90]], scenario="class",
              n_test=1000)
    results = load_results(tmp_path, "b", evaluation="task-agnostic")
    cells = dict(build_report(tmp_path, "b", "forgetting-ratio", results=results).rows)["sgd"]
    # t2: task 1 (0 - 0.25) / (0.90 - 0.25) - 1 = -1.3846, task 2 0; t3: tasks 1, 2 below chance, task 3 0:
    # ((0 - 0.17) / (0.85 - 0.17) - 1 + (0 - 0.16) / (0.88 - 0.16) - 1 + 0) / 3
    t2 = ((0 - 0.25) / (0.90 - 0.25) - 1) / 2
    t3 = ((0 - 0.17) / (0.85 - 0.17) - 1 + (0 - 0.16) / (0.88 - 0.16) - 1) / 3
    assert [cell.mean for cell in cells] == pytest.approx([0.0, t2, t3])


def test_an_undefined_cell_is_a_dash_with_a_note_even_when_another_seed_has_a_number(tmp_path: Path) -> None:
    # seed 0's joint reaches 0.30 on task 1 at stage 2, against chance 0.25: 3 sqrt(0.3 * 0.7 / 1000
    # + 0.25 * 0.75 / 1000) = 0.060 > 0.05, so undefined; seed 1's joint is fine
    write_references(tmp_path, 0, joint_agnostic=[[0.99], [0.30, 0.92], [0.85, 0.88, 0.90]])
    write_references(tmp_path, 1)
    for seed in (0, 1):
        write_run(tmp_path, "sgd", seed, JOINT_AWARE, agnostic=JOINT_AGNOSTIC, scenario="class", n_test=1000)
    results = load_results(tmp_path, "b", evaluation="task-agnostic")
    report = build_report(tmp_path, "b", "forgetting-ratio", results=results)
    cells = dict(report.rows)["sgd"]
    assert cells[0].n == 2 and cells[2].n == 2
    assert cells[1].n == 0 and np.isnan(cells[1].mean)  # `–`: not seed 1's number alone
    note = next(note for note in report.notes if "rho undefined" in note)
    assert "b/sgd/c0/seed-0" in note and "stage 2 task 1" in note
    assert "joint 0.300 against random 0.250" in note and "0.060" in note
    assert dict((row[0], row[1:]) for row in table_rows(report))["sgd"][:3] == ["0.00 (0.00)", "–", "0.00 (0.00)"]


def test_without_sample_counts_only_a_positive_gap_is_needed(tmp_path: Path) -> None:
    write_references(tmp_path, 0, n_test=None, joint_agnostic=[[0.99], [0.30, 0.92], [0.85, 0.88, 0.90]])
    write_run(tmp_path, "sgd", 0, JOINT_AWARE, agnostic=JOINT_AGNOSTIC, scenario="class")
    results = load_results(tmp_path, "b", evaluation="task-agnostic")
    cells = dict(build_report(tmp_path, "b", "forgetting-ratio", results=results).rows)["sgd"]
    # t2: task 1 (0.90 - 0.25) / (0.30 - 0.25) - 1 = 12, task 2 0
    assert cells[1].mean == pytest.approx(12 / 2)


def test_the_domain_scenario_keeps_the_paper_s_reference_in_either_evaluation(tmp_path: Path) -> None:
    # domain runs store one evaluation (as task-aware rows): the same A_R^u (column mean) under both names
    write_run(tmp_path, "joint", 0, [[0.9], [0.9, 0.9]], scenario="domain")
    write_run(tmp_path, "random", 0, [[0.12], [0.08, 0.10]], scenario="domain")
    write_run(tmp_path, "sgd", 0, [[0.9], [0.5, 0.9]], scenario="domain")
    for evaluation in ("task-aware", "task-agnostic"):
        results = load_results(tmp_path, "b", evaluation=evaluation)
        cells = dict(build_report(tmp_path, "b", "forgetting-ratio", results=results).rows)["sgd"]
        # A_R^u = ((0.12 + 0.08) / 2, 0.10) = (0.10, 0.10): t1 = 0; t2 = ((0.5 - 0.1) / (0.9 - 0.1) - 1 + 0) / 2
        # = -0.25 (taken per stage, t2 would read ((0.5 - 0.08) / (0.9 - 0.08) - 1) / 2 = -0.244)
        assert [cell.mean for cell in cells] == pytest.approx([0.0, -0.25])


def tuning_rows(run_id: str, method: str, overrides: list[str], matrix: list[list[float]],
                n_test: int | None = 1000) -> list[dict]:
    """Task-agnostic validation rows of one class-scenario run (learned tasks only)."""
    return [{"run_id": run_id, "benchmark": "toy", "method": method, "seed": 0, "config_hash": run_id.split("/")[2],
             "data_hash": "data", "reference_hash": "ref", "overrides": json.dumps(overrides), "hyperparameters": "{}",
             "evaluation": "task-agnostic", "split": "validation", "scenario": "class", "stage": stage,
             "task": task, "accuracy": accuracy, "n_test": n_test}
            for stage, accuracies in enumerate(matrix, start=1) for task, accuracy in enumerate(accuracies, start=1)]


def test_tuning_scores_the_task_agnostic_forgetting_ratio_against_the_chance_of_each_stage() -> None:
    # random [0.5], [0.25, 0.25]; joint [0.9], [0.65, 0.75]. q0 A = [0.25, 0.75]: task 1 at chance, rho^{<=2} =
    # ((0.25 - 0.25) / (0.65 - 0.25) - 1 + 0) / 2 = -0.5. q1 A = [0.45, 0.45]: ((0.45 - 0.25) / 0.4 - 1
    # + (0.45 - 0.25) / 0.5 - 1) / 2 = (-0.5 - 0.6) / 2 = -0.55. (The column mean A_R^1 = 0.375 would give q0
    # ((0.25 - 0.375) / 0.275 - 1 + 0) / 2 = -0.727 and q1 ((0.075 / 0.275 - 1) - 0.6) / 2 = -0.664: q1 would win.)
    rows = tuning_rows("toy/m/q0/seed-0", "m", ["toy.lr=0.1"], [[0.9], [0.25, 0.75]])
    rows += tuning_rows("toy/m/q1/seed-0", "m", ["toy.lr=0.01"], [[0.9], [0.45, 0.45]])
    rows += tuning_rows("toy/joint/j/seed-0", "joint", [], [[0.9], [0.65, 0.75]])
    rows += tuning_rows("toy/random/r/seed-0", "random", [], [[0.5], [0.25, 0.25]])
    points = scoring.score_points(pd.DataFrame(rows), "m", ["toy.lr=0.1,0.01"], rule="forgetting-ratio",
                                  evaluation="task-agnostic")
    assert [point.score for point in points] == pytest.approx([-0.5, -0.55])
    assert scoring.select(points).values == (("toy.lr", "0.1"),)


def test_tuning_refuses_a_point_whose_joint_does_not_beat_chance() -> None:
    # joint 0.27 on task 1 against chance 0.25 with 1,000 samples: margin 3 sqrt(0.27 * 0.73 / 1000 + 0.25 * 0.75
    # / 1000) = 0.060 > 0.02: undefined, never a score
    rows = tuning_rows("toy/m/q0/seed-0", "m", ["toy.lr=0.1"], [[0.9], [0.25, 0.75]])
    rows += tuning_rows("toy/joint/j/seed-0", "joint", [], [[0.9], [0.27, 0.75]])
    rows += tuning_rows("toy/random/r/seed-0", "random", [], [[0.5], [0.25, 0.25]])
    points = scoring.score_points(pd.DataFrame(rows), "m", ["toy.lr=0.1"], rule="forgetting-ratio",
                                  evaluation="task-agnostic")
    assert not points[0].scored and "forgetting ratio is undefined" in points[0].problem
    assert "joint reference (0.270)" in points[0].problem and "random one (0.250)" in points[0].problem
