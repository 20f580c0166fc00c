"""Hyper-parameter grids: `--grid hat.smax=25,50 --grid hat.c=0.1,0.5` -> one `--set` list per grid point.

Pure (no I/O, nothing imported beyond the standard library and `clbench.errors`). Each `--grid` option is
`KEY=V1,V2,...`; the grid is the Cartesian product of the options, the first option varying slowest:

    expand_grid(["hat.smax=25,50", "hat.c=0.1,0.5"])
    -> [["hat.smax=25", "hat.c=0.1"], ["hat.smax=25", "hat.c=0.5"],
        ["hat.smax=50", "hat.c=0.1"], ["hat.smax=50", "hat.c=0.5"]]

Values are split on top-level commas only, so YAML lists and quoted strings stay whole:
`network.hidden=[100,100],[500,500]` has two values. Keys and values are checked for form only; whether a key
exists is for the spec resolver (`clbench train` validates every grid point before running any; a key in an
approach section that names no registered approach, such as `haat.smax`, is an error there).
"""

from __future__ import annotations

import itertools

from clbench.errors import ClbenchError

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
    return key, values


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
