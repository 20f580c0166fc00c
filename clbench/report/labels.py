"""The row label of every approach and config in the report's tables (torch-free): the method, plus what tells its
configs apart, plus the scenario when the runs shown are of several scenarios."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

import pandas as pd

from clbench.results import CLASS_LOSS_DEFAULT
from clbench.spec.fields import flatten
from clbench.spec.sections import DataSpec, NetworkSpec, TrainingSpec

SCENARIO_DEFAULT = "task"
# `--set` keys whose value a label names from a run's columns (the scenario, the class-scenario loss) or its
# hyper-parameters, never twice.
NAMED_BY_COLUMNS = ("data.scenario", "training.class_loss", "variant")
# Keys a config has only where they mean something (`class_loss`: the class scenario, or a scenario where some
# config of the method sets it), compared and named only among the configs that have them.
WHERE_PRESENT = ("class_loss",)
SECTIONS = {"data": DataSpec, "network": NetworkSpec, "training": TrainingSpec}
UNKNOWN_DEFAULT = "default"  # a `--set` key's value where no stored config says it (a run without run.json)


def method_labels(frame: pd.DataFrame,
                  configs: Mapping[str, Mapping[str, Any]] | None = None) -> dict[tuple[str, str], str]:
    """A label per (method, config hash): the method, plus what differs between that method's configs, plus its
    scenario (named first) whenever the configs of `frame` are of more than one scenario.

    What differs is taken from the hyper-parameters, then (while two configs still read the same) the scenario and
    variant, then `training.class_loss` (`class_loss`, in the class scenario and in any scenario where a config sets
    it), then the command's `--set` options, a key that a config does not set reading as its value there (from
    `configs`, the stored resolved config by config hash); a config that none of these tells apart is labelled by
    its config hash.
    """
    unique_configs = frame.drop_duplicates(["method", "config_hash"])
    mixed = unique_configs.apply(_scenario, axis=1).nunique() > 1 if not unique_configs.empty else False
    labels: dict[tuple[str, str], str] = {}
    for method, group in unique_configs.groupby("method", sort=True):
        labels |= {(str(method), config): label
                   for config, label in _labels_of_method(str(method), group, configs or {}, mixed).items()}
    return labels


def _labels_of_method(method: str, group: pd.DataFrame, configs: Mapping[str, Mapping[str, Any]],
                      mixed: bool) -> dict[str, str]:
    """The label of each config (by hash) of one method (`method_labels`); `mixed`: the runs shown are of several
    scenarios, so every label names its scenario, first."""
    scenarios = {row.config_hash: _scenario(row) for row in group.itertuples()}
    loss_scenarios = _loss_scenarios(group)
    described = {row.config_hash: _config_description(row, loss_scenarios) for row in group.itertuples()}
    _fill_defaults(described, configs)
    details = _differing(described) if len(group) > 1 else {config: [] for config in described}
    named = {config: [f"scenario={scenarios[config]}"] if mixed else [] for config in details}
    texts = {config: ", ".join([*named[config], *(f"{key}={_label_value(value)}" for key, value in detail
                                                  if not (mixed and key == "scenario"))])
             for config, detail in details.items()}
    labels = {}
    for config, text in texts.items():
        if text and list(texts.values()).count(text) == 1:
            labels[config] = f"{method} ({text})"
        elif len(texts) == 1:
            labels[config] = method
        else:
            labels[config] = f"{method} ({', '.join([*named[config], f'config {config}'])})"
    return labels


def _scenario(row: Any) -> str:
    scenario = getattr(row, "scenario", None)
    return scenario if isinstance(scenario, str) else SCENARIO_DEFAULT


def _loss_scenarios(group: pd.DataFrame) -> set[str]:
    """The scenarios in which a config's `class_loss` is described: the class scenario (where it changes the loss),
    and any scenario where a config of the method sets a value other than the default."""
    found = {"class"}
    for row in group.itertuples():
        loss = getattr(row, "class_loss", None)
        if isinstance(loss, str) and loss != CLASS_LOSS_DEFAULT:
            found.add(_scenario(row))
    return found


def _config_description(row: Any, loss_scenarios: set[str]) -> list[dict[str, Any]]:
    """(hyper-parameters, scenario and variant, class loss, `--set` options) of a config as dicts, in the order
    labels look at them."""
    hyperparameters = json.loads(row.hyperparameters) if isinstance(row.hyperparameters, str) else {}
    variant = getattr(row, "variant", None)
    identity = {"scenario": _scenario(row)} | ({"variant": variant} if isinstance(variant, str) else {})
    class_loss = getattr(row, "class_loss", None)
    class_loss = class_loss if isinstance(class_loss, str) else CLASS_LOSS_DEFAULT
    loss = {"class_loss": class_loss} if _scenario(row) in loss_scenarios else {}
    return [hyperparameters, identity, loss, _settings(row)]


def _settings(row: Any) -> dict[str, Any]:
    """The run's `--set` options as key -> value text, without the keys other sources name (`NAMED_BY_COLUMNS`,
    the approach's own `METHOD.KEY`)."""
    overrides_text = getattr(row, "overrides", None)
    overrides = json.loads(overrides_text) if isinstance(overrides_text, str) else []
    settings = dict(item.split("=", 1) for item in overrides if "=" in item)
    return {key: value for key, value in settings.items()
            if key not in NAMED_BY_COLUMNS and not key.startswith(f"{row.method}.")}


