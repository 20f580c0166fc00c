"""Resolving a spec's approach sections against the registry: `resolve` gives the class, its validated
hyper-parameters and its effective training protocol (`ResolvedApproach`); every other approach section and every
default grid (`grids:`) of the spec is validated on the way. `refusal` says why an approach cannot run a spec (the
one rule of `clbench.approaches.refusals.approach_refusal`), and `resolve` refuses with its message.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from typing import Any

from clbench.approaches.base import Approach
from clbench.approaches.datatypes import Hyperparameters
from clbench.approaches.refusals import Refusal, approach_refusal
from clbench.approaches.registry import REGISTRY, approach_names, ensure_loaded, lookup, reload_spec
from clbench.errors import SpecError
from clbench.spec import (
    BenchmarkSpec,
    TrainingSpec,
    check_approach_sections,
    scenario_training,
    without_continual_evaluation,
)
from clbench.spec.fields import build, identity_dict, origin_of, to_dict
from clbench.spec.grid import GridAxis, value_text
from clbench.spec.sections import check_optimizer

__all__ = ["ResolvedApproach", "check_default_grids", "refusal", "resolve"]


@dataclass(frozen=True)
class ResolvedApproach:
    """An approach class with its validated hyper-parameters and its effective training protocol."""

    cls: type[Approach]
    hyperparameters: Hyperparameters
    training: TrainingSpec

    @property
    def name(self) -> str:
        return self.cls.name

    def config(self) -> dict[str, Any]:
        """Hyper-parameters and protocol (without the `added` hyper-parameter and training fields at their default,
        as `run_config`'s data and network: stored runs keep their hashes); the approach's `revision` too once its
        algorithm has changed. `eval_subset` without `eval_every` does nothing, and is left out like its default."""
        revision = {"revision": self.cls.revision} if self.cls.revision else {}
        measured = self.training if self.training.eval_every else without_continual_evaluation(self.training)
        return {"hyperparameters": identity_dict(self.hyperparameters), "training": identity_dict(measured),
                **revision}

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle by name plus how to import a plugin again, so a spawned worker can rebuild it."""
        return (_rebuild_resolved, (self.name, reload_spec(self.name), to_dict(self.hyperparameters),
                                    self.training))


def _rebuild_resolved(name: str, reload: str | None, hyperparameters: dict[str, Any],
                      training: TrainingSpec) -> ResolvedApproach:
    """Unpickle a `ResolvedApproach` (in a worker: register its plugin first)."""
    if name not in REGISTRY:
        ensure_loaded(reload)
    cls = lookup(name)
    return ResolvedApproach(cls, build(cls.hyperparameters_class, hyperparameters, where=f"approaches.{name}",
                                       source="(worker)"), training)


def resolve(spec: BenchmarkSpec, method: str, check_grids: bool = True, refuse: bool = True) -> ResolvedApproach:
    """Validate the spec's section for `method` (its `training` sub-section overrides the protocol).

    `method` is a registered name or a plugin's method spec (`file.py:Class`, `package.module:Class`). Every other
    approach section is validated too (names against the registry, keys against each dataclass), so that a typo in
    a section of an approach that is not run, e.g. from `--grid`, is an error as well. So is every default grid
    (`grids:`): each key must be a key of its approach and each value valid for it, refused with the message
    `--set` gives for that key and value, and no two values may be the same once read (`1000`, `1e3`). With
    `refuse`, an approach that cannot run the spec (`refusal`: its body, scenario or protocol) is refused in one
    line; without, its section is resolved all the same (`clbench spec` prints it).
    """
    method = lookup(method).name
    check_approach_sections(spec, approach_names())
    for other in spec.approaches:
        if other != method:
            _build(spec, other)  # a body, scenario or protocol that does not suit it refuses only its runs
    if check_grids:
        check_default_grids(spec)
    resolved = _build(spec, method)
    refused = _refusal(spec, resolved) if refuse else None
    if refused is not None:
        raise SpecError(refused.message(spec.source, spec.origins))
    return resolved


def refusal(spec: BenchmarkSpec, method: str) -> Refusal | None:
    """Why approach `method` cannot run benchmark `spec` (its body, its scenario, the approach's resolved protocol),
    or None if it can: what `clbench list` shows and `train` and `tune` refuse with (`resolve`), word for word.
    SpecError if `method`'s own section is invalid."""
    return _refusal(spec, _build(spec, lookup(method).name))


def _refusal(spec: BenchmarkSpec, resolved: ResolvedApproach) -> Refusal | None:
    return approach_refusal(resolved.cls, spec.network, spec.data, resolved.training, resolved.hyperparameters)


def check_default_grids(spec: BenchmarkSpec) -> None:
    """Every default grid of the spec (`grids:`) valid, as `resolve` checks it: for a caller that resolves many
    methods of one spec, once (`resolve(..., check_grids=False)` then), since it builds one approach per value."""
    for grid_method, axes in spec.grids.items():
        for axis in axes:
            _check_grid_axis(spec, grid_method, axis)


def _check_grid_axis(spec: BenchmarkSpec, method: str, axis: GridAxis) -> None:
    """Each value of one default-grid key, validated as `--set METHOD.KEY=VALUE` would be; distinct once typed."""
    name = f"grids.{method}.{axis.key}"
    where = origin_of(name, spec.source, spec.origins)
    path = axis.key.split(".")
    seen: list[tuple[Any, str]] = []
    for value in axis.values:
        text = value_text(value)
        origin = f"{where} ({name}: {text})"
        section = copy.deepcopy(spec.approach_section(method))
        node = section
        for depth, part in enumerate(path[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise SpecError(f"{origin}: `{'.'.join(['approaches', method, *path[:depth + 1]])}` is not a section")
            node = child
        node[path[-1]] = value
        point = replace(spec, approaches={**spec.approaches, method: section},
                        origins={**spec.origins, f"approaches.{method}.{axis.key}": origin})
        typed = _typed_value(_build(point, method), path)
        earlier = next((shown for other, shown in seen if other == typed), None)
        if earlier is not None:
            raise SpecError(f"{where}: `{name}`: {earlier} and {text} are the same value ({typed!r}); give each "
                            f"value once")
        seen.append((typed, text))


def _typed_value(resolved: ResolvedApproach, path: list[str]) -> Any:
    """The validated value at a grid key: a hyper-parameter, or `training.KEY` of the approach's protocol."""
    node: Any = resolved.training if path[0] == "training" else resolved.hyperparameters
    for part in path[1:] if path[0] == "training" else path:
        node = getattr(node, part)
    return node


def _build(spec: BenchmarkSpec, method: str) -> ResolvedApproach:
    """`method`'s section and protocol, validated (whether the approach can run the spec is `refusal`'s question,
    asked for the method resolved, not for the other sections and default grids `resolve` validates: pathnet's
    section must not refuse `-m sgd` an online protocol). The protocol is as it acts in the spec's scenario
    (`scenario_training`: `class_loss` outside the class scenario reads as its default)."""
    cls = lookup(method)
    section = spec.approach_section(method)
    training_overrides = section.pop("training", None) or {}
    where = f"approaches.{method}"
    if not isinstance(training_overrides, dict):
        raise SpecError(f"{spec.source}: `{where}.training` must be a mapping of training keys, e.g. "
                        f"{{max_epochs: 50}}")
    hyperparameters = build(cls.hyperparameters_class, section, where=where, source=spec.source,
                            origins=spec.origins)
    merged = {**to_dict(spec.training), **training_overrides}
    training = build(TrainingSpec, merged, where=f"{where}.training", source=spec.source,
                     origins=spec.origins)
    check_optimizer(training, f"{where}.training", origin_of(f"{where}.training", spec.source, spec.origins))
    return ResolvedApproach(cls, hyperparameters, scenario_training(training, spec.data.scenario))
