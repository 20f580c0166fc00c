"""`clbench report --compare` across several benchmarks: the average ranks of the approaches, the Friedman test
and the Nemenyi critical difference (Demsar 2006, Section 3.2.2), per metric, from each benchmark's
`Comparison` (each approach's mean final value over its seeds on that benchmark)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from clbench.metric_registry import METRICS
from clbench.report.comparison import ALPHA, Comparison, format_p
from clbench.report.formatting import Table
from clbench.report.significance import (
    NEMENYI_Q05,
    FriedmanTest,
    friedman,
    minimum_benchmarks,
    nemenyi_critical_difference,
)


@dataclass(frozen=True)
class MetricRanks:
    """One metric across the benchmarks that have a value for every approach: the benchmarks, the mean values
    (N x k), the Friedman test and the critical difference; `refused` says why there is no test."""

    metric: str
    benchmarks: list[str]
    values: np.ndarray
    test: FriedmanTest | None = None
    critical_difference: float = math.nan
    refused: str = ""

    def different(self, approaches: Sequence[str]) -> list[tuple[str, str]]:
        """(better, worse) pairs whose average ranks differ by at least the critical difference, when the Friedman
        test (Iman-Davenport) rejects at 5%; [] otherwise (Demsar: the post-hoc test only after a rejection)."""
        if self.test is None or not self.test.f_p < ALPHA:
            return []
        ranks = self.test.ranks
        return [(approaches[i], approaches[j]) for i in range(len(approaches)) for j in range(len(approaches))
                if ranks[j] - ranks[i] >= self.critical_difference]


@dataclass
class Ranking:
    """The ranks of `approaches` over the benchmarks, metric by metric."""

    approaches: list[str]
    metrics: list[MetricRanks] = field(default_factory=list)


def build_ranking(comparisons: Sequence[Comparison]) -> Ranking:
    """The ranks of the approaches the comparisons were asked for (the same names on every benchmark)."""
    ranking = Ranking(list(comparisons[0].names) if comparisons else [])
    k = len(ranking.approaches)
    for metric in (name for name in METRICS if any(name in comparison.finals for comparison in comparisons)):
        names, rows = [], []  # a metric no comparison has (not on its split: `Metric.reads`) has no ranks
        for comparison in comparisons:  # its approaches: the labels of `names` on that benchmark, in their order
            finals = comparison.finals.get(metric, {})
            if all(finals.get(label) for label in comparison.approaches):
                names.append(comparison.benchmark)
                rows.append([float(np.mean(list(finals[label].values()))) for label in comparison.approaches])
        ranking.metrics.append(metric_ranks(metric, names, np.array(rows).reshape(len(rows), k)))
    return ranking


def metric_ranks(metric: str, benchmarks: list[str], values: np.ndarray) -> MetricRanks:
    """The Friedman test and critical difference of one metric, or the reason there is none: more than the
    tabulated 10 approaches, or fewer benchmarks than `minimum_benchmarks` (the Nemenyi test could find nothing)."""
    k = values.shape[1]
    if k not in NEMENYI_Q05:
        return MetricRanks(metric, benchmarks, values, refused=f"{k} approaches: the Nemenyi test's q_0.05 is "
                                                               f"tabulated for 2 to 10 (Demsar 2006, Table 5)")
    needed = minimum_benchmarks(k)
    if len(benchmarks) < needed:
        return MetricRanks(metric, benchmarks, values, refused=(
            f"{len(benchmarks)} benchmark{'s' if len(benchmarks) != 1 else ''} with a value for every approach; the "
            f"ranks need at least {needed} for {k} approaches (below that the largest possible difference of average "
            f"ranks, {k - 1}, does not exceed the Nemenyi critical difference)"))
    test = friedman(values, METRICS[metric].higher_is_better)
    return MetricRanks(metric, benchmarks, values, test, nemenyi_critical_difference(k, len(benchmarks)))


def ranking_table(ranking: Ranking) -> Table:
    """Average ranks per metric (1: best), the Friedman p-values, the critical difference and the pairs it
    separates; a metric without a test says why."""
    header = ["metric", "benchmarks", *[f"rank {label}" for label in ranking.approaches], "Friedman p",
              "Iman-Davenport p", "CD (Nemenyi 5%)", "differ"]
    rows = []
    for ranks in ranking.metrics:
        if ranks.test is None:
            rows.append([ranks.metric, str(len(ranks.benchmarks)), *["–"] * len(ranking.approaches), "–", "–", "–",
                         "–"])
            continue
        pairs = ranks.different(ranking.approaches)
        rows.append([ranks.metric, str(len(ranks.benchmarks)), *[f"{rank:.2f}" for rank in ranks.test.ranks],
                     format_p(ranks.test.chi_square_p), format_p(ranks.test.f_p), f"{ranks.critical_difference:.2f}",
                     "; ".join(f"{better} better than {worse}" for better, worse in pairs) or "none"])
    notes = [f"average rank over the benchmarks of each approach's mean final value (1: the best; lower is better "
             f"for {', '.join(name for name, metric in METRICS.items() if not metric.higher_is_better)}); Friedman's "
             f"chi-square and Iman-Davenport's F (Demsar 2006, Section 3.2.2); two approaches differ where the "
             f"Iman-Davenport p < {ALPHA:g} and their ranks differ by at least the Nemenyi critical difference"]
    refused: dict[str, list[str]] = {}  # one note per cause, naming its metrics
    for ranks in ranking.metrics:
        if ranks.refused:
            refused.setdefault(ranks.refused, []).append(ranks.metric)
    notes += [f"{', '.join(names)}: no ranks: {reason}" for reason, names in refused.items()]
    return Table(header, rows, title="ranks across benchmarks", notes=notes)


def ranking_csv(ranking: Ranking) -> str:
    """Tidy CSV: one row per (metric, approach) with its average rank and the metric's test."""
    columns = ["metric", "benchmarks", "approach", "average_rank", "friedman_chi_square", "friedman_p",
               "iman_davenport_f", "iman_davenport_p", "critical_difference", "refused"]
    records = []
    for ranks in ranking.metrics:
        test = ranks.test
        for index, label in enumerate(ranking.approaches):
            records.append([ranks.metric, len(ranks.benchmarks), label,
                            test.ranks[index] if test else math.nan, test.chi_square if test else math.nan,
                            test.chi_square_p if test else math.nan, test.f_statistic if test else math.nan,
                            test.f_p if test else math.nan, ranks.critical_difference, ranks.refused])
    return pd.DataFrame(records, columns=columns).to_csv(index=False)
