"""tools/side_by_side_mammoth.py: its summary row, the target's verdict and the docs results file it writes."""

from __future__ import annotations

import argparse

import pytest
import yaml
from toolloader import load_tool


def test_a_record_holds_mean_sample_std_per_seed_and_median_seconds() -> None:
    tool = load_tool("side_by_side_mammoth")
    found = [(90.0, 99.0, 20.0), (91.0, 99.2, 22.0), (89.0, 98.8, 30.0)]  # class-IL, task-IL, seconds per seed
    record = tool.row_record("er-ace", 500, "Mammoth", found, "0,1,2", "abc1234")
    assert record["class_il"] == "90.0 (1.0)"  # sample std of 90, 91, 89 = 1
    assert record["task_il"] == "99.0 (0.2)"
    assert record["seconds"] == "22.0"  # the median, not the mean (24)
    assert record["per_seed"] == "90.00, 91.00, 89.00"
    assert record["id"] == "er-ace-500-mammoth"


def test_the_verdict_uses_two_peer_stds_or_one_point_whichever_is_larger() -> None:
    tool = load_tool("side_by_side_mammoth")
    assert tool.verdict([88.6, 88.6], [90.0, 90.0]).startswith("NOT within")  # 1.4 > max(0, 1)
    assert tool.verdict([89.1, 89.1], [90.0, 90.0]).startswith("within")      # 0.9 <= 1
    assert tool.verdict([87.1, 87.1], [88.0, 92.0]).startswith("within")      # std 2.83: 2.9 <= 5.66, not <= 2.83


def test_rows_are_replaced_by_id_and_each_method_gets_its_table(tmp_path) -> None:
    tool = load_tool("side_by_side_mammoth")
    path = tmp_path / "seq-mnist-mammoth.yaml"
    first = [tool.row_record("er-ace", 500, tool_name, [(90.0, 99.0, 20.0)], "0", "c1")
             for tool_name in ("Mammoth", "clbench")]
    tool.write_results(path, first, "command one")
    again = [tool.row_record("er-ace", 500, "clbench", [(80.0, 98.0, 5.0)], "0", "c2"),
             tool.row_record("bic", 200, "Mammoth", [(70.0, 97.0, 9.0)], "0", "c2")]
    tool.write_results(path, again, "command two")
    data = yaml.safe_load(path.read_text())
    rows = {row["id"]: row for row in data["rows"]}
    assert sorted(rows) == ["bic-200-mammoth", "er-ace-500", "er-ace-500-clbench", "er-ace-500-mammoth"]  # + a pair
    assert rows["er-ace-500-clbench"]["class_il"] == "80.0 (0.0)" and rows["er-ace-500-clbench"]["commit"] == "c2"
    assert rows["er-ace-500-mammoth"]["commit"] == "c1"  # untouched by the second run
    assert data["measured"]["commands"] == ["command one", "command two"]
    assert data["tables"]["er-ace"]["rows"] == ["er-ace-500-mammoth", "er-ace-500-clbench"]  # Mammoth first
    assert data["tables"]["bic"]["rows"] == ["bic-200-mammoth"]
    assert not path.with_suffix(".partial").exists()
    rendered = load_tool("docs_reference").results_table("seq-mnist-mammoth", "er-ace", folder=tmp_path)
    assert any("80.0 (0.0)" in line and "clbench" in line for line in rendered)


def test_a_saved_output_is_read_back_seed_by_seed(tmp_path) -> None:
    tool = load_tool("side_by_side_mammoth")
    output = tmp_path / "out.txt"
    output.write_text("er-ace Mammoth seed 1: class-IL 89.21, task-IL 98.94, 229.0 s\n"
                      "er-ace clbench seed 0: class-IL 89.92, task-IL 99.11, 142.6 s\n"
                      "| er-ace | Mammoth | 90.0 (0.7) | 99.0 (0.2) | 229.0 |\n"
                      "er-ace Mammoth seed 0: class-IL 90.14, task-IL 98.85, 177.9 s\n")
    found = tool.found_in_output(output.read_text())
    assert found == {("er-ace", "Mammoth"): [(1, (89.21, 98.94, 229.0)), (0, (90.14, 98.85, 177.9))],
                     ("er-ace", "clbench"): [(0, (89.92, 99.11, 142.6))]}
    results = tmp_path / "r.yaml"
    tool.main(["--mammoth", str(tmp_path), "--mammoth-python", "python", "--from-output", str(output),
               "--results-file", str(results), "--at", "c3", "--buffer", "200"])
    rows = {row["id"]: row for row in yaml.safe_load(results.read_text())["rows"]}
    assert rows["er-ace-200-mammoth"]["per_seed"] == "90.14, 89.21"  # in seed order
    assert rows["er-ace-200-mammoth"]["seeds"] == "0,1" and rows["er-ace-200-clbench"]["commit"] == "c3"


