"""Significance tests for comparing approaches over seeds and benchmarks, as pure functions (standard library and
numpy only: the report must not need scipy; the tests check every function against scipy.stats).

- `paired_t_test`: Student's paired t-test over the per-seed differences, its 95% confidence interval;
- `wilcoxon_exact`: the exact Wilcoxon signed-rank test (zeros dropped, ties given mid-ranks, the null
  distribution of W+ enumerated over the 2^n sign flips of the ranks actually observed);
- `welch_t_test`: Welch's unequal-variance t-test with the Welch-Satterthwaite degrees of freedom (unpaired runs);
- `holm`: Holm's step-down adjustment of a family of p-values;
- `friedman`, `average_ranks`, `nemenyi_critical_difference`: Demsar (2006), "Statistical comparisons of
  classifiers over multiple data sets", JMLR 7, Sections 3.2.2 (Friedman, Iman-Davenport, Nemenyi) and Table 5(a).

The distributions: Student's t and F through the regularised incomplete beta function I_x(a, b) (continued
fraction, Press et al., Numerical Recipes 3rd ed., Section 6.4), chi-square through the regularised incomplete
gamma function (series and continued fraction, Section 6.2).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

CONFIDENCE = 0.95
_EPSILON = 1e-15
_TINY = 1e-300
_ITERATIONS = 500

NEMENYI_Q05 = {2: 1.960, 3: 2.343, 4: 2.569, 5: 2.728, 6: 2.850, 7: 2.949, 8: 3.031, 9: 3.102, 10: 3.164}
"""q_0.05 of the two-tailed Nemenyi test for k = 2..10 approaches: Demsar (2006), Table 5(a), the studentized range
statistic divided by sqrt(2) (the tests check each against scipy.stats.studentized_range)."""


# ---------------------------------------------------------------------------------------------- distributions

def incomplete_beta(x: float, a: float, b: float) -> float:
    """The regularised incomplete beta function I_x(a, b), 0 <= x <= 1, a, b > 0."""
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"incomplete_beta needs 0 <= x <= 1, got {x}")
    if x in (0.0, 1.0):
        return x
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):  # the continued fraction converges fast here; else use the symmetry
        return front * _beta_fraction(x, a, b) / a
    return 1.0 - front * _beta_fraction(1.0 - x, b, a) / b


def _beta_fraction(x: float, a: float, b: float) -> float:
    """The continued fraction of I_x(a, b) by the modified Lentz method (Numerical Recipes, Eq. 6.4.5)."""
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    result = d
    for m in range(1, _ITERATIONS):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),  # the even step d_{2m}
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):  # the odd step d_{2m+1}
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + numerator / c
            c = c if abs(c) > _TINY else _TINY
            result *= c * d
        if abs(c * d - 1.0) < _EPSILON:
            break
    return result


def student_t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with df > 0 degrees of freedom (not only integers): I_{df/(df+t^2)}(df/2, 1/2)."""
    if math.isinf(t):
        return 0.0
    return incomplete_beta(df / (df + t * t), df / 2.0, 0.5)


def student_t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with df > 0 degrees of freedom."""
    tail = student_t_two_sided_p(t, df) / 2.0
    return 1.0 - tail if t > 0 else tail


def student_t_quantile(probability: float, df: float) -> float:
    """t_{p, df}, the p-quantile (0.5 < p < 1) of Student's t with df > 0 degrees of freedom, by bisection."""
    if not 0.5 < probability < 1.0 or df <= 0:
        raise ValueError(f"student_t_quantile needs 0.5 < p < 1 and df > 0, got p={probability}, df={df}")
    target = 2.0 * (1.0 - probability)  # the two-sided tail
    low, high = 0.0, 1.0
    while student_t_two_sided_p(high, df) > target:
        low, high = high, high * 2.0
    for _ in range(200):
        middle = (low + high) / 2.0
        low, high = (middle, high) if student_t_two_sided_p(middle, df) > target else (low, middle)
        if high - low < 1e-12 * max(1.0, high):
            break
    return (low + high) / 2.0


def chi_square_survival(x: float, df: float) -> float:
    """P(X >= x) for the chi-square distribution with df degrees of freedom: Q(df/2, x/2), the regularised upper
    incomplete gamma function."""
    if x <= 0.0:
        return 1.0
    a, y = df / 2.0, x / 2.0
    log_front = a * math.log(y) - y - math.lgamma(a)
    if y < a + 1.0:  # the series of P(a, y) (Numerical Recipes, Eq. 6.2.5)
        term = total = 1.0 / a
        for n in range(1, _ITERATIONS):
            term *= y / (a + n)
            total += term
            if abs(term) < abs(total) * _EPSILON:
                break
        return max(0.0, 1.0 - total * math.exp(log_front))
    b = y + 1.0 - a  # the continued fraction of Q(a, y) by modified Lentz (Numerical Recipes, Eq. 6.2.7)
    c, d = 1.0 / _TINY, 1.0 / b
    result = d
    for n in range(1, _ITERATIONS):
        numerator = -n * (n - a)
        b += 2.0
        d = numerator * d + b
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = b + numerator / c
        c = c if abs(c) > _TINY else _TINY
        result *= c * d
        if abs(c * d - 1.0) < _EPSILON:
            break
    return result * math.exp(log_front)


