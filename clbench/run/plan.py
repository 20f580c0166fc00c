"""Planning runs: what a command asks for, resolved into `RunPlan`s, and the identity of each run.

`plan_runs` makes one `RunPlan` per method x seed of a benchmark, with its resolved config (`run_config`), config
hash, data and reference hashes (`data_identity`, `reference_identity`) and results folder; `check_shipped_name`
refuses a spec file that takes a shipped benchmark's name but would make other runs. Nothing here trains.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from clbench.approaches.registry import code_identity
from clbench.approaches.resolution import ResolvedApproach, check_default_grids, protocol_notes, resolve
from clbench.errors import SpecError
from clbench.results import run_directory
from clbench.spec import (
    BenchmarkSpec,
    benchmarks_dir,
    scenario_training,
    without_continual_evaluation,
)
from clbench.spec.fields import flatten, identity_dict, stable_hash

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunPlan:
    """One run: a benchmark spec, an approach with its resolved hyper-parameters, and a seed."""

    spec: BenchmarkSpec
    approach: ResolvedApproach
    seed: int
    overrides: tuple[str, ...]
    config: dict[str, Any]
    config_hash: str
    data_hash: str
    run_dir: Path
    reference_hash: str = ""
    # `clbench train --tuned FILE`: the tuned file's sha256 and tuning seed, recorded in every row and in run.json;
    # not part of the config (a tuned run and the same values given by hand are one run).
    tuned_sha256: str | None = None
    tuned_seed: int | None = None

    @property
    def method(self) -> str:
        return self.approach.name

    @property
    def tuning_hash(self) -> str:
        """The config hash of this run with the protocol's fields that change no number at their defaults
        (`without_continual_evaluation`): what a tuned file is made for and must match, so that a run measured
        with the continual evaluation takes the tuned file of the same run without it."""
        approach = replace(self.approach, training=without_continual_evaluation(self.approach.training))
        return stable_hash(run_config(self.spec, approach))

    @property
    def run_id(self) -> str:
        return f"{self.spec.name}/{self.method}/{self.config_hash}/seed-{self.seed}"


def run_config(spec: BenchmarkSpec, approach: ResolvedApproach) -> dict[str, Any]:
    """The resolved config that identifies a run (everything but the seed and the device).

    A plugin's config includes `code` (`clbench.approaches.registry.code_identity`): an edited plugin makes new runs,
    never mixed with the old ones. Built-ins have no `code` key, so their config hashes are unchanged.
    """
    code = code_identity(approach.name)
    return {"benchmark": spec.name, "variant": spec.variant, "data": identity_dict(spec.data),
            "network": identity_dict(spec.network), "method": approach.name, **approach.config(),
            **own_datasets_identity(spec), **({"code": code} if code is not None else {})}


def data_identity(spec: BenchmarkSpec) -> str:
    """Hash of what the references must share with a run: the benchmark and its data (tasks, splits)."""
    return stable_hash({"benchmark": spec.name, "data": identity_dict(spec.data), **own_datasets_identity(spec)})


def reference_identity(spec: BenchmarkSpec) -> str:
    """Hash of what a run's `joint` reference must share with it: the benchmark's data, network and protocol.

    The protocol is the spec's `training` after `--set` (the benchmark's), not an approach's own `training:`
    section: HAT's 50 epochs on mnist2 compare against the joint of the benchmark's protocol. Two runs with the
    same reference hash and seed are measured against the same A_J. (The `random` reference trains nothing and is
    matched on the data hash and the seed alone.)
    """
    return stable_hash({"benchmark": spec.name, "data": identity_dict(spec.data),
                        "network": identity_dict(spec.network),
                        "training": identity_dict(without_continual_evaluation(scenario_training(spec.training,
                                                                                                 spec.data.scenario))),
                        **own_datasets_identity(spec)})


def own_datasets_identity(spec: BenchmarkSpec) -> dict[str, Any]:
    """`{"datasets": {name: {format, content_hash}}}` of the spec's own data sets in use; {} if none (so the
    hashes of built-in benchmarks stay as they were). Changed content changes the run's identity."""
    from clbench.data.custom import content_hash, custom_datasets

    own = custom_datasets(spec)
    if not own:
        return {}
    return {"datasets": {name: {"format": dataset.format, "content_hash": content_hash(dataset)}
                         for name, dataset in sorted(own.items())}}


