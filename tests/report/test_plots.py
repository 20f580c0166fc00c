"""Figures: written as PNG and PDF, non-trivial, and showing the curves' colours (pixel check)."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np
import pytest
from matplotlib.image import imread
from resultbuilders import golden_results, hat_capacity, sensitivity_results, write_hat_tables, write_run

from clbench.approaches.hat import figures as hat_figures
from clbench.approaches.hat.report import build_hat_report
from clbench.cli.report import ReportRequest, run_report
from clbench.report import figures as plots
from clbench.report.loading import load_results
from clbench.report.statistics import Cell
from clbench.report.tables import Report, build_report


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = golden_results(tmp_path_factory.mktemp("results"))
    run_dir = root / "b" / "hat" / "h1" / "seed-0"
    attention = {(task, layer): list(np.linspace(0, 1, units) ** task) for task in (1, 2, 3)
                 for layer, units in (("fc1", 8), ("fc2", 4))}
    write_hat_tables(run_dir, hat_capacity(0), {(1, 2): 0.5, (1, 3): 0.25, (2, 3): 0.75}, attention)
    return root


def hex_rgb(colour: str) -> np.ndarray:
    return np.array([int(colour[i: i + 2], 16) for i in (1, 3, 5)]) / 255.0


def pixels_of(png: Path, rgb: np.ndarray | tuple[float, ...], tolerance: float = 0.02) -> int:
    """How many pixels of the image have colour `rgb` (each channel within `tolerance`)."""
    image = imread(png)[..., :3]  # (H, W, 3) floats in [0, 1]
    return int((np.abs(image - np.asarray(rgb)[:3]) <= tolerance).all(axis=-1).sum())


def assert_written(paths: list[Path], stem: str) -> Path:
    png, pdf = Path(f"{stem}.png"), Path(f"{stem}.pdf")
    assert png in paths and pdf in paths
    assert png.stat().st_size > 10_000 and pdf.stat().st_size > 5_000
    assert pdf.read_bytes()[:5] == b"%PDF-" and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return png


def test_forgetting_curves_show_every_approach_in_its_colour(results: Path, tmp_path: Path) -> None:
    report = build_report(results, "b")
    paths = plots.plot_curves(report, tmp_path)
    png = assert_written(paths, str(tmp_path / "b-forgetting-ratio"))
    palette = plots.colours([label for label, _ in report.rows])
    assert list(palette) == ["sgd", "ewc", "hat"]
    for colour in palette.values():
        assert pixels_of(png, hex_rgb(colour)) > 100, colour
    assert pixels_of(png, hex_rgb(plots.PALETTE[5])) == 0  # a colour no curve has is absent


def test_confidence_bands_are_wider_than_std_bands(results: Path, tmp_path: Path) -> None:
    report = build_report(results, "b")
    std_png = assert_written(plots.plot_curves(report, tmp_path / "std"), str(tmp_path / "std" / "b-forgetting-ratio"))
    ci_png = assert_written(plots.plot_curves(report, tmp_path / "ci", ci=True),
                            str(tmp_path / "ci" / "b-forgetting-ratio"))
    white = (1.0, 1.0, 1.0)
    assert pixels_of(ci_png, white, 0.001) < pixels_of(std_png, white, 0.001)  # t-intervals of 2 seeds are wide


def test_hat_figures_capacity_layers_reuse_attention(results: Path, tmp_path: Path) -> None:
    paths = hat_figures.plot_hat(build_hat_report(load_results(results, "b")), tmp_path)
    stem = str(tmp_path / "b-hat")
    capacity = assert_written(paths, f"{stem}-capacity")
    layers = assert_written(paths, f"{stem}-layers")
    reuse = assert_written(paths, f"{stem}-reuse")
    assert_written(paths, f"{stem}-attention")
    assert pixels_of(capacity, hex_rgb(plots.PALETTE[0])) > 100 and pixels_of(capacity, hex_rgb(plots.PALETTE[1])) > 50
    assert pixels_of(layers, hex_rgb(plots.PALETTE[0])) > 100 and pixels_of(layers, hex_rgb(plots.PALETTE[1])) > 100
    viridis = matplotlib.colormaps["viridis"]
    assert pixels_of(reuse, viridis(0.75), 0.01) > 500  # the (2, 3) cell: 75 %
    assert pixels_of(reuse, viridis(0.25), 0.01) > 500  # the (1, 3) cell: 25 %
    assert len(paths) == 8  # no sensitivity figure: one config only


def test_sensitivity_heat_map(tmp_path: Path) -> None:
    report = build_hat_report(load_results(sensitivity_results(tmp_path / "results"), "b"))
    paths = hat_figures.plot_hat(report, tmp_path / "figures", max_configs=0)
    png = assert_written(paths, str(tmp_path / "figures" / "b-hat-sensitivity"))
    assert len(paths) == 2
    sensitivity = report.sensitivity
    assert sensitivity is not None
    colormap = matplotlib.colormaps["RdYlGn"]
    lowest = colormap(0.0)  # rho = -1/3 at smax 25, c 0.1 is the scale's minimum
    assert pixels_of(png, lowest, 0.01) > 500


def test_a_grid_draws_one_curve_per_method() -> None:
    cells = [Cell(-0.1, 0.01, 2), Cell(-0.2, 0.01, 2)]
    rows = [(f"hat (c={c})", cells) for c in range(20)] + [("sgd", cells)]
    report = Report("b", "forgetting-ratio", [1, 2], rows, {label: [0] for label, _ in rows} | {"hat (c=7)": [0, 1]})
    assert [label for label, _ in plots.curve_rows(report)] == ["hat (c=7)", "sgd"]
    small = Report("b", "forgetting-ratio", [1, 2], rows[:3])
    assert len(plots.curve_rows(small)) == 3


def test_report_command_writes_figures(results: Path, tmp_path: Path) -> None:
    request = ReportRequest(table=False, summary=True, time=False, hat=False, fmt="markdown",
                            metric="accuracy", ci=False, references=True, seeds=None, plot=tmp_path)
    text, figures = run_report(results, "b", request)
    assert {path.name for path in figures} == {"b-accuracy.png", "b-accuracy.pdf"}  # --hat adds HAT's figures
    assert all(path.is_file() for path in figures) and text.startswith("| approach | parameters")


def test_slugs_are_file_names() -> None:
    assert plots.slug("hat (c=0.1, smax=25)") == "hat-c=0.1-smax=25"
    assert plots.slug("lwf (data.datasets=[mnist])") == "lwf-data.datasets=-mnist"


def test_empty_report_draws_nothing(tmp_path: Path) -> None:
    write_run(tmp_path / "r", "sgd", 0, [[0.9]])
    assert plots.plot_curves(build_report(tmp_path / "r", "b"), tmp_path / "figures") == []  # no references
    assert not (tmp_path / "figures").exists()


def test_the_curve_figure_draws_both_evaluations_when_the_runs_have_both(tmp_path: Path, monkeypatch) -> None:
    write_run(tmp_path, "sgd", 0, [[0.9], [0.8, 0.9]], agnostic=[[0.9], [0.1, 0.9]])
    write_run(tmp_path, "hat", 0, [[0.9], [0.9, 0.9]])  # needs the task id: no task-agnostic curve
    drawn = []
    monkeypatch.setattr(plots, "save", lambda figure, directory, name: drawn.append(figure) or [directory / name])
    request = ReportRequest(True, False, False, False, "markdown", "accuracy", False, False, None, tmp_path / "p")
    run_report(tmp_path, "b", request)
    [figure] = drawn
    lines = {line.get_label(): line for line in figure.axes[0].get_lines()}
    assert set(lines) == {"sgd (task-aware)", "hat (task-aware)", "sgd (task-agnostic)"}
    assert lines["sgd (task-agnostic)"].get_linestyle() == "--"
    assert list(lines["sgd (task-agnostic)"].get_ydata()) == pytest.approx([90.0, 50.0])


def test_a_domain_run_has_one_curve_beside_runs_with_both_evaluations(tmp_path: Path, monkeypatch) -> None:
    write_run(tmp_path, "sgd", 0, [[0.9], [0.8, 0.9]], config_hash="t", agnostic=[[0.9], [0.1, 0.9]])
    write_run(tmp_path, "sgd", 0, [[0.7], [0.6, 0.7]], config_hash="d", scenario="domain")  # one evaluation
    drawn = []
    monkeypatch.setattr(plots, "save", lambda figure, directory, name: drawn.append(figure) or [directory / name])
    request = ReportRequest(True, False, False, False, "markdown", "accuracy", False, False, None, tmp_path / "p",
                            evaluation="task-aware")
    run_report(tmp_path, "b", request)
    [figure] = drawn
    labels = [line.get_label() for line in figure.axes[0].get_lines()]
    assert sorted(labels) == ["sgd (scenario=domain) (task-aware)", "sgd (scenario=task) (task-agnostic)",
                              "sgd (scenario=task) (task-aware)"]
