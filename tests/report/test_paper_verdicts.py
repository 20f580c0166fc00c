"""`clbench report --paper`: the "within the paper's std?" column (by hand arithmetic), the paper cells without runs
and the command that makes them, pmnist's network sizes kept apart, quick settings never called within, and the
table beyond the paper's (pmnist, small network: accuracy and the forgetting ratio, never without its references)."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pytest
from clihelpers import paper_csv
from resultbuilders import mnist2_config, pmnist_config, write_mnist2, write_run, write_run_json
from typer.testing import CliRunner

from clbench.cli import app
from clbench.report.paper_verdict import difference_text, verdict, within

SMALL, MEDIUM = [100, 100], [500, 500]


def flat(accuracy: float, stages: int = 10) -> list[list[float]]:
    """A lower-triangular matrix whose every entry is `accuracy`: A<=t = accuracy at every stage."""
    return [[accuracy] * (t + 1) for t in range(stages)]


def write_pmnist(results: Path, method: str, seeds: range, matrix: list[list[float]], *, variant: str = "small",
                 hidden: list[int] = SMALL, overrides: list[str] | None = None, config_hash: str = "c0",
                 **config: object) -> None:
    """pmnist runs of `method` at `variant` with the paper's protocol, unless `config` sections say otherwise."""
    resolved = pmnist_config(method, hidden, 0.0, 0.0, variant) | config
    for seed in seeds:
        run_dir = write_run(results, method, seed, matrix, config_hash, benchmark="pmnist", variant=variant,
                            overrides=overrides or [])
        write_run_json(run_dir, config=resolved)


def report(results: Path, benchmark: str, *options: str) -> str:
    result = CliRunner().invoke(app, ["report", benchmark, "--results", str(results), "--paper", *options])
    assert result.exit_code == 0, result.output
    return result.output


# ---------------------------------------------------------------------------------------------- the rule, by hand

@pytest.mark.parametrize(("ours", "paper", "std", "metric", "expected"), [
    (0.925, 0.916, None, "accuracy", True),     # +0.9 points, no std: within 1 point
    (0.927, 0.916, None, "accuracy", False),    # +1.1 points
    (0.906, 0.916, None, "accuracy", True),     # -1.0 points: the bound itself is within
    (0.728, 0.713, 0.015, "accuracy", True),    # +1.5 against the paper's std 1.5
    (0.729, 0.713, 0.015, "accuracy", False),   # +1.6
    (0.9897, 0.990, 0.0, "accuracy", True),     # -0.03 prints as -0.0: within the paper's 99.0 (0.0)
    (0.9894, 0.990, 0.0, "accuracy", False),    # -0.06 prints as -0.1
    (-0.05, -0.02, 0.03, "forgetting-ratio", True),   # -0.03 against 0.03
    (-0.06, -0.02, 0.03, "forgetting-ratio", False),  # -0.04
])
def test_within_the_paper_s_std_at_its_printed_precision(ours, paper, std, metric, expected) -> None:
    assert within(ours, paper, std, metric) is expected


@pytest.mark.parametrize(("ours", "paper", "metric", "expected"), [
    (0.97368, 0.974, "accuracy", "+0.0"),   # -0.032 points prints as 0.0: never "-0.0"
    (0.9163, 0.916, "accuracy", "+0.0"),
    (0.920, 0.916, "accuracy", "+0.4"),
    (0.9045, 0.916, "accuracy", "-1.2"),    # -1.15 points: round half to even on the float -1.1500000000000012
    (-0.021, -0.02, "forgetting", "+0.00"),  # -0.001 at two digits
])
def test_a_difference_prints_signed_and_never_as_minus_zero(ours, paper, metric, expected) -> None:
    assert difference_text(ours, paper, metric) == expected


def test_the_verdict_text() -> None:
    assert verdict(0.927, 5, 0.916, None, "accuracy") == "not within (+1.1)"
    assert verdict(0.9894, 10, 0.990, 0.0, "accuracy", paper_seeds=10) == "not within (-0.1)"
    assert verdict(0.728, 2, 0.713, 0.015, "accuracy", paper_seeds=10) == "within (2 of 10 seeds)"
    assert verdict(-0.06, 10, -0.02, 0.03, "forgetting-ratio") == "not within (-0.04)"
    # never within for runs off the paper's protocol, or a number the paper quotes from another protocol
    assert verdict(0.916, 5, 0.916, None, "accuracy", differences=("training.max_epochs=5 (paper: 200)",)) == (
        "not the paper's protocol (see settings)")
    assert verdict(0.86, 3, 0.86, None, "accuracy", other_protocol="X's protocol") == "not comparable: X's protocol"
    assert verdict(None, 0, 0.916, None, "accuracy", command="clbench train pmnist -m hat --seeds 0-4") == (
        "no runs: clbench train pmnist -m hat --seeds 0-4")


# ---------------------------------------------------------------------------------------------- the command line