def test_pairs_put_both_tools_in_one_row_with_the_verdict_from_the_seeds(tmp_path) -> None:
    tool = load_tool("side_by_side_mammoth")
    path = tmp_path / "r.yaml"
    mammoth = tool.row_record("bic", 500, "Mammoth", [(85.0, 98.0, 30.0), (87.0, 99.0, 40.0)], "0,1", "c")
    ours = tool.row_record("bic", 500, "clbench", [(88.0, 99.0, 9.0), (88.0, 99.2, 11.0)], "0,1", "c")
    lone = tool.row_record("gdumb", 200, "clbench", [(70.0, 97.0, 9.0)], "0", "c")  # no Mammoth row: no pair
    tool.write_results(path, [mammoth, ours, lone], "command")
    tool.write_results(path, [], "command")  # a second write keeps one pair, re-derived
    data = yaml.safe_load(path.read_text())
    pairs = [row for row in data["rows"] if row["tool"] == "both"]
    assert [pair["id"] for pair in pairs] == ["bic-500"] and data["tables"]["pairs"]["rows"] == ["bic-500"]
    # Mammoth 86.0 (std 1.41): target max(2.83, 1); clbench 88.0: |diff| 2.0 -> within
    assert pairs[0]["within"] == "within"
    assert (pairs[0]["mammoth_class_il"], pairs[0]["clbench_class_il"]) == ("86.0 (1.4)", "88.0 (0.0)")
    assert (pairs[0]["mammoth_seconds"], pairs[0]["clbench_seconds"]) == ("35.0", "10.0")
    assert "bic-500" not in data["tables"]["bic"]["rows"]


def test_a_timing_pass_replaces_only_the_seconds_of_existing_rows(tmp_path) -> None:
    tool = load_tool("side_by_side_mammoth")
    path = tmp_path / "r.yaml"
    full = [tool.row_record("bic", 500, name, [(85.0, 98.0, 300.0), (87.0, 99.0, 400.0)], "0,1", "c1")
            for name in ("Mammoth", "clbench")]
    tool.write_results(path, full, "command")
    quick = [tool.row_record("bic", 500, "Mammoth", [(10.0, 10.0, 25.0)], "0", "c2")]  # one seed, idle machine
    tool.retime(path, quick)
    rows = {row["id"]: row for row in yaml.safe_load(path.read_text())["rows"]}
    assert rows["bic-500-mammoth"]["seconds"] == "25.0 (seed 0 at c2, idle)"
    assert rows["bic-500-mammoth"]["class_il"] == "86.0 (1.4)"  # the full run's, not the timing pass's 10.0
    assert rows["bic-500-clbench"]["seconds"] == "350.0"
    assert rows["bic-500"]["mammoth_seconds"] == "25.0 (seed 0 at c2, idle)"  # the pair follows
    assert yaml.safe_load(path.read_text())["measured"]["commands"] == ["command"]
    with pytest.raises(SystemExit, match="no rows gdumb-200-clbench"):
        tool.retime(path, [tool.row_record("gdumb", 200, "clbench", [(1.0, 1.0, 1.0)], "0", "c2")])


def test_the_tools_run_in_turns_seed_by_seed_and_only_keeps_one(capsys) -> None:
    common = load_tool("side_by_side_common")
    calls = []

    def runner(tool: str):
        return lambda seed: calls.append((tool, seed)) or (float(seed), 99.0, 1.0)

    turns = common.in_turns("m", [0, 1], {"Mammoth": runner("Mammoth"), "clbench": runner("clbench")}, None)
    assert calls == [("Mammoth", 0), ("clbench", 0), ("Mammoth", 1), ("clbench", 1)]  # in turns, not tool by tool
    assert turns.found["clbench"] == [(0.0, 99.0, 1.0), (1.0, 99.0, 1.0)]
    assert turns.kept == [0, 1] and turns.left_out == {}
    assert "m Mammoth seed 1: class-IL 1.00, task-IL 99.00, 1.0 s" in capsys.readouterr().out
    assert common.in_turns("m", [0], {"Mammoth": runner("Mammoth"), "clbench": runner("clbench")},
                           "clbench").found == {"Mammoth": [], "clbench": [(0.0, 99.0, 1.0)]}


