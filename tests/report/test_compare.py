"""`clbench report --compare` through Typer's runner on result folders built by hand: the paired differences and
their tests computed by hand (and with scipy where noted), Welch for unpaired seeds, Holm across the pairs, the
refusals, every format, the ranks across benchmarks, the critical-difference figure and the HTML section."""

from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from resultbuilders import write_run
from typer.testing import CliRunner

from clbench.cli import app
from clbench.metric_registry import METRICS

stats = pytest.importorskip("scipy.stats")

# Two tasks; the final accuracy A<=2 is the mean of the second row.
# sgd: A = (0.50 + 0.01 s + 0.9) / 2 = 0.700, 0.705, 0.710 (s = 0, 1, 2)
# er:  A = (0.80 + D[s] + 0.9) / 2 = 0.850, 0.870, 0.860
# sgd - er per seed: -0.150, -0.165, -0.150: mean -0.155, s = sqrt(7.5e-5), se = 0.005, t = -31 (df 2),
# p = 1 - 31 / sqrt(31^2 + 2) (Student's t with 2 df), about 0.00104
D = (0.0, 0.04, 0.02)
P_SGD_ER = 1 - 31 / math.sqrt(31 ** 2 + 2)


def sgd(seed: int) -> list[list[float]]:
    return [[0.9], [0.5 + 0.01 * seed, 0.9]]


def er(seed: int) -> list[list[float]]:
    return [[0.9], [0.8 + D[seed], 0.9]]


def make_results(root: Path, benchmark: str = "b", methods: tuple[str, ...] = ("sgd", "er"),
                 seeds: tuple[int, ...] = (0, 1, 2)) -> Path:
    builders = {"sgd": sgd, "er": er, "derpp": lambda s: [[0.9], [0.81 + D[s] + 0.01 * (s == 1), 0.9]]}
    for seed in seeds:
        for method in methods:
            write_run(root, method, seed, builders[method](seed), benchmark=benchmark)
        write_run(root, "joint", seed, [[0.95], [0.95, 0.95]], benchmark=benchmark)
        write_run(root, "random", seed, [[0.5], [0.5, 0.5]], benchmark=benchmark)
    return root


def invoke(*arguments: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["report", *arguments])
    return result.exit_code, result.output


def csv_rows(text: str) -> pd.DataFrame:
    return pd.read_csv(io.StringIO(text.split("\n\n")[0]))


def compare_csv(results: Path, approaches: str, *extra: str) -> pd.DataFrame:
    code, text = invoke("b", "--results", str(results), "--compare", approaches, "--format", "csv", *extra)
    assert code == 0, text
    return csv_rows(text)


def test_paired_accuracy_difference_by_hand(tmp_path: Path) -> None:
    frame = compare_csv(make_results(tmp_path), "sgd,er")
    row = frame[frame["metric"] == "accuracy"].iloc[0]
    assert (row["first"], row["second"], row["test"], row["seeds"]) == ("sgd", "er", "paired t", "0-2")
    assert row["difference"] == pytest.approx(-0.155)
    half = 0.95 * math.sqrt(2 / (1 - 0.95 ** 2)) * 0.005  # t_{0.975, 2} se
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((-0.155 - half, -0.155 + half))
    assert row["p_value"] == pytest.approx(P_SGD_ER, rel=1e-9)
    assert row["p_holm"] == pytest.approx(P_SGD_ER, rel=1e-9)  # one pair: nothing to correct
    assert row["p_wilcoxon"] == pytest.approx(0.25)  # three seeds, all one way: 2/2^3
    assert row["verdict"] == "sgd < er"


def test_every_registered_metric_is_compared(tmp_path: Path) -> None:
    frame = compare_csv(make_results(tmp_path), "sgd,er")
    assert list(frame["metric"]) == list(METRICS)
    # the forgetting ratio from the same code as the table: (A - A_R) / (A_J - A_R) - 1 averaged over tasks
    rho = frame[frame["metric"] == "forgetting-ratio"].iloc[0]
    per_seed = [((0.5 + 0.01 * s - 0.5) / 0.45 - 1 + (0.9 - 0.5) / 0.45 - 1) / 2
                - ((0.8 + D[s] - 0.5) / 0.45 - 1 + (0.9 - 0.5) / 0.45 - 1) / 2 for s in range(3)]
    assert rho["difference"] == pytest.approx(sum(per_seed) / 3)
    assert rho["p_value"] == pytest.approx(stats.ttest_rel(per_seed, [0.0] * 3).pvalue, rel=1e-9)


