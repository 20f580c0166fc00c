"""`clbench report --paper`: the paper's typed tables checked against the LaTeX, and ours beside them."""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

import pandas as pd
import pytest
from clihelpers import paper_csv
from importchecks import assert_imports_no_torch, cli_code
from resultbuilders import mnist2_config, pmnist_config, write_mnist2, write_run, write_run_json
from typer.testing import CliRunner

from clbench.cli import app
from clbench.report.paper_results import (
    OurRow,
    compare,
    load_paper_results,
    override_setting,
    setting_differences,
)
from clbench.report.statistics import Cell

# The paper beside the checkout (../shared/paper), else beside the data mirror ($CLBENCH_MIRROR/../paper).
TEX_CANDIDATES = [Path(__file__).resolve().parents[3] / "shared" / "paper" / "hat-icml2018.tex",
                  Path(os.environ.get("CLBENCH_MIRROR", "/nonexistent")).parent / "paper" / "hat-icml2018.tex"]
NAMES = {"LFL": "lfl", "LWF": "lwf", "SGD": "sgd", "SGD-F": "sgd-f", "IMM-Mean": "imm-mean", "IMM-Mode": "imm-mode",
         "EWC": "ewc", "PathNet": "pathnet", "PNN": "pnn", "HAT": "hat"}


@pytest.fixture(scope="module")
def tex() -> str:
    found = [path for path in TEX_CANDIDATES if path.is_file()]
    if not found:
        pytest.skip(f"the paper's LaTeX is at none of {[str(path) for path in TEX_CANDIDATES]}")
    return found[0].read_text()


def table_body(tex: str, label: str) -> str:
    start = tex.index(f"\\label{{{label}}}")
    body = tex[tex.index("\\midrule", start):tex.index("\\bottomrule", start)]
    return body.replace("\\textbf{", "").replace("}", "")


def tex_row(tex: str, label: str, approach: str) -> list[tuple[float, float]]:
    """The `mean (std)` cells of one approach's line in a rho table."""
    line = next(line for line in table_body(tex, label).splitlines() if line.split("&")[0].strip() == approach)
    return [(float(mean), float(std)) for mean, std in re.findall(r"(-?\d\.\d\d) \((\d\.\d\d)\)", line)]


def typed(table: str, method: str | None, stage: int, variant: str | None = None, approach: str | None = None):
    rows = [row for row in load_paper_results().rows if row.table == table and row.clbench_method == method
            and row.stage == stage and (variant is None or row.variant == variant)
            and (approach is None or row.approach == approach)]
    assert len(rows) == 1, rows
    return rows[0]


# ---------------------------------------------------------------------------------------------- the data file

def test_every_table_label_exists_in_the_tex(tex: str) -> None:
    labels = {row.table for row in load_paper_results().rows}
    assert labels == {"tab:5MNIST", "tab:PMNIST", "tab:mixture0", "tab:mixture1", "tab:cifar1"}
    assert all(f"\\label{{{label}}}" in tex for label in labels)


@pytest.mark.parametrize(("label", "approach", "stages"), [
    ("tab:mixture1", "PathNet", range(1, 9)), ("tab:mixture1", "HAT", range(1, 9)), ("tab:mixture1", "LFL", [1, 8]),
    ("tab:cifar1", "PNN", range(1, 11)), ("tab:cifar1", "IMM-Mode", range(1, 11)), ("tab:mixture0", "EWC", [2, 8])])
def test_forgetting_ratio_cells_match_the_tex(tex: str, label: str, approach: str, stages) -> None:
    cells = dict(zip([2, 8] if label == "tab:mixture0" else range(1, 11), tex_row(tex, label, approach)))
    for stage in stages:
        row = typed(label, NAMES[approach], stage)
        assert (row.mean, row.std, row.seeds, row.metric) == (*cells[stage], 10, "forgetting-ratio")


def test_every_rho_table_has_all_its_rows_and_stages(tex: str) -> None:
    rows = load_paper_results().rows
    for label, stages in (("tab:mixture1", 8), ("tab:cifar1", 10), ("tab:mixture0", 2)):
        lines = [line for line in table_body(tex, label).splitlines() if "&" in line]
        assert sum(row.table == label for row in rows) == len(lines) * stages == 10 * stages


