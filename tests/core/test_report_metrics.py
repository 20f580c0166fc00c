"""`report --metric bwt | forgetting | intransigence | learning-accuracy | fwt` on hand-made result folders, the
values computed by hand (see tests/core/test_metrics.py for the functions themselves)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_report import write_run
from typer.testing import CliRunner

from clbench.cli import app
from clbench.errors import ResultsError
from clbench.report import build_report, render

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


def test_fwt_is_refused_never_a_number(tmp_path: Path) -> None:
    with pytest.raises(ResultsError, match="stage 0"):
        build_report(make_results(tmp_path), "b", "fwt")


def invoke(*arguments: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["report", *arguments])
    return result.exit_code, result.output


@pytest.mark.parametrize(("metric", "expected"), [
    ("bwt", [np.nan, -0.075, -0.30]),
    ("forgetting", [np.nan, 0.075, 0.3125]),
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


def test_cli_fwt_exits_2_with_one_line(tmp_path: Path) -> None:
    code, text = invoke("b", "--results", str(make_results(tmp_path)), "--metric", "fwt")
    assert code == 2
    lines = text.strip().splitlines()
    assert len(lines) == 1 and "stage 0" in lines[0] and "no number" in lines[0]


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
