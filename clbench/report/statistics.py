"""Statistics over seeds (Cell, summarize, Student-t) and the per-run values of each metric of
`clbench.metric_registry` (rho^{<=t}, A^{<=t}, BWT^{<=t}, ...): the inputs it declares, built for each run, with its
joint and random references matched."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from clbench import metrics
from clbench.errors import ResultsError
from clbench.metric_registry import METRICS, Metric, split_refusal
from clbench.report.commands import stored_overrides, train_command
from clbench.report.loading import DOMAIN, REFERENCES, Results
from clbench.report.notes import damaged_file_note
from clbench.results import CURVE_FILE
from clbench.run_files import read_run_parquet

CONFIDENCE = 0.95
NO_CURVE = ("no continual-evaluation curve, which the curve metrics need: train with `--set training.eval_every=K` "
            "(e.g. 50)")
"""Why a run has no value of a curve metric: the same words for every such metric, so the notes name it once."""
# What a run shares with each reference (besides the seed): `joint` is trained, so it must share the run's data,
# network and benchmark protocol (`reference_hash`); `random` trains nothing, so the data (`data_hash`) is enough.
REFERENCE_KEYS = {"joint": "reference_hash", "random": "data_hash"}


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
    """The per-stage values (length T) of `metric` (a name in `clbench.metric_registry.METRICS`: rho^{<=t},
    A^{<=t}, BWT^{<=t}, ...) of every usable run (or of `run_ids`), by run id.

    Why a run is not usable (incomplete matrix, no matching joint or random reference, several equally matching
    ones, an input it did not store) goes to `notes`, with the command that makes what is missing. Another name
    raises a ResultsError listing the metrics.
    """
    if metric not in METRICS:
        raise ResultsError(f"metric {metric!r}: use one of {', '.join(METRICS)}")
    refusal = split_refusal([metric], results.split, f"--metric {metric}")
    if refusal is not None:  # never another split's numbers under this one's name
        raise ResultsError(refusal)
    chosen = METRICS[metric]
    references = reference_candidates(results) if chosen.references else {}
    values: dict[str, np.ndarray] = {}
    for run_id in results.info if run_ids is None else run_ids:
        run = results.info[run_id]
        if run["method"] in REFERENCES and not include_references:
            continue
        curve = _run_values(notes, run_id, run, results, references, chosen)
        if curve is not None:
            values[run_id] = curve
    return values


def reference_candidates(results: Results) -> dict[tuple[str, str, int], list[str]]:
    """(reference method, key, seed) -> the complete reference runs with that key (`REFERENCE_KEYS`), by run id."""
    found: dict[tuple[str, str, int], list[str]] = {}
    for run_id, run in results.info.items():
        method = run["method"]
        if method in REFERENCES and _present(run[REFERENCE_KEYS[method]]) and run_id in results.matrices \
                and metrics.is_complete_matrix(results.matrices[run_id]):
            found.setdefault((method, run[REFERENCE_KEYS[method]], int(run["seed"])), []).append(run_id)
    return found


def _present(value: Any) -> bool:
    return isinstance(value, str) and value != ""


def match_reference(results: Results, candidates: dict[tuple[str, str, int], list[str]], method: str,
                    run: dict[str, Any]) -> tuple[np.ndarray | None, str | None]:
    """The matrix of a run's `method` reference (joint or random), or None with why not (None: no such run).

    Never chosen by order: when several runs match equally and their matrices differ, there is no answer.
    """
    key = run[REFERENCE_KEYS[method]]
    if not _present(key):
        return None, (f"it has no {REFERENCE_KEYS[method]} (written by an older clbench); re-run it with "
                      f"`--force`")
    run_ids = candidates.get((method, key, int(run["seed"])), [])
    if not run_ids:
        return None, None
    first = results.matrices[run_ids[0]]
    if all(np.array_equal(results.matrices[other], first, equal_nan=True) for other in run_ids[1:]):
        return first, None
    folders = ", ".join(str(results.folder(other)) for other in run_ids)
    return None, (f"{len(run_ids)} {method} runs match it equally and their accuracies differ ({folders}); "
                  f"keep one of them in this results folder (move the others to another `--results`)")


def _run_values(notes: list[str], run_id: str, run: dict[str, Any], results: Results,
                candidates: dict[tuple[str, str, int], list[str]], metric: Metric) -> np.ndarray | None:
    """`metric`'s per-stage values of one run from the inputs it declares, or None with a note on why not."""
    unmeasured = results.unmeasured(run_id)
    if unmeasured is not None:
        notes.append(f"left out {run_id}: {results.evaluation}: {unmeasured}")
        return None
    matrix = results.matrices[run_id]
    if not metrics.is_complete_matrix(matrix):
        notes.append(f"left out {run_id}: its accuracy matrix is incomplete (a stage or task is missing)")
        return None
    matched = _matched_references(notes, run_id, run, results, candidates, metric.references, matrix.shape[0])
    if matched is None:
        return None
    inputs = RunInputs(results, run_id, matrix, matched)
    if ("full" in metric.inputs or "initial" in metric.inputs) and inputs.found is None:
        notes.append(f"left out {run_id}: {metric.title} needs the accuracies at initialisation (stage 0) and "
                     f"before each task is learned, which this run did not store (results schema 1, or an approach "
                     f"that cannot predict a task it has not learned, such as pathnet); re-run it with --force")
        return None
    if "flops" in metric.inputs and np.isnan(inputs.flops).all():
        notes.append(f"left out {run_id}: {NO_FLOPS}")
        return None
    if "curve" in metric.inputs and inputs.curve is None and (damage := results.damage_of(run_id, CURVE_FILE)):
        notes.append(damaged_file_note(results, damage))  # one note per file, whichever metric needs it
        return None
    if "curve" in metric.inputs and inputs.curve is None:
        notes.append(f"left out {run_id}: {NO_CURVE}")
        return None
    arguments = [getattr(inputs, name) for name in metric.inputs]
    notes += metric.notes(run_id, *arguments)
    return metric.compute(*arguments)


