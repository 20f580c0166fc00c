"""Tuning on validation rows: scores, the choice and its tie rule, the test comparison, the tuned file.

Every expected value is worked out by hand in the comments; validation and test disagree on purpose, so a choice
made on test numbers would fail these tests.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import pandas as pd
import pytest
import yaml

from clbench.results import select_split
from clbench.tuning import scoring, tuned_file
from clbench.tuning.comparison import compare_winners, compare_with_test, tuning_points
from clbench.tuning.scoring import PointScore, TuningError

NAN = math.nan
GRID = ["toy.lr=0.1,0.01", "toy.c=1,2"]
# The grid's order (first option slowest): p0 (0.1, 1), p1 (0.1, 2), p2 (0.01, 1), p3 (0.01, 2).
POINTS = [(("toy.lr", "0.1"), ("toy.c", "1")), (("toy.lr", "0.1"), ("toy.c", "2")),
          (("toy.lr", "0.01"), ("toy.c", "1")), (("toy.lr", "0.01"), ("toy.c", "2"))]


def run_rows(run_id: str, method: str, overrides: list[str], split: str | None, matrix: list[list[float]],
             seed: int = 0, data_hash: str = "data", reference_hash: str = "ref",
             evaluation: str = "task-aware") -> list[dict]:
    """Long rows of one run: `matrix[t - 1]` holds the accuracies of tasks 1..t at stage t (learned tasks only)."""
    return [{"run_id": run_id, "benchmark": "toy", "method": method, "seed": seed, "config_hash": run_id.split("/")[2],
             "data_hash": data_hash, "reference_hash": reference_hash, "overrides": json.dumps(overrides),
             "hyperparameters": "{}", "evaluation": evaluation, "split": split, "stage": stage, "task": task,
             "accuracy": accuracy}
            for stage, accuracies in enumerate(matrix, start=1) for task, accuracy in enumerate(accuracies, start=1)]


def grid_run(index: int, split: str | None, final: list[float], **keys) -> list[dict]:
    """Rows of grid point `index` (2 tasks; stage 1 accuracy 0.99, stage 2 `final`)."""
    overrides = ["training.max_epochs=3", *(f"{key}={value}" for key, value in POINTS[index])]
    return run_rows(f"toy/m/p{index}/seed-0", "m", overrides, split, [[0.99], final], **keys)


# Validation, A^{<=2} = (A^{1<=2} + A^{2<=2}) / 2:
#   p0 (0.70 + 0.80) / 2 = 0.75; p1 (0.80 + 0.90) / 2 = 0.85; p2 (0.90 + 0.80) / 2 = 0.85 (a tie with p1);
#   p3 (0.60 + 0.70) / 2 = 0.65. Best 0.85, tied by p1 and p2: p1 comes first in the grid, p1 is chosen.
VALIDATION_FINAL = [[0.70, 0.80], [0.80, 0.90], [0.90, 0.80], [0.60, 0.70]]
# Test: p0 0.70, p1 0.75, p2 0.80, p3 0.95: test would choose p3.
TEST_FINAL = [[0.70, 0.70], [0.75, 0.75], [0.80, 0.80], [0.95, 0.95]]


def grid_rows(test_split: str | None = "test") -> pd.DataFrame:
    rows = []
    for index in range(4):
        rows += grid_run(index, "validation", VALIDATION_FINAL[index])
        rows += grid_run(index, test_split, TEST_FINAL[index])
    # Task-agnostic validation rows that favour p3 (chosen only when asked for that evaluation).
    rows += [row for index in range(4) for row in grid_run(index, "validation", TEST_FINAL[index],
                                                          evaluation="task-agnostic")]
    # Not grid points of m: the default config (no grid options), better than all on validation; another seed;
    # another method with p3's options.
    rows += run_rows("toy/m/default/seed-0", "m", ["training.max_epochs=3"], "validation", [[1.0], [1.0, 1.0]])
    rows += run_rows("toy/m/p0/seed-1", "m", ["training.max_epochs=3", "toy.lr=0.1", "toy.c=1"], "validation",
                     [[1.0], [1.0, 1.0]], seed=1)
    rows += run_rows("toy/n/p3/seed-0", "n", ["training.max_epochs=3", "toy.lr=0.01", "toy.c=2"], "validation",
                     [[1.0], [1.0, 1.0]])
    return pd.DataFrame(rows)


def choose(rows: pd.DataFrame, **options) -> tuned_file.TunedChoice:
    return tuned_file.choose(rows, "toy", "m", "abc123", GRID, overrides=["training.max_epochs=3"], **options)


def test_the_validation_winner_is_chosen_ties_to_the_earlier_grid_point() -> None:
    choice = choose(grid_rows())
    assert [point.values for point in choice.points] == POINTS
    assert [point.score for point in choice.points] == pytest.approx([0.75, 0.85, 0.85, 0.65])
    assert [point.run_id for point in choice.points] == [f"toy/m/p{index}/seed-0" for index in range(4)]
    assert choice.chosen == POINTS[1]  # 0.85 tied by p1 and p2: p1 is first in the grid's order
    assert choice.chosen_overrides == ["toy.lr=0.1", "toy.c=2"]


def test_the_evaluation_asked_for_is_the_one_scored() -> None:
    # Task-agnostic validation: p0 0.70, p1 0.75, p2 0.80, p3 0.95 -> p3.
    choice = choose(grid_rows(), evaluation="task-agnostic")
    assert [point.score for point in choice.points] == pytest.approx([0.70, 0.75, 0.80, 0.95])
    assert choice.chosen == POINTS[3]


def test_the_tie_rule_does_not_depend_on_where_the_tied_points_are() -> None:
    # Scores 0.5, 0.9, 0.9 + 1e-12 (floating-point noise, within TIE_TOLERANCE), 0.9: the first 0.9 (index 1) wins;
    # a clear winner (0.9 + 1e-6, beyond the tolerance) wins wherever it is.
    noisy = [PointScore(POINTS[index], score) for index, score in enumerate([0.5, 0.9, 0.9 + 1e-12, 0.9])]
    assert scoring.select(noisy) is noisy[1]
    clear = [PointScore(POINTS[index], score) for index, score in enumerate([0.5, 0.9, 0.9 + 1e-6, 0.9])]
    assert scoring.select(clear) is clear[2]


def test_test_rows_never_choose() -> None:
    """The test rows favour p3 (0.95 against 0.65 on validation); without validation rows there is no choice."""
    rows = grid_rows()
    only_test = rows[rows["split"] != "validation"]
    with pytest.raises(TuningError, match="no validation rows.*clbench tune toy -m m") as refused:
        choose(only_test)
    assert "\n" not in str(refused.value)
    with pytest.raises(TuningError, match="no validation rows"):
        choose(only_test.drop(columns="split"))  # results written before the split column: all test


def test_a_missing_split_value_is_a_test_row() -> None:
    # The test rows of the grid have no split value (None): they are still test rows, never validation.
    rows = grid_rows(test_split=None)
    assert choose(rows).chosen == POINTS[1]
    # 4 test runs of 3 rows; validation: 4 points x 2 evaluations, the default, seed 1 and method n, 3 rows each.
    assert len(select_split(rows, "test")) == 4 * 3 and len(select_split(rows, "validation")) == 11 * 3


def test_a_point_without_a_run_refuses_the_choice() -> None:
    rows = grid_rows()
    rows = rows[rows["run_id"] != "toy/m/p3/seed-0"]
    points = scoring.score_points(rows, "m", GRID, overrides=["training.max_epochs=3"])
    assert points[3].problem is not None and math.isnan(points[3].score) and points[1].scored
    with pytest.raises(TuningError, match="toy.lr=0.01, toy.c=2 has no validation rows"):
        scoring.select(points)


def test_the_test_winner_is_reported_beside_the_validation_winner() -> None:
    rows = grid_rows()
    choice = choose(rows)
    comparison = compare_with_test(rows, choice)
    assert comparison.validation.values == POINTS[1]
    assert [point.score for point in comparison.test_scores] == pytest.approx([0.70, 0.75, 0.80, 0.95])
    assert comparison.test is not None and comparison.test.values == POINTS[3]
    assert comparison.disagrees
    # Without test rows for p2 there is no test winner, and nothing to warn about.
    partial = compare_with_test(rows[~((rows["run_id"] == "toy/m/p2/seed-0") & (rows["split"] == "test"))],
                                choice)
    assert partial.test is None and not partial.disagrees
    assert [point.values for point in partial.missing] == [POINTS[2]]


def test_winners_that_agree_give_no_warning() -> None:
    validation = PointScore(POINTS[0], 0.8)
    test = [PointScore(POINTS[0], 0.7), PointScore(POINTS[1], 0.7)]  # a tie: the first, the same point
    comparison = compare_winners(validation, test)
    assert comparison.test is test[0] and not comparison.disagrees


# The forgetting-ratio rule, 2 tasks. Validation references (reference key "ref", data "data"): joint stage 2
# [0.9, 0.6]; random [0.5] then [0.5, 0.5], so A_R = (0.5, 0.5) (the column means). rho^{<=2} per point:
#   q0, A = [0.9, 0.5]: ((0.9-0.5)/(0.9-0.5) - 1 + (0.5-0.5)/(0.6-0.5) - 1) / 2 = (0 - 1) / 2 = -0.5
#   q1, A = [0.7, 0.6]: ((0.7-0.5)/0.4 - 1 + (0.6-0.5)/0.1 - 1) / 2 = (-0.5 + 0) / 2 = -0.25  -> chosen
# (On accuracy q0 would win: 0.70 against 0.65.) Decoys that would make q0 win: a joint with another reference key
# and the test joint, both [0.9, 0.9]: q0 (0 - 1) / 2 = -0.5, q1 (-0.5 + 0.25 - 1) / 2 = -0.625.
RHO_GRID = ["toy.lr=0.1,0.01"]


def rho_rows() -> pd.DataFrame:
    rows = []
    for index, (value, final) in enumerate([("0.1", [0.9, 0.5]), ("0.01", [0.7, 0.6])]):
        rows += run_rows(f"toy/m/q{index}/seed-0", "m", [f"toy.lr={value}"], "validation", [[0.99], final])
    rows += run_rows("toy/joint/j/seed-0", "joint", [], "validation", [[0.9], [0.9, 0.6]])
    rows += run_rows("toy/joint/j/seed-0", "joint", [], "test", [[0.9], [0.9, 0.9]])
    rows += run_rows("toy/joint/other/seed-0", "joint", [], "validation", [[0.9], [0.9, 0.9]], reference_hash="x")
    rows += run_rows("toy/random/r/seed-0", "random", [], "validation", [[0.5], [0.5, 0.5]])
    return pd.DataFrame(rows)


def test_the_forgetting_ratio_rule_uses_validation_references() -> None:
    points = scoring.score_points(rho_rows(), "m", RHO_GRID, rule="forgetting-ratio")
    assert [point.score for point in points] == pytest.approx([-0.5, -0.25])
    assert scoring.select(points).values == (("toy.lr", "0.01"),)
    assert scoring.select(scoring.score_points(rho_rows(), "m", RHO_GRID)).values == (("toy.lr", "0.1"),)
    assert scoring.RULES["forgetting-ratio"].needs_references and not scoring.RULES["accuracy"].needs_references


def test_the_forgetting_ratio_rule_needs_its_references() -> None:
    rows = rho_rows()
    points = scoring.score_points(rows[rows["method"] != "random"], "m", RHO_GRID, rule="forgetting-ratio")
    assert all(not point.scored and "no complete random reference on validation" in point.problem
               for point in points)
    with pytest.raises(TuningError, match="random reference"):
        scoring.select(points)


def test_references_longer_than_the_run_are_cut_to_its_stages() -> None:
    """A 1-stage run scored against 2-stage references takes their stage-1 part: joint [[0.9]], random [[0.5]], so
    A_J = 0.9 and A_R = 0.5. q0, A = 0.9: (0.9-0.5)/(0.9-0.5) - 1 = 0.0; q1, A = 0.7: (0.7-0.5)/0.4 - 1 = -0.5.
    (The whole 2-stage references would give q0 ((0.4/0.3 - 1) + (0.4/0.2 - 1)) / 2 = 2/3.)"""
    rows = []
    for index, (value, accuracy) in enumerate([("0.1", 0.9), ("0.01", 0.7)]):
        rows += run_rows(f"toy/m/q{index}/seed-0", "m", [f"toy.lr={value}"], "validation", [[accuracy]])
    rows += run_rows("toy/joint/j/seed-0", "joint", [], "validation", [[0.9], [0.8, 0.7]])
    rows += run_rows("toy/random/r/seed-0", "random", [], "validation", [[0.5], [0.5, 0.5]])
    points = scoring.score_points(pd.DataFrame(rows), "m", RHO_GRID, rule="forgetting-ratio")
    assert [point.score for point in points] == pytest.approx([0.0, -0.5])
    assert scoring.select(points).values == (("toy.lr", "0.1"),)


def write(tmp_path: Path) -> tuple[Path, tuned_file.TunedChoice]:
    choice = choose(grid_rows())
    path = tuned_file.tuned_path(tmp_path, "toy", "m", "abc123")
    tuned_file.write_tuned(path, choice)
    return path, choice


def test_the_tuned_file_holds_the_choice_and_reads_back(tmp_path: Path) -> None:
    path, choice = write(tmp_path)
    assert path == tmp_path / "toy" / "_tuned" / "m-abc123.yaml"
    data = yaml.safe_load(path.read_text())
    assert (data["benchmark"], data["config_hash"], data["method"], data["grid"]) == ("toy", "abc123", "m", GRID)
    assert (data["rule"], data["tuning_seed"], data["clbench_version"]) == ("accuracy", 0,
                                                                         tuned_file.clbench.__version__)
    assert [entry["validation_score"] for entry in data["points"]] == pytest.approx([0.75, 0.85, 0.85, 0.65])
    assert data["chosen"] == {"toy.lr": "0.1", "toy.c": "2"}
    assert tuned_file.read_tuned(path, "toy", "abc123", "m") == choice
    with pytest.raises(TuningError, match="exists"):
        tuned_file.write_tuned(path, choice)


@pytest.mark.parametrize(("asked", "difference"), [
    (("other", "abc123", "m"), "benchmark toy, not other"),
    (("toy", "def456", "m"), "config hash abc123, not def456"),
    (("toy", "abc123", "hat"), "method m, not hat"),
])
def test_a_tuned_file_for_something_else_is_refused(tmp_path: Path, asked: tuple[str, str, str],
                                                    difference: str) -> None:
    path, _ = write(tmp_path)
    with pytest.raises(TuningError) as refused:
        tuned_file.read_tuned(path, *asked)
    message = str(refused.value)
    assert difference in message and "\n" not in message
    assert f"clbench tune {asked[0]} -m {asked[2]} --grid toy.lr=0.1,0.01 --grid toy.c=1,2" in message


def test_the_refusal_names_the_asking_run_s_options(tmp_path: Path) -> None:
    path, _ = write(tmp_path)
    # The file's --set is training.max_epochs=3; a run with max_epochs=5 has another config hash: the command that
    # makes its tuned file carries the run's own options.
    with pytest.raises(TuningError, match=r"--grid toy.c=1,2 --set training.max_epochs=5 --evaluation task-aware"):
        tuned_file.read_tuned(path, "toy", "def456", "m", overrides=["training.max_epochs=5"])


def edit(path: Path, change, redigest: bool = False) -> None:
    """Change the tuned file's fields; with `redigest`, recompute its digest as a careful hand-editor would
    (sha256 of the fields without the digest, as compact JSON with sorted keys)."""
    data = yaml.safe_load(path.read_text())
    change(data)
    if redigest:
        content = {key: value for key, value in data.items() if key != "digest"}
        data["digest"] = hashlib.sha256(json.dumps(content, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def test_a_changed_score_is_refused(tmp_path: Path) -> None:
    path, _ = write(tmp_path)
    # p0's score 0.75 -> 0.70: the chosen point is still the best, but the file is not what tune wrote.
    edit(path, lambda data: data["points"][0].update(validation_score=0.70))
    with pytest.raises(TuningError, match="changed after `clbench tune` wrote it"):
        tuned_file.read_tuned(path, "toy", "abc123", "m")


@pytest.mark.parametrize("redigest", [False, True])
def test_chosen_values_that_do_not_match_the_scores_are_refused(tmp_path: Path, redigest: bool) -> None:
    path, _ = write(tmp_path)
    # p2 ties p1 at 0.85, but the tie rule gives p1: choosing p2 does not match the scores, digest or not.
    edit(path, lambda data: data.update(chosen={"toy.lr": "0.01", "toy.c": "1"}), redigest)
    with pytest.raises(TuningError, match="not the best validation score under rule accuracy"):
        tuned_file.read_tuned(path, "toy", "abc123", "m")


def test_a_recomputed_digest_still_needs_the_file_s_own_fields(tmp_path: Path) -> None:
    path, _ = write(tmp_path)
    # A field the reader does not know, digest recomputed: the content is not what this clbench writes.
    edit(path, lambda data: data.update(note="hand-picked"), redigest=True)
    with pytest.raises(TuningError, match="changed after"):
        tuned_file.read_tuned(path, "toy", "abc123", "m")
    path.write_text("not: [a tuned file")
    with pytest.raises(TuningError, match="not a readable tuned file"):
        tuned_file.read_tuned(path, "toy", "abc123", "m")


def test_a_comment_edit_leaves_the_identity_that_runs_record_and_the_report_counts(tmp_path: Path) -> None:
    path, choice = write(tmp_path)
    recorded = tuned_file.tuned_sha256(path)  # what `train --tuned` records in every row of its runs
    before = tuned_file.file_sha256(path)
    rows = grid_rows()
    tuned_run = pd.DataFrame(run_rows("toy/m/t1/seed-1", "m", ["training.max_epochs=3", "toy.lr=0.1", "toy.c=2"],
                                      "test", [[0.9], [0.8, 0.9]], seed=1)).assign(tuned_sha256=recorded)
    path.write_text(path.read_text().replace("# Hyper-parameters", "# Tuned on Monday.\n# Hyper-parameters"))
    assert tuned_file.file_sha256(path) != before  # other bytes, the same fields
    assert tuned_file.tuned_sha256(path) == recorded
    assert tuned_file.read_tuned(path, "toy", "abc123", "m") == choice
    points, notes = tuning_points(pd.concat([rows, tuned_run], ignore_index=True), [path])
    assert set(points["tuned_seeds"]) == {"1"} and not [note for note in notes if "changed" in note]


def test_runs_that_recorded_the_file_s_bytes_are_still_counted(tmp_path: Path) -> None:
    path, _ = write(tmp_path)
    stored_before = pd.DataFrame(run_rows("toy/m/t2/seed-2", "m", ["training.max_epochs=3", "toy.lr=0.1", "toy.c=2"],
                                          "test", [[0.9], [0.8, 0.9]], seed=2))
    points, _ = tuning_points(pd.concat([grid_rows(), stored_before.assign(
        tuned_sha256=tuned_file.file_sha256(path))], ignore_index=True), [path])
    assert set(points["tuned_seeds"]) == {"2"}


def test_file_sha256(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"abc")
    # The sha256 of "abc" (FIPS 180-2, appendix B.1).
    assert tuned_file.file_sha256(path) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def test_unknown_rules_and_empty_grids_are_refused() -> None:
    with pytest.raises(TuningError, match="use one of accuracy, forgetting-ratio"):
        scoring.score_points(grid_rows(), "m", GRID, rule="loss")
    with pytest.raises(TuningError, match="needs a grid"):
        scoring.score_points(grid_rows(), "m", [])


@pytest.mark.parametrize(("grid", "chosen", "ends"), [
    (["ewc.lamb=500,5000,50000"], [("ewc.lamb", "50000")], [("ewc.lamb", "50000", "highest")]),
    (["ewc.lamb=500,5000,50000"], [("ewc.lamb", "5000")], []),
    (["ewc.lamb=5000,500,50000"], [("ewc.lamb", "500")], [("ewc.lamb", "500", "lowest")]),  # by value, not order
    (["a.x=1e-2,0.1,1", "a.flag=true,false"], [("a.x", "1e-2"), ("a.flag", "true")], [("a.x", "1e-2", "lowest")]),
    (["a.x=0.1,1", "a.y=[1,2],[3]"], [("a.x", "1"), ("a.y", "[3]")], [("a.x", "1", "highest")]),
])
def test_a_chosen_value_at_an_end_of_its_grid_is_found(grid: list[str], chosen: list[tuple[str, str]],
                                                       ends: list[tuple[str, str, str]]) -> None:
    assert [found[:3] for found in scoring.grid_ends(grid, chosen)] == ends


def test_report_tuning_notes_a_choice_at_an_end_of_its_grid(tmp_path: Path) -> None:
    from clbench.tuning.comparison import tuning_points

    path, choice = write(tmp_path)
    assert choice.chosen == (("toy.lr", "0.1"), ("toy.c", "2"))  # both the largest of their values
    _, notes = tuning_points(grid_rows(), [path])
    assert f"m: toy.lr=0.1 is the highest value of its grid (0.1, 0.01); the best value may lie beyond the grid: " \
           f"tune again with values above 0.1 ({path.name})" in notes
    assert any(note.startswith("m: toy.c=2 is the highest value of its grid (1, 2)") for note in notes)


@pytest.mark.parametrize(("scenario", "asked", "method", "evaluation", "noted"), [
    ("task", None, "m", "task-aware", False), ("class", None, "m", "task-agnostic", False),
    ("domain", None, "m", "task-aware", False), (None, None, "m", "task-aware", False),
    ("class", None, "hat", "task-aware", True),  # stores task-aware rows only
    ("class", "task-aware", "m", "task-aware", True), ("task", "task-agnostic", "m", "task-agnostic", True),
    ("domain", "task-agnostic", "m", "task-agnostic", False)])
def test_tuning_scores_in_the_scenario_s_evaluation(scenario: str | None, asked: str | None, method: str,
                                                    evaluation: str, noted: bool) -> None:
    rows = pd.DataFrame(run_rows("toy/m/p/seed-0", "m", [], "validation", [[0.9]])
                        + run_rows("toy/m/p/seed-0", "m", [], "validation", [[0.5]], evaluation="task-agnostic")
                        + run_rows("toy/hat/p/seed-0", "hat", [], "validation", [[0.9]]))
    chosen, notes = scoring.tuning_evaluation(rows, method, scenario, asked)
    assert chosen == evaluation
    assert bool(notes) == noted
