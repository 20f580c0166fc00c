"""`report --metric bwt | forgetting | forgetting-mammoth | intransigence | learning-accuracy | fwt` on hand-made result
folders, the values computed by hand (see tests/metrics/test_metrics.py for the functions themselves)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from resultbuilders import write_run
from typer.testing import CliRunner

from clbench.cli import app
from clbench.report.loading import load_results
from clbench.report.render import render
from clbench.report.tables import build_report

JOINT = [[0.95], [0.90, 0.90], [0.90, 0.85, 1.00]]
RANDOM = [[0.5], [0.5, 0.5], [0.5, 0.5, 0.5]]


def make_results(tmp_path: Path) -> Path:
    for seed in (0, 1):
        write_run(tmp_path, "joint", seed, JOINT)
        write_run(tmp_path, "random", seed, RANDOM)
    # seed 0: BWT t2 = 0.70-0.90 = -0.20, t3 = ((0.60-0.90) + (0.50-0.80)) / 2 = -0.30
    #         F   t2 = 0.90-0.70 = 0.20,  t3 = ((0.90-0.60) + (0.80-0.50)) / 2 = 0.30
    #         LA  0.90, 0.85, 2.65/3 ; I (joint diagonal 0.95, 0.90, 1.00) 0.05, 0.075, 0.20/3
    write_run(tmp_path, "sgd", 0, [[0.90], [0.70, 0.80], [0.60, 0.50, 0.95]])
    # seed 1: BWT t2 = 0.85-0.80 = 0.05,  t3 = ((0.40-0.80) + (0.70-0.90)) / 2 = -0.30
    #         F   t2 = 0.80-0.85 = -0.05, t3 = ((max(0.80, 0.85)-0.40) + (0.90-0.70)) / 2 = 0.325
    #         LA  0.80, 0.85, 2.60/3 ; I 0.15, 0.075, 0.25/3
    write_run(tmp_path, "sgd", 1, [[0.80], [0.85, 0.90], [0.40, 0.70, 0.90]])
    return tmp_path


def means(tmp_path: Path, metric: str, label: str = "sgd") -> list[float]:
    return [cell.mean for cell in dict(build_report(tmp_path, "b", metric).rows)[label]]


def test_bwt_table_by_hand(tmp_path: Path) -> None:
    values = means(make_results(tmp_path), "bwt")
    assert np.isnan(values[0]) and values[1:] == pytest.approx([(-0.20 + 0.05) / 2, -0.30])


def test_forgetting_table_by_hand(tmp_path: Path) -> None:
    values = means(make_results(tmp_path), "forgetting")
    assert np.isnan(values[0]) and values[1:] == pytest.approx([(0.20 - 0.05) / 2, (0.30 + 0.325) / 2])


def test_learning_accuracy_table_by_hand(tmp_path: Path) -> None:
    assert means(make_results(tmp_path), "learning-accuracy") == pytest.approx(
        [(0.90 + 0.80) / 2, 0.85, (2.65 / 3 + 2.60 / 3) / 2])


def test_intransigence_table_by_hand(tmp_path: Path) -> None:
    assert means(make_results(tmp_path), "intransigence") == pytest.approx(
        [(0.05 + 0.15) / 2, 0.075, (0.20 / 3 + 0.25 / 3) / 2])


def test_intransigence_needs_only_the_joint(tmp_path: Path) -> None:
    """Without a random run the forgetting ratio leaves the run out; intransigence does not need it."""
    write_run(tmp_path, "joint", 0, JOINT)
    write_run(tmp_path, "sgd", 0, [[0.90], [0.70, 0.80], [0.60, 0.50, 0.95]])
    assert means(tmp_path, "intransigence") == pytest.approx([0.05, 0.075, 0.20 / 3])
    assert "sgd" not in dict(build_report(tmp_path, "b").rows)


def test_the_summary_names_the_joint_its_intransigence_column_lacks(tmp_path: Path) -> None:
    write_run(tmp_path, "joint", 0, JOINT)
    write_run(tmp_path, "sgd", 0, [[0.90], [0.70, 0.80], [0.60, 0.50, 0.95]])  # I 0.20/3 at t=3
    write_run(tmp_path, "ewc", 1, [[0.90], [0.70, 0.80], [0.60, 0.50, 0.95]], config_hash="e1")  # no joint seed 1
    result = CliRunner().invoke(app, ["report", "b", "--results", str(tmp_path), "--summary"])
    assert result.exit_code == 0, result.output
    rows = {line.split("|")[1].strip(): line.split("|") for line in result.output.splitlines()
            if line.startswith("| ") and not line.startswith("| approach")}
    assert rows["ewc"][8].strip() == "–" and rows["sgd"][8].strip() == "6.7 (–)"
    [note] = [" ".join(line.split()) for line in result.output.split("\n- ") if "intransigence" in line]
    assert note.startswith("I (intransigence) of ewc: no joint reference with the data, network, protocol and seed")
    assert "make it with `clbench train b -m joint --seeds 1 --set data.max_train_samples=9" in note


def test_missing_joint_is_named_with_the_command(tmp_path: Path) -> None:
    make_results(tmp_path)
    write_run(tmp_path, "sgd", 2, [[0.9], [0.7, 0.9], [0.6, 0.5, 0.9]])
    report = build_report(tmp_path, "b", "intransigence")
    [note] = report.notes
    assert "b/sgd/c0/seed-2" in note and "no joint reference for seed 2" in note and "random" not in note
    assert "clbench train b -m joint --seeds 2 --set data.max_train_samples=9" in note
    assert dict(report.rows)["sgd"][2].n == 2  # seed 2 not averaged
    assert build_report(tmp_path, "b", "bwt").notes == []  # BWT needs no reference


def test_markdown_headers_and_percent_cells(tmp_path: Path) -> None:
    text = render(build_report(make_results(tmp_path), "b", "bwt"), "markdown").splitlines()
    assert [cell.strip() for cell in text[0].split("|")[1:-1]] == ["approach", "BWT<=1", "BWT<=2", "BWT<=3", "seeds"]
    assert [cell.strip() for cell in text[2].split("|")[1:-1]] == ["sgd", "–", "-7.5 (17.7)", "-30.0 (0.0)", "2"]
    header = render(build_report(tmp_path, "b", "learning-accuracy"), "markdown").splitlines()[0]
    assert "LA<=3" in header
    assert "F<=2" in render(build_report(tmp_path, "b", "forgetting"), "markdown")
    assert "I<=1" in render(build_report(tmp_path, "b", "intransigence"), "markdown")


def test_fwt_table_by_hand(tmp_path: Path) -> None:
    # rows go on above the diagonal (tasks not learned yet); `initial`: b_u, the stage-0 accuracies
    # seed 0: FWT t2 = R[1, 2] - b2 = 0.30 - 0.20 = 0.10; t3 = mean(0.10, R[2, 3] - b3 = 0.50 - 0.30) = 0.15
    write_run(tmp_path, "sgd", 0, [[0.9, 0.3, 0.2], [0.7, 0.8, 0.5], [0.6, 0.5, 0.95]], initial=[0.1, 0.2, 0.3])
    # seed 1: t2 = 0.25 - 0.25 = 0; t3 = mean(0, 0.10 - 0.30) = -0.10
    write_run(tmp_path, "sgd", 1, [[0.8, 0.25, 0.4], [0.8, 0.9, 0.1], [0.4, 0.7, 0.9]], initial=[0.5, 0.25, 0.3])
    values = means(tmp_path, "fwt")
    assert np.isnan(values[0]) and values[1:] == pytest.approx([(0.10 + 0.0) / 2, (0.15 - 0.10) / 2])


def test_fwt_of_a_single_task_is_undefined(tmp_path: Path) -> None:
    write_run(tmp_path, "sgd", 0, [[0.9]], initial=[0.1])
    assert np.isnan(means(tmp_path, "fwt")).all()


def test_fwt_of_runs_without_stage_0_rows_is_never_a_number(tmp_path: Path) -> None:
    write_run(tmp_path, "sgd", 0, [[0.9], [0.7, 0.8]], schema_version=1)  # stored before the stage-0 rows
    write_run(tmp_path, "lwf", 0, [[0.9, 0.2], [0.7, 0.8]])  # schema 2, but no stage 0 (as pathnet)
    report = build_report(tmp_path, "b", "fwt")
    assert report.rows == []
    notes = " ".join(report.notes)
    assert "b/sgd/c0/seed-0: forward transfer needs the accuracies at initialisation" in notes
    assert "b/lwf/c0/seed-0: forward transfer needs" in notes


def invoke(*arguments: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["report", *arguments])
    return result.exit_code, result.output


@pytest.mark.parametrize(("metric", "expected"), [
    ("bwt", [np.nan, -0.075, -0.30]),
    ("forgetting", [np.nan, 0.075, 0.3125]),
    ("forgetting-mammoth", [np.nan, 0.10, 0.3125]),
    ("learning-accuracy", [0.85, 0.85, 0.875]),
    ("intransigence", [0.10, 0.075, 0.075]),
])
def test_cli_metric_csv(tmp_path: Path, metric: str, expected: list[float]) -> None:
    code, text = invoke("b", "--results", str(make_results(tmp_path)), "--metric", metric, "--format", "csv")
    assert code == 0, text
    table = pd.read_csv(io.StringIO(text))
    sgd = table[table["approach"] == "sgd"].set_index("stage")
    assert set(table["metric"]) == {metric} and set(table["approach"]) == {"sgd"}
    assert sgd["mean"].tolist() == pytest.approx(expected, nan_ok=True)


def test_cli_fwt_csv(tmp_path: Path) -> None:
    write_run(tmp_path, "sgd", 0, [[0.9, 0.3], [0.7, 0.8]], initial=[0.1, 0.2])
    code, text = invoke("b", "--results", str(tmp_path), "--metric", "fwt", "--format", "csv")
    assert code == 0, text
    assert pd.read_csv(io.StringIO(text))["mean"].tolist() == pytest.approx([np.nan, 0.1], nan_ok=True)


# ------------------------------------------------------------------ the two evaluations

def test_task_agnostic_accuracy_and_forgetting_ratio_by_hand(tmp_path: Path) -> None:
    # task-agnostic rows of the approach and of both references (the class scenario's numbers)
    write_run(tmp_path, "joint", 0, [[0.9], [0.8, 0.8]], agnostic=[[0.9], [0.7, 0.7]])
    write_run(tmp_path, "random", 0, [[0.5], [0.5, 0.5]], agnostic=[[0.5], [0.25, 0.25]])
    write_run(tmp_path, "sgd", 0, [[0.9], [0.8, 0.9]], agnostic=[[0.9], [0.0, 0.95]])
    aware = dict(build_report(tmp_path, "b", "accuracy").rows)["sgd"]
    agnostic = build_report(tmp_path, "b", "accuracy", results=load_results(tmp_path, "b", evaluation="task-agnostic"))
    assert [cell.mean for cell in aware] == pytest.approx([0.9, 0.85])
    assert [cell.mean for cell in dict(agnostic.rows)["sgd"]] == pytest.approx([0.9, 0.475])
    # rho with A_R^{u<=t} the random run's accuracy at the stage itself (its chance level falls as classes are
    # added): t1: (0.9 - 0.5) / (0.9 - 0.5) - 1 = 0; t2: mean((0.0 - 0.25) / (0.7 - 0.25) - 1 = -14/9,
    # (0.95 - 0.25) / (0.7 - 0.25) - 1 = 5/9) = -0.5. The paper's task-aware A_R^u (the column mean, 0.375 for
    # task 1) would give -0.80 here.
    expected = -0.5
    results = load_results(tmp_path, "b", evaluation="task-agnostic")
    ratio = dict(build_report(tmp_path, "b", "forgetting-ratio", results=results).rows)["sgd"]
    assert [cell.mean for cell in ratio] == pytest.approx([0.0, expected])


def test_an_approach_that_needs_the_task_id_shows_so_never_a_number(tmp_path: Path) -> None:
    write_run(tmp_path, "hat", 0, [[0.9], [0.8, 0.9]])  # schema 2, task-aware rows only
    write_run(tmp_path, "sgd", 0, [[0.9], [0.8, 0.9]], schema_version=1)  # stored before the evaluations
    write_run(tmp_path, "lwf", 0, [[0.9], [0.8, 0.9]], agnostic=[[0.9], [0.4, 0.9]])
    code, text = invoke("b", "--results", str(tmp_path), "--metric", "accuracy", "--evaluation", "task-agnostic",
                        "--format", "csv")
    assert code == 0, text
    assert pd.read_csv(io.StringIO(text))["approach"].tolist() == ["lwf", "lwf"]  # numbers only where measured
    code, text = invoke("b", "--results", str(tmp_path), "--metric", "accuracy", "--evaluation", "task-agnostic")
    assert code == 0, text
    rows = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| ")}
    assert rows["hat"].count("needs the task id") == 2 and "%" not in rows["hat"]
    assert rows["sgd"].count("not measured") == 2 and "re-run with --force" in text
    assert "65.0" in rows["lwf"]
    code, text = invoke("b", "--results", str(tmp_path), "--metric", "accuracy")
    assert code == 0 and "needs the task id" not in text  # task-aware: every run has its numbers
    code, text = invoke("b", "--results", str(tmp_path), "--summary", "--evaluation", "task-agnostic")
    rows = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| ")}
    assert code == 0 and rows["hat"].count("needs the task id") == 6 and "%" not in rows["hat"]
    assert "65.0" in rows["lwf"] and rows["sgd"].count("not measured") == 6


def test_a_wrong_evaluation_is_an_error_naming_the_choices(tmp_path: Path) -> None:
    write_run(tmp_path, "sgd", 0, [[0.9]])
    code, text = invoke("b", "--results", str(tmp_path), "--evaluation", "taskagnostic")
    flat = " ".join(text.replace("│", " ").split())
    assert code == 2 and "'taskagnostic' is not one of 'task-aware', 'task-agnostic'" in flat, text


def test_runs_of_the_two_scenarios_get_their_own_rows(tmp_path: Path) -> None:
    write_run(tmp_path, "sgd", 0, [[0.9], [0.8, 0.9]], config_hash="c1", scenario="task",
              overrides=[])
    write_run(tmp_path, "sgd", 0, [[0.9], [0.4, 0.9]], config_hash="c2", scenario="class", overrides=[])
    rows = dict(build_report(tmp_path, "b", "accuracy").rows)
    assert [cell.mean for cell in rows["sgd (scenario=task)"]] == pytest.approx([0.9, 0.85])
    assert [cell.mean for cell in rows["sgd (scenario=class)"]] == pytest.approx([0.9, 0.65])


def test_cli_missing_joint_named_under_the_table(tmp_path: Path) -> None:
    write_run(tmp_path, "sgd", 0, [[0.9], [0.7, 0.9]])
    code, text = invoke("b", "--results", str(tmp_path), "--metric", "intransigence")
    assert code == 0
    assert "no joint reference for seed 0" in " ".join(text.split())
    assert "clbench train b -m joint --seeds 0 --set data.max_train_samples=9" in " ".join(text.split())


def test_cli_single_task(tmp_path: Path) -> None:
    """T = 1: BWT and forgetting are undefined (an empty cell, no number); learning accuracy is A^{1<=1}."""
    write_run(tmp_path, "sgd", 0, [[0.9]])
    for metric in ("bwt", "forgetting"):
        code, text = invoke("b", "--results", str(tmp_path), "--metric", metric, "--format", "csv")
        assert code == 0, text
        assert pd.read_csv(io.StringIO(text))["mean"].isna().all()
    code, text = invoke("b", "--results", str(tmp_path), "--metric", "learning-accuracy", "--format", "csv")
    assert code == 0 and pd.read_csv(io.StringIO(text))["mean"].tolist() == pytest.approx([0.9])


def test_a_memory_column_appears_next_to_accuracy_when_a_method_replays(tmp_path: Path) -> None:
    write_run(tmp_path, "sgd", 0, [[0.9], [0.8, 0.9]], memory=(0, 0))
    write_run(tmp_path, "ewc", 0, [[0.9], [0.8, 0.9]], memory=(0, 3_800_000))
    code, text = invoke("b", "--results", str(tmp_path), "--metric", "accuracy")
    assert code == 0 and "memory" not in text  # nothing replays: no column
    write_run(tmp_path, "er", 0, [[0.9], [0.85, 0.9]], memory=(200, 160_000))
    write_run(tmp_path, "er", 1, [[0.9], [0.85, 0.9]], memory=(200, 170_000))
    code, text = invoke("b", "--results", str(tmp_path), "--metric", "accuracy")
    assert code == 0, text
    rows = {line.split("|")[1].strip(): [cell.strip() for cell in line.split("|")[1:-1]]
            for line in text.splitlines() if line.startswith("| ")}
    assert rows["approach"][-2] == "memory (samples / bytes)"
    assert rows["er"][-2] == "200 / 165.0 kB" and rows["ewc"][-2] == "0 / 3.8 MB" and rows["sgd"][-2] == "0 / 0 B"


# Mammoth's forgetting (`--metric forgetting-mammoth`): the max also takes the current stage, so a task whose
# accuracy rose counts 0. seed 0: F_M t2 = max(0.90, 0.70) - 0.70 = 0.20 ; t3 = ((0.90-0.60) + (0.80-0.50)) / 2 = 0.30
#                     seed 1: F_M t2 = max(0.80, 0.85) - 0.85 = 0.0 (F: -0.05) ;
#                             t3 = ((max(0.80, 0.85, 0.40)-0.40) + (max(0.90, 0.70)-0.70)) / 2 = 0.325
def test_forgetting_mammoth_table_by_hand(tmp_path: Path) -> None:
    values = means(make_results(tmp_path), "forgetting-mammoth")
    assert np.isnan(values[0]) and values[1:] == pytest.approx([(0.20 + 0.0) / 2, (0.30 + 0.325) / 2])


def test_cli_forgetting_mammoth_table(tmp_path: Path) -> None:
    """`clbench report --metric forgetting-mammoth --table` prints F_M<=t in accuracy points beside clbench's F."""
    code, text = invoke("b", "--results", str(make_results(tmp_path)), "--metric", "forgetting-mammoth", "--table")
    assert code == 0, text
    lines = text.splitlines()
    assert [cell.strip() for cell in lines[0].split("|")[1:-1]] == ["approach", "F_M<=1", "F_M<=2", "F_M<=3", "seeds"]
    # t2: mean (20.0 + 0.0) / 2 = 10.0, std |20.0 - 0.0| / sqrt(2) = 14.1 ; t3: (30.0 + 32.5) / 2 = 31.25,
    # std 2.5 / sqrt(2) = 1.8
    [sgd] = [line for line in lines if line.startswith("| sgd")]
    cells = [cell.strip() for cell in sgd.split("|")[1:-1]]
    assert cells == ["sgd", "–", "10.0 (14.1)", "31.2 (1.8)", "2"]
    code, chaudhry = invoke("b", "--results", str(tmp_path), "--metric", "forgetting", "--table")
    [sgd] = [line for line in chaudhry.splitlines() if line.startswith("| sgd")]
    assert [cell.strip() for cell in sgd.split("|")[1:-1]][2] == "7.5 (17.7)"  # (20.0 - 5.0) / 2, clbench's F


def test_forgetting_mammoth_takes_the_stored_accuracy_before_learning(tmp_path: Path) -> None:
    """With the rows above the diagonal stored, Mammoth's max also sees each task's accuracy just before it is
    learned (its training loop puts it in its rows); further above never counts."""
    # t2: max(0.90, 0.70) - 0.70 = 0.20 ; t3: task 1: 0.90 - 0.60 = 0.30, task 2: max(0.95 just before, 0.80,
    # 0.50) - 0.50 = 0.45, mean 0.375 (task 3's 0.99 at stage 1 is two stages before: never taken)
    write_run(tmp_path, "sgd", 0, [[0.9, 0.95, 0.99], [0.7, 0.8, 0.2], [0.6, 0.5, 0.95]], initial=[0.1, 0.2, 0.3])
    values = means(tmp_path, "forgetting-mammoth")
    assert np.isnan(values[0]) and values[1:] == pytest.approx([0.20, 0.375])


def test_report_help_lists_every_metric() -> None:
    import re

    from clbench.report.statistics import METRICS

    result = CliRunner().invoke(app, ["report", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for metric in METRICS:
        assert re.search(rf"(?<![\w-]){re.escape(metric)}(?![\w-])", result.output), metric
