"""A spec file named like a shipped benchmark but defining another one is refused; `--paper` compares the data too."""

from __future__ import annotations

from pathlib import Path

import pytest
from clihelpers import paper_csv
from resultbuilders import mnist2_config, write_mnist2
from typer.testing import CliRunner

from clbench.cli import app
from clbench.errors import SpecError
from clbench.run.plan import check_shipped_name
from clbench.spec import load_benchmark

runner = CliRunner()
OTHER_MNIST2 = """\
name: mnist2
data: {kind: split, datasets: [mnist], classes_per_task: [2], form: mnist28, shuffle_tasks: false}
network: {kind: mlp, hidden: [20]}
"""


def flat(text: str) -> str:
    return " ".join(text.split())  # rich wraps long lines


def printed_spec(tmp_path: Path, *options: str) -> Path:
    result = runner.invoke(app, ["spec", "mnist2", *[part for text in options for part in ("--set", text)]])
    assert result.exit_code == 0, result.output
    (tmp_path / "copy.yaml").write_text(result.stdout)
    return tmp_path / "copy.yaml"


@pytest.mark.parametrize("command", [["train", "--seeds", "0"], ["evaluate", "--seeds", "0"],
                                     ["bench", "--device", "cpu", "--batches", "1"]])
def test_a_spec_named_like_a_shipped_benchmark_but_different_is_refused(command: list[str], tmp_path: Path) -> None:
    spec = tmp_path / "my.yaml"
    spec.write_text(OTHER_MNIST2)
    result = runner.invoke(app, [command[0], str(spec), "-m", "sgd", *command[1:], "--results",
                                 str(tmp_path / "results"), "--data-dir", str(tmp_path / "data")])
    assert result.exit_code == 2, result.output
    output = flat(result.output)
    assert f"{spec}: `name: mnist2` is a shipped benchmark's name, but this spec's sgd runs differ" in output
    assert "data.classes_per_task=[2] (shipped: [5])" in output and "network.hidden=[20] (shipped: [800, 800, 800])" \
        in output
    assert "rename the benchmark" in output
    assert not (tmp_path / "results").exists()


def test_a_copy_of_the_shipped_spec_keeps_its_name(tmp_path: Path) -> None:
    copy = printed_spec(tmp_path)
    check_shipped_name(load_benchmark(str(copy)), ["sgd", "hat", "ewc"])  # the shipped definition: accepted


def test_a_copy_with_set_options_is_the_shipped_benchmark_with_those_options(tmp_path: Path) -> None:
    copy = printed_spec(tmp_path, "data.max_train_samples=500")
    check_shipped_name(load_benchmark(str(copy), ["data.max_train_samples=500"]), ["sgd"])
    with pytest.raises(SpecError, match=r"data.max_train_samples=500 \(shipped: null\)"):
        check_shipped_name(load_benchmark(str(copy)), ["sgd"])


def test_the_paper_comparison_compares_the_data_that_define_the_benchmark(tmp_path: Path) -> None:
    config = mnist2_config("sgd")
    config["data"] |= {"classes_per_task": [2], "datasets": ["mnist"]}
    write_mnist2(tmp_path, "sgd", range(10), [0.70, 0.74], config)
    frame = paper_csv(tmp_path, "mnist2")
    assert not frame.loc["sgd", "reproduction"]
    assert frame.loc["sgd", "settings"] == "data.classes_per_task=[2] (paper: [5])"


def test_the_paper_comparison_names_own_data_sets(tmp_path: Path) -> None:
    config = mnist2_config("sgd") | {"datasets": {"my-arrays": {"format": "npz", "content_hash": "0" * 64}}}
    write_mnist2(tmp_path, "sgd", range(10), [0.70, 0.74], config)
    frame = paper_csv(tmp_path, "mnist2")
    assert not frame.loc["sgd", "reproduction"]
    assert frame.loc["sgd", "settings"] == "own data sets my-arrays (paper: the built-in ones)"