@pytest.mark.parametrize("label", ["tab:mixture1", "tab:mixture0", "tab:cifar1"])
def test_every_rho_cell_matches_the_tex(tex: str, label: str) -> None:
    stages = [2, 8] if label == "tab:mixture0" else range(1, 11)
    expected = {(NAMES[line.split("&")[0].strip()], stage): cell for line in table_body(tex, label).splitlines()
                if "&" in line for stage, cell in zip(stages, tex_row(tex, label, line.split("&")[0].strip()))}
    found = {(row.clbench_method, row.stage): (row.mean, row.std) for row in load_paper_results().rows
             if row.table == label}
    assert found == expected


@pytest.mark.parametrize("label", ["tab:5MNIST", "tab:PMNIST"])
def test_every_accuracy_cell_matches_the_tex_in_order(tex: str, label: str) -> None:
    lines = [line for line in table_body(tex, label).splitlines() if "&" in line]
    cells = [re.search(r"& ([\d.]+\\,M|Unknown)(\*?)~?\s*& (\d+\.\d)\\%(?: \((\d\.\d)\))?", line) for line in lines]
    expected = [(size.replace("\\,", "") + star, float(mean), None if std is None else float(std))
                for size, star, mean, std in (cell.groups() for cell in cells)]
    found = [(row.parameters, round(row.mean * 100, 6), None if row.std is None else round(row.std * 100, 6))
             for row in load_paper_results().rows if row.table == label]
    assert found == expected and len(found) == {"tab:5MNIST": 6, "tab:PMNIST": 12}[label]


def test_pmnist_quoted_numbers_name_the_paper_of_their_superscript(tex: str) -> None:
    """tab:PMNIST's caption maps superscript (1) to Nguyen17ARXIV and (2) to He18ICLR; each row with a superscript
    is typed with that source and says how that paper's protocol differs."""
    start = tex.index("\\label{tab:PMNIST}")
    caption = tex[tex.rindex("\\caption{", 0, start):start]
    papers = dict(re.findall(r"\((\d)\)~\\citet\{(\w+)\}", caption))
    assert papers == {"1": "Nguyen17ARXIV", "2": "He18ICLR"}
    lines = [line for line in table_body(tex, "tab:PMNIST").splitlines() if "$^" in line]
    marked = {(line.split("~")[0].strip(), re.search(r"& (\d\.\d)\\,M", line)[1] + "M", papers[line.split("$^")[1][0]])
              for line in lines}
    assert marked == {("SI", "0.1M", "Nguyen17ARXIV"), ("EWC", "0.1M", "He18ICLR")}
    for approach, parameters, source in marked:
        row = next(row for row in load_paper_results().rows
                   if (row.table, row.approach, row.parameters) == ("tab:PMNIST", approach, parameters))
        assert row.source == source and row.other_protocol and "one output" in row.other_protocol


def test_mixture0_repeats_mixture1_at_t2_and_t8() -> None:
    for method in NAMES.values():
        for stage in (2, 8):
            short, full = typed("tab:mixture0", method, stage), typed("tab:mixture1", method, stage)
            assert (short.mean, short.std, short.primary, full.primary) == (full.mean, full.std, False, True)


def test_accuracy_cells_match_the_tex_in_fractions(tex: str) -> None:
    split = table_body(tex, "tab:5MNIST")
    sgd = re.search(r"SGD~\\cite\{Goodfellow14ICLR\$\^1\$\s*& 1\.9\\,M\s*& (\d+\.\d)\\% \((\d\.\d)\)", split)
    assert sgd is not None
    row = typed("tab:5MNIST", "sgd", 2)
    assert (row.mean, row.std) == pytest.approx((float(sgd[1]) / 100, float(sgd[2]) / 100))
    assert (row.benchmark, row.seeds) == ("mnist2", 10)
    permuted = table_body(tex, "tab:PMNIST")
    large = re.search(r"HAT -- Large\s*& 5\.8\\,M~\s*& (\d+\.\d)\\%", permuted)
    ewc_small = re.search(r"EWC~\\cite\{Kirkpatrick17PNAS\$\^2\$\s*& 0\.1\\,M~\s*& (\d+\.\d)\\%", permuted)
    assert large is not None and ewc_small is not None
    assert typed("tab:PMNIST", "hat", 10, "large").mean == pytest.approx(float(large[1]) / 100)
    assert typed("tab:PMNIST", "ewc", 10, "small").mean == pytest.approx(float(ewc_small[1]) / 100)
    assert typed("tab:PMNIST", "hat", 10, "large").std is None
    assert typed("tab:PMNIST", None, 5, approach="Generative Replay").mean == pytest.approx(0.949)
    assert typed("tab:5MNIST", "l2transfer", 2, approach="L2-Transfer").mean == pytest.approx(0.858)


