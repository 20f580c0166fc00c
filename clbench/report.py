"""Tables from stored results: forgetting ratio or accuracy per approach and stage, mean (std) over seeds.

Torch-free. Runs are grouped by (method, config hash); a method with several configs is labelled by the
hyper-parameters that differ. Every run is checked: incomplete runs, partial matrices and missing references
are never averaged silently; they are listed in `Report.notes` with the command that fixes them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from clbench import metrics
from clbench.results import incomplete_runs, load_accuracies

REFERENCES = ("joint", "random")


@dataclass(frozen=True)
class Cell:
    """Mean, sample standard deviation (ddof=1; NaN for one seed) and number of seeds of one table cell."""

    mean: float
    std: float
    n: int


@dataclass
class Report:
    """A table: one row per approach (label), one column per stage, plus notes on what was left out."""

    benchmark: str
    metric: str
    stages: list[int]
    rows: list[tuple[str, list[Cell]]] = field(default_factory=list)
    seeds: dict[str, list[int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def summarize(values: Sequence[float]) -> Cell:
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return Cell(float("nan"), float("nan"), 0)
    std = float(np.std(finite, ddof=1)) if len(finite) > 1 else float("nan")
    return Cell(float(np.mean(finite)), std, len(finite))


def run_matrices(frame: pd.DataFrame) -> dict[str, np.ndarray]:
    """The accuracy matrix of every run in `frame`, by run id."""
    return {run_id: metrics.accuracy_matrix(rows) for run_id, rows in frame.groupby("run_id", sort=True)}


def method_labels(frame: pd.DataFrame) -> dict[tuple[str, str], str]:
    """A label per (method, config hash): the method, plus the hyper-parameters that differ between its configs."""
    labels: dict[tuple[str, str], str] = {}
    configs = frame.drop_duplicates(["method", "config_hash"])
    for method, group in configs.groupby("method", sort=True):
        if len(group) == 1:
            labels[(method, group["config_hash"].iloc[0])] = method
            continue
        parsed = {row.config_hash: json.loads(row.hyperparameters) for row in group.itertuples()}
        keys = {key for hyperparameters in parsed.values() for key in hyperparameters}
        differing = sorted(k for k in keys if len({json.dumps(p.get(k)) for p in parsed.values()}) > 1)
        for config_hash, hp in parsed.items():
            detail = ", ".join(f"{k}={hp.get(k)}" for k in differing) or f"config {config_hash}"
            labels[(method, config_hash)] = f"{method} ({detail})"
    return labels


def build_report(results_dir: Path, benchmark: str, metric: str = "forgetting-ratio",
                 include_references: bool = False) -> Report:
    """The table of `metric` (forgetting-ratio or accuracy) for one benchmark's results."""
    frame = load_accuracies(results_dir, benchmark)
    report = Report(benchmark, metric, [])
    _note_incomplete(report, results_dir, benchmark)
    if frame.empty:
        report.notes.append(f"no finished runs of {benchmark} in {results_dir}: run `clbench train {benchmark} "
                            f"-m METHOD --seeds 0-9 --results {results_dir}`")
        return report
    matrices = run_matrices(frame)
    runs = frame.drop_duplicates("run_id").set_index("run_id")
    report.stages = list(range(1, int(frame["stage"].max()) + 1))
    references = _references(runs, matrices) if metric == "forgetting-ratio" else {}
    labels = method_labels(frame)
    per_label: dict[str, list[np.ndarray]] = {}
    for run_id, run in runs.iterrows():
        if run["method"] in REFERENCES and not (include_references or metric == "accuracy"):
            continue
        values = _run_values(report, run_id, run, matrices[run_id], references, results_dir)
        if values is not None:
            label = labels[(run["method"], run["config_hash"])]
            per_label.setdefault(label, []).append(values)
            report.seeds.setdefault(label, []).append(int(run["seed"]))
    for label, values in per_label.items():
        stacked = np.vstack([np.pad(v, (0, len(report.stages) - len(v)), constant_values=np.nan) for v in values])
        report.rows.append((label, [summarize(stacked[:, i]) for i in range(stacked.shape[1])]))
    report.rows.sort(key=lambda row: (-math.inf if math.isnan(row[1][-1].mean) else row[1][-1].mean, row[0]))
    return report


def _note_incomplete(report: Report, results_dir: Path, benchmark: str) -> None:
    for run in incomplete_runs(results_dir, benchmark):
        reason = f" ({run['error']})" if run.get("error") else ""
        report.notes.append(f"left out {run['run_id']}: {run['status']}{reason}; re-run `clbench train {benchmark} "
                            f"-m {run['method']} --seeds {run['seed']}` (with the same --set options)")