def check_shipped_name(spec: BenchmarkSpec, methods: Sequence[str]) -> None:
    """SpecError if a spec file takes a shipped benchmark's name but its runs of `methods` would differ from the
    shipped benchmark's (with the same `--set` options): they would be stored, reported and compared with the
    paper as that benchmark. A spec file that resolves to the shipped definition (`clbench spec mnist2 > my.yaml`)
    is accepted: its runs are the shipped benchmark's runs."""
    shipped_file = benchmarks_dir() / f"{spec.name}.yaml"
    if not shipped_file.is_file() or Path(spec.source).resolve() == shipped_file.resolve():
        return
    shipped = _shipped_counterpart(spec)
    for method in dict.fromkeys(methods):
        ours = flatten(run_config(spec, resolve(spec, method, check_grids=False)))  # grids: checked by plan_runs
        theirs = flatten(run_config(shipped, resolve(shipped, method, check_grids=False, refuse=False)))
        differing = [key for key in sorted(set(ours) | set(theirs)) if ours.get(key) != theirs.get(key)]
        if differing:
            shown = "; ".join(f"{key}={json.dumps(ours.get(key))} (shipped: {json.dumps(theirs.get(key))})"
                              for key in differing[:6]) + ("; ..." if len(differing) > 6 else "")
            raise SpecError(f"{spec.source}: `name: {spec.name}` is a shipped benchmark's name, but this spec's "
                            f"{method} runs differ from {spec.name}'s: {shown}; they would be stored and reported "
                            f"as {spec.name}'s: rename the benchmark (e.g. `name: my-{spec.name}`)")


def _shipped_counterpart(spec: BenchmarkSpec) -> BenchmarkSpec:
    """The shipped spec of `spec.name` with the same `--set` options (and variant), or as shipped if they do not
    apply to it."""
    from clbench.spec import load_benchmark

    options = [*spec.overrides, *([f"variant={spec.variant}"] if spec.variant else [])]
    try:
        return load_benchmark(spec.name, options)
    except SpecError:
        return load_benchmark(spec.name)


def plan_runs(spec: BenchmarkSpec, methods: Sequence[str], seeds: Sequence[int], results_dir: Path,
              overrides: Sequence[str] = ()) -> list[RunPlan]:
    """Resolve every (method, seed) of a command; unknown methods, bad sections and an approach the spec refuses
    (`clbench.approaches.resolution.refusal`: its body, scenario or protocol) fail before any work. What a method
    makes of the command's global training options (its own section's value, a key it ignores, a `class_loss` the
    scenario ignores: `protocol_notes`) is warned about, once per line."""
    plans = []
    check_default_grids(spec)  # once for the spec, not once per method
    approaches = [resolve(spec, method, check_grids=False) for method in dict.fromkeys(methods)]
    for note in dict.fromkeys(note for method in dict.fromkeys(methods) for note in protocol_notes(spec, method)):
        logger.warning(note)
    for method, approach in zip(dict.fromkeys(methods), approaches):
        config = run_config(spec, approach)
        config_hash = stable_hash(config)
        for seed in seeds:
            run_dir = run_directory(results_dir, spec.name, method, config_hash, seed)
            plans.append(RunPlan(spec, approach, seed, tuple(overrides), config, config_hash,
                                 data_identity(spec), run_dir, reference_identity(spec)))
    return plans


def unique_plans(plans: Iterable[RunPlan]) -> list[RunPlan]:
    """The plans in order, each run folder once (a grid or `--with-references` may name a run twice)."""
    unique: dict[Path, RunPlan] = {}
    for plan in plans:
        unique.setdefault(plan.run_dir, plan)
    return list(unique.values())
