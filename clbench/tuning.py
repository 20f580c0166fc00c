"""Hyper-parameter tuning on validation data: scoring grid points, choosing one, and the tuned file (torch-free).

The paper (Serra et al. 2018, Section 4, "Baselines") finds each approach's hyper-parameters by a grid search on
the task sequence of a single seed. Here every point of a `--grid` is trained at one seed (0 by default) and scored
on the validation split only (rows with `split == "validation"`; a test number is never used to choose), by one
of the `RULES`:

- `accuracy` (the default): A^{<=T} = (1/T) sum_{u<=T} A^{u<=T}, the mean validation accuracy over all tasks
  after the last one (`clbench.metrics.average_accuracy` at stage T);
- `forgetting-ratio`: rho^{<=T} = (1/T) sum_{u<=T} [(A^{u<=T} - A_R^u) / (A_J^{u<=T} - A_R^u) - 1], the paper's
  forgetting ratio at stage T (`clbench.metrics.forgetting_ratio`), with the joint reference A_J and the random
  reference A_R (`clbench.metrics.random_reference`) measured on validation too, matched to the run as the report
  matches them (`clbench.report.REFERENCE_KEYS`: the joint by reference key, the random by data hash, same seed).

Higher is better under both. Ties: among the points whose score is within `TIE_TOLERANCE` of the best, the first
in the grid's declared order wins (`clbench.spec.grid.expand_grid`: the first `--grid` option varies slowest).

The choice is a `TunedChoice`, stored as a YAML tuned file (`write_tuned`, `read_tuned`) at
`<results>/<benchmark>/_tuned/<method>-<config hash>.yaml` (`tuned_path`; the report's loader skips `_` folders).
The file guards its content with a sha256 `digest` of its fields, and `read_tuned` also re-derives the chosen point
from the stored scores, rule and tie rule: an edited file is refused, as is one for another benchmark, config or
method (with the `clbench tune` command that makes the right one). `compare_with_test` compares the validation
winner with the point the test split would have chosen (for `report --tuning`).

Rows are the results' long format (one row per run, stage, task, evaluation, split); a missing `split` column, or
a missing value in it, means test.
"""

from __future__ import annotations

import hashlib
import json
import math
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

import clbench
from clbench import metrics
from clbench.errors import ClbenchError
from clbench.report import REFERENCE_KEYS
from clbench.results import EVALUATIONS, atomic_write_bytes, inside, select_split
from clbench.spec.grid import expand_grid, parse_grid_spec

VALIDATION, TEST = "validation", "test"
DEFAULT_RULE = "accuracy"
DEFAULT_SEED = 0
# Scores closer than this to the best tie (accuracies are in [0, 1]; a validation set of a million samples over a
# hundred tasks still moves A^{<=T} by 1e-8): floating-point noise never decides between two points.
TIE_TOLERANCE = 1e-9
TUNED_FORMAT = "clbench-tuned"
TUNED_FORMAT_VERSION = 1
TUNED_FOLDER = "_tuned"


class TuningError(ClbenchError):
    """Rows cannot be tuned on, or a tuned file cannot be used; the message says what to do."""


@dataclass(frozen=True)
class TuningRule:
    """How a grid point's validation score is computed from its run's accuracy matrix (higher is better).

    Attributes:
        name: the rule's name in commands and tuned files (`--rule accuracy`).
        formula: the score, as the paper writes it.
        references: the reference runs the score needs, on the same split and seed ("joint", "random").
        score: (T x T accuracy matrix, the joint's T x T matrix or None, the random's length-T A_R or None) -> score.
    """

    name: str
    formula: str
    references: tuple[str, ...]
    score: Callable[[np.ndarray, np.ndarray | None, np.ndarray | None], float]

    @property
    def needs_references(self) -> bool:
        return bool(self.references)


def _final_accuracy(matrix: np.ndarray, joint: np.ndarray | None, random: np.ndarray | None) -> float:
    return float(metrics.average_accuracy(matrix)[-1])


def _final_forgetting_ratio(matrix: np.ndarray, joint: np.ndarray | None, random: np.ndarray | None) -> float:
    assert joint is not None and random is not None  # the rule declares both references
    return float(metrics.forgetting_ratio(matrix, joint, random)[-1])