def test_a_seed_one_tool_diverged_on_is_left_out_of_both_and_the_others_go_on(capsys) -> None:
    common = load_tool("side_by_side_common")

    def mammoth(seed: int):
        if seed == 7:
            raise common.Diverged("a NaN loss stopped Mammoth")
        return (70.0 + seed, 99.0, 1.0)

    turns = common.in_turns("xder", [6, 7, 8], {"Mammoth": mammoth, "clbench": lambda seed: (60.0 + seed, 98.0, 2.0)},
                            None)
    # seed 7's clbench run finished, yet it is not compared: the two lists stay paired seed by seed
    assert turns.found == {"Mammoth": [(76.0, 99.0, 1.0), (78.0, 99.0, 1.0)],
                           "clbench": [(66.0, 98.0, 2.0), (68.0, 98.0, 2.0)]}
    assert turns.kept == [6, 8]
    assert turns.left_out == {7: "Mammoth diverged: a NaN loss stopped Mammoth"}
    out = capsys.readouterr().out
    assert "xder Mammoth seed 7: diverged (a NaN loss stopped Mammoth)" in out
    assert "xder clbench seed 7: class-IL 67.00" in out  # printed, for the record


def test_a_mammoth_run_stopped_by_its_nan_assertion_is_a_divergence_and_another_failure_is_not(tmp_path,
                                                                                                 monkeypatch) -> None:
    tool = load_tool("side_by_side_mammoth")
    args = argparse.Namespace(log_dir=tmp_path, buffer=500, mammoth_python="python", mammoth=tmp_path)
    method = tool.METHODS["xder"]

    def failing(tail: str):
        def timed(command, env, cwd, log):
            log.write_text(f"Traceback (most recent call last):\n    {tail}\nAssertionError\n")
            raise SystemExit(f"failed; see {log}")
        return timed

    monkeypatch.setattr(tool, "timed", failing("assert not math.isnan(loss)"))
    with pytest.raises(tool.Diverged, match="NaN loss"):
        tool.run_mammoth(args, method, 7)
    monkeypatch.setattr(tool, "timed", failing("assert data is not None"))
    with pytest.raises(SystemExit, match="failed"):
        tool.run_mammoth(args, method, 7)


def test_rows_read_back_from_a_saved_output_keep_only_the_seeds_both_tools_finished(tmp_path) -> None:
    tool = load_tool("side_by_side_mammoth")
    output = tmp_path / "out.txt"
    output.write_text("\n".join([
        "xder Mammoth seed 6: class-IL 75.00, task-IL 99.00, 30.0 s",
        "xder clbench seed 6: class-IL 72.00, task-IL 99.40, 15.0 s",
        "xder Mammoth seed 7: diverged (a NaN loss stopped Mammoth)",
        "xder clbench seed 7: class-IL 71.00, task-IL 99.20, 15.0 s",
        "xder Mammoth seed 8: class-IL 77.00, task-IL 99.20, 30.0 s",
        "xder clbench seed 8: class-IL 74.00, task-IL 99.40, 15.0 s"]))
    results = tmp_path / "results.yaml"
    tool.rederive(argparse.Namespace(from_output=output, results_file=results, buffer=500, at="abc1234",
                                     inputs="spec"))
    rows = {row["id"]: row for row in yaml.safe_load(results.read_text())["rows"]}
    assert rows["xder-500-clbench"]["per_seed"] == "72.00, 74.00"  # not 71.00: Mammoth has no seed 7
    assert rows["xder-500-clbench"]["seeds"] == "6,8"
    assert rows["xder-500-mammoth"]["class_il"] == "76.0 (1.4)"  # 75 and 77: sample std 1.41
    assert rows["xder-500"]["within"] == "NOT within"  # |73 - 76| = 3 > max(2 x 1.41, 1) = 2.83


def test_a_clbench_run_whose_network_diverged_is_a_divergence_not_an_accuracy(tmp_path) -> None:
    import math

    import pandas as pd

    common = load_tool("side_by_side_common")
    rows = pd.DataFrame({"split": ["test"] * 6 + ["validation"], "stage": [0, 0, 1, 1, 2, 2, 2],
                         "evaluation": ["task-agnostic", "task-aware"] * 3 + ["task-aware"],
                         "accuracy": [0.1, 0.1, 0.9, 0.95, 0.5, 0.7, 0.0], "loss": [2.3, 2.3, 0.3, 0.2, 1.0, 0.8,
                                                                                    math.nan]})
    # a NaN validation loss alone is not a diverged network's test row: the last stage's means, %
    assert common.clbench_final(rows, tmp_path) == (50.0, 70.0)
    rows.loc[4, "loss"] = math.nan
    with pytest.raises(common.Diverged, match="diverged while learning task 2"):
        common.clbench_final(rows, tmp_path)