def test_split_mnist_cells_within_or_not_and_the_commands_for_the_rest(tmp_path: Path) -> None:
    # sgd A<=2 = (0.99 + 0.47) / 2 = 0.73 (both seeds): +1.7 against the paper's 71.3 (1.5): not within
    write_mnist2(tmp_path, "sgd", range(10), [0.47, 0.99], mnist2_config("sgd"))
    # imm-mean A<=2 = (0.99 + 0.894) / 2 = 0.942: +0.2 against 94.0 (0.2): within, on 2 of the paper's 10 runs
    write_mnist2(tmp_path, "imm-mean", range(2), [0.894, 0.99], mnist2_config("imm-mean"))
    frame = paper_csv(tmp_path, "mnist2")
    assert frame.loc["sgd", "verdict"] == "not within (+1.7)"
    assert frame.loc["imm-mean", "verdict"] == "within (2 of 10 seeds)"
    assert frame.loc["imm-mode", "verdict"] == (
        f"no runs: clbench train mnist2 -m imm-mode --seeds 0-9 --results {tmp_path}")
    assert frame.loc["hat", "verdict"] == f"no runs: clbench train mnist2 -m hat --seeds 0-9 --results {tmp_path}"
    assert list(frame.index) == ["sgd", "l2transfer", "imm-mean", "imm-mode", "hat"]  # the paper's order (tab:5MNIST)
    assert not frame.loc["hat", "reproduction"] and frame.loc["hat", "seeds"] == 0


def test_pmnist_network_sizes_are_compared_with_their_own_rows(tmp_path: Path) -> None:
    write_pmnist(tmp_path, "hat", range(3), flat(0.920))                       # small: 92.0 against 91.6
    write_pmnist(tmp_path, "hat", range(1), flat(0.970), variant="medium", hidden=MEDIUM,
                 overrides=["variant=medium"], config_hash="c1")               # medium: 97.0 against 97.4
    everything = paper_csv(tmp_path, "pmnist").reset_index()
    hat = everything[everything["paper_approach"].str.startswith("HAT")].set_index("paper_approach")
    assert hat.loc["HAT -- Small", "seeds"] == 3 and hat.loc["HAT -- Small", "mean"] == pytest.approx(0.92)
    assert hat.loc["HAT -- Medium", "seeds"] == 1 and hat.loc["HAT -- Medium", "mean"] == pytest.approx(0.97)
    assert hat.loc["HAT -- Small", "verdict"] == "within" and hat.loc["HAT -- Medium", "verdict"] == "within"
    assert hat.loc["HAT -- Small", "approach"] != hat.loc["HAT -- Medium", "approach"]  # two labels
    assert hat.loc["HAT -- Large", "verdict"] == (
        f"no runs: clbench train pmnist -m hat --seeds 0-4 --set variant=large --results {tmp_path}")
    # by network size: small rows, then medium, then large
    assert list(everything["variant"]) == sorted(everything["variant"], key=["small", "medium", "large"].index)


def test_the_small_network_s_missing_rows_need_no_variant_option(tmp_path: Path) -> None:
    write_pmnist(tmp_path, "hat", range(1), flat(0.970), variant="medium", hidden=MEDIUM,
                 overrides=["variant=medium"])
    everything = paper_csv(tmp_path, "pmnist")
    small = everything[(everything["variant"] == "small")].set_index("paper_approach")
    for paper_row, method in (("HAT -- Small", "hat"), ("EWC", "ewc")):
        assert small.loc[paper_row, "verdict"] == (
            f"no runs: clbench train pmnist -m {method} --seeds 0-4 --results {tmp_path}")


def test_a_quick_setting_is_never_within(tmp_path: Path) -> None:
    # A<=10 = 91.6, the paper's number exactly, but on 2,000 images and 5 epochs per task
    write_pmnist(tmp_path, "hat", range(5), flat(0.916), overrides=["data.max_train_samples=2000",
                                                                     "training.max_epochs=5"],
                 data={"max_train_samples": 2000, "max_test_samples": None},
                 training={"lr": 0.05, "lr_factor": 3, "lr_min": 1e-4, "patience": 5, "max_epochs": 5,
                           "batch_size": 64})
    frame = paper_csv(tmp_path, "pmnist")
    hat = frame[frame["paper_approach"] == "HAT -- Small"].iloc[0]
    assert hat["difference"] == pytest.approx(0.0) and hat["verdict"] == "not the paper's protocol (see settings)"
    assert hat["settings"].split("; ") == ["data.max_train_samples=2000 (paper: all)",
                                           "training.max_epochs=5 (paper: 200)"]