RULES = {rule.name: rule for rule in (
    TuningRule("accuracy", "A^{<=T} = (1/T) sum_{u<=T} A^{u<=T} (mean validation accuracy after the last task)",
               (), _final_accuracy),
    TuningRule("forgetting-ratio", "rho^{<=T} = (1/T) sum_{u<=T} [(A^{u<=T} - A_R^u) / (A_J^{u<=T} - A_R^u) - 1] "
               "(validation accuracies; A_J joint, A_R random reference)", ("joint", "random"),
               _final_forgetting_ratio),
)}


def tuning_rule(name: str) -> TuningRule:
    """The rule called `name`, or TuningError listing the rules."""
    if name not in RULES:
        raise TuningError(f"tuning rule {name!r}: use one of {', '.join(RULES)}")
    return RULES[name]


@dataclass(frozen=True)
class PointScore:
    """One grid point and its score on one split.

    Attributes:
        values: (key, value text) of each `--grid` option, in the grid's order (`hat.smax`, `"25"`).
        score: the rule's value on the split; NaN when it cannot be computed (then `problem` says why).
        run_id: the run the score comes from (None if there is none).
        config_hash: that run's config hash.
        problem: why there is no score, in words that end with what to do; None when there is one.
    """

    values: tuple[tuple[str, str], ...]
    score: float
    run_id: str | None = None
    config_hash: str | None = None
    problem: str | None = None

    @property
    def overrides(self) -> list[str]:
        """The point as `--set` options: `["hat.smax=25", "hat.c=0.1"]`."""
        return [f"{key}={value}" for key, value in self.values]

    @property
    def label(self) -> str:
        return ", ".join(self.overrides)

    @property
    def scored(self) -> bool:
        return self.problem is None and math.isfinite(self.score)


def grid_points(grid: Sequence[str]) -> list[tuple[tuple[str, str], ...]]:
    """The grid's points in its declared order, each as (key, value text) pairs (`expand_grid`'s order)."""
    if not grid:
        raise TuningError("tuning needs a grid: give at least one --grid KEY=V1,V2,...")
    keys = [parse_grid_spec(spec)[0] for spec in grid]
    return [tuple(zip(keys, (text.split("=", 1)[1] for text in point))) for point in expand_grid(list(grid))]


def score_points(rows: pd.DataFrame, method: str, grid: Sequence[str], rule: str = DEFAULT_RULE,
                 evaluation: str = EVALUATIONS[0], seed: int = DEFAULT_SEED, overrides: Sequence[str] = (),
                 split: str = VALIDATION) -> list[PointScore]:
    """Every grid point of `method` scored by `rule` on `split` (validation unless asked), in the grid's order.

    A point's run is the run of `method` at `seed` whose `--set` options are exactly `overrides` followed by the
    point's `KEY=VALUE` (as `clbench train --grid` stores them). A point without such a run, with an incomplete
    matrix, with several such runs or without its references gets a NaN score and a `problem`. With no row of
    `split` at all the whole call is refused (TuningError): there is no fallback to another split.
    """
    chosen_rule = tuning_rule(rule)
    if evaluation not in EVALUATIONS:
        raise TuningError(f"evaluation {evaluation!r}: use one of {', '.join(EVALUATIONS)}")
    points = grid_points(grid)
    own = select_split(rows, split)
    own = own[(own["seed"] == seed) & (own["evaluation"] == evaluation)]
    runs = own[own["method"] == method]
    if runs.empty:
        raise TuningError(_no_rows_message(rows, method, seed, split, evaluation))
    by_overrides: dict[tuple[str, ...], list[str]] = {}
    for run_id, text in runs.drop_duplicates("run_id")[["run_id", "overrides"]].itertuples(index=False):
        by_overrides.setdefault(tuple(json.loads(text) if isinstance(text, str) else []), []).append(str(run_id))
    matrices = metrics.accuracy_matrices(runs)
    references = {name: own[own["method"] == name] for name in chosen_rule.references}
    return [_score_point(point, by_overrides.get((*overrides, *(f"{k}={v}" for k, v in point)), []), runs,
                         matrices, references, chosen_rule, split, seed) for point in points]


def _no_rows_message(rows: pd.DataFrame, method: str, seed: int, split: str, evaluation: str) -> str:
    names = rows["benchmark"].dropna().unique() if "benchmark" in rows else []
    benchmark = shlex.quote(str(names[0])) if len(names) == 1 else "BENCHMARK"
    if split == VALIDATION and ("split" not in rows or not (rows["split"] == VALIDATION).any()):
        return (f"no validation rows in these results (they hold test accuracies only: written before validation "
                f"evaluation, or trained without a validation split); tune on validation with `clbench tune "
                f"{benchmark} -m {method} --grid KEY=V1,V2,...`: a test accuracy is never used to choose")
    return (f"no {split} rows of {method} at seed {seed} ({evaluation}); train the grid with `clbench tune "
            f"{benchmark} -m {method} --grid KEY=V1,V2,... --seed {seed}`")


