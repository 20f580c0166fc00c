"""`clbench report --compare A,B[,...]`: is a difference between two approaches real? Paired tests across seeds.

A seed fixes the task order, the data split and the initialisation for every approach (the seeding contract), so
two approaches' runs of the same seed are paired: for each pair of approaches, on one benchmark, for every metric
of `clbench.metric_registry.METRICS` (its value after the last task, from `run_values`, the code the tables use),
the mean paired difference over the seeds both have, its Student-t 95% confidence interval and the paired t-test's
p-value, the exact Wilcoxon signed-rank p beside it, Holm's correction over the pairs of the metric, and a verdict
only where the corrected test supports it. Two approaches with fewer than two seeds in common are compared unpaired
(Welch's t-test), and labelled so. The statistics are `clbench.report.significance`'s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from itertools import combinations

import pandas as pd

from clbench.errors import ResultsError
from clbench.metric_registry import FLOPS, METRICS, STEPS, split_note
from clbench.report.commands import (
    GLOBAL_SECTIONS,
    label_commands,
    option_section,
    stored_overrides,
    train_command,
)
from clbench.report.formatting import Table, format_seeds
from clbench.report.loading import Results
from clbench.report.notes import damaged_notes, one_note_per_cause, split_notes
from clbench.report.significance import holm, paired_t_test, welch_t_test, wilcoxon_exact
from clbench.report.statistics import run_values

ALPHA = 0.05
MIN_SEEDS = 2
PAIRED, WELCH = "paired t", "Welch t (unpaired)"
NO_DIFFERENCE = "no difference at 5%"


@dataclass(frozen=True)
class PairRow:
    """One pair of approaches on one metric: the difference first - second (fractions, as the metric's function
    returns them), its 95% interval, the test, its p-value and Holm's, the exact Wilcoxon p (paired only)."""

    metric: str
    first: str
    second: str
    test: str  # PAIRED, WELCH, or "" (not testable: fewer than 2 values)
    seeds: str  # the seeds compared: "0-2" (paired), "0-2 / 3-5" (Welch: first's / second's)
    difference: float = math.nan
    low: float = math.nan
    high: float = math.nan
    p_value: float = math.nan
    wilcoxon_p: float = math.nan
    holm_p: float = math.nan

    @property
    def verdict(self) -> str:
        """`A > B` or `A < B` (the metric's values, whichever way is better) where Holm's p < 5%; else no
        difference at 5%; `–` without a test."""
        if not self.test:
            return "–"
        if self.holm_p < ALPHA:
            return f"{self.first} {'>' if self.difference > 0 else '<'} {self.second}"
        return NO_DIFFERENCE


@dataclass
class Comparison:
    """The pairs of one benchmark, metric by metric, with each run's final value (for the ranks across
    benchmarks) and the notes on what was left out."""

    benchmark: str
    evaluation: str
    approaches: list[str]  # the row labels of `names` on this benchmark
    names: list[str]  # as `--compare` gave them
    rows: list[PairRow] = field(default_factory=list)
    finals: dict[str, dict[str, dict[int, float]]] = field(default_factory=dict)  # metric -> label -> seed -> value
    notes: list[str] = field(default_factory=list)


def resolve_approaches(results: Results, names: Sequence[str]) -> list[str]:
    """The row label of each name: a label itself, or a method with one config in `results`. A ResultsError (exit 2)
    for fewer than two distinct names, a name without runs (with the command that makes them) or a method with
    several configs (naming them)."""
    chosen = _distinct(names)
    if len(chosen) < 2:
        raise ResultsError(f"--compare needs at least two approaches, comma-separated (got "
                           f"{','.join(chosen) or 'none'})")
    labels = {str(run["label"]): str(run["method"]) for run in results.info.values()}
    by_name = {name: [name] if name in labels else sorted(label for label, method in labels.items() if method == name)
               for name in chosen}
    resolved = []
    for name, found in by_name.items():
        if not found:
            others = [labels_of[0] for labels_of in by_name.values() if labels_of]
            raise ResultsError(f"--compare: no finished runs of {name} on {results.benchmark} in "
                               f"{results.results_dir}; make them with `{_command_beside(results, name, others)}`")
        if len(found) > 1:
            raise ResultsError(f"--compare: {name} has several configs on {results.benchmark}; name one of "
                               + ", ".join(repr(label) for label in found))
        resolved.append(found[0])
    return resolved


