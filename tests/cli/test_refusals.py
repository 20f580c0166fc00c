"""One refusal rule (`clbench.approaches.resolution.refusal`): `list`, `spec`, `train` and `tune` say why a
benchmark refuses an approach in the same words; `--grid` values that read the same are refused up front; a
`training.class_loss` the scenario ignores leaves the run the default's."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
from clihelpers import invoke_fresh, offline

from clbench.approaches.registry import approach_names
from clbench.approaches.resolution import refusal
from clbench.cli.listing import refusals
from clbench.spec import benchmark_names, benchmarks_dir, load_benchmark

pytestmark = pytest.mark.usefixtures("restored_registry")

# no ResNet body: each says why (`unsupported_networks`)
RESNET18 = {"adahat", "gpm", "hat", "packnet", "pathnet", "pnn", "supsup", "wsn"}
MLP_ONLY = {"supsup"}  # no AlexNet-like body either
NEED_TASK_ID = {"adahat", "hat", "packnet", "pathnet", "pnn", "wsn"}  # refused in the domain scenario with icarl
# The shipped matrix's refusals, by hand: benchmark -> {approach: the spec key that refuses it}.
REFUSED = {
    "cifar10-5": dict.fromkeys(RESNET18, "network.kind"),
    # supsup, er-ace, xder, bic, lucir, gdumb: `refuses_domain`
    "rot-mnist": dict.fromkeys(NEED_TASK_ID | {"bic", "gdumb", "icarl", "lucir", "supsup", "er-ace", "xder"},
                               "data.scenario"),
    **{name: dict.fromkeys(MLP_ONLY, "network.kind") for name in ("mixture8", "cifar-incremental", "cifar100-10")},
    "seq-mnist": {"pathnet": "training",  # no validation split for its tournament
                  "gpm": "data.scenario"},  # the class scenario (`refuses_class`)
}


def test_the_rule_over_every_shipped_benchmark_and_approach() -> None:
    assert set(REFUSED) <= set(benchmark_names())
    for benchmark in benchmark_names():
        spec = load_benchmark(benchmark)
        # Avalanche's av-* follow the same rule, whose refusals depend on the installed extra:
        # tests/approaches/test_avalanche_table.py
        refused = {name: refusal(spec, name) for name in approach_names() if not name.startswith("av-")}
        found = {name: why.key for name, why in refused.items() if why is not None}
        assert found == REFUSED.get(benchmark, {}), benchmark
        for name, why in refused.items():
            if why is not None:
                assert why.reason.startswith((f"approach {name} ", f"approach {name}: ")) and "\n" not in why.reason


def run(tmp_path: Path, *arguments: str) -> tuple[int, str]:
    """A command with no data, no mirror and results in `tmp_path`: one that got past its checks would fail."""
    return invoke_fresh(*arguments, *offline(tmp_path), "--results", str(tmp_path / "r"))


def test_list_shows_every_refusal_and_exits_0() -> None:
    code, output = invoke_fresh("list", "-b", "seq-mnist", "-b", "rot-mnist")
    assert code == 0, output  # before: pathnet's protocol refusal ended `list` with exit 2
    # the notes' numbers, as the list gives them (Avalanche's av-* refusals come between them when the extra is in)
    numbers = {(benchmark, name): note_number(output, refusal(load_benchmark(benchmark), name).reason)
               for benchmark, name in [("seq-mnist", "gpm"), ("seq-mnist", "pathnet"), ("rot-mnist", "adahat"),
                                       ("rot-mnist", "bic"), ("rot-mnist", "er-ace"), ("rot-mnist", "gdumb"),
                                       ("rot-mnist", "hat"), ("rot-mnist", "icarl"), ("rot-mnist", "lucir"),
                                       ("rot-mnist", "packnet"), ("rot-mnist", "pathnet"), ("rot-mnist", "pnn")]}
    assert list(numbers.values()) == sorted(set(numbers.values()))
    pathnet = output[output.rindex("│ pathnet"):].split("│")[1:4]  # the parameter table is the last one
    assert [cell.strip() for cell in pathnet] == ["pathnet", f"refused ({numbers['seq-mnist', 'pathnet']})",
                                                  f"refused ({numbers['rot-mnist', 'pathnet']})"]
    hat = output[output.rindex("│ hat"):].split("│")[1:4]
    assert hat[1].strip().replace(",", "").isdigit()  # counted on seq-mnist
    assert hat[2].strip() == f"refused ({numbers['rot-mnist', 'hat']})"


def note_number(output: str, reason: str) -> int:
    """The n of the note `(n) refused: <reason>` under `list`'s parameter table."""
    match = re.search(rf"\((\d+)\) refused: {re.escape(reason)}", output)
    assert match, reason
    return int(match.group(1))


