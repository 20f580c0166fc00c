"""Loading a benchmark spec: `benchmarks/<name>.yaml` -> a validated `BenchmarkSpec` (variant, overrides, checks).

A spec has the keys `name`, `description`, `data`, `network`, `training`, `approaches`, and optionally
`variant` + `variants` (named sets of overrides, e.g. pmnist's small/medium/large network), `datasets`
(the spec's own data sets: an image folder or an npz file, see `clbench.data.custom`) and `grids` (each
approach's default hyper-parameter grid for `clbench tune`, with where its values were published; see
`clbench.spec.grid`). The grids are kept apart from `approaches`: a grid is not a run's config, so it enters no
config, data or reference hash, and an approach section stays exactly its hyper-parameters. Overrides from
`--set KEY=VALUE` are applied last; a first key segment that names an approach means `approaches.<name>`. A value
refused by validation is named with the option that gave it (`--set ...`, `--grid ...`), else with the file.
Approach sections are validated against the approach's own hyper-parameter dataclass by
`clbench.approaches.resolve` (that needs torch; this module does not); `check_approach_sections` makes a section
that names no registered approach (a typo such as `haat`) an error, given the registry's names.

The sections' types are in `clbench.spec.sections`, finding and reading spec files in `clbench.spec.files`, the
`data:` section's rules in `clbench.spec.data_checks` (against the built-in data sets of `clbench.spec.catalogue`).
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from clbench.errors import SpecError
from clbench.spec.catalogue import DATASET_NAMES
from clbench.spec.data_checks import check_data
from clbench.spec.fields import build, origin_of, parse_override
from clbench.spec.files import check_name, find_spec_file, read_yaml
from clbench.spec.grid import read_spec_grids
from clbench.spec.sections import (
    IMAGE_NETWORKS,
    TOP_LEVEL_KEYS,
    BenchmarkSpec,
    DatasetEntry,
    DataSpec,
    NetworkSpec,
    TrainingSpec,
    check_optimizer,
)


def load_benchmark(name_or_path: str, overrides: Sequence[str] = (),
                   origins: Sequence[str] | None = None) -> BenchmarkSpec:
    """Load, merge the chosen variant, apply `--set` overrides and validate a benchmark spec.

    Args:
        name_or_path: a shipped benchmark's name or a YAML spec file.
        overrides: `KEY=VALUE` texts, applied in order.
        origins: for each override, the option that gave it, named when its value is refused (default:
            `--set KEY=VALUE`; `clbench train` names a grid point's value by its `--grid` option).
    """
    if origins is None:
        origins = [f"--set {text}" for text in overrides]
    if len(origins) != len(overrides):
        raise ValueError(f"{len(overrides)} overrides but {len(origins)} origins")
    path = find_spec_file(name_or_path)
    raw = read_yaml(path)
    parsed = [parse_override(text) for text in overrides]
    raw = _apply_variant(raw, parsed, source=str(path))
    set_by: dict[str, str] = {}
    for (key_path, value), origin in zip(parsed, origins):
        if key_path != ["variant"]:
            key = ".".join(_set(raw, key_path, value))
            set_by = {set_key: text for set_key, text in set_by.items() if not set_key.startswith(f"{key}.")}
            set_by[key] = origin
    return replace(_validate(raw, source=str(path), origins=set_by), overrides=tuple(overrides), origins=set_by)


def check_approach_sections(spec: BenchmarkSpec, known: Collection[str]) -> None:
    """Raise SpecError if an approach section (from the file, its variant, `--set` or `--grid`), or a section of
    `grids:`, is not in `known`.

    Args:
        spec: a loaded spec.
        known: the registered approach names (`clbench.approaches.approach_names()`, plugins included).
    """
    unknown = sorted(set(spec.approaches) - set(known))
    if not unknown:
        _check_grid_sections(spec, known)
        return
    name = unknown[0]
    culprit = next((text for text in spec.overrides if _override_section(text) == name), None)
    where = f"override {culprit!r} (--set/--grid)" if culprit else f"section `approaches.{name}`"
    raise SpecError(f"{spec.source}: {where} names unknown approach {name!r}; known approaches: "
                    f"{', '.join(sorted(known))} (fix the spelling, or remove the section)")


def _check_grid_sections(spec: BenchmarkSpec, known: Collection[str]) -> None:
    """SpecError if `grids:` has a section for an approach not in `known` (`grids.haat`)."""
    unknown = sorted(set(spec.grids) - set(known))
    if unknown:
        name = unknown[0]
        raise SpecError(f"{origin_of(f'grids.{name}', spec.source, spec.origins)}: section `grids.{name}` names "
                        f"unknown approach {name!r}; known approaches: {', '.join(sorted(known))} (fix the "
                        f"spelling, or remove the section)")


def _override_section(text: str) -> str | None:
    """The approach section an override text writes to (`haat.smax=3` -> haat), or None."""
    key_path, _ = parse_override(text)
    if key_path[0] == "approaches":
        return key_path[1] if len(key_path) > 1 else None
    return None if key_path[0] in TOP_LEVEL_KEYS else key_path[0]


def _apply_variant(raw: dict[str, Any], parsed: list[tuple[list[str], Any]], source: str) -> dict[str, Any]:
    raw = copy.deepcopy(raw)
    variants = raw.pop("variants", None) or {}
    chosen = raw.get("variant")
    for key_path, value in parsed:
        if key_path == ["variant"]:
            chosen = value
    if chosen is None:
        return raw
    if chosen not in variants:
        valid = ", ".join(variants) or "none"
        raise SpecError(f"{source}: unknown variant {chosen!r}; valid variants: {valid}")
    raw["variant"] = chosen
    return _deep_merge(raw, variants[chosen])


def _deep_merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in (update or {}).items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _set(raw: dict[str, Any], key_path: list[str], value: Any) -> list[str]:
    """Apply one `--set` override; `hat.smax` means `approaches.hat.smax`. Returns the full key path set."""
    if len(key_path) == 1 and key_path[0] not in TOP_LEVEL_KEYS:
        raise SpecError(f"--set {key_path[0]}: unknown key; use a section key such as training.lr or "
                        f"hat.smax, or one of {', '.join(TOP_LEVEL_KEYS)}")
    if key_path[0] not in TOP_LEVEL_KEYS:
        key_path = ["approaches", *key_path]
    node = raw
    for depth, part in enumerate(key_path[:-1]):
        child = node.get(part)
        if child is None and (depth == 0 or key_path[0] in ("approaches", "grids")):
            child = node[part] = {}
        if not isinstance(child, dict):
            raise SpecError(f"--set {'.'.join(key_path)}: `{'.'.join(key_path[:depth + 1])}` is not a section")
        node = child
    node[key_path[-1]] = value
    return key_path


def _validate(raw: dict[str, Any], source: str, origins: dict[str, str]) -> BenchmarkSpec:
    unknown = sorted(set(raw) - set(TOP_LEVEL_KEYS))
    if unknown:
        raise SpecError(f"{source}: unknown key `{unknown[0]}` (valid keys: {', '.join(TOP_LEVEL_KEYS)})")
    for key in ("name", "data", "network"):
        if key not in raw:
            raise SpecError(f"{source}: missing required key `{key}`")
    datasets = _own_datasets(raw.get("datasets"), source, origins)
    data = build(DataSpec, raw["data"], where="data", source=source, origins=origins)
    check_data(data, source, tuple(datasets), origins)
    approaches = raw.get("approaches") or {}
    if not isinstance(approaches, dict) or not all(isinstance(v, dict) for v in approaches.values()):
        raise SpecError(f"{source}: `approaches` must map approach names to mappings of hyper-parameters")
    network = build(NetworkSpec, raw["network"], where="network", source=source, origins=origins)
    if network.kind in IMAGE_NETWORKS and data.form != "image32":
        raise SpecError(f"{source}: `network.kind` {network.kind} needs `data.form` image32 (3x32x32 images), not "
                        f"{data.form}; use `network.kind: mlp` for {data.form}")
    if not network.bias and network.kind != "mlp":
        raise SpecError(f"{origin_of('network.bias', source, origins)}: `network.bias: false` is supported by the mlp "
                        f"only, not `network.kind` {network.kind}; remove it")
    training = build(TrainingSpec, raw.get("training"), where="training", source=source, origins=origins)
    given = [origin_of(f"training.{key}", source, origins) for key in ("momentum", "optimizer")]
    check_optimizer(training, "training", next((origin for origin in given if origin != source), source))
    return BenchmarkSpec(
        name=check_name(raw["name"], f"{source}: `name`"),
        description=str(raw.get("description", "")),
        source=source,
        variant=raw.get("variant"),
        data=data,
        network=network,
        training=training,
        approaches={name: dict(values) for name, values in approaches.items()},
        datasets=datasets,
        grids=read_spec_grids(raw.get("grids"), source, origins),
    )


def _own_datasets(raw: Any, source: str, origins: dict[str, str]) -> dict[str, DatasetEntry]:
    """The `datasets:` section: typed entries whose relative paths resolve against the spec file's folder."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise SpecError(f"{source}: `datasets` must map data set names to {{format: ..., path: ...}}")
    entries = {}
    for name, values in raw.items():
        check_name(name, f"{source}: the data set name `datasets.{name}`")
        if name in DATASET_NAMES:
            raise SpecError(f"{source}: `datasets.{name}` would hide the built-in data set {name}; rename it")
        entry = build(DatasetEntry, values, where=f"datasets.{name}", source=source, origins=origins)
        path = Path(entry.path).expanduser()
        if not path.is_absolute():
            path = Path(source).resolve().parent / path
        entries[name] = DatasetEntry(entry.format, str(path))
    return entries