# ---------------------------------------------------------------------------------------------- pure functions

def test_override_keys_map_to_config_keys() -> None:
    assert override_setting("hat.smax", "hat") == "hyperparameters.smax"
    assert override_setting("hat.training.max_epochs", "hat") == "training.max_epochs"
    assert override_setting("data.max_train_samples", "sgd") == "data.max_train_samples"
    assert override_setting("hat.smax", "sgd") is None  # another approach's section
    assert override_setting("variant", "hat") is None


def test_setting_differences_from_config_and_overrides() -> None:
    config = {"data": {"max_train_samples": 600}, "training": {"max_epochs": 200, "lr": 0.05},
              "network": {"hidden": [800, 800, 800]}, "hyperparameters": {"smax": 800}}
    expected = {"data.max_train_samples": None, "training.max_epochs": 200, "training.lr": 0.05,
                "network.hidden": [800, 800, 800]}
    overrides = ["data.max_train_samples=600", "training.max_epochs=200", "hat.smax=800", "sgd.lamb=1",
                 "variant=large"]
    assert setting_differences(config, overrides, "hat", expected) == [
        "data.max_train_samples=600 (paper: all)", "--set hat.smax=800"]
    assert setting_differences(None, ["training.max_epochs=200"], "hat", expected) == [
        "settings unknown (no run.json with the resolved config)", "--set training.max_epochs=200"]


def test_lists_of_different_lengths_are_different_settings() -> None:
    expected = {"network.hidden": [800, 800, 800]}
    for hidden in ([800, 800], [800, 800, 800, 800]):  # a common prefix is not the same network
        assert setting_differences({"network": {"hidden": hidden}}, [], "hat", expected) == [
            f"network.hidden=[{','.join(['800'] * len(hidden))}] (paper: [800,800,800])"]
    assert setting_differences({"network": {"hidden": (800, 800, 800)}}, [], "hat", expected) == []


def test_expected_settings_per_variant_and_method() -> None:
    paper = load_paper_results()
    small, large = (paper.expected_settings("pmnist", variant, "hat") for variant in ("small", "large"))
    assert (small["hyperparameters.smax"], small["network.hidden"], small["hyperparameters.c"]) == (
        200, [100, 100], 0.5)
    assert (large["hyperparameters.smax"], large["network.dropout"], large["training.max_epochs"]) == (400, 0.5, 200)
    assert "hyperparameters.smax" not in paper.expected_settings("pmnist", "small", "sgd")
    assert paper.expected_settings("mnist2", None, "hat")["training.max_epochs"] == 50


def test_compare_difference_in_paper_std_and_missing_stages() -> None:
    paper = load_paper_results()
    ours = OurRow("hat", "hat", None, (Cell(0.0, 0.0, 10), Cell(-0.05, 0.01, 10)))
    comparison = compare("mixture8", [ours], paper)
    rows = {row.paper.stage: row for row in comparison.rows}
    assert sorted(rows) == list(range(1, 9))  # tab:mixture1 only (tab:mixture0 repeats it)
    assert rows[2].difference == pytest.approx(-0.05 - -0.02)
    assert rows[2].in_paper_std == pytest.approx(-0.03 / 0.03)
    assert rows[1].in_paper_std == pytest.approx(0.01 / 0.02)
    assert rows[2].reproduction and not rows[3].reproduction
    assert rows[3].ours is None and rows[3].settings == ("no result at stage 3",)
    assert not comparison.reproduction and comparison.notes[0].startswith("NOT A REPRODUCTION: hat: no result")
    assert compare("b", [ours], paper).rows == [] and "no table for b" in compare("b", [], paper).notes[0]


