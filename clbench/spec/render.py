"""A resolved benchmark spec written back as YAML, each field commented with its dataclass doc (`clbench spec`).

The text loads back into the same resolved spec: same data, network and training values, same variant name,
same approach hyper-parameters, hence the same config hashes, and the same default grids (`grids:`, each key's
values with their `source:`). Torch-free: the approaches' validated
hyper-parameters are passed in by the caller.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import yaml

from clbench.spec.fields import build, to_dict
from clbench.spec.sections import BenchmarkSpec, TrainingSpec

INDENT = "  "


def flow(value: Any) -> str:
    """One value as inline YAML (lists in brackets, strings quoted only when YAML needs it)."""
    if isinstance(value, tuple):
        value = list(value)
    text = yaml.safe_dump([value], default_flow_style=True, width=1_000_000, sort_keys=False).strip()
    return text[1:-1]


def commented(key: str, value: Any, doc: str, depth: int) -> str:
    """`key: value  # doc` at `depth` levels of indentation (no comment when the doc is empty)."""
    line = f"{INDENT * depth}{key}: {flow(value)}"
    return f"{line}  # {doc}" if doc else line


def dataclass_lines(instance: Any, depth: int) -> list[str]:
    """Every field of a config dataclass, with its value and the doc of `clbench.spec.fields.field`."""
    values = to_dict(instance)
    return [commented(f.name, values[f.name], f.metadata.get("doc", ""), depth)
            for f in dataclasses.fields(instance)]


def grid_lines(spec: BenchmarkSpec, hyperparameters: Mapping[str, Any]) -> list[str]:
    """The `grids:` section: each approach's default grid for `clbench tune`, a key's doc as its comment."""
    if not spec.grids:
        return []
    lines = ["grids:  # `clbench tune`'s default grid per approach: the values to try and where they were published "
             "(no run's config)"]
    training_docs = {f.name: f.metadata.get("doc", "") for f in dataclasses.fields(TrainingSpec)}
    for name, axes in spec.grids.items():
        lines.append(f"{INDENT}{flow(name)}:")
        instance = hyperparameters.get(name)
        docs = {f.name: f.metadata.get("doc", "") for f in dataclasses.fields(instance)} if instance else {}
        opened: list[str] = []
        for axis in axes:
            *section, key = axis.key.split(".")
            for depth, part in enumerate(section):
                if opened[:depth + 1] != section[:depth + 1]:
                    lines.append(f"{INDENT * (2 + depth)}{flow(part)}:")
            opened = section
            depth = 2 + len(section)
            doc = (training_docs if section == ["training"] else docs if not section else {}).get(key, "")
            lines.append(f"{INDENT * depth}{flow(key)}:" + (f"  # {doc}" if doc else ""))
            lines.append(commented("values", list(axis.values), "tried by `clbench tune`", depth + 1))
            if axis.source:
                lines.append(commented("source", axis.source, "where these values were published", depth + 1))
    return lines


def render_spec(spec: BenchmarkSpec, hyperparameters: Mapping[str, Any], header: list[str]) -> str:
    """The YAML text of a resolved spec.

    Args:
        spec: the resolved spec (variant and `--set` overrides applied).
        hyperparameters: the validated hyper-parameter dataclass of each approach in the spec, by name.
        header: comment lines printed first (without `#`).
    """
    lines = [f"# {text}" if text else "#" for text in header]
    lines += [f"name: {flow(spec.name)}", f"description: {flow(spec.description)}"]
    for section, instance in (("data", spec.data), ("network", spec.network), ("training", spec.training)):
        lines += [f"{section}:  # {type(instance).__doc__.splitlines()[0]}", *dataclass_lines(instance, 1)]
    lines.append("approaches:  # each approach's hyper-parameters; a `training:` mapping overrides the protocol")
    for name in spec.approaches:
        lines.append(f"{INDENT}{name}:")
        lines += dataclass_lines(hyperparameters[name], 2)
        training = spec.approach_section(name).get("training")
        if training:
            lines.append(f"{INDENT * 2}training:  # this approach's own protocol values")
            docs = {f.name: f.metadata.get("doc", "") for f in dataclasses.fields(spec.training)}
            values = to_dict(build(TrainingSpec, {**to_dict(spec.training), **training},
                                   where=f"approaches.{name}.training", source=spec.source, origins=spec.origins))
            lines += [commented(key, values[key], docs.get(key, ""), 3) for key in training]
    lines += grid_lines(spec, hyperparameters)
    if spec.datasets:
        lines.append("datasets:  # the spec's own data sets (paths as resolved against the spec file's folder)")
        for name, entry in spec.datasets.items():
            lines += [f"{INDENT}{flow(name)}:", *dataclass_lines(entry, 2)]
    if spec.variant is not None:
        lines += [f"variant: {flow(spec.variant)}  # already merged into the values above; kept as the runs' "
                  "variant name", "variants:", f"{INDENT}{flow(spec.variant)}: {{}}"]
    return "\n".join(lines) + "\n"
