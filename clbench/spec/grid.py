"""Hyper-parameter grids: `--grid hat.smax=25,50 --grid hat.c=0.1,0.5` -> one `--set` list per grid point.

Pure (no I/O, nothing imported beyond the standard library, `clbench.errors` and `clbench.spec.fields`). Each
`--grid` option is `KEY=V1,V2,...`; the grid is the Cartesian product of the options, the first option varying
slowest:

    expand_grid(["hat.smax=25,50", "hat.c=0.1,0.5"])
    -> [["hat.smax=25", "hat.c=0.1"], ["hat.smax=25", "hat.c=0.5"],
        ["hat.smax=50", "hat.c=0.1"], ["hat.smax=50", "hat.c=0.5"]]

Values are split on top-level commas only, so YAML lists and quoted strings stay whole:
`network.hidden=[100,100],[500,500]` has two values; two values that `--set` reads as the same (`1e3` and `1000`,
`0.5` and `5e-1`: one run) are refused, as a spec's `grids:` refuses them. Keys and values are checked for form
only; whether a key exists is for the spec resolver (`clbench train` validates every grid point before running any;
a key in an approach section that names no registered approach, such as `haat.smax`, is an error there).

A spec's default grids (its `grids:` section, `GridAxis`, read by `read_spec_grids`) come out of `default_grid`
in the form `parse_grid_spec` gives a `--grid` option (full key -> value texts) and out of `default_grid_options`
as `--grid` texts, so `clbench tune` expands both alike: `expand_grid(default_grid_options(spec, "ewc"))`.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from clbench.errors import ClbenchError, SpecError
from clbench.spec.fields import origin_of, parse_override, read_number

if TYPE_CHECKING:
    from clbench.spec.sections import BenchmarkSpec

EXAMPLE = "e.g. --grid hat.smax=25,50,100"
CLOSING = {"[": "]", "{": "}", "(": ")"}


class GridError(ClbenchError):
    """A `--grid` option is malformed; the message quotes it and says what is expected."""


def expand_grid(specs: list[str]) -> list[list[str]]:
    """Every point of the grid as a list of `KEY=VALUE` overrides (one per spec, in the specs' order).

    No spec gives one point with no overrides. Raises GridError for a spec without `=`, an empty key or
    value, unbalanced brackets or quotes, a value repeated within a spec, or a key given twice.
    """
    axes: list[tuple[str, list[str]]] = []
    for spec in specs:
        key, values = parse_grid_spec(spec)
        if any(key == seen for seen, _ in axes):
            raise GridError(f"--grid {spec!r}: {key} is already a --grid key; give all its values in one "
                            f"option ({key}=V1,V2,...)")
        axes.append((key, values))
    return [[f"{key}={value}" for (key, _), value in zip(axes, point)]
            for point in itertools.product(*(values for _, values in axes))]


def parse_grid_spec(spec: str) -> tuple[str, list[str]]:
    """`hat.smax=25,50` -> ("hat.smax", ["25", "50"])."""
    if "=" not in spec:
        raise GridError(f"--grid {spec!r}: expected KEY=V1,V2,... ({EXAMPLE})")
    key, text = (part.strip() for part in spec.split("=", 1))
    if not key or any(char.isspace() for char in key) or key.startswith(".") or key.endswith("."):
        raise GridError(f"--grid {spec!r}: {key!r} is not a key like hat.smax or training.max_epochs ({EXAMPLE})")
    values = split_values(text, spec)
    repeated = sorted({value for value in values if values.count(value) > 1})
    if repeated:
        raise GridError(f"--grid {spec!r}: value {repeated[0]!r} is given twice")
    same = same_values(values)
    if same is not None:
        raise GridError(f"--grid {spec!r}: {same[0]} and {same[1]} are the same value once read; give each value "
                        f"once")
    return key, values


def same_values(texts: list[str]) -> tuple[str, str] | None:
    """The first two value texts that `--set` reads as the same value (`1e3` and `1000`; `[1,2]` and `[1.0, 2]`),
    or None: two such grid points would be one run."""
    seen: list[tuple[Any, str]] = []
    for text in texts:
        read = comparable(parse_override(f"value={text}")[1])
        earlier = next((shown for other, shown in seen if other == read), None)
        if earlier is not None:
            return earlier, text
        seen.append((read, text))
    return None


def comparable(value: Any) -> Any:
    """A value as a typed field reads it, for equality: numbers by value (`1000`, `1e3` and `1000.0` are one; a
    number PyYAML left a string is read with `read_number`), booleans apart from numbers, lists and mappings item by
    item."""
    if isinstance(value, str):
        number = read_number(value)
        return value if number is None else ("number", number)
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int | float):
        return ("number", value)
    if isinstance(value, list | tuple):
        return ("list", tuple(comparable(item) for item in value))
    if isinstance(value, dict):
        return ("map", tuple(sorted(((str(key), comparable(item)) for key, item in value.items()),
                                    key=lambda pair: pair[0])))
    return value


def split_values(text: str, spec: str | None = None) -> list[str]:
    """Split on commas outside brackets and quotes: `25,[1,2],'a,b'` -> ["25", "[1,2]", "'a,b'"]."""
    where = f"--grid {(spec if spec is not None else text)!r}"
    values, current, stack, quote = [], [], [], None
    for char in text:
        if quote is not None:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in CLOSING:
            stack.append(CLOSING[char])
        elif char in CLOSING.values():
            if not stack or stack.pop() != char:
                raise GridError(f"{where}: unbalanced {char!r} in {text!r}")
        elif char == "," and not stack:
            values.append("".join(current).strip())
            current = []
            continue
        current.append(char)
    if quote is not None or stack:
        raise GridError(f"{where}: missing {quote or stack[-1]!r} in {text!r}")
    values.append("".join(current).strip())
    if any(not value for value in values):
        raise GridError(f"{where}: empty value in {text!r} (values are separated by single commas; {EXAMPLE})")
    return values


GRID_KEY_RULE = ("a grid key is one of the approach's hyper-parameters (`lamb`) or a key of its `training:` "
                 "section (`training: {lr: [...]}`)")


@dataclass(frozen=True)
class GridAxis:
    """One key of an approach's default grid (`grids: {ewc: {lamb: ...}}`): the values `clbench tune` tries.

    Not part of any run's config: a run is identified by the value it ran with, never by the grid it came from.
    """

    key: str  # relative to the approach, as after `APPROACH.` in --grid: `lamb`, `training.lr`
    values: tuple[Any, ...]  # as the spec wrote them; checked against the approach's fields by `resolve`
    source: str = ""  # where the values were published (a file of the authors' code, a section of a paper)


def read_spec_grids(raw: Any, source: str, origins: Mapping[str, str] | None = None) -> dict[str, tuple[GridAxis, ...]]:
    """The `grids:` section of a spec: approach -> its axes, checked for form (torch-free).

    Each key maps to a non-empty list of distinct values, or to `{values: [...], source: "..."}`; another mapping
    is a section of keys (`training: {lr: [...]}` is the key `training.lr`, as `--set grids.ewc.training.lr=[...]`
    writes it; a dotted key in the file is refused, so that such a `--set` replaces it). Whether a key is a
    hyper-parameter of the approach and each value valid for it is checked with the approach's fields, by
    `clbench.approaches.resolve`, with `--set`'s messages.
    """
    origins = origins or {}
    if raw is None:
        return {}
    wrong = next((str(method) for method, axes in raw.items() if not isinstance(axes, dict | None)), None) \
        if isinstance(raw, dict) else ""
    if wrong is not None:
        key = f"grids.{wrong}" if wrong else "grids"
        what = "map each key of the approach to its values" if wrong else "map approach names to {KEY: [V1, V2, ...]}"
        raise SpecError(f"{origin_of(key, source, origins)}: `{key}` must {what}, e.g. grids: "
                        f"{{ewc: {{lamb: [500, 5000]}}}}")
    grids = {}
    for method, axes in raw.items():
        if axes:
            grids[str(method)] = tuple(_read_axis(f"grids.{method}", key, value, source, origins)
                                       for key, value in _axis_items(f"grids.{method}", axes, source, origins))
    return grids


def _axis_items(section: str, axes: dict[Any, Any], source: str, origins: Mapping[str, str]) -> list[tuple[str, Any]]:
    """(key relative to the approach, values) pairs; a mapping without `values` is a section of keys."""
    items: list[tuple[str, Any]] = []
    for key, value in axes.items():
        name = f"{section}.{key}"
        if not isinstance(key, str) or not key or "." in key or key.strip() != key or any(c in key for c in "=,"):
            raise SpecError(f"{origin_of(name, source, origins)}: `{name}`: {key!r} is not a key; {GRID_KEY_RULE}")
        if isinstance(value, dict) and "values" not in value:
            items += [(f"{key}.{inner}", values) for inner, values in _axis_items(name, value, source, origins)]
        else:
            items.append((key, value))
    return items


def _read_axis(section: str, key: str, raw: Any, source_file: str, origins: Mapping[str, str]) -> GridAxis:
    name = f"{section}.{key}"
    where = origin_of(name, source_file, origins)
    source = ""
    if isinstance(raw, dict):
        unknown = sorted(set(raw) - {"values", "source"})
        if unknown:
            raise SpecError(f"{where}: `{name}` has the unknown key `{unknown[0]}`; a key's values are a list or "
                            f"{{values: [...], source: \"...\"}}")
        source, raw = raw.get("source") or "", raw["values"]
        if not isinstance(source, str):
            raise SpecError(f"{where}: `{name}.source` is {source!r}; expected a string (where the values were "
                            f"published)")
    if not isinstance(raw, list):
        raise SpecError(f"{where}: `{name}` is {raw!r}; expected a list of the values to try, e.g. [{raw!r}]")
    if not raw:
        raise SpecError(f"{where}: `{name}` is an empty list; give the values to try, or remove the key")
    for index, value in enumerate(raw):
        if any(_same(value, earlier) for earlier in raw[:index]):
            raise SpecError(f"{where}: `{name}`: value {value!r} is given twice")
    return GridAxis(key=key, values=tuple(raw), source=source)


def _same(one: Any, other: Any) -> bool:
    """Equal values of the same type (YAML `1` and `true` differ; `1` and `1.0` are caught once typed)."""
    return type(one) is type(other) and one == other


def value_text(value: Any) -> str:
    """A grid value as a `--set KEY=TEXT` text that reads back to the same value: 5000 -> `5000`, [1, 2] -> `[1,2]`.

    A number PyYAML left a string (`1e-2`, see `clbench.spec.fields.read_number`) stays as written: `--set` reads
    it back the same way.
    """
    if isinstance(value, str) and read_number(value) is not None:
        return value
    return json.dumps(value, separators=(",", ":"))


def default_grid(spec: BenchmarkSpec, method: str) -> dict[str, tuple[str, ...]] | None:
    """The spec's default grid for `method` as `parse_grid_spec` gives a `--grid` option: full key -> value texts.

    `{"ewc.lamb": ("500", "5000")}` for `grids: {ewc: {lamb: [500, 5000]}}`; None if the spec has no grid for
    `method` (then `clbench tune` needs `--grid`).
    """
    axes = spec.grids.get(method)
    if not axes:
        return None
    return {f"{method}.{axis.key}": tuple(value_text(value) for value in axis.values) for axis in axes}


def default_grid_options(spec: BenchmarkSpec, method: str) -> list[str]:
    """The default grid of `method` as `--grid` texts (`["ewc.lamb=500,5000"]`) for `expand_grid`; [] if none."""
    return [f"{key}={','.join(values)}" for key, values in (default_grid(spec, method) or {}).items()]
