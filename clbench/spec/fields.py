"""Typed, validated configuration: mappings from YAML into frozen dataclasses.

One documented pass: every key must be a field, every value must have the field's type and lie within the
domain declared in the field's metadata (`minimum`, `maximum`, `above`, `below`, `choices`, a list's `min_items`,
and `special` values that mean something other than their number, e.g. BiC's lamb -1). Errors name the key and where the
value came from (the file, or the `--set`/`--grid` option that gave it). Booleans are not numbers (YAML `true` is
not 1) and floats must be finite (no `.inf`, `.nan`). A number field reads a number that PyYAML's YAML 1.1 left a
string (`1e-2`, see `read_number`); an integer field takes an integral float (`1e3`, `1000.0`).
Torch-free, so that the CLI can validate before importing anything heavy.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

import yaml

from clbench.errors import SpecError

T = TypeVar("T")

_DIGITS = r"[0-9](?:_?[0-9])*"
NUMBER = re.compile(rf"[-+]?(?:{_DIGITS}(?:\.(?:{_DIGITS})?)?|\.{_DIGITS})(?:[eE][-+]?[0-9]+)?")
"""A decimal number as YAML 1.2's core schema (and JSON, and Python) writes it, `_` allowed between digits."""


def field(default: Any = dataclasses.MISSING, *, doc: str, minimum: float | None = None,
          maximum: float | None = None, choices: tuple[Any, ...] | None = None,
          above: float | None = None, below: float | None = None, min_items: int | None = None,
          special: Mapping[float, str] | None = None, added: bool = False, changes_results: bool = True) -> Any:
    """A dataclass field with a one-line description and its domain: the range of a number, or of each number of a
    list (`minimum`, `maximum`; `above` and `below`: strictly), `choices`, a list's `min_items`, and `special`
    values (value -> what it means, e.g. `{-1: "lambda = old / seen classes"}`) accepted outside the range and not
    read as numbers (a grid whose lowest value is one has no lower edge there). What the domain cannot say alone
    (against other fields or the benchmark) is the approach's `hyperparameter_problem` hook.

    `added`: the field came after results were stored; while it has its default it is left out of a run's
    identity (`identity_dict`), so the config, data and reference hashes of stored results do not change.
    `changes_results=False`: the field changes none of a run's numbers (how it is measured, e.g. the continual
    evaluation); `results_only` sets it to its default where only the numbers matter (a joint reference, a tuned
    file's config).
    """
    metadata = {"doc": doc, "minimum": minimum, "maximum": maximum, "choices": choices, "above": above,
                "below": below, "min_items": min_items, "special": dict(special or {}), "added": added,
                "changes_results": changes_results}
    if isinstance(default, (list, dict, set)):
        raise TypeError("mutable defaults are not allowed: use a tuple")
    return dataclasses.field(default=default, metadata=metadata)


def read_number(text: str) -> int | float | None:
    """The number `text` writes in YAML 1.2 (`NUMBER`), or None: `1e-2` -> 0.01, `5e3` -> 5000.0, `1_000` -> 1000.

    PyYAML reads YAML 1.1, where a float needs a dot (`1e-2` and `1.0e4` stay strings); a number field reads such
    a string with this. Not numbers: `true`, `.inf`, `0x10`, `1:30`, `1e`, `abc` (None).
    """
    if not NUMBER.fullmatch(text):
        return None
    plain = text.replace("_", "")
    return float(plain) if any(char in plain for char in ".eE") else int(plain)


