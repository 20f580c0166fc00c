"""The statistics of `report --compare` (clbench.report.significance): each against scipy.stats on hand-made
tables, and small cases computed fully by hand in the comments."""

from __future__ import annotations

import math

import numpy as np
import pytest

from clbench.report import significance as sig

stats = pytest.importorskip("scipy.stats")

TABLES = [[0.5, -0.2, 1.1, 0.7, 0.3], [0.01, 0.02, 0.04], [-3.0, -1.0, -2.5, -0.5, -2.0, -1.5],
          [0.12, -0.08], [2.0, 1.0, 4.0, 3.0, 7.0, 5.0, 6.0, -8.0, 9.0, 10.0]]


@pytest.mark.parametrize("df", [1, 2, 3, 4.4, 7, 12.8, 30, 200])
def test_student_t_against_scipy(df: float) -> None:
    for t in (0.0, 0.05, 0.7, 1.5, 2.2, 4.0, 12.0):
        assert sig.student_t_cdf(t, df) == pytest.approx(stats.t.cdf(t, df), abs=1e-12)
        assert sig.student_t_cdf(-t, df) == pytest.approx(stats.t.cdf(-t, df), abs=1e-12)
    for p in (0.6, 0.9, 0.975, 0.995):
        assert sig.student_t_quantile(p, df) == pytest.approx(stats.t.ppf(p, df), rel=1e-9)


def test_student_t_by_hand() -> None:
    # df = 2: P(|T| >= t) = 1 - t / sqrt(t^2 + 2) and t_{p} = a sqrt(2 / (1 - a^2)), a = 2p - 1
    assert sig.student_t_two_sided_p(3.0, 2) == pytest.approx(1 - 3 / math.sqrt(11), abs=1e-14)
    assert sig.student_t_quantile(0.975, 2) == pytest.approx(0.95 * math.sqrt(2 / (1 - 0.95 ** 2)), rel=1e-10)
    # df = 1 (Cauchy): P(T <= t) = 1/2 + atan(t) / pi
    assert sig.student_t_cdf(1.7, 1) == pytest.approx(0.5 + math.atan(1.7) / math.pi, abs=1e-14)


@pytest.mark.parametrize("df", [1, 2, 3, 5, 9, 20])
def test_chi_square_and_f_against_scipy(df: int) -> None:
    for x in (0.01, 0.5, 2.0, 7.5, 30.0):
        assert sig.chi_square_survival(x, df) == pytest.approx(stats.chi2.sf(x, df), abs=1e-12)
        assert sig.f_survival(x, df, 2 * df + 1) == pytest.approx(stats.f.sf(x, df, 2 * df + 1), abs=1e-12)
    assert sig.chi_square_survival(3.0, 2) == pytest.approx(math.exp(-1.5), abs=1e-14)  # df = 2: exp(-x/2)


@pytest.mark.parametrize("differences", TABLES)
def test_paired_t_test_against_scipy(differences: list[float]) -> None:
    first = np.linspace(50, 60, len(differences))
    second = first - np.array(differences)
    expected = stats.ttest_rel(first, second)
    interval = expected.confidence_interval(0.95)
    found = sig.paired_t_test(first - second)
    assert (found.statistic, found.p_value, found.df) == pytest.approx((expected.statistic, expected.pvalue,
                                                                        expected.df), rel=1e-9)
    assert (found.low, found.high) == pytest.approx((interval.low, interval.high), rel=1e-9)


def test_paired_t_test_by_hand() -> None:
    # d = 0.1, 0.2, 0.3: mean 0.2, s = 0.1, se = 0.1/sqrt(3), t = 2 sqrt(3) = 3.4641, df 2,
    # p = 1 - t / sqrt(t^2 + 2) = 1 - sqrt(12/14) = 0.07418; half-width t_{0.975,2} se = 4.302653 * 0.057735
    found = sig.paired_t_test([0.1, 0.2, 0.3])
    assert found.statistic == pytest.approx(2 * math.sqrt(3))
    assert found.p_value == pytest.approx(1 - math.sqrt(12 / 14), abs=1e-12)
    half = 0.95 * math.sqrt(2 / (1 - 0.95 ** 2)) * 0.1 / math.sqrt(3)
    assert (found.low, found.high) == pytest.approx((0.2 - half, 0.2 + half))


