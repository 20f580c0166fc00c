"""The compute of stored runs in the report: tiny real-time runs through the engine (synthetic data, the CPU), their
rows' FLOPs and batches, the summary's columns, `--metric train-flops` and the accuracy-against-FLOPs figure; the
config hash with and without `training.realtime`; the refusal of realtime outside the online protocol."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from clihelpers import invoke_fresh, offline
from synthetic import TINY_TRAINING, synthetic_loader, tiny_spec

from clbench.report.loading import load_results
from clbench.report.statistics import run_values
from clbench.report.summary import build_summary, summary_table
from clbench.run.engine import execute
from clbench.run.plan import plan_runs

ONLINE = replace(TINY_TRAINING, max_epochs=1, early_stopping=False, batch_size=8)


def online_spec(realtime: bool):  # type: ignore[no-untyped-def]
    spec = tiny_spec("mlp", training=replace(ONLINE, realtime=realtime))
    return replace(spec, approaches={"derpp": {"buffer_size": 40, "replay_batch_size": 8}})


@pytest.fixture(scope="module")
def realtime_results(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, pd.DataFrame]]:
    folder = tmp_path_factory.mktemp("realtime")
    rows = {}
    for plan in plan_runs(online_spec(True), ["sgd", "derpp"], [0, 1], folder):
        outcome = execute(plan, device=torch.device("cpu"), loader=synthetic_loader(n_train=96, n_test=40))
        rows[f"{plan.method}/{plan.seed}"] = pd.DataFrame(outcome.rows)
    return folder, rows


def stage_values(frame: pd.DataFrame, column: str) -> np.ndarray:
    trained = frame[frame["stage"] >= 1]
    return trained.groupby("stage")[column].first().to_numpy(dtype=float)


def test_the_rows_store_each_stages_flops_and_batches(realtime_results) -> None:  # type: ignore[no-untyped-def]
    _, rows = realtime_results
    sgd, derpp = rows["sgd/0"], rows["derpp/0"]
    offered = stage_values(sgd, "stage_stream_batches")
    assert (offered > 0).all()
    assert np.array_equal(stage_values(sgd, "stage_batches"), offered)  # the unit's method trains every batch
    assert np.array_equal(stage_values(sgd, "stage_step_flops"), stage_values(sgd, "stage_unit_flops"))
    assert np.array_equal(stage_values(derpp, "stage_stream_batches"), offered)  # the same stream
    # DER++ on the MLP: a step of B + 2M rows against SGD's B (first task: nothing to replay, its first step cheap)
    assert (stage_values(derpp, "stage_batches") < offered).all()
    assert (stage_values(derpp, "stage_train_flops") > 0).all() and (stage_values(derpp, "stage_eval_flops") > 0).all()
    assert sgd.loc[sgd["stage"] == 0, "stage_train_flops"].isna().all()  # nothing trained at initialisation


def test_the_summary_shows_training_flops_and_batches_seen(realtime_results) -> None:  # type: ignore[no-untyped-def]
    folder, rows = realtime_results
    summary = build_summary(load_results(folder, "tiny"))
    assert summary.shows_flops and summary.shows_stream
    row = {row.label: row for row in summary.rows}["derpp"]
    flops = [stage_values(rows[f"derpp/{seed}"], "stage_train_flops").sum() for seed in (0, 1)]
    trained = [stage_values(rows[f"derpp/{seed}"], "stage_batches").sum() for seed in (0, 1)]
    assert row.train_flops.mean == pytest.approx(np.mean(flops)) and row.train_flops.n == 2
    assert row.batches.mean == pytest.approx(np.mean(trained))
    table = summary_table(summary)
    assert table.header[9:11] == ["train FLOPs", "batches seen"]
    cells = {line[0]: line for line in table.rows}
    offered = stage_values(rows["sgd/0"], "stage_stream_batches").sum()
    assert cells["sgd"][10] == f"{offered:.0f} of {offered:.0f}"


def test_the_train_flops_metric_is_the_cumulative_sum(realtime_results) -> None:  # type: ignore[no-untyped-def]
    folder, rows = realtime_results
    results = load_results(folder, "tiny")
    values = run_values(results, "train-flops", [])
    [run_id] = [run_id for run_id in values if results.info[run_id]["method"] == "sgd"
                and results.info[run_id]["seed"] == 0]
    per_stage = stage_values(rows["sgd/0"], "stage_train_flops")
    assert values[run_id] == pytest.approx([per_stage[0], per_stage[0] + per_stage[1], per_stage.sum()])


def test_the_figure_draws_the_runs_with_flops_and_nothing_without(realtime_results, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from clbench.report.figures import plot_accuracy_flops

    folder, _ = realtime_results
    summary = build_summary(load_results(folder, "tiny"))
    paths = plot_accuracy_flops([summary], tmp_path)
    assert sorted(path.name for path in paths) == ["tiny-accuracy-flops.pdf", "tiny-accuracy-flops.png"]
    assert plot_accuracy_flops([replace(summary, shows_flops=False)], tmp_path / "none") == []


def test_the_config_hash_changes_only_with_realtime_on(tmp_path: Path) -> None:
    [on] = plan_runs(online_spec(True), ["sgd"], [0], tmp_path)
    [off] = plan_runs(online_spec(False), ["sgd"], [0], tmp_path)
    [default] = plan_runs(tiny_spec("mlp", training=ONLINE), ["sgd"], [0], tmp_path)
    assert off.config_hash == default.config_hash != on.config_hash
    assert off.reference_hash == default.reference_hash != on.reference_hash  # the joint reference follows
    assert "realtime" not in off.config["training"]


def test_realtime_outside_the_online_protocol_is_refused_in_one_line(tmp_path: Path) -> None:
    code, output = invoke_fresh("train", "mnist2", "-m", "sgd", "--set", "training.realtime=true", "--results",
                                str(tmp_path / "results"), *offline(tmp_path))
    assert code == 2
    assert "training.realtime` is the online protocol's stream: it needs one pass" in output
    assert "max_epochs 200" in output
    assert not (tmp_path / "results").exists()


def test_several_benchmarks_share_one_flops_figure_a_panel_each(realtime_results, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """`report --plot` over every benchmark of the results: one accuracy-against-FLOPs figure, a panel per benchmark
    with that benchmark's approaches (issue 61), not a figure each."""
    import shutil

    import clbench.report.figures as figures

    folder = tmp_path / "results"
    shutil.copytree(realtime_results[0], folder)
    for plan in plan_runs(replace(online_spec(True), name="tiny-b"), ["sgd"], [0], folder):
        execute(plan, device=torch.device("cpu"), loader=synthetic_loader(n_train=96, n_test=40))
    drawn: dict[str, object] = {}
    save = figures.save
    monkeypatch.setattr(figures, "save", lambda figure, directory, stem: drawn.setdefault(stem, figure) and
                        save(figure, directory, stem))
    code, output = invoke_fresh("report", "--results", str(folder), "--plot", str(tmp_path / "figures"))
    assert code == 0, output
    flops_figures = {stem: figure for stem, figure in drawn.items() if stem.endswith("accuracy-flops")}
    assert list(flops_figures) == ["benchmarks-accuracy-flops"]
    panels = flops_figures["benchmarks-accuracy-flops"].axes  # type: ignore[attr-defined]
    assert [axes.get_title() for axes in panels] == ["tiny", "tiny-b"]
    # a point per approach and panel (its error bars' line), in the approach's colour, the same in every panel
    points = [[(line.get_xdata()[0], line.get_color()) for line in axes.get_lines() if line.get_marker() == "o"]
              for axes in panels]
    assert [len(panel) for panel in points] == [2, 1]
    for axes, panel in zip(panels, points):  # every point clear of its panel's frame by 6% (a marker), log scale
        low, high = np.log10(axes.get_xlim())
        for x, _ in panel:
            assert low + 0.06 * (high - low) < np.log10(x) < high - 0.06 * (high - low)
    legend = {text.get_text(): handle.get_color() for text, handle in  # type: ignore[attr-defined]
              zip(flops_figures["benchmarks-accuracy-flops"].legends[0].get_texts(),
                  flops_figures["benchmarks-accuracy-flops"].legends[0].legend_handles)}
    assert sorted(legend) == ["derpp", "sgd"] and points[1][0][1] == legend["sgd"]
    assert legend["sgd"] in {colour for _, colour in points[0]}
    assert (tmp_path / "figures" / "benchmarks-accuracy-flops.png").is_file()


@pytest.mark.parametrize(("label", "expected"), [
    ("derpp (training.realtime=true)", ("derpp", "training.realtime=true")), ("sgd", ("sgd", "")),
    ("hat (smax=200.0, c=0.5)", ("hat", "smax=200.0, c=0.5")), ("my (odd) name", ("my (odd) name", ""))])
def test_a_label_splits_into_its_approach_and_its_setting(label: str, expected: tuple[str, str]) -> None:
    from clbench.report.figures import approach_and_setting

    assert approach_and_setting(label) == expected