# ---------------------------------------------------------------------------------------------- command line

def invoke(*arguments: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["report", *arguments])
    return result.exit_code, result.output


def test_runs_of_no_approach_in_the_paper_s_table_say_there_is_nothing_to_compare(tmp_path: Path) -> None:
    write_mnist2(tmp_path, "derpp", range(1), [0.70, 0.74], mnist2_config("derpp"))
    code, output = invoke("mnist2", "--results", str(tmp_path), "--paper")
    assert code == 0, output
    assert output.splitlines()[0].endswith(": no runs here of its approaches")
    assert ("- nothing to compare with the paper (tab:5MNIST): no approach here (derpp) is one of its hat, imm-mean, "
            "imm-mode, l2transfer, sgd") in output.splitlines()


def test_a_report_without_numbers_says_there_is_nothing_to_compare() -> None:
    comparison = compare("mnist2", [], load_paper_results())
    assert not any(row.ran for row in comparison.rows) and comparison.notes[0] == (
        "nothing to compare with the paper (tab:5MNIST): no approach of mnist2 has a number in its metric (accuracy) "
        "here (see the notes below)")


def test_full_protocol_runs_show_the_papers_numbers_and_the_differences(tmp_path: Path) -> None:
    hat = mnist2_config("hat", max_epochs=50, hyperparameters={"smax": 400, "c": 0.1})
    write_mnist2(tmp_path, "hat", range(10), lambda seed: [0.97, 0.99] if seed < 5 else [0.99, 0.99], hat)
    write_mnist2(tmp_path, "sgd", range(10), [0.70, 0.74], mnist2_config("sgd"))
    everything = paper_csv(tmp_path, "mnist2")
    frame = everything[everything["seeds"] > 0]
    assert set(frame.index) == {"hat", "sgd"} and frame["reproduction"].all()
    assert set(everything.index) - set(frame.index) == {"imm-mean", "imm-mode", "l2transfer"}  # rows without runs
    # hat: A<=2 = 0.98 (seeds 0-4) and 0.99 (5-9): mean 0.985; paper 99.0% (0.0): no difference in stds
    assert frame.loc["hat", "mean"] == pytest.approx(0.985)
    assert frame.loc["hat", "paper_mean"] == pytest.approx(0.99)
    assert frame.loc["hat", "difference"] == pytest.approx(-0.005)
    assert pd.isna(frame.loc["hat", "difference_in_paper_std"])
    # sgd: A<=2 = 0.72; paper 71.3% (1.5): +0.7 points = +0.467 paper stds
    assert frame.loc["sgd", "difference"] == pytest.approx(0.007)
    assert frame.loc["sgd", "difference_in_paper_std"] == pytest.approx(0.7 / 1.5)
    assert frame.loc["sgd", "table"] == "tab:5MNIST" and frame.loc["sgd", "paper_seeds"] == 10
    code, text = invoke("mnist2", "--results", str(tmp_path), "--paper")
    lines = text.splitlines()
    assert code == 0 and "NOT A REPRODUCTION" not in text and "the paper's protocol" in lines[0]
    sgd = next(line for line in lines if line.startswith("| sgd"))
    assert [cell.strip() for cell in sgd.strip("|").split("|")] == [
        "sgd", "SGD [tab:5MNIST]", "2", "72.0 (0.0)", "10", "71.3 (1.5)", "+0.7", "+0.5", "within", "paper protocol"]
    hat_line = next(line for line in lines if line.startswith("| hat"))
    assert [cell.strip() for cell in hat_line.strip("|").split("|")][3:9] == [
        "98.5 (0.5)", "10", "99.0 (0.0)", "-0.5", "–", "not within (-0.5)"]
    assert everything.loc["imm-mean", "verdict"] == (
        f"no runs: clbench train mnist2 -m imm-mean --seeds 0-9 --results {tmp_path}")
    # L2-transfer is the example plugin, not built in: its command installs it first
    assert everything.loc["l2transfer", "verdict"] == (
        "no runs: pip install ./examples/l2transfer (in a clone of clbench), then "
        f"clbench train mnist2 -m l2transfer --seeds 0-9 --results {tmp_path}")