def test_holm_over_the_pairs_of_a_metric(tmp_path: Path) -> None:
    frame = compare_csv(make_results(tmp_path, methods=("sgd", "er", "derpp")), "sgd,er,derpp")
    accuracy = frame[frame["metric"] == "accuracy"]
    assert [tuple(pair) for pair in accuracy[["first", "second"]].values] == [("sgd", "er"), ("sgd", "derpp"),
                                                                             ("er", "derpp")]
    raw = list(accuracy["p_value"])
    order = sorted(range(3), key=lambda i: raw[i])
    expected = [0.0] * 3
    running = 0.0
    for rank, index in enumerate(order):  # Holm by hand: (m - rank) p, made monotone
        running = max(running, min(1.0, (3 - rank) * raw[index]))
        expected[index] = running
    assert list(accuracy["p_holm"]) == pytest.approx(expected)
    # er - derpp per seed: -0.005, -0.010, -0.005 (A is half the row sum): mean -0.02/3, s = sqrt(2.5e-5/3),
    # t = -4 (df 2), p = 1 - 4/sqrt(18) = 0.057: no difference even before the correction
    er_derpp = accuracy.iloc[2]
    assert er_derpp["difference"] == pytest.approx(-0.02 / 3)
    assert er_derpp["p_value"] == pytest.approx(1 - 4 / math.sqrt(18), rel=1e-9)
    assert er_derpp["verdict"] == "no difference at 5%"
    assert list(accuracy["verdict"])[:2] == ["sgd < er", "sgd < derpp"]


def test_unpaired_seeds_use_welch(tmp_path: Path) -> None:
    make_results(tmp_path, methods=("sgd",), seeds=(0, 1, 2))
    for seed in (3, 4):  # er on other seeds: nothing to pair
        write_run(tmp_path, "er", seed, er(seed - 3))
    row = compare_csv(tmp_path, "sgd,er").query("metric == 'accuracy'").iloc[0]
    assert (row["test"], row["seeds"]) == ("Welch t (unpaired)", "0-2 / 3-4")
    expected = stats.ttest_ind([0.700, 0.705, 0.710], [0.850, 0.870], equal_var=False)
    assert row["p_value"] == pytest.approx(expected.pvalue, rel=1e-9)
    assert math.isnan(row["p_wilcoxon"])
    # sgd - er, not er - sgd: 0.705 - 0.860 = -0.155. Welch's se^2 = s1^2/n1 + s2^2/n2 = 2.5e-5/3 + 2e-4/2 and
    # df = se^4 / [(2.5e-5/3)^2 / 2 + (1e-4)^2 / 1] (1.17); the interval -0.155 +- t_{0.975, df} se, below zero;
    # one pair, so Holm's p is the p (0.028): sgd < er
    va, vb = 2.5e-5 / 3, 2e-4 / 2
    df = (va + vb) ** 2 / (va ** 2 / 2 + vb ** 2 / 1)
    half = stats.t.ppf(0.975, df) * math.sqrt(va + vb)
    assert row["difference"] == pytest.approx(-0.155, rel=1e-9)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((-0.155 - half, -0.155 + half), rel=1e-6)
    assert row["ci_high"] < 0 and row["verdict"] == "sgd < er"


@pytest.mark.parametrize(("arguments", "message"), [
    (("--compare", "sgd"), "at least two approaches"),
    (("--compare", "sgd,sgd"), "at least two approaches"),
    (("--compare", "sgd,nope"), "--compare: unknown method 'nope'"),
    (("--compare", "sgd,ewc"), "no finished runs of ewc on b"),
])
def test_refusals(tmp_path: Path, arguments: tuple[str, ...], message: str) -> None:
    code, text = invoke("b", "--results", str(make_results(tmp_path)), *arguments)
    assert code == 2 and message in " ".join(text.split())


