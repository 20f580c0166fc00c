"""Resolving a spec's approach sections against the registry: `resolve` gives the class, its validated
hyper-parameters and its effective training protocol (`ResolvedApproach`); every other approach section and every
default grid (`grids:`) of the spec is validated on the way, each value within its domain
(`clbench.approaches.domains`: its field's, then the approach's `hyperparameter_problem` against the other fields
and the benchmark). `refusal` says why an approach cannot run a spec (the one rule of
`clbench.approaches.refusals.approach_refusal`, then a default hyper-parameter that does not fit the benchmark), and
`resolve` refuses with its message.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass, replace
from typing import Any

from clbench.approaches.base import Approach
from clbench.approaches.datatypes import Hyperparameters
from clbench.approaches.domains import domain_refusal, given, hyperparameter_problem
from clbench.approaches.refusals import Refusal, approach_refusal
from clbench.approaches.registry import REGISTRY, approach_names, ensure_loaded, lookup, reload_spec
from clbench.errors import SpecError
from clbench.spec import (
    BenchmarkSpec,
    TrainingSpec,
    check_approach_sections,
    ignored_class_loss,
    scenario_training,
    without_continual_evaluation,
)
from clbench.spec.fields import build, identity_dict, origin_of, to_dict
from clbench.spec.grid import GridAxis, value_text
from clbench.spec.sections import check_optimizer, check_realtime

__all__ = ["ResolvedApproach", "check_default_grids", "protocol", "protocol_notes", "refusal", "resolve"]


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
            _build(spec, other, asked=False)  # a body, scenario or protocol that does not suit it refuses only its runs
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
    """The body, scenario and protocol refusals, then a default hyper-parameter that does not fit the benchmark."""
    refused = approach_refusal(resolved.cls, spec.network, spec.data, resolved.training, resolved.hyperparameters)
    if refused is not None:
        return refused
    problem = hyperparameter_problem(resolved.cls, resolved.hyperparameters, spec)
    return None if problem is None else domain_refusal(problem, resolved.name, resolved.hyperparameters)


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
        typed = _typed_value(_build(point, method, asked=False), path)  # its values, not the protocol
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


def _build(spec: BenchmarkSpec, method: str, asked: bool = True) -> ResolvedApproach:
    """`method`'s section and protocol, validated (whether the approach can run the spec is `refusal`'s question,
    asked for the method resolved, not for the other sections and default grids `resolve` validates: pathnet's
    section must not refuse `-m sgd` an online protocol). Its optimizer keys are checked against each other only
    for a method `asked` (the one resolved): another method's section refuses only its own runs. The protocol is
    as it acts: `class_loss` as in the spec's scenario (`scenario_training`), and a key the approach ignores
    (`Approach.ignores_training`) at a value no option changes (`_ignored_values`), so that an option that changes
    none of its numbers makes no new configuration."""
    cls = lookup(method)
    section = spec.approach_section(method)
    training_overrides = section.pop("training", None) or {}
    where = f"approaches.{method}"
    if not isinstance(training_overrides, dict):
        raise SpecError(f"{spec.source}: `{where}.training` must be a mapping of training keys, e.g. "
                        f"{{max_epochs: 50}}")
    hyperparameters = build(cls.hyperparameters_class, section, where=where, source=spec.source,
                            origins=spec.origins)
    ignored_given = _given_options(spec, method, cls.ignores_hyperparameters) if asked else []
    if ignored_given:
        hyperparameters = _without_ignored_options(spec, method, cls, hyperparameters, ignored_given)
    merged = {**to_dict(spec.training), **training_overrides}
    training = build(TrainingSpec, merged, where=f"{where}.training", source=spec.source,
                     origins=spec.origins)
    training = _applicable(training, training_overrides)
    if asked:
        check_optimizer(training, f"{where}.training",
                        origin_of(f"{where}.training.momentum", spec.source, spec.origins))
        given_at = [origin_of(key, spec.source, spec.origins) for key in (f"{where}.training.realtime",
                                                                          "training.realtime")]
        check_realtime(training, f"{where}.training", next((o for o in given_at if o != spec.source), spec.source))
    problem = hyperparameter_problem(cls, hyperparameters, spec)  # the domain against other fields and the benchmark
    if problem is not None and given(spec, method, problem.key):
        raise SpecError(domain_refusal(problem, method, hyperparameters).message(spec.source, spec.origins))
    acting = scenario_training(training, spec.data.scenario)
    fixed = _ignored_values(spec, method, cls.ignores_training) if asked and cls.ignores_training else None
    if fixed is not None:  # the identity of the run asked: not for the other sections validated
        acting = replace(acting, **{key: getattr(fixed, key) for key in cls.ignores_training})
    return ResolvedApproach(cls, hyperparameters, acting)


def _ignored_values(spec: BenchmarkSpec, method: str, ignored: tuple[str, ...]) -> TrainingSpec | None:
    """Where the training keys an approach ignores (`ignored`) take their values in its resolved protocol, so that
    no option that changes none of its numbers changes its config hash: on a shipped benchmark, the shipped spec's
    values for its name and variant (wherever a value was written: a spec printed by `clbench spec --set ...`
    resolves as the options it bakes in); on another spec, the spec file's values without the command's options
    (None when no option sets one of the keys: the spec's own values stand). Stored runs keep their hashes."""
    shipped = _shipped_training(spec.name, spec.variant, method)
    if shipped is not None:
        return shipped
    keys = [full for key in ignored for full in (f"training.{key}", f"approaches.{method}.training.{key}")]
    if not any(_given_by_option(spec, full) for full in keys):
        return None
    unset = _without_options(spec)
    return TrainingSpec() if unset is None else _method_training(unset, method)


def _given_by_option(spec: BenchmarkSpec, key: str) -> bool:
    """True when a command option (`--set`, `--grid`) gave the spec key `key` or a section above it."""
    return any(key == given or key.startswith(f"{given}.") for given in spec.origins)


def _without_options(spec: BenchmarkSpec) -> BenchmarkSpec | None:
    """The spec file (with its variant) as written, without the command's options; None if it cannot be read."""
    from clbench.errors import ClbenchError
    from clbench.spec import load_benchmark

    try:
        return load_benchmark(spec.source, [f"variant={spec.variant}"] if spec.variant else [])
    except (ClbenchError, OSError):
        return None


def _given_options(spec: BenchmarkSpec, method: str, keys: tuple[str, ...]) -> list[str]:
    """The keys of `keys` (hyper-parameters of `method`) that a command option (`--set`, `--grid`) gave."""
    return [key for key in keys if _given_by_option(spec, f"approaches.{method}.{key}")]


def _without_ignored_options(spec: BenchmarkSpec, method: str, cls: type[Approach], hyperparameters: Any,
                             given: list[str]) -> Any:
    """`hyperparameters` with the keys in `given` (ones the approach ignores, `Approach.ignores_hyperparameters`,
    that an option gave) back at the spec's own value (the spec without the command's options; the default where it
    has none), so that an option that changes none of the approach's numbers makes no new configuration. Stored runs
    keep their hashes."""
    from clbench.errors import ClbenchError

    unset, own = _without_options(spec), cls.hyperparameters_class()
    if unset is not None:
        section = {key: value for key, value in unset.approach_section(method).items() if key != "training"}
        try:
            own = build(cls.hyperparameters_class, section, where=f"approaches.{method}", source=unset.source)
        except ClbenchError:
            pass  # the file's own section is invalid without the options: the defaults
    return replace(hyperparameters, **{key: getattr(own, key) for key in given})


@functools.lru_cache(maxsize=64)
def _shipped_training(name: str, variant: str | None, method: str) -> TrainingSpec | None:
    """The protocol of `method` on the shipped benchmark `name` (with `variant`); None when clbench ships no
    benchmark of that name (or not that variant). Cached: shipped specs are package data."""
    from clbench.spec import benchmark_names, load_benchmark

    if name not in benchmark_names():
        return None
    try:
        shipped = load_benchmark(name, [f"variant={variant}"] if variant else [])
    except SpecError:
        return None
    return _method_training(shipped, method)


def _method_training(spec: BenchmarkSpec, method: str) -> TrainingSpec:
    """The spec's `training` with `method`'s own `training:` section over it, validated."""
    own = spec.approach_section(method).get("training")
    return build(TrainingSpec, {**to_dict(spec.training), **(own if isinstance(own, dict) else {})},
                 where=f"approaches.{method}.training", source=spec.source)


def _applicable(training: TrainingSpec, own: dict[str, Any]) -> TrainingSpec:
    """The merged protocol with a global key that the approach's own optimizer has no use for left out: the
    benchmark's (or `--set training.momentum`'s) momentum under an approach section's own `optimizer: adam` (Adam
    has no momentum; `protocol_notes` says so). A momentum in the approach's own section stays, to be refused."""
    if training.optimizer == "adam" and "optimizer" in own and "momentum" not in own and training.momentum:
        return replace(training, momentum=TrainingSpec.momentum)
    return training


def protocol(spec: BenchmarkSpec, method: str) -> TrainingSpec:
    """The protocol `method` trains with on `spec` (`resolve`'s, without validating the other sections): the spec's
    `training` with the approach's own section over it, as it acts (`_build`). SpecError if its section is
    invalid."""
    return _build(spec, lookup(method).name).training


def protocol_notes(spec: BenchmarkSpec, method: str) -> list[str]:
    """What `method` makes of the global training options the command gave (`--set training.KEY=...`, `--grid`),
    one line each: a key the approach's own `training:` section sets (its value is the one it trains with), a
    momentum its own optimizer has no use for, a key the approach ignores (`Approach.ignores_training`), and a
    `class_loss` the scenario ignores (`ignored_class_loss`). Empty when every option applies as given."""
    cls = lookup(method)
    own = spec.approach_section(cls.name).get("training")
    own = own if isinstance(own, dict) else {}
    effective = _build(spec, cls.name, asked=False).training
    notes, ignored = [], []
    for key in sorted(key.removeprefix("training.") for key in spec.origins if key.startswith("training.")):
        given = spec.origins[f"training.{key}"]
        if key in cls.ignores_training:
            ignored.append(f"`{given}`")
        elif key == "class_loss" and spec.data.scenario != "class":
            continue  # `ignored_class_loss` says it
        elif key in own and getattr(effective, key) != getattr(spec.training, key):
            section = origin_of(f"approaches.{cls.name}.training.{key}", spec.source, spec.origins)
            notes.append(f"{cls.name}: `{given}` does not apply to {cls.name}: its own section "
                         f"`approaches.{cls.name}.training.{key}` ({section}) sets it; {cls.name} trains with "
                         f"training.{key}={_shown(getattr(effective, key))}")
        elif key == "momentum" and effective.momentum != spec.training.momentum:
            notes.append(f"{cls.name}: `{given}` does not apply to {cls.name}: its own section sets "
                         f"training.optimizer {effective.optimizer}, which has no momentum; {cls.name} trains with "
                         f"training.momentum={_shown(effective.momentum)}")
    prefix = f"approaches.{cls.name}.training."
    ignored += [f"`{given}`" for key, given in sorted(spec.origins.items())
                if key.startswith(prefix) and key.removeprefix(prefix) in cls.ignores_training]
    if ignored:
        notes.append(f"{cls.name}: {', '.join(ignored)} {'has' if len(ignored) == 1 else 'have'} no effect on "
                     f"{cls.name}: {cls.ignores_training_reason}; its runs are those without "
                     f"{'it' if len(ignored) == 1 else 'them'} (the same config hash)")
    inert = [f"`{spec.origins[f'approaches.{cls.name}.{key}']}`" for key in cls.ignores_hyperparameters
             if f"approaches.{cls.name}.{key}" in spec.origins]
    if inert:
        notes.append(f"{cls.name}: {', '.join(inert)} {'has' if len(inert) == 1 else 'have'} no effect on "
                     f"{cls.name}: {cls.ignores_hyperparameters_reason}; its runs are those without "
                     f"{'it' if len(inert) == 1 else 'them'} (the same config hash)")
    class_loss = ignored_class_loss(spec, cls.name)
    return [*notes, *([class_loss] if class_loss else [])]


def _shown(value: Any) -> str:
    """A training value as `--set` takes it: `adam`, `0.001`, `false`."""
    return value if isinstance(value, str) else value_text(value)
