"""The tuned file: a `TunedChoice` (made by `choose`), written as YAML guarded by a digest of its fields, and read
back only when intact and made for the run that asks (`read_tuned`)."""

from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

import clbench
from clbench.errors import ClbenchError
from clbench.results import EVALUATIONS, atomic_write_bytes, inside
from clbench.spec.grid import default_grid_options, parse_grid_spec
from clbench.tuning.scoring import (
    DEFAULT_RULE,
    DEFAULT_SEED,
    PointScore,
    TuningError,
    grid_ends,
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
        config_hash: the config hash of `clbench train BENCHMARK -m METHOD` with `overrides` and without the grid,
            with the fields that change no number at their defaults (`RunPlan.tuning_hash`: the continual
            evaluation is not part of it): the run config the chosen values are applied to.
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

    def command(self, benchmark: str | None = None, results: Path | None = None) -> str:
        """The `clbench tune` command that makes this choice: for `benchmark` as the user names it (a spec file; by
        default the benchmark's name), writing into `results` (left out: the default results folder)."""
        return tune_command(benchmark or self.benchmark, self.method, self.grid, self.rule, self.tuning_seed,
                            self.overrides, self.evaluation, results)


def tune_command(benchmark: str, method: str, grid: Sequence[str], rule: str = DEFAULT_RULE,
                 seed: int = DEFAULT_SEED, overrides: Sequence[str] = (), evaluation: str = EVALUATIONS[0],
                 results: Path | None = None) -> str:
    """`clbench tune BENCHMARK -m METHOD --grid ... [--set ...] [--rule ...] [--seed ...] --evaluation ...
    [--results ...]`, quoted for a shell (`benchmark` as given: a name or a spec file)."""
    parts = ["clbench tune", shlex.quote(benchmark), "-m", shlex.quote(method),
             *(f"--grid {shlex.quote(spec)}" for spec in grid), *(f"--set {shlex.quote(text)}" for text in overrides)]
    if rule != DEFAULT_RULE:
        parts.append(f"--rule {rule}")
    if seed != DEFAULT_SEED:
        parts.append(f"--seed {seed}")
    parts.append(f"--evaluation {evaluation}")  # always: the default depends on the scenario
    if results is not None:
        parts.append(f"--results {shlex.quote(str(results))}")
    return " ".join(parts)


def choose(rows: pd.DataFrame, benchmark: str, method: str, config_hash: str, grid: Sequence[str],
           rule: str = DEFAULT_RULE, evaluation: str = EVALUATIONS[0], seed: int = DEFAULT_SEED,
           overrides: Sequence[str] = ()) -> TunedChoice:
    """Score every grid point of `method` on validation (`score_points`) and choose one (`select`)."""
    points = score_points(rows, method, grid, rule, evaluation, seed, overrides)
    return TunedChoice(benchmark, method, config_hash, tuple(grid), rule, evaluation, seed, tuple(overrides),
                       tuple(points), select(points).values)


def grid_end_notes(choice: TunedChoice, special: Mapping[str, Collection[float]] | None = None) -> list[str]:
    """A note per grid key whose chosen value is the smallest or largest of its values (`grid_ends`, with each key's
    `special` values, which are no end): the best value may lie beyond the grid, so tune again with values past it."""
    return [f"{choice.method}: {key}={value} is the {side} value of its grid ({', '.join(values)}); the best value "
            f"may lie beyond the grid: tune again with values {'below' if side == 'lowest' else 'above'} {value}"
            for key, value, side, values in grid_ends(choice.grid, choice.chosen, special)]


def tuned_path(results_dir: Path, benchmark: str, method: str, config_hash: str) -> Path:
    """`<results>/<benchmark>/_tuned/<method>-<config hash>.yaml`, checked to lie inside `results_dir`."""
    return inside(results_dir, Path(results_dir) / benchmark / TUNED_FOLDER / f"{method}-{config_hash}.yaml")


def results_folder_of(path: Path) -> Path | None:
    """The results folder a tuned file lies in (`<results>/<benchmark>/_tuned/<file>`, as `tuned_path` places it),
    so that the command that makes it again writes it back there; None for a file elsewhere."""
    path = Path(path)
    return path.parents[2] if path.parent.name == TUNED_FOLDER and len(path.parents) > 2 else None


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes, as hex (what runs trained with `--tuned FILE` recorded before `tuned_sha256`)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def tuned_sha256(path: Path) -> str:
    """The identity of an intact tuned file, as runs trained with it record it (`tuned_sha256`): the sha256 of its
    fields (its checked `digest`), not of its bytes. A comment edited, or the file re-indented, leaves the choice and
    this identity as they were, so its runs stay attributed to it; a changed value is refused by `read_tuned`."""
    return _digest(_content(_parse_tuned(Path(path))))


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
          "# Do not edit its values: the digest covers every field, and a changed value is refused. Re-run the command "
          "below.\n")


