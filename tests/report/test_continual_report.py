"""`report --continual`, the summary's min-ACC and WC-ACC and the continual figure, from tiny runs trained with
and without `training.eval_every`."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from synthetic import TINY_TRAINING, synthetic_loader, tiny_spec

from clbench.cli.report import ReportRequest, run_report
from clbench.curve_metrics import min_accuracy, worst_case_accuracy
from clbench.report.continual import build_continual
from clbench.report.loading import load_results
from clbench.report.statistics import run_values
from clbench.report.summary import build_summary
from clbench.results import CURVE_FILE
from clbench.run.engine import execute
from clbench.run.plan import plan_runs

SPEC = tiny_spec("mlp", training=replace(TINY_TRAINING, max_epochs=2))
CURVE = replace(SPEC, training=replace(SPEC.training, eval_every=2, eval_subset=40))


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("continual")
    for spec, method in ((CURVE, "sgd"), (CURVE, "ewc"), (SPEC, "lwf")):
        for seed in (0, 1):
            [plan] = plan_runs(spec, [method], [seed], folder)
            execute(plan, device=torch.device("cpu"), loader=synthetic_loader())
    return folder


def request(**changes):  # type: ignore[no-untyped-def]
    base = ReportRequest(table=False, summary=False, time=False, hat=False, fmt="markdown", metric="accuracy",
                         ci=False, references=False, seeds=None, plot=None)
    return replace(base, **changes)


def test_the_metrics_of_a_run_are_those_of_its_curve(results: Path) -> None:
    loaded = load_results(results, SPEC.name)
    values = run_values(loaded, "min-accuracy", notes := [])
    sgd = [run_id for run_id, run in loaded.info.items() if run["method"] == "sgd" and run["seed"] == 0][0]
    curve = pd.read_parquet(loaded.folder(sgd) / CURVE_FILE)
    curve = curve[curve["evaluation"] == loaded.evaluation]
    np.testing.assert_array_equal(values[sgd], min_accuracy(curve))
    assert len(values) == 4 and any("training.eval_every" in note for note in notes)  # lwf's two runs left out
    np.testing.assert_array_equal(run_values(loaded, "worst-case-accuracy", [])[sgd], worst_case_accuracy(curve))


def test_continual_table_shows_a_dash_and_the_option_for_runs_without_a_curve(results: Path) -> None:
    report = build_continual(load_results(results, SPEC.name))
    rows = {row.label: row for row in report.rows}
    assert rows["sgd"].values["min-accuracy"].n == 2 and rows["lwf"].values["min-accuracy"].n == 0
    text, _ = run_report(results, SPEC.name, request(continual=True))
    lwf_line = next(line for line in text.splitlines() if line.startswith("| lwf"))
    assert lwf_line.count("–") == 5 and "eval_every" in text and "min-ACC" in text and "WF10" in text


def test_summary_adds_min_acc_and_wc_acc_where_a_run_has_a_curve(results: Path) -> None:
    summary = build_summary(load_results(results, SPEC.name))
    assert summary.continual == ("min-accuracy", "worst-case-accuracy")
    text, _ = run_report(results, SPEC.name, request(summary=True))
    header = [cell.strip() for cell in text.splitlines()[0].split("|")]
    assert header[-4:-1] == ["min-ACC", "WC-ACC", "seeds"] and "training.eval_every" in text


def test_continual_figure_has_one_panel_per_approach(results: Path, tmp_path: Path) -> None:
    _, figures = run_report(results, SPEC.name, request(continual=True, plot=tmp_path))
    assert {path.name for path in figures} >= {f"{SPEC.name}-continual.png", f"{SPEC.name}-continual.pdf"}
    assert all(path.stat().st_size > 0 for path in figures)


def test_the_html_page_has_the_continual_section_when_a_run_has_a_curve(results: Path, tmp_path: Path) -> None:
    from clbench.cli.report import write_html_report

    page = tmp_path / "page.html"
    write_html_report(results, SPEC.name, page, "accuracy", False, False, None, None, "test")
    text = page.read_text()
    assert 'data-table="continual"' in text and "continual evaluation" in text and "data:image/png" in text