def test_a_quick_run_is_not_a_reproduction_and_says_why(tmp_path: Path) -> None:
    quick = ["data.max_train_samples=600", "hat.training.max_epochs=5"]
    config = mnist2_config("hat", max_epochs=5, max_train_samples=600, hyperparameters={"smax": 400, "c": 0.1})
    write_mnist2(tmp_path, "hat", range(2), [0.99, 0.99], config, overrides=quick)
    frame = paper_csv(tmp_path, "mnist2")
    assert not frame.loc["hat", "reproduction"]
    assert frame.loc["hat", "verdict"] == "not the paper's protocol (see settings)"
    assert frame.loc["hat", "settings"].split("; ") == [
        "2 seeds (paper: 10)", "data.max_train_samples=600 (paper: all)", "training.max_epochs=5 (paper: 50)"]
    code, text = invoke("mnist2", "--results", str(tmp_path), "--paper")
    assert code == 0 and "NOT A REPRODUCTION: settings differ" in text.splitlines()[0]
    assert "- NOT A REPRODUCTION: hat: 2 seeds (paper: 10); data.max_train_samples=600" in text


def test_runs_without_run_json_are_flagged_with_their_set_options(tmp_path: Path) -> None:
    for seed in range(10):
        write_run(tmp_path, "hat", seed, [[0.99], [0.99, 0.99]], benchmark="mnist2",
                  overrides=["data.max_train_samples=600"])
    settings = paper_csv(tmp_path, "mnist2").loc["hat", "settings"]
    assert settings == "settings unknown (no run.json with the resolved config); --set data.max_train_samples=600"


def test_pmnist_large_is_compared_with_the_large_row(tmp_path: Path) -> None:
    matrix = [[0.98] * (t + 1) for t in range(10)]  # A<=10 = 0.98
    for method, config_hash in (("hat", "c0"), ("ewc", "c0")):
        for seed in range(2):
            run_dir = write_run(tmp_path, method, seed, matrix, config_hash, benchmark="pmnist", variant="large",
                                overrides=["variant=large"])
            write_run_json(run_dir, config=pmnist_config(method, [2000, 2000], 0.2, 0.5))
    everything = paper_csv(tmp_path, "pmnist")
    frame = everything[everything["seeds"] > 0]
    assert frame.loc["hat", "paper_approach"] == "HAT -- Large" and frame.loc["ewc", "paper_approach"] == "EWC"
    assert frame.loc["hat", "paper_mean"] == pytest.approx(0.986) and frame.loc["ewc", "paper_mean"] == 0.969
    assert set(frame["variant"]) == {"large"} and len(frame) == 2
    assert frame.loc["hat", "difference"] == pytest.approx(0.98 - 0.986)
    assert frame["reproduction"].all()  # the paper gives no seed count for this table
    code, text = invoke("pmnist", "--results", str(tmp_path), "--paper")
    assert code == 0 and "HAT -- Large (5.8M) [tab:PMNIST]" in text
    without = everything[everything["seeds"] == 0]
    assert sorted(without["paper_approach"] + " " + without["variant"]) == [
        "EWC small", "HAT -- Medium medium", "HAT -- Small small", "SI large", "SI small"]


def test_pmnist_large_with_a_small_network_names_the_network_change(tmp_path: Path) -> None:
    matrix = [[0.9] * (t + 1) for t in range(10)]
    run_dir = write_run(tmp_path, "hat", 0, matrix, benchmark="pmnist", variant="large", overrides=[])
    write_run_json(run_dir, config=pmnist_config("hat", [100, 100], 0.0, 0.0))
    frame = paper_csv(tmp_path, "pmnist")
    settings = frame[frame["seeds"] > 0].loc["hat", "settings"].split("; ")
    assert settings == ["network.hidden=[100,100] (paper: [2000,2000])", "network.input_dropout=0 (paper: 0.2)",
                        "network.dropout=0 (paper: 0.5)"]