def test_raw_inputs_rows_stand_apart_and_pair_with_mammoths_own(tmp_path) -> None:
    """`--inputs raw`: clbench's rows with Mammoth's [0, 1] pixels get their own ids and pair, beside the spec's."""
    tool = load_tool("side_by_side_mammoth")
    path = tmp_path / "r.yaml"
    mammoth = tool.row_record("xder", 500, "Mammoth", [(76.0, 99.0, 30.0), (76.0, 99.0, 30.0)], "0,2", "c")
    spec = tool.row_record("xder", 500, "clbench", [(72.0, 99.0, 9.0), (72.0, 99.0, 9.0)], "0,2", "c")
    raw = tool.row_record("xder", 500, "clbench", [(75.5, 99.0, 9.0), (75.5, 99.0, 9.0)], "0,2", "c", raw=True)
    assert (raw["id"], raw["inputs"], spec["inputs"], mammoth["inputs"]) == (
        "xder-500-clbench-raw", "[0, 1]", "normalised", "[0, 1]")
    tool.write_results(path, [mammoth, spec, raw], "command")
    data = yaml.safe_load(path.read_text())
    [pair] = [row for row in data["rows"] if row["tool"] == "both"]  # one pair: the raw row sits beside
    # target max(2 x 0, 1) = 1: 4.0 away with the spec's inputs, 0.5 with Mammoth's
    assert (pair["id"], pair["within"], pair["within_raw"]) == ("xder-500", "NOT within", "within")
    assert (pair["clbench_class_il"], pair["clbench_raw_class_il"]) == ("72.0 (0.0)", "75.5 (0.0)")
    assert data["tables"]["xder"]["rows"] == ["xder-500-mammoth", "xder-500-clbench", "xder-500-clbench-raw"]


def test_rows_written_before_the_inputs_column_read_as_the_spec_s_inputs(tmp_path) -> None:
    tool = load_tool("side_by_side_mammoth")
    path = tmp_path / "r.yaml"
    old = [{**tool.row_record("er", 500, name, [(90.0, 99.0, 1.0)], "0", "c")} for name in ("Mammoth", "clbench")]
    for row in old:
        row.pop("inputs")
    path.write_text(yaml.safe_dump({"rows": old}))
    tool.write_results(path, [], None)
    rows = {row["id"]: row for row in yaml.safe_load(path.read_text())["rows"]}
    assert (rows["er-500-mammoth"]["inputs"], rows["er-500-clbench"]["inputs"]) == ("[0, 1]", "normalised")


def test_raw_inputs_run_clbench_with_normalize_false(monkeypatch, tmp_path) -> None:
    tool = load_tool("side_by_side_mammoth")
    seen = []
    monkeypatch.setattr(tool, "run_clbench", lambda folder, spec, name, seed, values, mirror:
                        seen.append(list(values)) or (80.0, 99.0, 1.0))
    for inputs in ("spec", "raw"):
        tool.main(["--mammoth", str(tmp_path), "--mammoth-python", "python", "--methods", "er", "--seeds", "0",
                   "--only", "clbench", "--inputs", inputs, "--log-dir", str(tmp_path / "logs")])
    assert seen == [[], ["data.normalize=false"]]


def test_mnist_is_gunzipped_once_into_place_and_a_short_mirror_is_refused(tmp_path) -> None:
    """The one gunzip the three side-by-side tools share: each of the four files in place, one already there kept,
    a mirror without the four refused with its folder named."""
    import gzip

    common = load_tool("side_by_side_common")
    names = ["t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte", "train-images-idx3-ubyte", "train-labels-idx1-ubyte"]
    (tmp_path / "mirror" / "mnist").mkdir(parents=True)
    for name in names:
        with gzip.open(tmp_path / "mirror" / "mnist" / f"{name}.gz", "wb") as out:
            out.write(name.encode())
    raw = tmp_path / "copy" / "raw"
    common.gunzip_mnist(tmp_path / "mirror", raw)
    assert sorted(path.name for path in raw.iterdir()) == names  # no .partial left
    assert (raw / "train-labels-idx1-ubyte").read_bytes() == b"train-labels-idx1-ubyte"
    (raw / "t10k-images-idx3-ubyte").write_bytes(b"kept")
    common.gunzip_mnist(tmp_path / "mirror", raw)
    assert (raw / "t10k-images-idx3-ubyte").read_bytes() == b"kept"
    (tmp_path / "mirror" / "mnist" / f"{names[0]}.gz").unlink()
    with pytest.raises(SystemExit, match=r"mirror/mnist: expected MNIST's four \*-ubyte.gz files, found 3"):
        common.gunzip_mnist(tmp_path / "mirror", tmp_path / "other")


def test_the_results_command_names_the_buffer_the_seeds_and_raw_inputs() -> None:
    tool = load_tool("side_by_side_mammoth")
    args = argparse.Namespace(buffer=200, results_file="docs/results/seq-mnist-mammoth.yaml", inputs="raw")
    command = tool.results_command(args, "0,2")
    assert "--buffer 200 --seeds 0,2 " in command
    assert command.endswith("--results-file docs/results/seq-mnist-mammoth.yaml --inputs raw")
    assert not tool.results_command(argparse.Namespace(**{**vars(args), "inputs": "spec"}), "0").endswith("raw")