def f_survival(f: float, df1: float, df2: float) -> float:
    """P(F >= f) for Fisher's F with (df1, df2) degrees of freedom: I_{df2/(df2 + df1 f)}(df2/2, df1/2)."""
    if f <= 0.0:
        return 1.0
    if math.isinf(f):
        return 0.0
    return incomplete_beta(df2 / (df2 + df1 * f), df2 / 2.0, df1 / 2.0)


# ---------------------------------------------------------------------------------------------- two approaches

@dataclass(frozen=True)
class TTest:
    """A t-test of a mean difference: the difference, its 95% confidence interval, t, df and the two-sided p."""

    difference: float
    low: float
    high: float
    statistic: float
    df: float
    p_value: float


def paired_t_test(differences: Sequence[float]) -> TTest:
    """Student's paired t-test of mean(d) = 0 over n >= 2 paired differences d_i (one per seed).

    t = mean(d) / (s_d / sqrt(n)), n - 1 degrees of freedom; the 95% interval is mean(d) +- t_{0.975, n-1} s_d /
    sqrt(n). When every d_i is equal (s_d = 0): p = 1 if they are all 0 (nothing differs), else p = 0 (t infinite,
    as scipy.stats.ttest_rel), the interval [mean, mean].
    """
    values = np.asarray(differences, dtype=float)
    if len(values) < 2:
        raise ValueError(f"a paired t-test needs at least 2 differences, got {len(values)}")
    return _t_test(float(values.mean()), float(values.std(ddof=1)) / math.sqrt(len(values)), len(values) - 1.0)


def welch_t_test(first: Sequence[float], second: Sequence[float]) -> TTest:
    """Welch's t-test of mean(first) = mean(second) for unpaired samples (n >= 2 each), unequal variances.

    t = (m1 - m2) / se, se^2 = s1^2/n1 + s2^2/n2, df = se^4 / [(s1^2/n1)^2/(n1-1) + (s2^2/n2)^2/(n2-1)] (Welch
    1947, Satterthwaite 1946); the 95% interval is (m1 - m2) +- t_{0.975, df} se.
    """
    a, b = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
    if len(a) < 2 or len(b) < 2:
        raise ValueError(f"Welch's t-test needs at least 2 values on each side, got {len(a)} and {len(b)}")
    va, vb = float(a.var(ddof=1)) / len(a), float(b.var(ddof=1)) / len(b)
    se = math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1)) if se > 0 else len(a) + len(b) - 2.0
    return _t_test(float(a.mean() - b.mean()), se, df)


def _t_test(difference: float, standard_error: float, df: float) -> TTest:
    if standard_error == 0.0:
        p_value = 1.0 if difference == 0.0 else 0.0
        statistic = 0.0 if difference == 0.0 else math.copysign(math.inf, difference)
        return TTest(difference, difference, difference, statistic, df, p_value)
    statistic = difference / standard_error
    half = student_t_quantile(0.5 + CONFIDENCE / 2.0, df) * standard_error
    return TTest(difference, difference - half, difference + half, statistic, df,
                 student_t_two_sided_p(statistic, df))


@dataclass(frozen=True)
class SignedRankTest:
    """The exact Wilcoxon signed-rank test: W = min(W+, W-), the number of non-zero differences, two-sided p."""

    statistic: float
    n: int
    p_value: float


def wilcoxon_exact(differences: Sequence[float]) -> SignedRankTest:
    """The exact two-sided Wilcoxon signed-rank test of the differences d_i.

    Convention: zero differences are dropped (Wilcoxon's own, scipy's `zero_method="wilcox"`), tied |d_i| get the
    mean of their ranks, and the null distribution of W+ (the sum of the ranks of the positive d_i) is that of the
    2^n equally likely sign assignments of the ranks observed, mid-ranks included (a permutation test, exact with
    ties). p = min(1, 2 min(P(W+ <= w+), P(W+ >= w+))). No non-zero difference: W = 0, p = 1.
    """
    values = np.asarray([d for d in differences if d != 0.0], dtype=float)
    if len(values) == 0:
        return SignedRankTest(0.0, 0, 1.0)
    doubled = np.rint(2.0 * _mid_ranks(np.abs(values))).astype(int)  # mid-ranks are multiples of 1/2
    counts = np.zeros(int(doubled.sum()) + 1)
    counts[0] = 1.0
    for rank in doubled:  # the distribution of 2 W+: each rank is in the sum or not, with equal chance
        counts[rank:] = counts[rank:] + counts[: len(counts) - rank].copy()
    probabilities = counts / counts.sum()
    observed = int(doubled[values > 0].sum())
    lower, upper = float(probabilities[: observed + 1].sum()), float(probabilities[observed:].sum())
    plus = observed / 2.0
    return SignedRankTest(min(plus, doubled.sum() / 2.0 - plus), len(values), min(1.0, 2.0 * min(lower, upper)))


