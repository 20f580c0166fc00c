"""The tuned file: a `TunedChoice` (made by `choose`), written as YAML guarded by a digest of its fields, and read
back only when intact and made for the run that asks (`read_tuned`)."""

from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

import clbench
from clbench.errors import ClbenchError
from clbench.results import EVALUATIONS, atomic_write_bytes, inside
from clbench.tuning.scoring import (
    DEFAULT_RULE,
    DEFAULT_SEED,
    PointScore,
    TuningError,
    grid_points,
    score_points,
    select,
    tuning_rule,
)

TUNED_FORMAT = "clbench-tuned"
TUNED_FORMAT_VERSION = 1
TUNED_FOLDER = "_tuned"


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
