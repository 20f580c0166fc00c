"""Which `joint` and `random` runs a run is measured against (issue: references were picked by sort order).

A run's joint reference shares its data, network and benchmark protocol (`reference_hash`) and its seed; its
random reference shares its data (`data_hash`) and seed. Every expected value below is worked out by hand from

    rho^{<=t} = 1/t sum_{u<=t} [ (A^{u<=t} - R_u) / (J^{u<=t} - R_u) - 1 ],  R_u = mean of the random run's column u.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from resultbuilders import write_run

from clbench.report.loading import load_results
from clbench.report.statistics import run_values
from clbench.report.tables import build_report
from clbench.results import run_directory

# Seed 0: R = (0.2, 0.4); seed 1: R = (0.1, 0.3) (the random runs' column means).
RANDOM = {0: [[0.2], [0.2, 0.4]], 1: [[0.1], [0.1, 0.3]]}
JOINT_QUICK = {0: [[0.6], [0.6, 0.8]], 1: [[0.5], [0.5, 0.7]]}
JOINT_FULL = {0: [[1.0], [1.0, 1.0]], 1: [[0.9], [0.9, 0.9]]}
SGD_QUICK = {0: [[0.6], [0.4, 0.8]], 1: [[0.5], [0.4, 0.7]]}
SGD_FULL = {0: [[1.0], [0.8, 1.0]], 1: [[0.9], [0.7, 0.9]]}

QUICK = ["training.max_epochs=5"]


def two_protocols(results: Path) -> None:
    """Benchmark `b`: a quick and a full protocol (same data d0), each with its own joint; one random per seed."""
    for seed in (0, 1):
        write_run(results, "random", seed, RANDOM[seed], config_hash="r0", overrides=[])
        write_run(results, "joint", seed, JOINT_QUICK[seed], config_hash="jq", reference_hash="quick",
                  overrides=QUICK)
        write_run(results, "joint", seed, JOINT_FULL[seed], config_hash="jf", reference_hash="full", overrides=[])
        write_run(results, "sgd", seed, SGD_QUICK[seed], config_hash="sq", reference_hash="quick", overrides=QUICK)
        write_run(results, "sgd", seed, SGD_FULL[seed], config_hash="sf", reference_hash="full", overrides=[])


def curves(results: Path, benchmark: str = "b") -> tuple[dict[str, list[float]], list[str]]:
    notes: list[str] = []
    values = run_values(load_results(results, benchmark), "forgetting-ratio", notes)
    return {run_id: [round(float(v), 6) for v in curve] for run_id, curve in values.items()}, notes


def test_each_protocol_is_measured_against_its_own_joint_and_seed(tmp_path: Path) -> None:
    two_protocols(tmp_path)
    values, notes = curves(tmp_path)
    assert notes == []
    # seed 0, quick: t=1 (0.6-0.2)/(0.6-0.2)-1 = 0; t=2 1/2[(0.4-0.2)/(0.6-0.2)-1 + (0.8-0.4)/(0.8-0.4)-1] = -0.25
    assert values["b/sgd/sq/seed-0"] == [0.0, -0.25]
    # seed 1, quick: 1/2[(0.4-0.1)/(0.5-0.1)-1 + (0.7-0.3)/(0.7-0.3)-1] = -0.125
    assert values["b/sgd/sq/seed-1"] == [0.0, -0.125]
    # seed 0, full: 1/2[(0.8-0.2)/(1.0-0.2)-1 + (1.0-0.4)/(1.0-0.4)-1] = -0.125
    assert values["b/sgd/sf/seed-0"] == [0.0, -0.125]
    # seed 1, full: 1/2[(0.7-0.1)/(0.9-0.1)-1 + (0.9-0.3)/(0.9-0.3)-1] = -0.125
    assert values["b/sgd/sf/seed-1"] == [0.0, -0.125]


def test_report_means_use_each_runs_own_references(tmp_path: Path) -> None:
    two_protocols(tmp_path)
    report = build_report(tmp_path, "b")
    means = {label: [round(cell.mean, 6) for cell in cells] for label, cells in report.rows}
    # quick: mean(-0.25, -0.125) = -0.1875; full: mean(-0.125, -0.125) = -0.125 (never the other joint's numbers:
    # quick sgd against the full joint would give 1/2[(0.4-0.2)/0.8-1 + (0.8-0.4)/0.6-1] = -0.541667 at seed 0)
    assert sorted(means.values()) == [[0.0, -0.1875], [0.0, -0.125]]
    assert not any("left out" in note for note in report.notes)


def test_pmnist_variants_with_the_same_data_use_their_own_networks_joint(tmp_path: Path) -> None:
    for variant, joint, sgd in (("small", [[0.6], [0.6, 0.8]], [[0.6], [0.4, 0.8]]),
                                ("large", [[1.0], [1.0, 1.0]], [[1.0], [0.6, 1.0]])):
        options = [f"variant={variant}"]
        write_run(tmp_path, "joint", 0, joint, config_hash=f"j-{variant}", data_hash="dp", benchmark="p",
                  variant=variant, reference_hash=variant, overrides=options)
        write_run(tmp_path, "sgd", 0, sgd, config_hash=f"s-{variant}", data_hash="dp", benchmark="p",
                  variant=variant, reference_hash=variant, overrides=options)
    write_run(tmp_path, "random", 0, RANDOM[0], config_hash="r0", data_hash="dp", benchmark="p", overrides=[])
    values, notes = curves(tmp_path, "p")
    assert notes == []
    assert values["p/sgd/s-small/seed-0"] == [0.0, -0.25]  # as the quick seed-0 case above
    # large: 1/2[(0.6-0.2)/(1.0-0.2)-1 + (1.0-0.4)/(1.0-0.4)-1] = -0.25
    assert values["p/sgd/s-large/seed-0"] == [0.0, -0.25]
    # with the small network's joint, the large run would be 1/2[(0.6-0.2)/0.4-1 + (1.0-0.4)/0.4-1] = +0.25
    assert values["p/sgd/s-large/seed-0"] != [0.0, 0.25]


def test_no_matching_joint_is_named_with_the_command_that_makes_it(tmp_path: Path) -> None:
    two_protocols(tmp_path)
    write_run(tmp_path, "sgd", 0, SGD_QUICK[0], config_hash="s7", reference_hash="seven",
              overrides=["training.max_epochs=7", "sgd.clip_grad_norm=5"])
    values, notes = curves(tmp_path)
    assert "b/sgd/s7/seed-0" not in values
    [note] = notes
    assert "left out b/sgd/s7/seed-0: no joint reference for seed 0" in note
    assert f"clbench train b -m joint --seeds 0 --set training.max_epochs=7 --results {tmp_path}" in note
    assert "sgd.clip_grad_norm" not in note  # an approach's own option does not make the reference


def test_two_equally_matching_joints_are_a_refusal_naming_both(tmp_path: Path) -> None:
    two_protocols(tmp_path)
    other = write_run(tmp_path, "joint", 0, [[0.7], [0.7, 0.9]], config_hash="jq2", reference_hash="quick",
                      overrides=QUICK)
    values, notes = curves(tmp_path)
    assert "b/sgd/sq/seed-0" not in values  # never chosen by order
    assert values["b/sgd/sq/seed-1"] == [0.0, -0.125]  # seed 1 has one quick joint
    [note] = [note for note in notes if "b/sgd/sq/seed-0" in note]
    assert "2 joint runs match it equally" in note
    assert str(other) in note and str(run_directory(tmp_path, "b", "joint", "jq", 0)) in note


def test_identical_random_runs_of_other_configs_are_one_reference(tmp_path: Path) -> None:
    two_protocols(tmp_path)
    write_run(tmp_path, "random", 0, RANDOM[0], config_hash="r1", overrides=QUICK)  # the same numbers
    values, notes = curves(tmp_path)
    assert notes == [] and values["b/sgd/sq/seed-0"] == [0.0, -0.25]
    write_run(tmp_path, "random", 0, [[0.3], [0.3, 0.4]], config_hash="r2", overrides=[])  # other numbers
    values, notes = curves(tmp_path)
    assert "b/sgd/sq/seed-0" not in values
    assert any("3 random runs match it equally" in note for note in notes)


def test_a_run_without_a_reference_key_is_left_out_with_what_to_do(tmp_path: Path) -> None:
    two_protocols(tmp_path)
    write_run(tmp_path, "sgd", 0, SGD_QUICK[0], config_hash="old", reference_hash="", overrides=QUICK)
    values, notes = curves(tmp_path)
    assert "b/sgd/old/seed-0" not in values
    assert any("b/sgd/old/seed-0" in note and "re-run it with `--force`" in note for note in notes)


@pytest.mark.parametrize(("overrides", "same"), [
    ([], True),
    (["hat.training.max_epochs=3"], True),  # an approach's own protocol is not the benchmark's
    (["training.max_epochs=3"], False),
    (["network.hidden=[64,64,64]"], False),
    (["data.max_train_samples=100"], False),
])
def test_reference_hash_is_data_network_and_benchmark_protocol(tmp_path: Path, overrides: list[str],
                                                                same: bool) -> None:
    from clbench.run.plan import plan_runs
    from clbench.spec import load_benchmark

    base = {plan.method: plan for plan in plan_runs(load_benchmark("mnist2"), ["hat", "joint"], [0], tmp_path)}
    changed = {plan.method: plan for plan in plan_runs(load_benchmark("mnist2", overrides), ["hat", "joint"], [0],
                                                       tmp_path)}
    # HAT's own 50 epochs (the spec's `approaches.hat.training`) never separate it from its joint
    assert base["hat"].reference_hash == base["joint"].reference_hash
    assert base["hat"].config_hash != base["joint"].config_hash
    assert changed["hat"].reference_hash == changed["joint"].reference_hash
    assert (changed["joint"].reference_hash == base["joint"].reference_hash) is same


def test_pmnist_variants_share_the_data_but_not_the_reference(tmp_path: Path) -> None:
    from clbench.run.plan import plan_runs
    from clbench.spec import load_benchmark

    small, large = (plan_runs(load_benchmark("pmnist", [f"variant={v}"]), ["joint"], [0], tmp_path)[0]
                    for v in ("small", "large"))
    assert small.data_hash == large.data_hash
    assert small.reference_hash != large.reference_hash


def test_an_incomplete_joint_is_no_reference(tmp_path: Path) -> None:
    write_run(tmp_path, "random", 0, RANDOM[0], config_hash="r0", overrides=[])
    write_run(tmp_path, "sgd", 0, SGD_QUICK[0], config_hash="sq", reference_hash="quick", overrides=QUICK)
    # stage 2 lacks task 2: the joint's matrix is [[0.6, nan], [0.6, nan]]
    write_run(tmp_path, "joint", 0, [[0.6], [0.6]], config_hash="jq", reference_hash="quick", overrides=QUICK)
    values, notes = curves(tmp_path)
    assert values == {}
    [note] = notes
    assert note.startswith("left out b/sgd/sq/seed-0: no joint reference for seed 0")
    # beside a complete joint with the same key, the incomplete one is not a second candidate
    write_run(tmp_path, "joint", 0, JOINT_QUICK[0], config_hash="jq2", reference_hash="quick", overrides=QUICK)
    values, notes = curves(tmp_path)
    assert notes == [] and values == {"b/sgd/sq/seed-0": [0.0, -0.25]}  # as the quick seed-0 case above


def test_a_random_reference_with_fewer_stages_than_the_run_is_refused(tmp_path: Path) -> None:
    write_run(tmp_path, "random", 0, [[0.2]], config_hash="r0", overrides=[])  # complete, but one stage
    write_run(tmp_path, "joint", 0, JOINT_QUICK[0], config_hash="jq", reference_hash="quick", overrides=QUICK)
    write_run(tmp_path, "sgd", 0, SGD_QUICK[0], config_hash="sq", reference_hash="quick", overrides=QUICK)
    values, notes = curves(tmp_path)
    assert values == {}
    assert notes == ["left out b/sgd/sq/seed-0: its references have fewer stages than the run"]
    # a joint with fewer stages: the same refusal
    write_run(tmp_path, "random", 0, RANDOM[0], config_hash="r0", overrides=[])
    write_run(tmp_path, "joint", 0, [[0.6]], config_hash="jq", reference_hash="quick", overrides=QUICK)
    values, notes = curves(tmp_path)
    assert values == {}
    assert notes == ["left out b/sgd/sq/seed-0: its references have fewer stages than the run"]