def test_a_number_quoted_from_another_protocol_is_not_comparable(tmp_path: Path) -> None:
    write_pmnist(tmp_path, "si", range(3), flat(0.860))  # SI 86.0: the paper's number exactly
    write_pmnist(tmp_path, "ewc", range(3), flat(0.882))  # EWC 88.2
    frame = paper_csv(tmp_path, "pmnist")
    ran = frame[frame["seeds"] > 0]
    assert ran.loc["si", "verdict"] == "not comparable: the paper quotes Nguyen17ARXIV's number, another protocol " \
                                       "(see the notes)"
    assert ran.loc["ewc", "verdict"].startswith("not comparable: the paper quotes He18ICLR's number")
    text = report(tmp_path, "pmnist")
    assert "- SI (0.1M): the paper quotes this number from Nguyen17ARXIV" in text
    assert "one output head shared by every task" in text and "(nvcuong/variational-continual-learning@" in text


# ---------------------------------------------------------------------------------------------- beyond the paper

def test_the_table_beyond_the_paper_has_rho_only_with_its_references(tmp_path: Path) -> None:
    two = {"data": {"max_train_samples": None, "max_test_samples": None, "n_tasks": 2}}
    for seed in range(2):
        write_pmnist(tmp_path, "hat", range(seed, seed + 1), [[0.9], [0.8, 0.9]], **two)
    write_pmnist(tmp_path, "sgd", range(1), [[0.9], [0.5, 0.9]], **two)
    write_pmnist(tmp_path, "joint", range(1), [[0.9], [0.9, 0.9]], **two)
    write_pmnist(tmp_path, "random", range(1), [[0.1], [0.1, 0.1]], **two)
    result = CliRunner().invoke(app, ["report", "pmnist", "--results", str(tmp_path), "--paper", "--format", "csv"])
    beyond = pd.read_csv(io.StringIO(result.output.split("\n\n")[1]))
    sgd = beyond[beyond["approach"] == "sgd"].set_index("stage")
    # rho<=1 = (0.9 - 0.1) / (0.9 - 0.1) - 1 = 0; rho<=2 = ((0.5 - 0.1) / 0.8 - 1 + 0) / 2 = -0.25
    assert sgd.loc[1, "forgetting_ratio"] == pytest.approx(0.0)
    assert sgd.loc[2, "forgetting_ratio"] == pytest.approx(-0.25)
    assert sgd.loc[2, "accuracy"] == pytest.approx(0.7)
    # hat: seed 0 has references, seed 1 has none: no rho at all, never seed 0's alone
    hat = beyond[beyond["approach"] == "hat"].set_index("stage")
    assert hat["forgetting_ratio"].isna().all() and hat.loc[2, "accuracy"] == pytest.approx(0.85)
    assert set(beyond["approach"]) == {"hat", "sgd"}
    text = report(tmp_path, "pmnist")
    assert (f"none here for hat seed 1 (their rho reads –): make them with `clbench train pmnist -m joint,random "
            f"--seeds 1 --results {tmp_path}`") in text
    assert (f"no runs of ewc, si, packnet, gpm, wsn at the small network: make them with `clbench train pmnist -m "
            f"ewc,si,packnet,gpm,wsn --seeds 0-2 --results {tmp_path}`") in text
    rows = {line.split("|")[1].strip(): [cell.strip() for cell in line.strip("|").split("|")]
            for line in text.splitlines() if line.startswith("| ")}
    assert rows["sgd"][1:4] == ["70.0 (–)", "0.00 (–)", "-0.25 (–)"] and rows["hat"][2:4] == ["–", "–"]
    assert rows["wsn"][1] == "no runs"


def test_medium_runs_are_not_in_the_small_table_beyond_the_paper(tmp_path: Path) -> None:
    write_pmnist(tmp_path, "sgd", range(1), flat(0.5), variant="medium", hidden=MEDIUM, overrides=["variant=medium"])
    result = CliRunner().invoke(app, ["report", "pmnist", "--results", str(tmp_path), "--paper", "--format", "csv"])
    blocks = result.output.split("\n\n")
    assert len(blocks) == 2 and pd.read_csv(io.StringIO(blocks[1])).empty


def test_a_forgetting_ratio_cell_without_runs_asks_for_the_references_too_on_one_line(tmp_path: Path) -> None:
    for seed in range(2):
        write_run(tmp_path, "joint", seed, [[0.9], [0.9, 0.9]], benchmark="mixture8", overrides=[])
        write_run(tmp_path, "random", seed, [[0.5], [0.5, 0.5]], benchmark="mixture8", overrides=[])
        write_run_json(write_run(tmp_path, "ewc", seed, [[0.9], [0.8, 0.9]], benchmark="mixture8", overrides=[]),
                       config={"data": {"max_train_samples": None}, "training": {"max_epochs": 200}})
    frame = paper_csv(tmp_path, "mixture8")
    hat = frame.loc[["hat"]]
    assert list(hat["stage"]) == list(range(1, 9))  # every cell in the CSV
    assert set(hat["verdict"]) == {f"no runs: clbench train mixture8 -m hat,joint,random --seeds 0-9 --results "
                                   f"{tmp_path}"}
    lines = [line for line in report(tmp_path, "mixture8").splitlines() if line.startswith("| hat ")]
    cells = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert len(lines) == 1 and cells[2] == "1-8" and cells[5] == "–"  # one line, no single paper value