def _command_beside(results: Results, method: str, labels: Sequence[str]) -> str:
    """The `train_command` of seeds 0-2 of `method`, with the global `--set` options of the runs of the first of
    `labels` (the approaches it is compared with), so that its runs pair with theirs."""
    runs = sorted((run for run in results.info.values() if labels and run["label"] == labels[0]),
                  key=lambda run: run["seed"])
    options = stored_overrides(runs[0].get("overrides")) if runs else None
    return train_command(results, [method], "0-2", [text for text in options or []
                                                    if option_section(text) in GLOBAL_SECTIONS])


def _distinct(names: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(name.strip() for name in names if name.strip()))


def check_pairs(results: Results, labels: Sequence[str]) -> None:
    """Refuse (ResultsError) a pair that no test can compare: fewer than two seeds in common (paired) and fewer than
    two seeds on one side (Welch). Seeds are those of the finished runs."""
    seeds = {label: sorted({int(run["seed"]) for run in results.info.values() if run["label"] == label})
             for label in labels}
    for first, second in combinations(labels, 2):
        common = set(seeds[first]) & set(seeds[second])
        if len(common) < MIN_SEEDS and min(len(seeds[first]), len(seeds[second])) < MIN_SEEDS:
            raise ResultsError(
                f"--compare: {first} and {second} on {results.benchmark} have fewer than {MIN_SEEDS} paired seeds "
                f"(seeds {format_seeds(seeds[first]) or 'none'} and {format_seeds(seeds[second]) or 'none'}); make "
                f"more with " + " and ".join(f"`{command}`" for command in label_commands(results, [first, second],
                                                                                          "0-2")))


def build_comparison(results: Results, names: Sequence[str]) -> Comparison:
    """Every pair of the approaches `names` (labels or methods, `resolve_approaches`) on every metric."""
    labels = resolve_approaches(results, names)
    check_pairs(results, labels)
    comparison = Comparison(results.benchmark, results.evaluation, labels, _distinct(names))
    run_ids = [run_id for run_id, run in results.info.items() if run["label"] in labels]
    notes: list[str] = split_notes(results) + split_note(list(METRICS), results.split)
    for metric in (name for name, metric in METRICS.items() if metric.reads(results.split)):
        values = run_values(results, metric, notes, include_references=True, run_ids=run_ids)
        finals: dict[str, dict[int, float]] = {label: {} for label in labels}
        for run_id, curve in values.items():
            if len(curve) and math.isfinite(float(curve[-1])):
                finals[results.info[run_id]["label"]][int(results.info[run_id]["seed"])] = float(curve[-1])
        comparison.finals[metric] = finals
        rows = [compare_pair(metric, first, second, finals[first], finals[second])
                for first, second in combinations(labels, 2)]
        adjusted = holm([row.p_value for row in rows])
        comparison.rows += [replace(row, holm_p=p) for row, p in zip(rows, adjusted)]
    comparison.notes = one_note_per_cause(results, notes + damaged_notes(results)) + _untested_notes(comparison)
    return comparison


def compare_pair(metric: str, first: str, second: str, a: dict[int, float], b: dict[int, float]) -> PairRow:
    """The test of first - second on `metric` from each approach's final value by seed: paired over the seeds both
    have (at least 2), else Welch's unpaired test (at least 2 values each), else no test."""
    common = sorted(set(a) & set(b))
    if len(common) >= MIN_SEEDS:
        differences = [a[seed] - b[seed] for seed in common]
        test = paired_t_test(differences)
        return PairRow(metric, first, second, PAIRED, format_seeds(common), test.difference, test.low, test.high,
                       test.p_value, wilcoxon_exact(differences).p_value)
    if len(a) >= MIN_SEEDS and len(b) >= MIN_SEEDS:
        test = welch_t_test(list(a.values()), list(b.values()))
        return PairRow(metric, first, second, WELCH, f"{format_seeds(a)} / {format_seeds(b)}", test.difference,
                       test.low, test.high, test.p_value)
    return PairRow(metric, first, second, "", f"{format_seeds(a) or 'none'} / {format_seeds(b) or 'none'}")