def _mid_ranks(values: np.ndarray) -> np.ndarray:
    """The ranks (1 = smallest) of `values`, tied values given the mean of their ranks."""
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values))
    ranks[order] = np.arange(1, len(values) + 1)
    for value in np.unique(values):
        tied = values == value
        ranks[tied] = ranks[tied].mean()
    return ranks


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's (1979) step-down adjusted p-values: sorted p_(1) <= ... <= p_(m), adjusted
    p~_(i) = max_{j <= i} min(1, (m - j + 1) p_(j)); rejecting where p~ < alpha controls the family-wise error at
    alpha under any dependence. NaN p-values (no test) stay NaN and are not counted in m."""
    tested = [(p, i) for i, p in enumerate(p_values) if not math.isnan(p)]
    adjusted = [math.nan] * len(p_values)
    running = 0.0
    for rank, (p, index) in enumerate(sorted(tested)):
        running = max(running, min(1.0, (len(tested) - rank) * p))
        adjusted[index] = running
    return adjusted


# ---------------------------------------------------------------------------------------------- several benchmarks

def average_ranks(table: np.ndarray, higher_is_better: bool = True) -> np.ndarray:
    """The average rank of each approach (column) over the benchmarks (rows) of `table` (N x k): rank 1 is the
    best value of a row, ties get the mean of their ranks (Demsar 2006, Section 3.2.2)."""
    scores = np.asarray(table, dtype=float)
    rows = -scores if higher_is_better else scores
    return np.mean([_mid_ranks(row) for row in rows], axis=0)


@dataclass(frozen=True)
class FriedmanTest:
    """The Friedman test over N benchmarks and k approaches: chi^2_F and its p-value (chi-square, k - 1 df), and
    Iman and Davenport's F_F and its p-value (F with k - 1 and (k - 1)(N - 1) df), which Demsar recommends."""

    ranks: np.ndarray
    chi_square: float
    chi_square_p: float
    f_statistic: float
    f_p: float


def friedman(table: np.ndarray, higher_is_better: bool = True) -> FriedmanTest:
    """Friedman's test that the k approaches (columns) of `table` (N benchmarks x k) rank alike.

    chi^2_F = 12 N / (k (k+1)) [sum_j R_j^2 - k (k+1)^2 / 4] (Demsar 2006, Section 3.2.2), R_j the average ranks,
    divided by the tie correction 1 - sum(t^3 - t) / (N k (k^2 - 1)) over the groups of t tied values in a row (as
    scipy.stats.friedmanchisquare; 1 without ties); F_F = (N - 1) chi^2_F / (N (k - 1) - chi^2_F).
    """
    scores = np.asarray(table, dtype=float)
    n, k = scores.shape
    if n < 2 or k < 2:
        raise ValueError(f"the Friedman test needs at least 2 benchmarks and 2 approaches, got {n} x {k}")
    ranks = average_ranks(scores, higher_is_better)
    statistic = 12.0 * n / (k * (k + 1)) * (float(np.sum(ranks ** 2)) - k * (k + 1) ** 2 / 4.0)
    ties = sum(float(count ** 3 - count) for row in scores for count in np.unique(row, return_counts=True)[1])
    correction = 1.0 - ties / (n * k * (k * k - 1))
    statistic = statistic / correction if correction > 0 else 0.0
    denominator = n * (k - 1) - statistic
    f_statistic = (n - 1) * statistic / denominator if denominator > 0 else math.inf
    return FriedmanTest(ranks, statistic, chi_square_survival(statistic, k - 1.0), f_statistic,
                        f_survival(f_statistic, k - 1.0, (k - 1.0) * (n - 1.0)))


def nemenyi_critical_difference(k: int, n: int) -> float:
    """CD = q_0.05 sqrt(k (k+1) / (6 N)) (Demsar 2006, Section 3.2.2): two of k approaches differ at 5% on N
    benchmarks when their average ranks differ by at least CD."""
    if k not in NEMENYI_Q05:
        raise ValueError(f"the Nemenyi critical difference is tabulated for 2 to 10 approaches, got {k}")
    return NEMENYI_Q05[k] * math.sqrt(k * (k + 1) / (6.0 * n))


def minimum_benchmarks(k: int) -> int:
    """The fewest benchmarks N on which the Nemenyi test can find any difference among k approaches: the largest
    possible difference of average ranks, k - 1, must exceed CD(k, N), i.e. N > q^2 k (k+1) / (6 (k-1)^2) (4 for
    k = 2, 3 for k = 3..10)."""
    if k not in NEMENYI_Q05:
        raise ValueError(f"the Nemenyi critical difference is tabulated for 2 to 10 approaches, got {k}")
    return math.floor(NEMENYI_Q05[k] ** 2 * k * (k + 1) / (6.0 * (k - 1) ** 2)) + 1
