"""Which joint and random runs a run's forgetting ratio is computed against (never the first by order).

Every expected rho is computed by hand: rho^{u<=t} = (A - A_R) / (A_J - A_R) - 1, averaged over u <= t.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_report import write_run

from clbench.report import build_report, load_results, reference_key, run_values

QUICK = ["training.max_epochs=5"]


def write_mixed_folder(results: Path) -> None:
    """A quick and a full joint (same data and network), and joint runs of two pmnist-like variants."""
    write_run(results, "random", 0, [[0.5], [0.5, 0.5]], config_hash="r0", overrides=[])
    write_run(results, "joint", 0, [[0.8], [0.8, 0.8]], config_hash="jquick", overrides=QUICK)
    write_run(results, "joint", 0, [[0.95], [0.95, 0.95]], config_hash="jfull", overrides=[])
    write_run(results, "joint", 0, [[0.7], [0.7, 0.7]], config_hash="jsmall", variant="small",
              overrides=["variant=small"])
    write_run(results, "joint", 0, [[0.9], [0.9, 0.9]], config_hash="jlarge", variant="large",
              overrides=["variant=large"])
    write_run(results, "sgd", 0, [[0.8], [0.65, 0.8]], config_hash="squick", overrides=QUICK)
    write_run(results, "sgd", 0, [[0.95], [0.5, 0.95]], config_hash="sfull", overrides=[])
    write_run(results, "sgd", 0, [[0.7], [0.6, 0.7]], config_hash="ssmall", variant="small",
              overrides=["variant=small"])
    write_run(results, "sgd", 0, [[0.9], [0.6, 0.9]], config_hash="slarge", variant="large",
              overrides=["variant=large", "approaches.sgd.lr=0.1"])


def test_each_run_uses_the_joint_of_its_own_protocol_and_variant(tmp_path: Path) -> None:
    write_mixed_folder(tmp_path)
    notes: list[str] = []
    values = run_values(load_results(tmp_path, "b"), "forgetting-ratio", notes)
    assert notes == []
    # quick: A_J = 0.8, A_R = 0.5: rho1 = 0.3/0.3 - 1 = 0; task 1 at t=2: 0.15/0.3 - 1 = -0.5 -> rho2 = -0.25
    assert values["b/sgd/squick/seed-0"] == pytest.approx([0.0, -0.25])
    # full: A_J = 0.95: task 1 at t=2: 0/0.45 - 1 = -1 -> rho2 = -0.5 (against the quick joint it would be -0.25)
    assert values["b/sgd/sfull/seed-0"] == pytest.approx([0.0, -0.5])
    # small: A_J = 0.7: 0.1/0.2 - 1 = -0.5 -> -0.25; large: A_J = 0.9: 0.1/0.4 - 1 = -0.75 -> -0.375
    assert values["b/sgd/ssmall/seed-0"] == pytest.approx([0.0, -0.25])
    assert values["b/sgd/slarge/seed-0"] == pytest.approx([0.0, -0.375])


def test_reference_key_ignores_approach_options_and_follows_the_last_set() -> None:
    run = {"data_hash": "d0", "variant": "large",
           "overrides": '["approaches.hat.training.max_epochs=50", "training.lr=0.1", "training.lr=0.05"]'}
    assert reference_key(run) == ("d0", "large", (("training.lr", "0.05"),))


def write_per_seed_folder(results: Path) -> None:
    """References that differ per seed: mixing seeds would change every number below."""
    write_run(results, "joint", 0, [[0.9], [0.9, 0.9]], overrides=[])
    write_run(results, "random", 0, [[0.5], [0.5, 0.5]], overrides=[])
    write_run(results, "joint", 1, [[0.8], [0.8, 0.8]], overrides=[])
    write_run(results, "random", 1, [[0.6], [0.6, 0.6]], overrides=[])
    write_run(results, "sgd", 0, [[0.9], [0.7, 0.9]], overrides=[])
    write_run(results, "sgd", 1, [[0.8], [0.65, 0.8]], overrides=[])


def test_each_seed_uses_the_references_of_its_seed(tmp_path: Path) -> None:
    write_per_seed_folder(tmp_path)
    report = build_report(tmp_path, "b")
    assert report.notes == []
    [(label, cells)] = report.rows
    # seed 0: (0.7-0.5)/(0.9-0.5) - 1 = -0.5 -> rho2 = -0.25
    # seed 1: (0.65-0.6)/(0.8-0.6) - 1 = -0.75 -> rho2 = -0.375 (with seed 0's references: -0.4375)
    assert label == "sgd"
    assert cells[0].mean == pytest.approx(0.0) and cells[0].std == pytest.approx(0.0)
    assert cells[1].mean == pytest.approx(-0.3125)
    assert cells[1].std == pytest.approx(0.125 / 2 ** 0.5)
    assert cells[1].n == 2


def test_no_matching_joint_is_named_with_the_command_that_makes_it(tmp_path: Path) -> None:
    write_mixed_folder(tmp_path)
    write_run(tmp_path, "ewc", 0, [[0.9], [0.6, 0.9]], config_hash="e3", variant="large",
              overrides=["variant=large", "training.max_epochs=3", "approaches.ewc.lamb=100"])
    report = build_report(tmp_path, "b")
    [note] = report.notes
    assert note.startswith("left out b/ewc/e3/seed-0: no joint reference for seed 0")
    command = f"clbench train b -m joint --seeds 0 --set variant=large --set training.max_epochs=3 --results {tmp_path}"
    assert f"`{command}`" in note
    assert "ewc" not in dict(report.rows)


def test_the_variant_goes_into_the_command_when_only_the_column_has_it(tmp_path: Path) -> None:
    write_run(tmp_path, "sgd", 0, [[0.9], [0.6, 0.9]], variant="large", overrides=[])
    [note] = build_report(tmp_path, "b").notes
    assert "`clbench train b -m joint,random --seeds 0 --set variant=large --results" in note


def test_two_matching_joints_are_refused_and_named(tmp_path: Path) -> None:
    write_per_seed_folder(tmp_path)
    write_run(tmp_path, "joint", 0, [[0.85], [0.85, 0.85]], config_hash="j2", overrides=[])
    report = build_report(tmp_path, "b")
    [note] = report.notes
    assert note.startswith("left out b/sgd/c0/seed-0: 2 joint runs match it equally")
    assert "b/joint/c0/seed-0" in note and "b/joint/j2/seed-0" in note
    assert str(tmp_path / "b" / "joint" / "j2" / "seed-0") in note
    assert dict(report.rows)["sgd"][1].n == 1  # seed 1 still has one joint


def test_two_random_runs_are_refused_only_when_their_numbers_differ(tmp_path: Path) -> None:
    write_per_seed_folder(tmp_path)
    write_run(tmp_path, "random", 0, [[0.5], [0.5, 0.5]], config_hash="r2", overrides=[])  # same numbers
    assert build_report(tmp_path, "b").notes == []
    write_run(tmp_path, "random", 1, [[0.4], [0.4, 0.4]], config_hash="r2", overrides=[])  # other numbers
    report = build_report(tmp_path, "b")
    [note] = report.notes
    assert note.startswith("left out b/sgd/c0/seed-1: 2 random runs match it equally and their accuracies differ")
    assert dict(report.rows)["sgd"][1].mean == pytest.approx(-0.25)  # seed 0 only