def _untested_notes(comparison: Comparison) -> list[str]:
    """Why a row has no test: one note per group of approaches with fewer than 2 final values, naming the metrics."""
    untested: dict[tuple[str, ...], list[str]] = {}
    for metric, finals in comparison.finals.items():
        short = tuple(label for label, values in finals.items() if len(values) < MIN_SEEDS)
        if short and any(not row.test for row in comparison.rows if row.metric == metric):
            untested.setdefault(short, []).append(metric)
    return [f"no test for {', '.join(short)} in "
            f"{'any metric' if len(names) == len(comparison.finals) else ', '.join(names)}: fewer than {MIN_SEEDS} "
            f"runs with a final value (the notes above say why runs were left out)"
            for short, names in untested.items()]


# ---------------------------------------------------------------------------------------------- rendering

def _number(value: float, metric: str) -> str:
    if not math.isfinite(value):
        return "–"
    if METRICS[metric].unit == STEPS:
        return f"{value:+.0f}"
    if METRICS[metric].unit == FLOPS:
        return f"{value:+.3g}"
    return f"{value * 100:+.2f}" if METRICS[metric].percent else f"{value:+.3f}"


def format_p(value: float) -> str:
    """A p-value: `0.0123`, `<0.0001`; `–` without one."""
    if not math.isfinite(value):
        return "–"
    return "<0.0001" if value < 1e-4 else f"{value:.4f}"


COMPARISON_HEADER = ["metric", "A - B", "test", "seeds", "mean diff.", "95% CI", "p", "p (Holm)",
                     "p (Wilcoxon exact)", "verdict"]


def comparison_table(comparison: Comparison) -> Table:
    """The pairs as one table (metric by metric), with the notes that say how to read it."""
    rows = [[f"{METRICS[row.metric].symbol} ({row.metric})", f"{row.first} - {row.second}", row.test or "–",
             row.seeds, _number(row.difference, row.metric),
             "–" if not math.isfinite(row.low) else
             f"[{_number(row.low, row.metric)}, {_number(row.high, row.metric)}]",
             format_p(row.p_value), format_p(row.holm_p), format_p(row.wilcoxon_p), row.verdict]
            for row in comparison.rows]
    notes = [f"evaluation: {comparison.evaluation}; each run's value after its last task; A - B in percentage points "
             f"(accuracy metrics), as a ratio (rho) or in optimiser steps (recovery); a seed fixes the task order, "
             f"data split and initialisation, so the same seed pairs two runs",
             f"p: the paired t-test over the per-seed differences ({PAIRED}; {WELCH}: Welch's test where the two "
             f"approaches share fewer than {MIN_SEEDS} seeds); p (Holm): corrected over the pairs of each metric; "
             f"p (Wilcoxon exact): the exact signed-rank test, which cannot go below 2/2^n (0.25 with 3 seeds)",
             f"verdict: A > B or A < B (the metric's values; lower is better for "
             f"{', '.join(name for name, metric in METRICS.items() if not metric.higher_is_better) or 'none'}) "
             f"only where p (Holm) < {ALPHA:g}", *comparison.notes]
    return Table(COMPARISON_HEADER, rows, title=f"{comparison.benchmark}: {', '.join(comparison.approaches)}",
                 notes=notes)


def comparison_csv(comparisons: Sequence[Comparison]) -> str:
    """Tidy CSV: one row per (benchmark, metric, pair) with the raw numbers (fractions)."""
    columns = ["benchmark", "evaluation", "metric", "first", "second", "test", "seeds", "difference", "ci_low",
               "ci_high", "p_value", "p_holm", "p_wilcoxon", "verdict"]
    records = [[comparison.benchmark, comparison.evaluation, row.metric, row.first, row.second, row.test, row.seeds,
                row.difference, row.low, row.high, row.p_value, row.holm_p, row.wilcoxon_p, row.verdict]
               for comparison in comparisons for row in comparison.rows]
    return pd.DataFrame(records, columns=columns).to_csv(index=False)
