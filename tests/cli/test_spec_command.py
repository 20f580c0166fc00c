"""`clbench spec`: the resolved spec as commented YAML that loads back into the same resolved spec."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from clbench.approaches.resolution import resolve
from clbench.cli import app
from clbench.run.plan import plan_runs
from clbench.spec import load_benchmark

runner = CliRunner()


def printed_spec(tmp_path: Path, *arguments: str) -> Path:
    result = runner.invoke(app, ["spec", *arguments])
    assert result.exit_code == 0, result.output
    path = tmp_path / "mine.yaml"
    path.write_text(result.stdout)
    return path


def assert_same_resolved_spec(original: str, copy: Path, overrides: list[str]) -> None:
    before, after = load_benchmark(original, overrides), load_benchmark(str(copy))
    assert (after.name, after.description, after.variant) == (before.name, before.description, before.variant)
    assert (after.data, after.network, after.training) == (before.data, before.network, before.training)
    assert list(after.approaches) == list(before.approaches)
    assert after.grids == before.grids  # `clbench tune`'s default grids, values and sources
    for method in before.approaches:
        assert resolve(after, method) == resolve(before, method), method
    methods = list(before.approaches)
    hashes = [[plan.config_hash for plan in plan_runs(spec, methods, [0], Path("r"))] for spec in (before, after)]
    assert hashes[0] == hashes[1]


@pytest.mark.parametrize(("benchmark", "overrides"), [
    ("mnist2", []),
    ("pmnist", ["variant=large"]),
    ("mixture8", []),
    ("cifar-incremental", []),
    ("cifar10-5", []),
    ("cifar10-5", ["variant=buffer-5120", "network.nf=20"]),
    ("mnist2", ["hat.smax=25", "training.max_epochs=3", "data.max_train_samples=500"]),
    ("seq-mnist", []),
    ("seq-mnist", ["variant=buffer-5120"]),
])
def test_printed_spec_loads_back_into_the_same_resolved_spec(tmp_path: Path, benchmark: str,
                                                             overrides: list[str]) -> None:
    arguments = [benchmark, *[part for text in overrides for part in ("--set", text)]]
    assert_same_resolved_spec(benchmark, printed_spec(tmp_path, *arguments), overrides)


def test_overrides_and_variant_values_are_written_out(tmp_path: Path) -> None:
    path = printed_spec(tmp_path, "pmnist", "--set", "variant=medium", "--set", "hat.c=1.5",
                        "--set", "training.max_epochs=3")
    raw = yaml.safe_load(path.read_text())
    assert raw["network"]["hidden"] == [500, 500]  # the medium variant, merged
    assert raw["approaches"]["hat"]["smax"] == 400.0 and raw["approaches"]["hat"]["c"] == 1.5
    assert raw["training"]["max_epochs"] == 3
    assert raw["variant"] == "medium" and raw["variants"] == {"medium": {}}


def test_an_approach_s_own_optimizer_lr_is_not_called_sgd_s(tmp_path: Path) -> None:
    """supsup's section sets rmsprop: its lr's comment must not call it plain SGD's (issue 58, item 7)."""
    lines = printed_spec(tmp_path, "pmnist").read_text().splitlines()
    section = lines[lines.index("  supsup:"):][:12]
    assert any(line.startswith("      optimizer: rmsprop  # ") for line in section)
    lr = next(line for line in section if line.startswith("      lr: 0.0001  # "))
    assert "of plain SGD" not in lr and "learning rate of the optimizer" in lr


def test_each_field_carries_its_doc_as_a_comment(tmp_path: Path) -> None:
    lines = printed_spec(tmp_path, "mnist2").read_text().splitlines()
    assert "  lr: 0.05  # initial learning rate of the optimizer (`optimizer`; paper: 0.05, plain SGD)" in lines
    assert "  hidden: [800, 800, 800]  # mlp: hidden layer sizes (paper pmnist: 100/500/2000 x2; split MNIST: 800 x3)" \
        in lines
    assert "    smax: 400.0  # stability s_max of the annealed gate (Eq. 3; paper 400, grid 25..800)" in lines
    assert "      max_epochs: 50  # epochs per task at most (paper: 200)" in lines  # hat's own training section
    fields = [line for line in lines if line.startswith("  ") and not line.endswith(":")]
    assert fields and all("  # " in line for line in fields)


def test_spec_of_a_spec_file_prints_it_resolved(tmp_path: Path) -> None:
    first = printed_spec(tmp_path, "mnist2", "--set", "training.max_epochs=2")
    again = runner.invoke(app, ["spec", str(first)])
    assert again.exit_code == 0, again.output
    body = [line for line in again.stdout.splitlines() if not line.startswith("#")]
    assert body == [line for line in first.read_text().splitlines() if not line.startswith("#")]


@pytest.mark.parametrize("arguments", [["mnist3"], ["missing.yaml"], ["mnist2", "--set", "training.epochs=3"],
                                       ["mnist2", "--set", "hat.smax=huge"]])
def test_bad_input_exits_2(arguments: list[str]) -> None:
    result = runner.invoke(app, ["spec", *arguments])
    assert result.exit_code == 2, result.output
    assert "error:" in result.output


def test_a_spec_with_its_own_data_sets_prints_them_and_loads_back(tmp_path: Path) -> None:
    import numpy as np

    images = np.stack([np.full((28, 28), value, np.uint8) for value in (10, 20, 30, 40)])  # (4, 28, 28)
    np.savez(tmp_path / "arrays.npz", x_train=images, y_train=np.array([0, 1, 0, 1]), x_test=images[:2],
             y_test=np.array([0, 1]))
    original = tmp_path / "own.yaml"
    original.write_text(
        "name: own\ndescription: two classes of my arrays\n"
        "datasets:\n  my-arrays: {format: npz, path: ./arrays.npz}\n"
        "data: {kind: split, datasets: [my-arrays], classes_per_task: [2], form: mnist28}\n"
        "network: {kind: mlp, hidden: [8]}\ntraining: {max_epochs: 1}\napproaches: {sgd: {}}\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    copy = printed_spec(elsewhere, str(original))
    text = copy.read_text()
    assert "datasets:" in text and str(tmp_path / "arrays.npz") in text
    assert load_benchmark(str(copy)).datasets == load_benchmark(str(original)).datasets
    assert_same_resolved_spec(str(original), copy, [])