def test_list_train_tune_and_spec_give_one_reason_in_the_same_words(tmp_path: Path) -> None:
    reason = refusal(load_benchmark("rot-mnist"), "hat").reason
    assert reason.startswith("approach hat needs the task id")
    where = benchmarks_dir() / "rot-mnist.yaml"
    _, listed = invoke_fresh("list", "-b", "rot-mnist")
    train = run(tmp_path, "train", "rot-mnist", "-m", "hat")
    tune = run(tmp_path, "tune", "rot-mnist", "-m", "hat", "--grid", "hat.smax=25,50")
    _, printed = invoke_fresh("spec", "rot-mnist")
    assert f"refused: {reason}" in listed and f"# - {reason}" in printed
    assert train == tune == (2, f"error: {where}: {reason}")
    assert not (tmp_path / "r").exists()  # refused before any run


def test_train_names_the_option_that_made_the_refusal(tmp_path: Path) -> None:
    code, output = run(tmp_path, "train", "mnist2", "-m", "pathnet", "--set", "data.validation_fraction=0",
                       "--set", "training.early_stopping=false")
    assert code == 2
    assert output.startswith("error: ") and "approach pathnet: its tournament scores the paths" in output


def test_gdumb_batch_norm_on_a_conv_body_is_refused_before_any_run(tmp_path: Path) -> None:
    """`gdumb.batch_norm` builds the authors' batch-norm MLP: on cifar10-5's ResNet-18 it is refused up front,
    through the same rule (no data is needed: none is fetched here)."""
    code, output = run(tmp_path, "train", "cifar10-5", "-m", "gdumb", "--set", "gdumb.batch_norm=true")
    assert code == 2
    assert "`approaches.gdumb.batch_norm` is true with network.kind resnet18" in output
    assert not (tmp_path / "r").exists()  # refused before any run


def test_spec_of_a_benchmark_that_refuses_nothing_lists_no_refusals() -> None:
    code, output = invoke_fresh("spec", "mnist2")
    refused = refusals(load_benchmark("mnist2"))  # with the extra `avalanche`: its class-incremental strategies
    assert code == 0 and all(name.startswith("av-") for name in refused)
    assert ("refuses" in output) == bool(refused)


@pytest.mark.parametrize("command", ["tune", "train"])
def test_grid_values_that_read_the_same_are_refused_before_any_training(command: str, tmp_path: Path) -> None:
    code, output = run(tmp_path, command, "mnist5", "-m", "ewc", "--grid", "ewc.lamb=1e3,1000")
    assert code == 2
    assert output == ("error: --grid 'ewc.lamb=1e3,1000': 1e3 and 1000 are the same value once read; give each value "
                      "once")
    assert not (tmp_path / "r").exists() and not (tmp_path / "data").exists()


# ---------------------------------------------------------------------------------------------- class_loss
def plan(tmp_path: Path, benchmark: str, method: str, *overrides: str):  # type: ignore[no-untyped-def]
    from clbench.run.plan import plan_runs

    [only] = plan_runs(load_benchmark(benchmark, list(overrides)), [method], [0], tmp_path, overrides)
    return only


@pytest.mark.parametrize("override", ["training.class_loss=all", "ewc.training.class_loss=all"])
def test_a_class_loss_the_task_scenario_ignores_is_the_default_s_run_with_a_warning(
        override: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    default = plan(tmp_path, "mnist5", "ewc")
    with caplog.at_level(logging.WARNING, logger="clbench.run.plan"):
        given = plan(tmp_path, "mnist5", "ewc", override)
    assert (given.config_hash, given.reference_hash, given.run_dir) == (default.config_hash, default.reference_hash,
                                                                        default.run_dir)
    assert given.approach.training.class_loss == "seen"  # what its rows store
    [record] = caplog.records
    assert record.getMessage().startswith(f"--set {override}: ") and "data.scenario=task" in record.getMessage()


def test_the_class_scenario_keeps_class_loss_in_the_run_s_identity(tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="clbench.run.plan"):
        seen = plan(tmp_path, "mnist5", "sgd", "data.scenario=class")
        every = plan(tmp_path, "mnist5", "sgd", "data.scenario=class", "training.class_loss=all")
    assert seen.config_hash != every.config_hash and seen.reference_hash != every.reference_hash
    assert every.approach.training.class_loss == "all" and not caplog.records