def _score_point(point: tuple[tuple[str, str], ...], run_ids: list[str], runs: pd.DataFrame,
                 matrices: dict[str, np.ndarray], references: dict[str, pd.DataFrame], rule: TuningRule,
                 split: str, seed: int) -> PointScore:
    label = ", ".join(f"{key}={value}" for key, value in point)
    if not run_ids:
        return PointScore(point, math.nan, problem=f"point {label} has no {split} rows at seed {seed}; train it")
    if len(run_ids) > 1:
        return PointScore(point, math.nan, problem=f"point {label} has {len(run_ids)} runs at seed {seed} "
                          f"({', '.join(sorted(run_ids))}); keep one of them in this results folder")
    run_id = run_ids[0]
    run = runs[runs["run_id"] == run_id].iloc[0]
    found = PointScore(point, math.nan, run_id, str(run["config_hash"]))
    matrix = matrices.get(run_id)
    if matrix is None or not metrics.is_complete_matrix(matrix):
        return _with_problem(found, f"run {run_id} ({label}) has an incomplete {split} accuracy matrix; re-run it")
    matched = {}
    for name, frame in references.items():
        reference, problem = _reference_matrix(frame, name, run, split, matrix.shape[0])
        if problem is not None:
            return _with_problem(found, f"run {run_id} ({label}): {problem}")
        matched[name] = reference
    joint = matched.get("joint")
    random = metrics.random_reference(matched["random"]) if "random" in matched else None
    return PointScore(point, rule.score(matrix, joint, random), run_id, found.config_hash)


def _with_problem(point: PointScore, problem: str) -> PointScore:
    return PointScore(point.values, math.nan, point.run_id, point.config_hash, problem)


def _reference_matrix(frame: pd.DataFrame, name: str, run: pd.Series, split: str,
                      size: int) -> tuple[np.ndarray | None, str | None]:
    """The T x T matrix of the run's `name` reference on `split` (same seed, same `REFERENCE_KEYS` value), or None
    and why not. Several matching runs are used only when their matrices are equal (never chosen by order)."""
    key = REFERENCE_KEYS[name]
    value = run[key]
    if not isinstance(value, str) or not value:
        return None, f"it has no {key} (written by an older clbench); re-run it with --force"
    matching = frame[frame[key] == value]
    found = [matrix for matrix in metrics.accuracy_matrices(matching).values()
             if metrics.is_complete_matrix(matrix) and matrix.shape[0] >= size]
    if not found:
        return None, (f"no complete {name} reference on {split} at seed {int(run['seed'])} with its {key} "
                      f"{value}; train it with `clbench tune` (it trains the references the rule needs)")
    if any(not np.array_equal(other, found[0], equal_nan=True) for other in found[1:]):
        return None, (f"{len(found)} {name} references match it and their {split} accuracies differ; keep one of "
                      f"them in this results folder")
    return found[0][:size, :size], None


def select(points: Sequence[PointScore]) -> PointScore:
    """The point with the highest score; ties (within `TIE_TOLERANCE`) go to the first in the grid's order.

    Every point must be scored: a point without a score refuses the choice (TuningError with its `problem`),
    never a choice among the others.
    """
    if not points:
        raise TuningError("no grid points to choose from")
    unscored = [point for point in points if not point.scored]
    if unscored:
        why = unscored[0].problem or f"point {unscored[0].label} has no finite score"
        more = f" (and {len(unscored) - 1} more points)" if len(unscored) > 1 else ""
        raise TuningError(f"cannot choose: {why}{more}")
    return _best(points)


def _best(points: Sequence[PointScore]) -> PointScore:
    best = max(point.score for point in points)
    return next(point for point in points if point.score >= best - TIE_TOLERANCE)