def test_paired_t_test_of_equal_differences() -> None:
    assert sig.paired_t_test([0.0, 0.0, 0.0]).p_value == 1.0
    same = sig.paired_t_test([0.02, 0.02])
    assert same.p_value == 0.0 and (same.low, same.high) == (0.02, 0.02)
    with pytest.raises(ValueError, match="at least 2"):
        sig.paired_t_test([0.1])


@pytest.mark.parametrize("differences", TABLES)
def test_wilcoxon_against_scipy(differences: list[float]) -> None:
    expected = stats.wilcoxon(differences, method="exact")
    found = sig.wilcoxon_exact(differences)
    assert (found.statistic, found.p_value) == pytest.approx((expected.statistic, expected.pvalue), rel=1e-12)


def test_wilcoxon_by_hand_with_a_zero_and_ties() -> None:
    # 0.0 is dropped; |d| = 0.1, 0.1, 0.3 get ranks 1.5, 1.5, 3; W+ = 1.5 + 3 = 4.5, W- = 1.5.
    # The 8 sign assignments give W+ = 0, 1.5, 1.5, 3, 3, 4.5, 4.5, 6: P(W+ >= 4.5) = 3/8, p = 2 * 3/8.
    found = sig.wilcoxon_exact([0.1, -0.1, 0.3, 0.0])
    assert (found.statistic, found.n, found.p_value) == (1.5, 3, pytest.approx(0.75))
    # three seeds, all one way: P(W+ = 6) = 1/8, p = 1/4 (the smallest p three seeds can give)
    assert sig.wilcoxon_exact([0.1, 0.2, 0.3]).p_value == pytest.approx(0.25)
    assert sig.wilcoxon_exact([0.0, 0.0]).p_value == 1.0


def test_wilcoxon_with_ties_against_a_sign_flip_permutation_test() -> None:
    differences = np.array([0.2, -0.1, 0.1, 0.4, 0.2, 0.3])

    def plus(sample: np.ndarray, axis: int = -1) -> np.ndarray:  # W+ with mid-ranks of |d|
        ranks = stats.rankdata(np.abs(sample), axis=axis)
        return np.sum(ranks * (sample > 0), axis=axis)

    expected = stats.permutation_test((differences,), plus, permutation_type="samples", n_resamples=np.inf)
    assert sig.wilcoxon_exact(differences).p_value == pytest.approx(expected.pvalue, rel=1e-12)


@pytest.mark.parametrize(("first", "second"), [([1.0, 2.0, 3.0], [2.0, 4.0, 6.0, 8.0]),
                                               ([0.81, 0.84, 0.80, 0.83], [0.78, 0.74, 0.80]),
                                               ([5.0, 5.5], [1.0, 9.0, 4.0, 6.0, 2.0])])
def test_welch_against_scipy(first: list[float], second: list[float]) -> None:
    expected = stats.ttest_ind(first, second, equal_var=False)
    interval = expected.confidence_interval(0.95)
    found = sig.welch_t_test(first, second)
    assert (found.statistic, found.p_value, found.df) == pytest.approx((expected.statistic, expected.pvalue,
                                                                        expected.df), rel=1e-9)
    assert (found.low, found.high) == pytest.approx((interval.low, interval.high), rel=1e-9)


def test_welch_by_hand() -> None:
    # means 2 and 5; s^2/n = 1/3 and (20/3)/4 = 5/3; se = sqrt(2); t = -3/sqrt(2);
    # df = 2^2 / ((1/3)^2/2 + (5/3)^2/3) = 4 / (1/18 + 25/27) = 216/53
    found = sig.welch_t_test([1.0, 2.0, 3.0], [2.0, 4.0, 6.0, 8.0])
    assert (found.difference, found.statistic, found.df) == pytest.approx((-3.0, -3 / math.sqrt(2), 216 / 53))


