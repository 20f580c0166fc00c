"""A resolved benchmark spec written back as YAML, each field commented with its dataclass doc (`clbench spec`).

The text loads back into the same resolved spec: same data, network and training values, same variant name,
same approach hyper-parameters, hence the same config hashes. Torch-free: the approaches' validated
hyper-parameters are passed in by the caller.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import yaml

from clbench.spec.benchmark import BenchmarkSpec, TrainingSpec
from clbench.spec.fields import build, to_dict

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
    if spec.datasets:
        lines.append("datasets:  # the spec's own data sets (paths as resolved against the spec file's folder)")
        for name, entry in spec.datasets.items():
            lines += [f"{INDENT}{flow(name)}:", *dataclass_lines(entry, 2)]
    if spec.variant is not None:
        lines += [f"variant: {flow(spec.variant)}  # already merged into the values above; kept as the runs' "
                  "variant name", "variants:", f"{INDENT}{flow(spec.variant)}: {{}}"]
    return "\n".join(lines) + "\n"