def test_a_missing_approach_names_the_command_that_makes_it(tmp_path: Path) -> None:
    code, text = invoke("b", "--results", str(make_results(tmp_path)), "--compare", "sgd,ewc")
    assert code == 2
    # with the --set options of the runs it is compared with (make_results' runs: data.max_train_samples=9)
    assert (f"clbench train b -m ewc --seeds 0-2 --set data.max_train_samples=9 --results {tmp_path}"
            in " ".join(text.split()))


def test_fewer_than_two_paired_seeds_is_refused(tmp_path: Path) -> None:
    make_results(tmp_path, seeds=(0,))
    write_run(tmp_path, "er", 1, er(1))
    code, text = invoke("b", "--results", str(tmp_path), "--compare", "sgd,er")
    assert code == 2
    assert "sgd and er on b have fewer than 2 paired seeds (seeds 0 and 0-1)" in " ".join(text.split())


@pytest.mark.parametrize(("fmt", "expected"), [("markdown", "| A (accuracy)"), ("latex", "\\begin{tabular}"),
                                               ("html", "<td>sgd &lt; er</td>"), ("csv", "accuracy,sgd,er")])
def test_every_format(tmp_path: Path, fmt: str, expected: str) -> None:
    code, text = invoke("b", "--results", str(make_results(tmp_path)), "--compare", "sgd,er", "--format", fmt)
    assert code == 0, text
    assert expected in text
    if fmt == "markdown":
        row = next(line for line in text.splitlines() if line.startswith("| A (accuracy)"))
        assert "| -15.50 " in row and "sgd < er" in row


def test_the_evaluation_option_is_respected(tmp_path: Path) -> None:
    for seed in range(3):  # task-agnostic rows differ from the task-aware ones: er - sgd is 0.1 there
        write_run(tmp_path, "sgd", seed, sgd(seed), agnostic=[[0.9], [0.1 + 0.01 * seed, 0.9]], scenario="class")
        write_run(tmp_path, "er", seed, er(seed), agnostic=[[0.9], [0.3 + D[seed], 0.9]], scenario="class")
    # task-agnostic sgd - er per seed: (-0.2 + 0.01 s - D[s]) / 2 = -0.100, -0.115, -0.100
    agnostic = compare_csv(tmp_path, "sgd,er").query("metric == 'accuracy'").iloc[0]
    aware = compare_csv(tmp_path, "sgd,er", "--evaluation", "task-aware").query("metric == 'accuracy'").iloc[0]
    assert (agnostic["evaluation"], aware["evaluation"]) == ("task-agnostic", "task-aware")
    assert agnostic["difference"] == pytest.approx(-0.315 / 3)
    assert aware["difference"] == pytest.approx(-0.155)


def several_benchmarks(root: Path, count: int) -> Path:
    for index in range(count):
        make_results(root, benchmark=f"b{index}", methods=("sgd", "er", "derpp"))
    return root


def test_ranks_across_benchmarks(tmp_path: Path) -> None:
    code, text = invoke("--results", str(several_benchmarks(tmp_path, 3)), "--compare", "sgd,er,derpp",
                        "--format", "csv")
    assert code == 0, text
    ranks = pd.read_csv(io.StringIO(text.split("\n\n")[1]))
    accuracy = ranks[ranks["metric"] == "accuracy"].set_index("approach")
    # every benchmark ranks derpp > er > sgd: ranks 1, 2, 3; chi2_F = 12*3/(3*4) (9+4+1 - 12) = 6, F_F infinite
    assert list(accuracy.loc[["derpp", "er", "sgd"], "average_rank"]) == [1.0, 2.0, 3.0]
    assert accuracy["friedman_chi_square"].iloc[0] == pytest.approx(6.0)
    assert accuracy["critical_difference"].iloc[0] == pytest.approx(2.343 * math.sqrt(12 / 18))
    assert accuracy["friedman_p"].iloc[0] == pytest.approx(math.exp(-3.0))  # chi-square, 2 df