@dataclass(frozen=True)
class TunedChoice:
    """A method's hyper-parameters chosen on validation data, as a tuned file holds them.

    Attributes:
        benchmark: the benchmark's name.
        method: the approach tuned.
        config_hash: the config hash of `clbench train BENCHMARK -m METHOD` with `overrides` and without the grid:
            the run config the chosen values are applied to.
        grid: the `--grid` options, as given (`hat.smax=25,50`).
        rule: the `RULES` name the points were scored by.
        evaluation: task-aware or task-agnostic, the rows scored.
        tuning_seed: the seed every point was trained with.
        overrides: the command's `--set` options (part of every point's run, and of `config_hash`).
        points: every grid point with its validation score, in the grid's order.
        chosen: the chosen point's (key, value text) pairs.
        clbench_version: the clbench that chose.
    """

    benchmark: str
    method: str
    config_hash: str
    grid: tuple[str, ...]
    rule: str
    evaluation: str
    tuning_seed: int
    overrides: tuple[str, ...]
    points: tuple[PointScore, ...]
    chosen: tuple[tuple[str, str], ...]
    clbench_version: str = clbench.__version__

    @property
    def chosen_overrides(self) -> list[str]:
        """The chosen values as `--set` options (what `--tuned FILE` applies)."""
        return [f"{key}={value}" for key, value in self.chosen]

    def command(self) -> str:
        """The `clbench tune` command that makes this choice."""
        return tune_command(self.benchmark, self.method, self.grid, self.rule, self.tuning_seed, self.overrides,
                            self.evaluation)


def tune_command(benchmark: str, method: str, grid: Sequence[str], rule: str = DEFAULT_RULE,
                 seed: int = DEFAULT_SEED, overrides: Sequence[str] = (), evaluation: str = EVALUATIONS[0]) -> str:
    """`clbench tune BENCHMARK -m METHOD --grid ... [--rule ...] [--seed ...] [--set ...]`, quoted for a shell."""
    parts = ["clbench tune", shlex.quote(benchmark), "-m", shlex.quote(method),
             *(f"--grid {shlex.quote(spec)}" for spec in grid), *(f"--set {shlex.quote(text)}" for text in overrides)]
    if rule != DEFAULT_RULE:
        parts.append(f"--rule {rule}")
    if seed != DEFAULT_SEED:
        parts.append(f"--seed {seed}")
    if evaluation != EVALUATIONS[0]:
        parts.append(f"--evaluation {evaluation}")
    return " ".join(parts)


def choose(rows: pd.DataFrame, benchmark: str, method: str, config_hash: str, grid: Sequence[str],
           rule: str = DEFAULT_RULE, evaluation: str = EVALUATIONS[0], seed: int = DEFAULT_SEED,
           overrides: Sequence[str] = ()) -> TunedChoice:
    """Score every grid point of `method` on validation (`score_points`) and choose one (`select`)."""
    points = score_points(rows, method, grid, rule, evaluation, seed, overrides)
    return TunedChoice(benchmark, method, config_hash, tuple(grid), rule, evaluation, seed, tuple(overrides),
                       tuple(points), select(points).values)


@dataclass(frozen=True)
class WinnerComparison:
    """The validation winner against the point the test split would have chosen (`report --tuning`).

    Attributes:
        validation: the point chosen on validation.
        test_scores: every grid point scored on test, in the grid's order (NaN with a `problem` where missing).
        test: the point the test split would choose under the same rule and tie rule; None when a point has no
            test score (then `missing` lists them and there is nothing to compare).
    """

    validation: PointScore
    test_scores: tuple[PointScore, ...]
    test: PointScore | None

    @property
    def missing(self) -> list[PointScore]:
        return [point for point in self.test_scores if not point.scored]

    @property
    def disagrees(self) -> bool:
        """True when choosing on test would have picked another point (a warning for the report)."""
        return self.test is not None and self.test.values != self.validation.values


def compare_winners(validation: PointScore, test_scores: Sequence[PointScore]) -> WinnerComparison:
    """The test winner (same tie rule) next to the validation winner; no test winner unless every point has a test
    score."""
    complete = bool(test_scores) and all(point.scored for point in test_scores)
    return WinnerComparison(validation, tuple(test_scores), _best(test_scores) if complete else None)


def compare_with_test(rows: pd.DataFrame, choice: TunedChoice) -> WinnerComparison:
    """Score the choice's grid on the test rows (same method, seed, rule, evaluation, options) and compare winners.

    The rows never change the choice: the validation winner is the one the tuned file holds.
    """
    chosen = next(point for point in choice.points if point.values == choice.chosen)
    try:
        test_scores = score_points(rows, choice.method, choice.grid, choice.rule, choice.evaluation,
                                   choice.tuning_seed, choice.overrides, split=TEST)
    except TuningError:
        test_scores = [PointScore(point.values, math.nan, problem=f"point {point.label} has no test rows")
                       for point in choice.points]
    return compare_winners(chosen, test_scores)