def _fill_defaults(described: dict[str, list[dict[str, Any]]], configs: Mapping[str, Mapping[str, Any]]) -> None:
    """Give every config each `--set` key that some config of the method sets, with the value its runs used
    (`_effective_text`), so that a key reads as a value, never as missing, and never as an option the method's own
    section overrode."""
    keys = {key for description in described.values() for key in description[-1]}
    for config, description in described.items():
        settings = description[-1]
        description[-1] = {key: _effective_text(key, settings.get(key), configs.get(config)) for key in sorted(keys)}


def _effective_text(key: str, given: str | None, config: Mapping[str, Any] | None) -> str:
    """The value of a `--set` key that a config's runs used: a section key (`training.lr`) from its stored resolved
    config (`_default_text`: the approach's own `training:` section's value where it overrides the option), else
    the option's text as given, else `_default_text`'s."""
    if isinstance(config, Mapping) and key.partition(".")[0] in SECTIONS:
        return _default_text(key, config)
    return given if given is not None else _default_text(key, config)


def _default_text(key: str, config: Mapping[str, Any] | None) -> str:
    """The value text of a `--set` key that a config does not set: from its stored resolved config, else (a field
    left out of the config while it has its default) the spec's default, else `UNKNOWN_DEFAULT`."""
    flat = flatten(config) if isinstance(config, Mapping) else {}
    if key in flat:
        return _label_value(flat[key])
    section, _, name = key.partition(".")
    spec_class = SECTIONS.get(section) if config is not None else None
    for spec_field in dataclasses.fields(spec_class) if spec_class is not None else ():
        if spec_field.name == name and spec_field.default is not dataclasses.MISSING:
            return _label_value(spec_field.default)
    return UNKNOWN_DEFAULT


def _label_value(value: Any) -> str:
    """A value as a label shows it, as `--set` would take it: `null`, `true`, `[400,400]`, `0.05`."""
    if isinstance(value, str):
        return value
    if value is None or isinstance(value, (bool, list, tuple)):
        return json.dumps(list(value) if isinstance(value, tuple) else value, separators=(",", ":"))
    return str(value)


def _differing(described: dict[str, list[dict[str, Any]]]) -> dict[str, list[tuple[str, Any]]]:
    """Per config, the (key, value) pairs that differ between configs, source after source until all differ."""
    details: dict[str, list[tuple[str, Any]]] = {config: [] for config in described}
    for source in range(len(next(iter(described.values())))):
        parts = {config: description[source] for config, description in described.items()}
        keys = {key for part in parts.values() for key in part}
        differing = sorted(k for k in keys if len({json.dumps(p.get(k), default=str) for p in parts.values()
                                                   if k in p or k not in WHERE_PRESENT}) > 1)
        for config, part in parts.items():
            details[config] += [(key, part.get(key)) for key in differing if key in part or key not in WHERE_PRESENT]
        if len({json.dumps(detail, default=str) for detail in details.values()}) == len(details):
            break
    return details
