"""The `clbench train` commands the report prints (torch-free): one function, `train_command`, builds each from the
`--set` options a run stored, so that what it trains pairs with the runs it is printed for: a missing reference,
a run that stopped or is damaged, more seeds or another approach for `--compare`."""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from clbench.report.formatting import format_seeds

if TYPE_CHECKING:
    from clbench.report.loading import Results

GLOBAL_SECTIONS = ("data", "network", "training", "variant")  # the options that concern every approach of a run


def train_command(results: Results, methods: Sequence[str], seeds: Iterable[int] | str,
                  overrides: Sequence[str]) -> str:
    """`clbench train BENCHMARK -m METHODS --seeds SEEDS --set ... --results FOLDER`, quoted for a shell, into the
    report's results folder, naming the benchmark as the report did (a spec file as given).

    `overrides`: the `--set` options a run stored (its run.json or rows); those of approaches other than `methods`
    are left out (a reference needs none of them).
    """
    seed_text = seeds if isinstance(seeds, str) else format_seeds(sorted(set(int(seed) for seed in seeds)))
    kept = [text for text in overrides if option_section(text) in (*GLOBAL_SECTIONS, *methods)]
    parts = [f"clbench train {results.command_name} -m {shlex.quote(','.join(methods))} --seeds {seed_text}",
             *(f"--set {shlex.quote(text)}" for text in kept),
             f"--results {shlex.quote(str(results.results_dir))}"]
    return " ".join(parts)


def stored_overrides(value: Any) -> list[str] | None:
    """A run's `--set` options as stored: a list (run.json) or its JSON text (the rows' `overrides`); None when
    unknown."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return [str(text) for text in value] if isinstance(value, list) else None


def option_section(text: str) -> str:
    """The section a `--set` option writes to: `training` for `training.lr=0.1`, `hat` for `hat.smax=25` and for
    `approaches.hat.smax=25`."""
    parts = text.split("=", 1)[0].split(".")
    return parts[1] if parts[0] == "approaches" and len(parts) > 1 else parts[0]


def label_commands(results: Results, labels: Sequence[str], seeds: str) -> list[str]:
    """The `train_command`s that make `seeds` of each row label's approach with its runs' options (those of its
    first run by seed): one command for the labels whose runs share their global options (`GLOBAL_SECTIONS`),
    each approach's own options kept."""
    groups: dict[tuple[str, ...], tuple[list[str], list[str]]] = {}
    for label in labels:
        runs = sorted((run for run in results.info.values() if run["label"] == label), key=lambda run: run["seed"])
        method = str(runs[0]["method"])
        options = stored_overrides(runs[0].get("overrides")) or []
        shared = tuple(text for text in options if option_section(text) in GLOBAL_SECTIONS)
        methods, own = groups.setdefault(shared, ([], []))
        if method not in methods:
            methods.append(method)
        own += [text for text in options if option_section(text) == method and text not in own]
    return [train_command(results, methods, seeds, [*shared, *own]) for shared, (methods, own) in groups.items()]
