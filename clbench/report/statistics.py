"""Statistics over seeds (Cell, summarize, Student-t) and the per-run values: rho^{<=t} against the
matching joint and random references, or A^{<=t}."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from clbench import metrics
from clbench.report.loading import REFERENCES, Results

if TYPE_CHECKING:
    pass


METRICS = ("forgetting-ratio", "accuracy")


CONFIDENCE = 0.95


@dataclass(frozen=True)
class Cell:
    """Mean, sample standard deviation (ddof=1; NaN for one seed) and number of seeds of one table cell."""

    mean: float
    std: float
    n: int

    @property
    def half_width(self) -> float:
        """Half-width of the Student-t 95% confidence interval of the mean: t_{0.975, n-1} s / sqrt(n).

        NaN for fewer than two values.
        """
        if self.n < 2 or not math.isfinite(self.std):
            return float("nan")
        return student_t_quantile(0.5 + CONFIDENCE / 2, self.n - 1) * self.std / math.sqrt(self.n)


def summarize(values: Iterable[float]) -> Cell:
    """The Cell of the finite values among `values` (NaN values are not counted)."""
    finite = [float(v) for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return Cell(float("nan"), float("nan"), 0)
    std = float(np.std(finite, ddof=1)) if len(finite) > 1 else float("nan")
    return Cell(float(np.mean(finite)), std, len(finite))


def student_t_two_sided(t: float, df: int) -> float:
    """P(|T| <= t) for Student's t with integer df >= 1 (Abramowitz & Stegun 26.7.3, exact finite series)."""
    theta = math.atan(abs(t) / math.sqrt(df))
    cosine, sine = math.cos(theta), math.sin(theta)
    if df % 2:  # odd: 2/pi [theta + sin cos (1 + 2/3 cos^2 + (2*4)/(3*5) cos^4 + ...)], terms up to cos^{df-2}
        total, term = 0.0, cosine
        for power in range(1, df - 1, 2):
            total += term
            term *= cosine * cosine * (power + 1) / (power + 2)
        return 2.0 / math.pi * (theta + sine * total)
    total, term = 0.0, 1.0  # even: sin (1 + 1/2 cos^2 + (1*3)/(2*4) cos^4 + ...), terms up to cos^{df-2}
    for power in range(0, df - 1, 2):
        total += term
        term *= cosine * cosine * (power + 1) / (power + 2)
    return sine * total


def student_t_quantile(probability: float, df: int) -> float:
    """t_{p, df}: the p-quantile (p > 0.5) of Student's t with integer df >= 1, by bisection on its CDF."""
    if not 0.5 < probability < 1.0 or df < 1:
        raise ValueError(f"student_t_quantile needs 0.5 < p < 1 and df >= 1, got p={probability}, df={df}")
    target = 2.0 * probability - 1.0  # P(|T| <= t)
    low, high = 0.0, 1.0
    while student_t_two_sided(high, df) < target:
        high *= 2.0
    for _ in range(200):
        middle = (low + high) / 2.0
        low, high = (middle, high) if student_t_two_sided(middle, df) < target else (low, middle)
        if high - low < 1e-12:
            break
    return (low + high) / 2.0


def run_values(results: Results, metric: str, notes: list[str], include_references: bool = False,
               run_ids: Sequence[str] | None = None) -> dict[str, np.ndarray]:
    """rho^{<=t} or A^{<=t} (length T) of every usable run (or of `run_ids`), by run id.

    Why a run is not usable (incomplete matrix, no matching joint or random reference, or several that match
    equally) goes to `notes`, with the command that makes what is missing. See `reference_key`.
    """
    references = _references(results) if metric == "forgetting-ratio" else None
    values: dict[str, np.ndarray] = {}
    for run_id in results.info if run_ids is None else run_ids:
        run = results.info[run_id]
        if run["method"] in REFERENCES and not include_references:
            continue
        curve = _run_values(notes, run_id, run, results, references, metric)
        if curve is not None:
            values[run_id] = curve
    return values


def reference_key(run: dict[str, Any]) -> tuple[str, str, tuple[tuple[str, str], ...]]:
    """What a run's `joint` reference must share with it (besides the seed): its data, network and protocol.

    The data hash covers the tasks and splits; the variant and the `--set network.*` options give the resolved
    network; the variant and the `--set training.*` options give the benchmark's training protocol (an
    approach's own `training:` section is not part of it). Computed from the stored identity columns, so old
    results folders match the same way. When a key is set twice, the last `--set` wins, as in the spec loader.
    """
    settings: dict[str, str] = {}
    for text in json.loads(run["overrides"] or "[]"):
        key, _, value = text.partition("=")
        if key.strip().split(".")[0] in ("network", "training"):
            settings[key.strip()] = value.strip()
    return str(run["data_hash"]), _text(run["variant"]), tuple(sorted(settings.items()))