def tuned_path(results_dir: Path, benchmark: str, method: str, config_hash: str) -> Path:
    """`<results>/<benchmark>/_tuned/<method>-<config hash>.yaml`, checked to lie inside `results_dir`."""
    return inside(results_dir, Path(results_dir) / benchmark / TUNED_FOLDER / f"{method}-{config_hash}.yaml")


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes, as hex (what runs trained with `--tuned FILE` record)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _content(choice: TunedChoice) -> dict[str, Any]:
    """The tuned file's fields, without the digest (plain types, the order they are written in)."""
    return {
        "format": TUNED_FORMAT, "format_version": TUNED_FORMAT_VERSION, "benchmark": choice.benchmark,
        "method": choice.method, "config_hash": choice.config_hash, "grid": list(choice.grid), "rule": choice.rule,
        "rule_formula": tuning_rule(choice.rule).formula, "evaluation": choice.evaluation,
        "tuning_seed": int(choice.tuning_seed), "overrides": list(choice.overrides),
        "clbench_version": choice.clbench_version,
        "points": [{"values": dict(point.values), "validation_score": float(point.score), "run_id": point.run_id,
                    "config_hash": point.config_hash} for point in choice.points],
        "chosen": dict(choice.chosen),
    }


def _digest(content: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(content, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


HEADER = ("# Hyper-parameters chosen on validation data by `clbench tune`; `clbench train --tuned` applies them.\n"
          "# Do not edit: the digest covers every field, and a changed file is refused. Re-run the command below.\n")


def write_tuned(path: Path, choice: TunedChoice, overwrite: bool = False) -> None:
    """Write the tuned file atomically (temporary file + rename); an existing file is kept unless `overwrite`."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise TuningError(f"{path} exists; remove it first, or write the new choice elsewhere")
    content = _content(choice)
    text = yaml.safe_dump({**content, "digest": _digest(content)}, sort_keys=False, allow_unicode=True, width=120)
    atomic_write_bytes(path, (HEADER + f"# {choice.command()}\n" + text).encode())


def read_tuned(path: Path, benchmark: str, config_hash: str, method: str,
               overrides: Sequence[str] | None = None) -> TunedChoice:
    """The choice in a tuned file, after checking that it is intact and made for `benchmark`, `config_hash` and
    `method`; TuningError with one line naming the file, what differs and the command that makes the right one
    (with the `--set` options `overrides` of the run that asks, if given; else the file's).

    Intact: its digest matches its fields, its points are its grid's, in order, and its chosen values are the ones
    `select` picks from its stored scores.
    """
    choice = _parse_tuned(Path(path))
    # The method before the config hash: another method always has another config hash too; the method says why.
    wanted = {"benchmark": benchmark, "method": method, "config hash": config_hash}
    found = {"benchmark": choice.benchmark, "method": choice.method, "config hash": choice.config_hash}
    for what, value in wanted.items():
        if found[what] != value:
            command = tune_command(benchmark, method, choice.grid, choice.rule, choice.tuning_seed,
                                   choice.overrides if overrides is None else overrides, choice.evaluation)
            raise TuningError(f"{path} is a tuned file for {what} {found[what]}, not {value}; make the right one "
                              f"with `{command}`")
    return choice


def _parse_tuned(path: Path) -> TunedChoice:
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        raise TuningError(f"{path} is not a readable tuned file ({' '.join(str(error).split())})") from None
    if not isinstance(data, dict) or data.get("format") != TUNED_FORMAT:
        raise TuningError(f"{path} is not a tuned file (no `format: {TUNED_FORMAT}`); make one with `clbench tune`")
    if data.get("format_version") != TUNED_FORMAT_VERSION:
        raise TuningError(f"{path}: tuned-file format version {data.get('format_version')!r} is not one this "
                          f"clbench ({clbench.__version__}) reads ({TUNED_FORMAT_VERSION}); make it again with "
                          f"`clbench tune`")
    try:
        choice = _choice_from(data)
    except (KeyError, TypeError, ValueError, AttributeError, ClbenchError) as error:
        raise TuningError(f"{path} is damaged or edited ({' '.join(str(error).split())}); make it again with "
                          f"`clbench tune`") from None
    content = {key: value for key, value in data.items() if key != "digest"}
    if _digest(content) != data.get("digest") or _content(choice) != content:
        raise TuningError(f"{path} was changed after `clbench tune` wrote it (its digest does not match its "
                          f"content); make it again with `{choice.command()}`")
    return choice


def _choice_from(data: dict[str, Any]) -> TunedChoice:
    """A TunedChoice from a tuned file's fields, checked against its own grid, rule and scores."""
    grid = tuple(str(spec) for spec in data["grid"])
    points = tuple(PointScore(tuple((str(k), str(v)) for k, v in entry["values"].items()),
                              float(entry["validation_score"]), entry["run_id"], entry["config_hash"])
                   for entry in data["points"])
    if [point.values for point in points] != grid_points(grid):
        raise ValueError("its points are not its grid's, in the grid's order")
    chosen = tuple((str(k), str(v)) for k, v in data["chosen"].items())
    tuning_rule(data["rule"])
    best = select(points)
    if chosen != best.values:
        raise ValueError(f"the chosen values {', '.join(f'{k}={v}' for k, v in chosen)} are not the best "
                         f"validation score under rule {data['rule']}, which is {best.label}")
    return TunedChoice(str(data["benchmark"]), str(data["method"]), str(data["config_hash"]), grid,
                       str(data["rule"]), str(data["evaluation"]), int(data["tuning_seed"]),
                       tuple(str(text) for text in data["overrides"]), points, chosen, str(data["clbench_version"]))


def tuned_files(results_dir: Path, benchmark: str) -> list[Path]:
    """The tuned files of a benchmark's results (`<results>/<benchmark>/_tuned/*.yaml`), sorted by name."""
    return sorted((Path(results_dir) / benchmark / TUNED_FOLDER).glob("*.yaml"))


def read_tuned_file(path: Path) -> TunedChoice:
    """The choice in a tuned file, after checking that it is intact (not what it was made for: `read_tuned`)."""
    return _parse_tuned(Path(path))


def tuning_points(rows: pd.DataFrame, paths: Sequence[Path]) -> tuple[pd.DataFrame, list[str]]:
    """For `report --tuning`: one row per tuned file and grid point (file, method, rule, evaluation, tuning_seed,
    point, validation_score, test_score, chosen, test_choice, tuned_seeds: the seeds of the runs in `rows` that
    `clbench train --tuned` trained with the file), and notes: a file that cannot be used, and each file whose test
    split would have chosen another point (`compare_with_test`), or that has no test score for some points."""
    table: list[dict[str, Any]] = []
    notes: list[str] = []
    for path in paths:
        try:
            choice = read_tuned_file(path)
        except TuningError as error:
            notes.append(str(error))
            continue
        comparison = compare_with_test(rows, choice)
        sha256 = file_sha256(path)
        tuned = rows[rows["tuned_sha256"] == sha256] if "tuned_sha256" in rows else rows.iloc[0:0]
        seeds = ",".join(str(int(seed)) for seed in sorted(tuned["seed"].unique()))
        for point, test in zip(choice.points, comparison.test_scores):
            table.append({"file": Path(path).name, "method": choice.method, "rule": choice.rule,
                          "evaluation": choice.evaluation, "tuning_seed": choice.tuning_seed, "point": point.label,
                          "validation_score": point.score, "test_score": test.score,
                          "chosen": point.values == choice.chosen,
                          "test_choice": comparison.test is not None and point.values == comparison.test.values,
                          "tuned_seeds": seeds})
        chosen = ", ".join(choice.chosen_overrides)
        if comparison.disagrees:
            assert comparison.test is not None
            notes.append(f"{choice.method} ({Path(path).name}): the test split would have chosen "
                         f"{comparison.test.label}, not {chosen}; the choice is made on validation only (report the "
                         f"validation winner's test numbers)")
        elif comparison.missing:
            notes.append(f"{choice.method} ({Path(path).name}): {len(comparison.missing)} grid points have no test "
                         f"score at seed {choice.tuning_seed} ({comparison.missing[0].problem}); no test winner to "
                         f"compare with")
    return pd.DataFrame(table, columns=TUNING_POINT_COLUMNS), notes


TUNING_POINT_COLUMNS = ("file", "method", "rule", "evaluation", "tuning_seed", "point", "validation_score",
                        "test_score", "chosen", "test_choice", "tuned_seeds")