def test_nemenyi_pairs_follow_iman_davenports_p_where_it_and_the_chi_square_disagree() -> None:
    """4 approaches on 4 benchmarks, ranks per benchmark (1: best) a b c d: (1,3,2,4), (1,2,3,4), (2,1,3,4),
    (1,4,2,3). R = 1.25, 2.5, 2.5, 3.75; sum R^2 = 28.125; chi2_F = 12*4/(4*5) (28.125 - 4*25/4) = 7.5, whose
    chi-square p (3 df) is 0.058, no rejection; F_F = 3 * 7.5 / (4*3 - 7.5) = 5, whose F(3, 9) p is 0.026, a
    rejection (Demsar 2006, Section 3.2.2, recommends F_F). CD = 2.569 sqrt(4*5 / (6*4)) = 2.345 <= 3.75 - 1.25:
    a is better than d, and no other pair differs by CD."""
    from clbench.report.ranking import metric_ranks

    ranks = [[1, 3, 2, 4], [1, 2, 3, 4], [2, 1, 3, 4], [1, 4, 2, 3]]
    found = metric_ranks("accuracy", ["b0", "b1", "b2", "b3"], 1.0 - 0.1 * np.array(ranks, dtype=float))
    assert found.test is not None and found.test.ranks.tolist() == [1.25, 2.5, 2.5, 3.75]
    assert found.test.chi_square_p == pytest.approx(stats.chi2.sf(7.5, 3), rel=1e-9) and found.test.chi_square_p > 0.05
    assert found.test.f_p == pytest.approx(stats.f.sf(5.0, 3, 9), rel=1e-9) and found.test.f_p < 0.05
    assert found.critical_difference == pytest.approx(2.569 * math.sqrt(20 / 24))
    assert found.different(["a", "b", "c", "d"]) == [("a", "d")]


def test_ranks_are_refused_below_the_minimum_with_the_reason(tmp_path: Path) -> None:
    code, text = invoke("--results", str(several_benchmarks(tmp_path, 2)), "--compare", "sgd,er,derpp")
    assert code == 0, text
    assert "accuracy: no ranks: 2 benchmarks with a value for every approach; the ranks need at least 3 for 3 " \
           "approaches" in " ".join(text.split())


def test_critical_difference_figure(tmp_path: Path) -> None:
    code, text = invoke("--results", str(several_benchmarks(tmp_path / "r", 3)), "--compare", "sgd,er,derpp",
                        "--plot", str(tmp_path / "figures"))
    assert code == 0, text
    assert (tmp_path / "figures" / "compare-accuracy-cd.png").stat().st_size > 1000
    assert (tmp_path / "figures" / "compare-accuracy-cd.pdf").exists()


def test_html_section(tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    code, text = invoke("--results", str(several_benchmarks(tmp_path / "r", 3)), "--compare", "sgd,er,derpp",
                        "--html", str(page))
    assert code == 0, text
    html = page.read_text()
    assert html.count('data-table="compare"') == 3 and 'data-table="ranks"' in html
    assert '<a href="#b0-compare">paired comparisons across seeds</a>' in html
    assert "<td>sgd &lt; er</td>" in html and "data:image/png;base64," in html


def test_the_verdict_follows_the_corrected_p() -> None:
    from clbench.report.comparison import PairRow

    row = PairRow("accuracy", "a", "b", "paired t", "0-4", difference=0.02, p_value=0.03, holm_p=0.06)
    assert row.verdict == "no difference at 5%"
    assert PairRow(**{**row.__dict__, "holm_p": 0.04}).verdict == "a > b"
    assert PairRow(**{**row.__dict__, "holm_p": 0.04, "difference": -0.02}).verdict == "a < b"
    assert PairRow("accuracy", "a", "b", "", "0 / 0").verdict == "–"


def test_html_refuses_what_the_tables_refuse(tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    code, text = invoke("b", "--results", str(make_results(tmp_path / "r")), "--compare", "sgd,ewc", "--html",
                        str(page))
    assert code == 2 and "no finished runs of ewc on b" in " ".join(text.split())
    assert not page.exists()