def write_tuned(path: Path, choice: TunedChoice, overwrite: bool = False, benchmark: str | None = None) -> None:
    """Write the tuned file atomically (temporary file + rename); an existing file is kept unless `overwrite`.

    Its header names the command that makes it again: for `benchmark` as the user named it (a spec file), writing
    into the results folder the file lies in."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise TuningError(f"{path} exists; remove it first, or write the new choice elsewhere")
    content = _content(choice)
    text = yaml.safe_dump({**content, "digest": _digest(content)}, sort_keys=False, allow_unicode=True, width=120)
    atomic_write_bytes(path, (HEADER + f"# {choice.command(benchmark, results_folder_of(path))}\n" + text).encode())


def read_tuned(path: Path, benchmark: str, config_hash: str, method: str, overrides: Sequence[str] | None = None,
               *, argument: str | None = None, results: Path | None = None) -> TunedChoice:
    """The choice in a tuned file, after checking that it is intact and made for `benchmark`, `config_hash` and
    `method`; TuningError with one line naming the file, what differs and the command that makes the right one
    (with the `--set` options `overrides` of the run that asks, if given; else the file's). That command names the
    benchmark as the asking command did (`argument`: a spec file; default `benchmark`) and writes into `results`
    (default: the results folder the file lies in), so that it works when pasted.

    Intact: its digest matches its fields, its points are its grid's, in order, and its chosen values are the ones
    `select` picks from its stored scores.
    """
    argument = argument or benchmark
    results = results if results is not None else results_folder_of(Path(path))
    choice = _parse_tuned(Path(path), argument, results)
    # The method before the config hash: another method always has another config hash too; the method says why.
    wanted = {"benchmark": benchmark, "method": method, "config hash": config_hash}
    found = {"benchmark": choice.benchmark, "method": choice.method, "config hash": choice.config_hash}
    for what, value in wanted.items():
        if found[what] != value:
            order = " (give one --tuned file per method of -m, in the same order)" if what == "method" else ""
            sets = choice.overrides if overrides is None else tuple(overrides)
            raise TuningError(f"{path} is a tuned file for {what} {found[what]}, not {value}{order}; "
                              f"{_remake_advice(choice, argument, method, sets, results)}")
    return choice


def _remake_advice(choice: TunedChoice, argument: str, method: str, overrides: Sequence[str],
                   results: Path | None) -> str:
    """How to make the tuned file `method` needs: the `clbench tune` command of `choice`'s search for `method` (its
    grid without the keys of another method's section, which `tune -m METHOD` refuses; without any, the spec's
    default grid), or, when `method` then has no grid, that it needs `--grid` or no tuned file."""
    grid = [spec for spec in choice.grid if method == choice.method or _grid_owner(spec) != choice.method]
    if not grid and not _has_default_grid(argument, method, overrides):
        return (f"{method} has no default grid in {argument}: train {method} without --tuned, or tune it on a grid "
                f"of your own (--grid {method}.KEY=V1,V2)")
    command = tune_command(argument, method, grid, choice.rule, choice.tuning_seed, overrides, choice.evaluation,
                           results)
    return f"make the right one with `{command}`"


def _grid_owner(spec: str) -> str:
    """The section a `--grid` option's key belongs to: `ewc` for `ewc.lamb=...`, `training` for `training.lr=...`."""
    return parse_grid_spec(spec)[0].split(".", 1)[0]


def _has_default_grid(argument: str, method: str, overrides: Sequence[str]) -> bool:
    """Whether the benchmark's spec has a default grid for `method` (True when the spec cannot be read here: the
    command then says why itself)."""
    from clbench.spec import load_benchmark

    try:
        return bool(default_grid_options(load_benchmark(argument, list(overrides)), method))
    except ClbenchError:
        return True


def _parse_tuned(path: Path, argument: str | None = None, results: Path | None = None) -> TunedChoice:
    """The choice in a tuned file, checked to be intact; the commands in its messages name the benchmark as
    `argument` and write into `results` (default: the results folder the file lies in)."""
    results = results if results is not None else results_folder_of(path)
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
                          f"content); make it again with `{choice.command(argument, results)}`")
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
