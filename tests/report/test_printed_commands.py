"""Hints and names (issue 58, item 6): every `clbench train` command the report prints carries the `--set` options of
the runs it is printed for (one function builds them: `clbench.report.commands.train_command`), so that pasted it
trains runs that pair with them; `--compare` names an unknown method as unknown."""

from __future__ import annotations

from pathlib import Path

from clihelpers import flat, pasted_commands
from clioutputs import assert_exit
from filebuilders import write_block_arrays
from resultbuilders import write_run
from typer.testing import CliRunner

from clbench.approaches.registry import approach_names
from clbench.cli import app

runner = CliRunner()
SPEC = """\
name: tiny-hints
datasets:
  my-arrays: {format: npz, path: ./arrays.npz}
data: {kind: split, datasets: [my-arrays], classes_per_task: [2], form: mnist28}
network: {kind: mlp, hidden: [8]}
"""
# the class scenario and quick settings: runs without them never pair with these
OPTIONS = ["--set", "data.scenario=class", "--set", "training.max_epochs=1", "--set", "training.batch_size=4"]


def invoke(*arguments: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, list(arguments))


def config_hashes(results: Path, method: str) -> set[str]:
    return {path.name for path in (results / "tiny-hints" / method).iterdir()}


def test_the_commands_compare_prints_carry_the_runs_options_and_make_runs_that_pair(tmp_path: Path) -> None:
    write_block_arrays(tmp_path / "arrays.npz")
    spec = tmp_path / "tiny.yaml"
    spec.write_text(SPEC)
    results = tmp_path / "results"
    data = ["--data-dir", str(tmp_path / "data"), "--device", "cpu"]
    assert_exit(invoke("train", str(spec), "-m", "sgd", "--seeds", "0", "--results", str(results), *OPTIONS, *data), 0)
    report = ["report", str(spec), "--results", str(results), "--compare", "sgd,ewc"]

    # ewc has no runs: the command that makes them carries sgd's options
    result = invoke(*report)
    assert_exit(result, 2)
    [command] = pasted_commands(result.output, "clbench train")
    assert command == ["train", str(spec), "-m", "ewc", "--seeds", "0-2", *OPTIONS, "--results", str(results)]
    assert_exit(invoke(*command, "--set", "ewc.lamb=100", *data), 0)  # with an option of ewc's own

    # sgd has one seed: the command that makes more carries each approach's own options too
    result = invoke(*report)
    assert_exit(result, 2)
    [command] = pasted_commands(result.output, "clbench train")
    assert command == ["train", str(spec), "-m", "sgd,ewc", "--seeds", "0-2", *OPTIONS, "--set", "ewc.lamb=100",
                       "--results", str(results)]
    assert_exit(invoke(*command, *data), 0)

    assert_exit(invoke(*report), 0)  # every run pairs: one config of each approach, three seeds
    assert len(config_hashes(results, "sgd")) == 1 and len(config_hashes(results, "ewc")) == 1
    assert {path.name for path in results.glob("tiny-hints/*/*/seed-*")} == {"seed-0", "seed-1", "seed-2"}


def test_an_unknown_method_is_named_as_unknown_in_one_line(tmp_path: Path) -> None:
    for seed in (0, 1):
        write_run(tmp_path, "sgd", seed, [[0.9], [0.8, 0.9]])
    result = invoke("report", "b", "--results", str(tmp_path), "--compare", "sgd,nosuch")
    assert_exit(result, 2)
    text = flat(result.output)
    assert "unknown method 'nosuch'" in text and f"known approaches: {', '.join(approach_names())}" in text


def test_a_method_with_runs_is_known_though_not_registered(tmp_path: Path) -> None:
    for method in ("sgd", "my-plugin"):  # a plugin named by its file when trained: its runs carry its name
        for seed in (0, 1, 2):
            write_run(tmp_path, method, seed, [[0.9], [0.8, 0.9 - 0.1 * (method == "sgd") - 0.01 * seed]])
    assert_exit(invoke("report", "b", "--results", str(tmp_path), "--compare", "sgd,my-plugin"), 0)