def _references(runs: pd.DataFrame, matrices: dict[str, np.ndarray]) -> dict[tuple[str, str, int], np.ndarray]:
    """(reference method, data hash, seed) -> its matrix (the first complete one, by run id)."""
    found: dict[tuple[str, str, int], np.ndarray] = {}
    for run_id, run in runs.iterrows():
        key = (run["method"], run["data_hash"], int(run["seed"]))
        if run["method"] in REFERENCES and key not in found and metrics.is_complete_matrix(matrices[run_id]):
            found[key] = matrices[run_id]
    return found


def _run_values(report: Report, run_id: str, run: pd.Series, matrix: np.ndarray,
                references: dict[tuple[str, str, int], np.ndarray], results_dir: Path) -> np.ndarray | None:
    if not metrics.is_complete_matrix(matrix):
        report.notes.append(f"left out {run_id}: its accuracy matrix is incomplete (a stage or task is missing)")
        return None
    if report.metric == "accuracy":
        return metrics.average_accuracy(matrix)
    seed = int(run["seed"])
    joint = references.get(("joint", run["data_hash"], seed))
    random = references.get(("random", run["data_hash"], seed))
    missing = [name for name, ref in (("joint", joint), ("random", random)) if ref is None]
    if missing:
        overrides = " ".join(f"--set {o}" for o in json.loads(run["overrides"]) if not _is_method_override(o))
        command = " ".join(part for part in (f"clbench train {run['benchmark']} -m {','.join(missing)}",
                                              f"--seeds {seed}", overrides, f"--results {results_dir}") if part)
        report.notes.append(f"left out {run_id}: no {' and no '.join(missing)} reference for seed {seed} "
                            f"(data {run['data_hash']}); make it with `{command}`")
        return None
    size = matrix.shape[0]
    if joint.shape[0] < size or random.shape[0] < size:
        report.notes.append(f"left out {run_id}: its references have fewer stages than the run")
        return None
    return metrics.forgetting_ratio(matrix, joint[:size, :size], metrics.random_reference(random[:size, :size]))


def _is_method_override(text: str) -> bool:
    """True for `--set` options that only concern approaches (not data/network/training/variant)."""
    key = text.split("=", 1)[0]
    return key.split(".")[0] not in ("data", "network", "training", "variant")


# ---------------------------------------------------------------------- rendering

def format_cell(cell: Cell, metric: str) -> str:
    """`-0.06 (0.01)` for the forgetting ratio, `99.0 (0.2)` (percent) for accuracy; `–` when empty."""
    if cell.n == 0:
        return "–"
    scale, digits = (100.0, 1) if metric == "accuracy" else (1.0, 2)
    mean = f"{cell.mean * scale:.{digits}f}"
    std = "–" if math.isnan(cell.std) else f"{cell.std * scale:.{digits}f}"
    return f"{mean} ({std})"


def header(report: Report) -> list[str]:
    symbol = "rho" if report.metric == "forgetting-ratio" else "A"
    return ["approach", *[f"{symbol}<={t}" for t in report.stages], "seeds"]


def table_rows(report: Report) -> list[list[str]]:
    return [[label, *[format_cell(cell, report.metric) for cell in cells], str(len(report.seeds.get(label, [])))]
            for label, cells in report.rows]


def render(report: Report, fmt: str = "markdown") -> str:
    """The table as markdown, csv or latex text (notes follow markdown and latex as comments)."""
    if fmt == "csv":
        return _render_csv(report)
    rows = [header(report), *table_rows(report)]
    body = _render_latex(rows) if fmt == "latex" else _render_markdown(rows)
    prefix = "% " if fmt == "latex" else "- "
    notes = "\n".join(prefix + note for note in report.notes)
    return body + ("\n\n" + notes if notes else "") + "\n"


def _render_markdown(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["| " + " | ".join(cell.ljust(w) for cell, w in zip(row, widths)) + " |" for row in rows]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def _render_latex(rows: list[list[str]]) -> str:
    head = " & ".join(c.replace("rho<=", "$\\rho^{\\leq ").replace("A<=", "$A^{\\leq ") + ("}$" if "<=" in c else "")
                      for c in rows[0])
    body = [" & ".join(row) + " \\\\" for row in rows[1:]]
    spec = "l" + "c" * (len(rows[0]) - 1)
    return "\n".join([f"\\begin{{tabular}}{{{spec}}}", "\\toprule", head + " \\\\", "\\midrule", *body,
                      "\\bottomrule", "\\end{tabular}"])


def _render_csv(report: Report) -> str:
    records = []
    for label, cells in report.rows:
        for stage, cell in zip(report.stages, cells):
            records.append({"benchmark": report.benchmark, "approach": label, "metric": report.metric,
                            "stage": stage, "mean": cell.mean, "std": cell.std, "seeds": cell.n})
    return pd.DataFrame(records, columns=["benchmark", "approach", "metric", "stage", "mean", "std", "seeds"]
                        ).to_csv(index=False)