def test_holm_by_hand() -> None:
    # m = 3 (NaN is no test): 0.01 * 3 = 0.03; 0.03 * 2 = 0.06; 0.04 * 1 = 0.04, raised to 0.06 (monotone)
    adjusted = sig.holm([0.01, 0.04, 0.03, math.nan])
    assert adjusted[:3] == pytest.approx([0.03, 0.06, 0.06]) and math.isnan(adjusted[3])
    assert sig.holm([0.6, 0.5]) == [1.0, 1.0]


FRIEDMAN_TABLES = [np.array([[0.9, 0.8, 0.7], [0.85, 0.8, 0.6], [0.7, 0.9, 0.5]]),
                   np.array([[1, 2, 3, 4], [2, 1, 3, 4.0], [3, 3, 1, 2], [1, 2, 2, 3], [4, 3, 2, 1]]),
                   np.array([[0.3, 0.2], [0.4, 0.1], [0.2, 0.25], [0.5, 0.1], [0.6, 0.3]])]


@pytest.mark.parametrize("table", FRIEDMAN_TABLES[:2])  # scipy needs at least 3 approaches
def test_friedman_against_scipy(table: np.ndarray) -> None:
    expected = stats.friedmanchisquare(*table.T)
    found = sig.friedman(table)
    assert (found.chi_square, found.chi_square_p) == pytest.approx((expected.statistic, expected.pvalue), rel=1e-9)
    n, k = table.shape
    assert found.f_p == pytest.approx(stats.f.sf(found.f_statistic, k - 1, (k - 1) * (n - 1)), rel=1e-9)


def test_friedman_and_nemenyi_by_hand() -> None:
    # ranks (1: the highest) per row: [1,2,3], [1,2,3], [2,1,3]: R = 4/3, 5/3, 3; sum R^2 = 122/9;
    # chi2_F = 12*3/(3*4) * (122/9 - 3*16/4) = 14/3; F_F = 2 * (14/3) / (3*2 - 14/3) = 7;
    # chi-square (2 df) p = exp(-7/3); F(2, 4) p = (1 + 2*7/4)^(-2) = 1/20.25; CD = 2.343 sqrt(12/18)
    found = sig.friedman(FRIEDMAN_TABLES[0])
    assert found.ranks == pytest.approx([4 / 3, 5 / 3, 3])
    assert (found.chi_square, found.f_statistic) == pytest.approx((14 / 3, 7.0))
    assert (found.chi_square_p, found.f_p) == pytest.approx((math.exp(-7 / 3), 1 / 20.25))
    assert sig.nemenyi_critical_difference(3, 3) == pytest.approx(2.343 * math.sqrt(12 / 18))
    assert sig.average_ranks(FRIEDMAN_TABLES[0], higher_is_better=False) == pytest.approx([8 / 3, 7 / 3, 1])


def test_nemenyi_table_is_demsars_studentized_range() -> None:
    # Demsar 2006, Table 5(a): q_0.05 = studentized range q(0.95, k, inf) / sqrt(2), given to 3 decimals
    for k, value in sig.NEMENYI_Q05.items():
        assert value == pytest.approx(stats.studentized_range.ppf(0.95, k, np.inf) / math.sqrt(2), abs=1e-3)
    with pytest.raises(ValueError, match="2 to 10"):
        sig.nemenyi_critical_difference(11, 20)


def test_minimum_benchmarks_is_where_the_largest_rank_gap_can_beat_cd() -> None:
    for k in sig.NEMENYI_Q05:
        needed = sig.minimum_benchmarks(k)
        assert k - 1 > sig.nemenyi_critical_difference(k, needed)
        assert k - 1 <= sig.nemenyi_critical_difference(k, needed - 1) if needed > 1 else True
    assert (sig.minimum_benchmarks(2), sig.minimum_benchmarks(6)) == (4, 3)


def test_the_report_needs_no_scipy() -> None:
    import subprocess
    import sys

    code = ("import sys; import clbench.report.comparison, clbench.report.ranking, clbench.report.html_sections; "
            "sys.exit('scipy' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