def build(cls: type[T], mapping: Mapping[str, Any] | None, *, where: str, source: str,
          origins: Mapping[str, str] | None = None) -> T:
    """Build dataclass `cls` from `mapping`, validating keys, types and ranges.

    Args:
        cls: a dataclass whose fields were declared with `field`.
        mapping: the raw values (missing keys take the defaults).
        where: the dotted key path of this mapping, for error messages (e.g. ``training``).
        source: the file the values come from, for error messages.
        origins: dotted key -> the option that set it (``--set training.lr=1e-2``), named in errors instead of
            `source` for that key and the keys below it.
    """
    origins = origins or {}
    source = origin_of(where, source, origins)
    if mapping is None:
        mapping = {}
    if not isinstance(mapping, dict):
        raise SpecError(f"{source}: `{where}` must be a mapping of keys to values, got {mapping!r} "
                        f"({type(mapping).__name__})")
    mapping = dict(mapping)
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(mapping) - set(fields))
    if unknown:
        valid = ", ".join(sorted(fields))
        key = _join(where, unknown[0])
        raise SpecError(f"{origin_of(key, source, origins)}: unknown key `{key}` (valid keys: {valid})")
    values: dict[str, Any] = {}
    for name, spec_field in fields.items():
        key = _join(where, name)
        if name in mapping:
            values[name] = _check(mapping[name], hints[name], spec_field.metadata, key=key,
                                  source=origin_of(key, source, origins), origins=origins)
        elif spec_field.default is dataclasses.MISSING:
            raise SpecError(f"{source}: missing required key `{key}`")
    return cls(**values)


def origin_of(key: str, source: str, origins: Mapping[str, str]) -> str:
    """Where the value of dotted `key` came from: the origin of the key or of its nearest section, else `source`."""
    parts = key.split(".")
    for end in range(len(parts), 0, -1):
        origin = origins.get(".".join(parts[:end]))
        if origin is not None:
            return origin
    return source