def _matched_references(notes: list[str], run_id: str, run: dict[str, Any], results: Results,
                        candidates: dict[tuple[str, str, int], list[str]], references: Sequence[str],
                        size: int) -> dict[str, np.ndarray] | None:
    """The T x T matrix of each of `references` (`joint`, `random`) that matches the run, by reference method; None
    with a note when one does not match (none, several that differ, or fewer stages than the run)."""
    matched = {method: match_reference(results, candidates, method, run) for method in references}
    refused = [reason for _, reason in matched.values() if reason]
    if refused:
        notes.append(f"left out {run_id}: " + "; ".join(refused))
        return None
    missing = [method for method, (reference, _) in matched.items() if reference is None]
    if missing:
        notes.append(f"left out {run_id}: no {' and no '.join(missing)} reference for seed {int(run['seed'])} with "
                     f"its data, network and protocol (data {run['data_hash']}, reference key "
                     f"{run['reference_hash']}); make it with `{_reference_command(run, missing, results)}`")
        return None
    if any(reference.shape[0] < size for reference, _ in matched.values()):
        notes.append(f"left out {run_id}: its references have fewer stages than the run")
        return None
    return {method: reference[:size, :size] for method, (reference, _) in matched.items()}


class RunInputs:
    """The inputs a metric can take (`clbench.metric_registry.INPUTS`) of one run, each built when first asked."""

    def __init__(self, results: Results, run_id: str, matrix: np.ndarray, references: dict[str, np.ndarray]):
        self.results, self.run_id, self.learned, self.references = results, run_id, matrix, references

    @cached_property
    def found(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(the matrix with the entries above the diagonal, the stage-0 accuracies), or None where not stored."""
        return self.results.full_matrix(self.run_id)

    @property
    def stored(self) -> np.ndarray:
        return self.learned if self.found is None else self.found[0]

    @property
    def full(self) -> np.ndarray:
        assert self.found is not None  # `_run_values` leaves out a run without it
        return self.found[0]

    @property
    def initial(self) -> np.ndarray:
        assert self.found is not None
        return self.found[1]

    @property
    def joint(self) -> np.ndarray:
        return self.references["joint"]

    @cached_property
    def flops(self) -> np.ndarray:
        """The training FLOPs of stages 1..T (`stage_train_flops`), NaN where the run stored none."""
        return stage_values(self.results, self.run_id, "stage_train_flops", self.learned.shape[0])

    @cached_property
    def curve(self) -> pd.DataFrame | None:
        return run_curve(self.results, self.run_id)

    @cached_property
    def random(self) -> np.ndarray:
        return metrics.random_reference(self.references["random"], per_stage=chance_per_stage(self.results,
                                                                                               self.run_id))

    @cached_property
    def margin(self) -> np.ndarray:
        return metrics.reference_gap_margin(self.joint, self.random,
                                            self.results.test_sizes(self.run_id, self.learned.shape[0]))


NO_FLOPS = ("it stored no FLOPs (written before clbench counted them: `clbench.approaches.flops`); re-run it with "
            "--force")


def stage_values(results: Results, run_id: str, column: str, stages: int) -> np.ndarray:
    """A per-stage column of a run's rows (one value per stage: every row of a stage holds it) at stages 1..`stages`,
    NaN where missing (a file written before the column)."""
    rows = results.rows if results.rows is not None else results.frame
    mine = rows[(rows["run_id"] == run_id) & (rows["stage"] >= 1)]
    if column not in mine:
        return np.full(stages, np.nan)
    values = mine.groupby("stage")[column].first()
    return np.array([float(values.get(stage, np.nan)) for stage in range(1, stages + 1)])


def run_curve(results: Results, run_id: str) -> pd.DataFrame | None:
    """A run's continual-evaluation curve (`curve.parquet`: `training.eval_every`) in the chosen evaluation, or None
    when it has none. A domain run's one evaluation reads as either (`DOMAIN`)."""
    if CURVE_FILE not in results.files.get(run_id, set()):
        return None
    if run_id not in results.curves:  # read once per report: every curve metric and table asks for it
        results.curves[run_id] = read_run_parquet(results.folder(run_id) / CURVE_FILE)  # checked at loading
    curve = results.curves[run_id]
    if results.info[run_id].get("scenario") == DOMAIN:
        return curve
    chosen = curve[curve["evaluation"] == results.evaluation]
    return chosen if len(chosen) else None


def chance_per_stage(results: Results, run_id: str) -> bool:
    """True when the run's random reference is taken per stage (A_R^{u<=t}): the task-agnostic evaluation, where
    the chance level falls as classes are added; False for the paper's A_R^u (task-aware, and the domain scenario,
    whose one head guesses among the same classes at every stage). See `clbench.metrics.random_reference`."""
    return metrics.chance_varies_by_stage(results.evaluation, results.info[run_id]["scenario"])


def undefined_ratio_notes(run_id: str, matrix: np.ndarray, joint: np.ndarray, random: np.ndarray,
                          margin: np.ndarray) -> list[str]:
    """The forgetting ratio's explanation (`Metric.explain`): a note on the stages where a run's rho^{<=t} is
    undefined (`clbench.metrics.undefined_ratio_cells`), or none."""
    undefined = metrics.undefined_ratio_cells(joint, random, margin)
    return [undefined_ratio_note(run_id, joint, random, margin, undefined)] if undefined.any() else []


def undefined_ratio_note(run_id: str, joint: np.ndarray, random: np.ndarray, margin: np.ndarray,
                         undefined: np.ndarray, shown: int = 3) -> str:
    """Why some of a run's rho^{<=t} read `–`: each cell (stage t, task u) whose joint reference does not clearly
    beat the random one, with both accuracies (the first `shown` cells, then how many more)."""
    chance = metrics.chance_matrix(random, joint.shape)
    cells = [(int(t), int(u)) for t, u in zip(*np.nonzero(undefined))]
    texts = [f"stage {t + 1} task {u + 1}: joint {joint[t, u]:.3f} against random {chance[t, u]:.3f}"
             for t, u in cells[:shown]]
    more = f" and {len(cells) - shown} more" if len(cells) > shown else ""
    return (f"{run_id}: rho undefined at {'; '.join(texts)}{more} (the joint reference must beat chance by more "
            f"than {metrics.REFERENCE_GAP_STANDARD_ERRORS:g} standard errors of the two test accuracies, "
            f"{float(np.nanmax(np.where(undefined, margin, np.nan))):.3f} here): those stages read –, never a number")


def _reference_command(run: dict[str, Any], missing: Sequence[str], results: Results) -> str:
    """The `clbench train` command that makes the missing references with the run's data, network, protocol."""
    return train_command(results, missing, [int(run["seed"])], stored_overrides(run["overrides"]) or [])