def _text(value: Any) -> str:
    """A stored string column's value, "" when null."""
    return "" if value is None or (not isinstance(value, str) and pd.isna(value)) else str(value)


@dataclass(frozen=True)
class References:
    """The complete reference runs of a results folder, grouped by what a run must share with them.

    Attributes:
        joint: (reference_key, seed) -> run ids of the complete joint runs.
        random: (data hash, seed) -> run ids of the complete random runs (random trains nothing, so its data
            and seed identify it).
    """

    joint: dict[tuple[Any, int], list[str]]
    random: dict[tuple[str, int], list[str]]


def _references(results: Results) -> References:
    joint: dict[tuple[Any, int], list[str]] = {}
    random: dict[tuple[str, int], list[str]] = {}
    for run_id, run in results.info.items():
        if run["method"] not in REFERENCES or not metrics.is_complete_matrix(results.matrices[run_id]):
            continue
        if run["method"] == "joint":
            joint.setdefault((reference_key(run), int(run["seed"])), []).append(run_id)
        else:
            random.setdefault((str(run["data_hash"]), int(run["seed"])), []).append(run_id)
    return References(joint, random)


def _pick_reference(notes: list[str], run_id: str, name: str, candidates: list[str],
                    results: Results) -> np.ndarray | None:
    """The one matrix of `candidates`; None (with a note) when several differ. Never chosen by order."""
    matrices = [results.matrices[candidate] for candidate in candidates]
    if all(np.array_equal(matrix, matrices[0], equal_nan=True) for matrix in matrices[1:]):
        return matrices[0]
    folders = ", ".join(f"{candidate} ({results.folder(candidate)})" for candidate in candidates)
    notes.append(f"left out {run_id}: {len(candidates)} {name} runs match it equally and their accuracies differ: "
                 f"{folders}; move all but one out of the results folder")
    return None


def _run_values(notes: list[str], run_id: str, run: dict[str, Any], results: Results,
                references: References | None, metric: str) -> np.ndarray | None:
    matrix = results.matrices[run_id]
    if not metrics.is_complete_matrix(matrix):
        notes.append(f"left out {run_id}: its accuracy matrix is incomplete (a stage or task is missing)")
        return None
    if metric == "accuracy" or references is None:
        return metrics.average_accuracy(matrix)
    seed = int(run["seed"])
    joint_runs = references.joint.get((reference_key(run), seed), [])
    random_runs = references.random.get((str(run["data_hash"]), seed), [])
    missing = [name for name, found in (("joint", joint_runs), ("random", random_runs)) if not found]
    if missing:
        notes.append(_missing_note(run_id, run, missing, results.results_dir))
        return None
    joint = _pick_reference(notes, run_id, "joint", joint_runs, results)
    random = _pick_reference(notes, run_id, "random", random_runs, results)
    if joint is None or random is None:
        return None
    size = matrix.shape[0]
    if joint.shape[0] < size or random.shape[0] < size:
        notes.append(f"left out {run_id}: its references have fewer stages than the run")
        return None
    return metrics.forgetting_ratio(matrix, joint[:size, :size], metrics.random_reference(random[:size, :size]))


def _missing_note(run_id: str, run: dict[str, Any], missing: list[str], results_dir: Path) -> str:
    """Why `run_id` has no reference, with the `clbench train` command that makes the matching one."""
    overrides = [o for o in json.loads(run["overrides"] or "[]") if not _is_method_override(o)]
    variant = _text(run["variant"])
    if variant and not any(o.split("=", 1)[0].strip() == "variant" for o in overrides):
        overrides.insert(0, f"variant={variant}")
    options = " ".join(f"--set {o}" for o in overrides)
    command = " ".join(part for part in (f"clbench train {run['benchmark']} -m {','.join(missing)}",
                                          f"--seeds {run['seed']}", options, f"--results {results_dir}") if part)
    settings = reference_key(run)[2]
    protocol = ", ".join(f"{key}={value}" for key, value in settings)
    shared = f"data {run['data_hash']}" + (f", variant {variant}" if variant else "") + (
        f", {protocol}" if protocol else "")
    return (f"left out {run_id}: no {' and no '.join(missing)} reference for seed {run['seed']} "
            f"({shared}); make it with `{command}`")


def _is_method_override(text: str) -> bool:
    """True for `--set` options that only concern approaches (not data/network/training/variant)."""
    key = text.split("=", 1)[0]
    return key.split(".")[0] not in ("data", "network", "training", "variant")