def test_mixture_forgetting_ratio_beside_tab_mixture1(tmp_path: Path) -> None:
    for seed in range(10):
        write_run(tmp_path, "joint", seed, [[0.9], [0.9, 0.9]], benchmark="mixture8", overrides=[])
        write_run(tmp_path, "random", seed, [[0.5], [0.5, 0.5]], benchmark="mixture8", overrides=[])
        run_dir = write_run(tmp_path, "ewc", seed, [[0.9], [0.8, 0.9]], benchmark="mixture8", overrides=[])
        write_run_json(run_dir, config={"data": {"max_train_samples": None}, "training": {"max_epochs": 200}})
    code, text = invoke("mixture8", "--results", str(tmp_path), "--paper", "--format", "csv")
    everything = pd.read_csv(io.StringIO(text))
    frame = everything[everything["approach"] == "ewc"].set_index("stage")
    assert (everything[everything["approach"] != "ewc"]["seeds"] == 0).all()  # the other approaches: no runs
    # rho<=2 = ((0.8-0.5)/(0.9-0.5) - 1 + 0) / 2 = -0.125; paper EWC -0.08 (0.06)
    assert code == 0 and list(frame.index) == list(range(1, 9)) and set(frame["table"]) == {"tab:mixture1"}
    assert frame.loc[2, "mean"] == pytest.approx(-0.125)
    assert frame.loc[2, "difference_in_paper_std"] == pytest.approx((-0.125 + 0.08) / 0.06)
    assert frame.loc[3, "settings"] == "no result at stage 3" and frame.loc[2, "reproduction"]


def test_a_benchmark_the_paper_lacks_is_a_note(tmp_path: Path) -> None:
    write_run(tmp_path, "sgd", 0, [[0.9]], benchmark="b")
    code, text = invoke("b", "--results", str(tmp_path), "--paper")
    assert code == 0 and text.startswith("- the paper has no table for b; it has cifar-incremental, mixture8")


def test_paper_comparison_imports_no_torch(tmp_path: Path) -> None:
    write_run(tmp_path, "sgd", 0, [[0.9], [0.7, 0.9]], benchmark="mnist2")
    assert_imports_no_torch(cli_code(["report", "mnist2", "--results", str(tmp_path), "--paper"]))


def test_no_paper_row_is_marked_unimplemented_for_an_approach_clbench_registers() -> None:
    from clbench.approaches.registry import approach_names

    registered = set(approach_names())
    unimplemented = {row.approach for row in load_paper_results().rows if row.clbench_method is None}
    assert not {name for name in unimplemented if name.lower() in registered}
    built_in = {row.clbench_method for row in load_paper_results().rows if row.plugin is None}
    assert built_in - {None} <= registered


def test_a_paper_row_of_a_plugin_names_a_plugin_shipped_with_clbench_and_its_method() -> None:
    """L2-transfer (tab:5MNIST) is the example plugin: its `plugin` path holds a package whose entry point is the
    row's method, so the command printed for its missing runs installs what it names."""
    import tomllib

    root = Path(__file__).resolve().parents[2]
    plugins = {row.clbench_method: row.plugin for row in load_paper_results().rows if row.plugin}
    assert plugins == {"l2transfer": "./examples/l2transfer"}
    project = tomllib.loads((root / plugins["l2transfer"] / "pyproject.toml").read_text())
    assert "l2transfer" in project["project"]["entry-points"]["clbench.approaches"]


def test_pmnist_si_runs_are_compared_with_the_si_row_and_its_source_is_named(tmp_path: Path) -> None:
    matrix = [[0.87] * (t + 1) for t in range(10)]  # A<=10 = 0.87
    small = {**pmnist_config("si", [100, 100], 0.0, 0.0), "variant": "small"}
    for seed in range(2):
        run_dir = write_run(tmp_path, "si", seed, matrix, benchmark="pmnist", variant="small", overrides=[])
        write_run_json(run_dir, config=small)
    everything = paper_csv(tmp_path, "pmnist")
    frame = everything[everything["seeds"] > 0]
    assert frame.loc["si", "paper_approach"] == "SI" and frame.loc["si", "paper_mean"] == pytest.approx(0.860)
    assert frame.loc["si", "difference"] == pytest.approx(0.87 - 0.860)
    code, text = invoke("pmnist", "--results", str(tmp_path), "--paper")
    assert code == 0
    assert "SI (0.1M): the paper quotes this number from Nguyen17ARXIV" in " ".join(text.split())
    unimplemented = next(line for line in text.splitlines() if "does not implement" in line)
    assert "SI" not in unimplemented