def _join(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def _check(value: Any, hint: Any, metadata: Mapping[str, Any], *, key: str, source: str,
           origins: Mapping[str, str]) -> Any:
    value = _coerce(value, hint, key=key, source=source, origins=origins)
    choices = metadata.get("choices")
    if choices is not None and value not in choices:
        raise SpecError(f"{source}: `{key}` is {value!r}; expected one of {', '.join(map(str, choices))}")
    min_items = metadata.get("min_items")
    if isinstance(value, tuple) and min_items is not None and len(value) < min_items:
        raise SpecError(f"{source}: `{key}` is {list(value)!r}; it needs at least {min_items} "
                        f"value{'s' if min_items > 1 else ''}")
    numbers = enumerate(value) if isinstance(value, tuple) else ((None, value),)
    for index, number in numbers:
        problem = range_problem(number, metadata)
        if problem is not None:
            raise SpecError(f"{source}: `{key if index is None else f'{key}[{index}]'}` is {number!r}; {problem}")
    return value


def range_problem(number: Any, metadata: Mapping[str, Any]) -> str | None:
    """Why `number` lies outside a field's range (`minimum`, `maximum`, `above`, `below`), saying what is allowed
    (its `special` values too), or None (also for what is not a number, and for a special value)."""
    if not isinstance(number, (int, float)) or isinstance(number, bool):
        return None
    special = metadata.get("special") or {}
    if number in special:
        return None
    bounds = (("minimum", ">=", lambda low: number < low), ("maximum", "<=", lambda high: number > high),
              ("above", ">", lambda low: number <= low), ("below", "<", lambda high: number >= high))
    for name, relation, outside in bounds:
        limit = metadata.get(name)
        if limit is not None and outside(limit):
            shown = f"{limit:g}" if name in ("above", "below") else f"{limit}"
            others = "".join(f" (or {value:g}: {meaning})" for value, meaning in special.items())
            return f"it must be {relation} {shown}{others}"
    return None


def _coerce(value: Any, hint: Any, *, key: str, source: str, origins: Mapping[str, str]) -> Any:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [arg for arg in args if arg is not type(None)]
        return _coerce(value, inner[0], key=key, source=source, origins=origins)
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise _type_error(key, source, value, "a list")
        item_hint = args[0]
        return tuple(_coerce(item, item_hint, key=f"{key}[{i}]", source=source, origins=origins)
                     for i, item in enumerate(value))
    if hint in (int, float) and isinstance(value, str):
        number = read_number(value)
        value = value if number is None else number
    if hint is bool:
        if not isinstance(value, bool):
            raise _type_error(key, source, value, "true or false")
        return value
    if hint is int:
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise _type_error(key, source, value, "an integer")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _type_error(key, source, value, "a number")
        if not math.isfinite(value):
            raise _type_error(key, source, value, "a finite number")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise _type_error(key, source, value, "a string")
        return value
    if dataclasses.is_dataclass(hint):
        return build(hint, value, where=key, source=source, origins=origins)
    raise TypeError(f"unsupported field type {hint!r} for {key}")


def _type_error(key: str, source: str, value: Any, expected: str) -> SpecError:
    return SpecError(f"{source}: `{key}` is {value!r} ({type(value).__name__}); expected {expected}")


def to_dict(instance: Any) -> dict[str, Any]:
    """A dataclass as plain JSON-able data (tuples become lists)."""
    return json.loads(json.dumps(dataclasses.asdict(instance)))


def identity_dict(instance: Any) -> dict[str, Any]:
    """`to_dict(instance)` without the `added` fields that have their default (what a run's hashes are made of).

    A field added later (e.g. `data.scenario`) changes no stored result's identity as long as it keeps its
    default; a non-default value is part of the identity like any other field.
    """
    values = to_dict(instance)
    for spec_field in dataclasses.fields(instance):
        if spec_field.metadata.get("added") and getattr(instance, spec_field.name) == spec_field.default:
            values.pop(spec_field.name)
    return values


def results_only(instance: T) -> T:
    """`instance` with every field that changes no number of a run (`field(..., changes_results=False)`) at its
    default: what two runs must share to have the same numbers."""
    return dataclasses.replace(instance, **{spec_field.name: spec_field.default  # type: ignore[type-var]
                                            for spec_field in dataclasses.fields(instance)  # type: ignore[arg-type]
                                            if not spec_field.metadata.get("changes_results", True)})


def flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested config as dotted keys: `{"data": {"n": 1}}` -> `{"data.n": 1}`."""
    flat: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, Mapping):
            flat |= flatten(value, f"{prefix}{key}.")
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def stable_hash(data: Any, length: int = 12) -> str:
    """A short, stable sha256 of JSON-able data (keys sorted)."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def parse_override(text: str) -> tuple[list[str], Any]:
    """Parse `--set a.b=value` into (["a", "b"], value); the value is read as YAML (`3`, `0.1`, `[1,2]`)."""
    if "=" not in text:
        raise SpecError(f"--set {text!r}: expected KEY=VALUE, e.g. --set training.max_epochs=3")
    key, raw = text.split("=", 1)
    path = [part for part in key.strip().split(".") if part]
    if not path:
        raise SpecError(f"--set {text!r}: the key is empty")
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError:
        value = raw
    return path, value


def domain_text(metadata: Mapping[str, Any]) -> str:
    """A field's declared domain in words, for the reference pages: `> 0 and < 1`, `>= 0, or -1 (meaning)`, `one of
    a, b`, `at least 1 value, each >= 0`; "" where nothing is declared."""
    if metadata.get("choices") is not None:
        return "one of " + ", ".join(map(str, metadata["choices"]))
    bounds = [f"{relation} {metadata[name]:g}" for name, relation in
              (("minimum", ">="), ("above", ">"), ("maximum", "<="), ("below", "<")) if metadata.get(name) is not None]
    text = " and ".join(bounds)
    if metadata.get("special"):
        text += ", or " + ", ".join(f"{value:g} ({meaning})" for value, meaning in metadata["special"].items())
    if metadata.get("min_items"):
        items = metadata["min_items"]
        text = f"at least {items} value{'s' if items > 1 else ''}" + (f", each {text}" if text else "")
    return text


def describe_fields(cls: type) -> list[tuple[str, Any, str]]:
    """(name, default, doc) for each field of a config dataclass, for `clbench list` and the docs."""
    return [(f.name, f.default, f.metadata.get("doc", "")) for f in dataclasses.fields(cls)]
