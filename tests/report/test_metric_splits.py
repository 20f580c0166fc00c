"""A metric reads the data it says (issue 58, item 4): every registered metric declares the stored file and the splits
it reads; a report asked for another split refuses it where it is asked for by name (`--metric`, `--continual`: one
line, exit 2, nothing written) and leaves it out of a table that merely includes it (`--summary`, `--compare`) with
one note, never another split's numbers. The matrix of metric x split x report mode is generated from the registry,
so a metric added later is covered. Also `--continual`'s joint and random rows (`--references`), a folder with
references only, the summary's reference rows, and an interrupted run named under `--continual`."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from clihelpers import flat
from resultbuilders import hand_curve, write_curve_file, write_run, write_run_json
from typer.testing import CliRunner

from clbench.cli import app
from clbench.errors import ResultsError
from clbench.metric_registry import INPUT_SOURCES, INPUTS, METRICS, SOURCES
from clbench.report.continual import CONTINUAL_METRICS
from clbench.report.loading import load_results
from clbench.report.statistics import run_values
from clbench.report.summary import SUMMARY_CONTINUAL
from clbench.results import SPLITS, write_parquet

SGD = [[0.9, 0.3, 0.2], [0.7, 0.9, 0.4], [0.6, 0.7, 0.9]]  # rows go on above the diagonal: FWT is defined
EWC = [[0.9, 0.3, 0.2], [0.8, 0.9, 0.4], [0.7, 0.8, 0.9]]
JOINT = [[0.95], [0.95, 0.95], [0.95, 0.95, 0.95]]
RANDOM = [[0.5], [0.5, 0.5], [0.5, 0.5, 0.5]]
INITIAL = [0.1, 0.1, 0.1]
VALIDATION_FACTOR = 0.5  # validation accuracies: the test ones halved, so a number tells which split it came from
# min-ACC and WC-ACC of `hand_curve` after task 3, by hand (tests/metrics/test_curve_metrics.py works the curve out):
# task 1's lowest point after task 1 is 0.5, task 2's after task 2 is 0.4; task 3 ends at 0.95.
CURVE_MIN_ACC = (0.5 + 0.4) / 2
CURVE_WC_ACC = 0.95 / 3 + (2 / 3) * CURVE_MIN_ACC
JOINT_SHIFT = 0.05  # joint's curve: hand_curve's, 5 points higher at every point


def with_validation_rows(run_dir: Path) -> None:
    """Add validation rows (the test rows' accuracies x `VALIDATION_FACTOR`) to a run's accuracy.parquet."""
    path = run_dir / "accuracy.parquet"
    test = pd.read_parquet(path).assign(split="test")
    validation = test.assign(split="validation", accuracy=test["accuracy"] * VALIDATION_FACTOR)
    write_parquet(path, pd.concat([test, validation], ignore_index=True))


def split_results(root: Path, curves: bool = True) -> Path:
    """sgd, ewc, joint and random on seeds 0-2 of benchmark `b` (3 tasks), test and validation rows, each with its
    training FLOPs and a curve (`curves`): hand_curve, joint's 5 points higher."""
    for seed in range(3):
        for method, matrix in (("sgd", SGD), ("ewc", EWC), ("joint", JOINT), ("random", RANDOM)):
            run_dir = write_run(root, method, seed, matrix, initial=INITIAL if method in ("sgd", "ewc") else None,
                                flops=[1_000, 2_000, 3_000])  # every metric's input stored: train-flops' too
            write_run_json(run_dir)
            with_validation_rows(run_dir)
            if curves:
                curve = hand_curve()
                curve["accuracy"] += JOINT_SHIFT if method == "joint" else 0.0
                write_curve_file(run_dir, curve)
    return root


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return split_results(tmp_path_factory.mktemp("splits"))


def invoke(*arguments: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["report", *arguments])
    return result.exit_code, result.output


def csv(text: str) -> pd.DataFrame:
    return pd.read_csv(io.StringIO(text.split("\n\n")[0]))


# ------------------------------------------------------------------------------------------------ the registry


def test_every_input_names_a_stored_source_and_every_source_holds_known_splits() -> None:
    assert set(INPUT_SOURCES) == set(INPUTS)
    assert all(set(source.splits) <= set(SPLITS) and source.splits for source in SOURCES.values())
    assert SOURCES["curve"].splits == ("test",) and set(SOURCES["accuracy"].splits) == set(SPLITS)


@pytest.mark.parametrize("name", list(METRICS))
def test_every_metric_states_its_source_and_splits(name: str) -> None:
    metric = METRICS[name]
    expected_sources = {"curve"} if "curve" in metric.inputs else {"accuracy"}  # by hand from each metric's inputs
    assert set(metric.sources) == expected_sources
    assert metric.splits == (("test",) if "curve" in metric.inputs else tuple(SPLITS))


def test_the_curve_is_recorded_on_test_images_only() -> None:
    """What the curve source declares: `clbench.run.curve` draws each task's subset from its test split."""
    import torch

    from clbench.data.batches import LabelledData
    from clbench.run.curve import evaluation_subsets

    def split(value: int) -> LabelledData:
        labels = torch.zeros(6, dtype=torch.long)
        return LabelledData(torch.full((6, 1), value, dtype=torch.uint8), labels, labels, None, 0)  # type: ignore

    class Task:  # the recorder reads only `test`; train and validation images (0) that it must not take
        def __init__(self, value: int):
            self.test, self.train, self.validation = split(value), split(0), split(0)

    subsets = evaluation_subsets([Task(1), Task(2)], keep=4, seed=0)  # type: ignore[list-item]
    assert [set(subset.images.flatten().tolist()) for subset in subsets] == [{1}, {2}]


@pytest.mark.parametrize("name", [name for name, metric in METRICS.items() if "validation" not in metric.splits])
def test_run_values_refuses_a_metric_on_a_split_its_file_lacks(results: Path, name: str) -> None:
    loaded = load_results(results, "b", split="validation")
    with pytest.raises(ResultsError, match=f"--metric {name}: .*validation split.*curve.parquet"):
        run_values(loaded, name, [])


# ------------------------------------------------------------------------- the generated metric x split x mode

_CACHE: dict[tuple[str, ...], tuple[int, str]] = {}


def cached(results: Path, *arguments: str) -> tuple[int, str]:
    """A report's (exit code, output), run once per arguments in this module."""
    if arguments not in _CACHE:
        _CACHE[arguments] = invoke("b", "--results", str(results), *arguments)
    return _CACHE[arguments]


MATRIX = [(name, split, mode) for name in METRICS for split in SPLITS
          for mode in ("metric", "compare", *(["summary"] if name in SUMMARY_CONTINUAL else []),
                       *(["continual"] if name in CONTINUAL_METRICS else []))]


@pytest.mark.parametrize(("name", "split", "mode"), MATRIX)
def test_a_metric_is_shown_only_on_a_split_its_file_holds(results: Path, name: str, split: str, mode: str) -> None:
    metric = METRICS[name]
    readable = split in metric.splits
    if mode == "metric":  # asked for by name: its table, or a one-line refusal
        code, text = cached(results, "--metric", name, "--split", split, "--format", "csv")
        if readable:
            assert code == 0 and len(csv(text)) >= 2, text
        else:
            assert code == 2 and len(text.strip().splitlines()) == 1, text
            assert f"--metric {name}" in text and f"--split {split}" in text
    elif mode == "continual":  # every column of --continual reads the curve: the whole table is asked for by name
        code, text = cached(results, "--continual", "--split", split, "--format", "csv")
        assert (code == 0) == all(split in METRICS[other].splits for other in CONTINUAL_METRICS), text
        if code == 0:
            assert name in set(csv(text)["quantity"])
        else:
            assert code == 2 and "--continual" in text and len(text.strip().splitlines()) == 1
    elif mode == "summary":  # a column of a table that has others: left out, with the note naming it
        code, frame_text = cached(results, "--summary", "--split", split, "--format", "csv")
        assert code == 0 and (name in set(csv(frame_text)["quantity"])) == readable
        code, text = cached(results, "--summary", "--split", split)
        assert code == 0 and (metric.symbol in text.splitlines()[0]) == readable
        assert (metric.symbol in _left_out_note(text)) == (not readable)
    else:  # --compare: its rows only where it can be computed, the note where it is left out
        code, frame_text = cached(results, "--compare", "sgd,ewc", "--split", split, "--format", "csv")
        assert code == 0 and (name in set(csv(frame_text)["metric"])) == readable
        code, text = cached(results, "--compare", "sgd,ewc", "--split", split)
        assert code == 0 and (f"({name})" in text) == readable
        assert (metric.symbol in _left_out_note(text)) == (not readable)


def _left_out_note(text: str) -> set[str]:
    """The symbols the note `split: S: X, Y left out: ...` names; empty without one."""
    notes = [line.removeprefix("- ") for line in text.splitlines() if " left out: " in line]
    named = [note.split(": ", 2)[2].split(" left out: ")[0] for note in notes if note.startswith("- split: ")
             or note.startswith("split: ")]
    return {symbol for note in named for symbol in note.split(", ")}


def test_summary_on_validation_shows_validation_accuracy_and_no_curve_numbers(results: Path) -> None:
    code, text = invoke("b", "--results", str(results), "--summary", "--split", "validation", "--format", "csv")
    frame = csv(text).set_index(["approach", "quantity"])
    sgd_last = np.mean(SGD[-1]) * VALIDATION_FACTOR  # A<=3 on validation, by hand
    assert code == 0 and frame.loc[("sgd", "accuracy"), "mean"] == pytest.approx(sgd_last)
    assert not {"min-accuracy", "worst-case-accuracy"} & set(frame.index.get_level_values("quantity"))


def test_refusals_write_nothing(results: Path, tmp_path: Path) -> None:
    for arguments in (["--continual"], ["--metric", "min-accuracy"], ["--html", str(tmp_path / "page.html"),
                                                                      "--metric", "stability-gap"]):
        output = [] if "--html" in arguments else ["--output", str(tmp_path / "out.md")]
        code, text = invoke("b", "--results", str(results), "--split", "validation", *arguments, *output)
        assert code == 2 and len(text.strip().splitlines()) == 1, text
    assert not list(tmp_path.iterdir())


def test_the_html_page_on_validation_leaves_the_continual_section_out_with_a_note(results: Path,
                                                                                   tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    code, text = invoke("b", "--results", str(results), "--split", "validation", "--metric", "accuracy",
                        "--html", str(page))
    html = page.read_text()
    assert code == 0, text
    assert 'data-table="continual"' not in html and "curve.parquet" in html


# ------------------------------------------------------------------ joint and random, interrupted runs, notes


def test_continual_lists_joint_and_random_with_references_as_the_per_stage_table_does(results: Path) -> None:
    code, text = invoke("b", "--results", str(results), "--continual", "--format", "csv")
    assert code == 0 and set(csv(text)["approach"]) == {"sgd", "ewc"}
    code, text = invoke("b", "--results", str(results), "--continual", "--references", "--format", "csv")
    frame = csv(text).set_index(["approach", "quantity"])
    assert code == 0 and set(frame.index.get_level_values("approach")) == {"sgd", "ewc", "joint", "random"}
    assert frame.loc[("joint", "min-accuracy"), "mean"] == pytest.approx(CURVE_MIN_ACC + JOINT_SHIFT)
    assert frame.loc[("random", "worst-case-accuracy"), "mean"] == pytest.approx(CURVE_WC_ACC)
    assert frame.loc[("joint", "accuracy"), "mean"] == pytest.approx(0.95)
    code, table = invoke("b", "--results", str(results), "--metric", "min-accuracy", "--references",
                         "--format", "csv")  # the per-stage table of the same metric lists the same rows
    assert code == 0 and set(csv(table)["approach"]) == {"sgd", "ewc", "joint", "random"}


def test_a_folder_with_only_joint_says_why_there_is_nothing_to_show(tmp_path: Path) -> None:
    for seed in range(2):
        run_dir = write_run(tmp_path, "joint", seed, JOINT)
        write_run_json(run_dir)
        write_curve_file(run_dir, hand_curve())
    code, text = invoke("b", "--results", str(tmp_path), "--continual")
    assert code == 2 and "joint only" in flat(text) and "--references" in text, text
    code, text = invoke("b", "--results", str(tmp_path), "--continual", "--references", "--format", "csv")
    assert code == 0 and set(csv(text)["approach"]) == {"joint"}
    code, text = invoke("b", "--results", str(tmp_path))  # the per-stage table says why it is empty
    assert code == 0 and "joint only" in flat(text)


def test_summary_gives_joint_and_random_their_min_acc_and_names_rows_without_a_curve(tmp_path: Path) -> None:
    split_results(tmp_path)
    write_run_json(write_run(tmp_path, "lwf", 0, SGD))  # no curve: `–`, and named in the note
    code, text = invoke("b", "--results", str(tmp_path), "--summary", "--format", "csv")
    frame = csv(text).set_index(["approach", "quantity"])
    assert code == 0
    assert frame.loc[("joint", "min-accuracy"), "mean"] == pytest.approx(CURVE_MIN_ACC + JOINT_SHIFT)
    assert frame.loc[("random", "min-accuracy"), "mean"] == pytest.approx(CURVE_MIN_ACC)
    assert np.isnan(frame.loc[("lwf", "min-accuracy"), "mean"])
    code, text = invoke("b", "--results", str(tmp_path), "--summary")
    no_curve = [line for line in text.splitlines() if "no continual-evaluation curve" in line]
    assert code == 0 and len(no_curve) == 1 and no_curve[0].startswith("- lwf:")


def test_an_interrupted_run_is_named_under_continual_as_under_the_per_stage_table(tmp_path: Path) -> None:
    split_results(tmp_path)
    interrupted = tmp_path / "b" / "er" / "c0" / "seed-0"
    write_run_json(interrupted, status="interrupted", overrides=[])
    for arguments in ([], ["--continual"]):
        code, text = invoke("b", "--results", str(tmp_path), *arguments)
        assert code == 0 and "left out b/er/c0/seed-0: interrupted" in flat(text), (arguments, text)


def test_compare_without_curves_gives_one_note_per_cause(tmp_path: Path) -> None:
    split_results(tmp_path, curves=False)
    code, text = invoke("b", "--results", str(tmp_path), "--compare", "sgd,ewc")
    notes = [line for line in text.splitlines() if line.startswith("- left out")]
    assert code == 0 and len(notes) == 1, notes  # the curve, once for every curve metric, approach and seed
    assert "sgd seeds 0-2" in notes[0] and "ewc seeds 0-2" in notes[0] and "eval_every" in notes[0]


def test_compare_gives_recovery_in_steps(results: Path) -> None:
    code, text = invoke("b", "--results", str(results), "--compare", "sgd,ewc")
    row = next(line for line in text.splitlines() if "(gap-recovery)" in line)
    cells = [cell.strip() for cell in row.split("|")]
    assert code == 0 and cells[5] == "+0" and "optimiser steps (recovery)" in flat(text)


def test_the_ranks_give_one_note_per_cause(tmp_path: Path) -> None:
    for benchmark in ("b", "c"):  # two benchmarks: too few for ranks of two approaches (4 needed), one cause
        for seed in range(3):
            for method, matrix in (("sgd", SGD), ("ewc", EWC)):
                write_run_json(write_run(tmp_path, method, seed, matrix, benchmark=benchmark))
    result = CliRunner().invoke(app, ["report", "--results", str(tmp_path), "--compare", "sgd,ewc"])
    ranks = result.output.split("ranks across benchmarks")[-1]
    notes = [line for line in ranks.splitlines() if "no ranks" in line]
    named = [name for note in notes for name in note.removeprefix("- ").split(": no ranks")[0].split(", ")]
    assert result.exit_code == 0 and len(notes) == 2, notes  # 2 benchmarks with values, or 0 (no curve, no joint)
    assert sorted(named) == sorted(METRICS)  # every metric in exactly one note


def test_one_note_per_cause_merges_runs_of_a_cause_and_keeps_the_rest(results: Path) -> None:
    from clbench.report.notes import one_note_per_cause

    loaded = load_results(results, "b")
    notes = ["left out b/sgd/c0/seed-0: cause A", "a note", "left out b/ewc/c0/seed-2: cause A",
             "left out b/sgd/c0/seed-1: cause A", "left out b/sgd/c0/seed-1: cause B", "a note",
             "left out b/nosuch/c0/seed-0: cause A"]  # a run id not in the results stays as it is
    assert one_note_per_cause(loaded, notes) == [
        "left out sgd seeds 0-1, ewc seed 2: cause A", "a note", "left out sgd seed 1: cause B",
        "left out b/nosuch/c0/seed-0: cause A"]
