"""Shared pieces of the CLI layer: error handling, option parsing, console output.

Nothing here imports torch: `clbench --help` must stay fast.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from clbench.errors import EXIT_INTERRUPTED, ClbenchError

F = TypeVar("F", bound=Callable[..., object])

MIRROR_SCHEMES = ("http", "https", "file")
"""The URL schemes a `--mirror` may use: those `clbench.data.download.require_scheme` accepts."""


def console(stderr: bool = False) -> Console:
    """A rich console for user-facing output (the library itself only logs); its `log` lines name no source file."""
    return Console(stderr=stderr, highlight=False, log_path=False)


def handle_errors(function: F) -> F:
    """Turn a ClbenchError into a one-line message on stderr and its class's exit code (`clbench.errors`: 2 for a
    usage error, 1 for a runtime failure), and Ctrl-C into exit code 130 (Click's own handler would exit 1); no
    traceback."""

    @functools.wraps(function)
    def wrapper(*args: object, **kwargs: object) -> object:
        try:
            return function(*args, **kwargs)
        except ClbenchError as error:
            console(stderr=True).print(f"[bold red]error:[/] {escape(str(error))}", soft_wrap=True)
            raise typer.Exit(error.exit_code) from None
        except KeyboardInterrupt:
            console(stderr=True).print("[bold red]interrupted[/]")
            raise typer.Exit(EXIT_INTERRUPTED) from None

    return wrapper  # type: ignore[return-value]


def parse_seeds(text: str) -> list[int]:
    """Parse `0-9`, `0,3,7`, `4` or a mix (`0-2,5`) into a sorted list of distinct seeds."""
    seeds: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            if "-" in part:
                low, high = (int(value) for value in part.split("-", 1))
                if low > high or low < 0:
                    raise ValueError
                seeds.update(range(low, high + 1))
            else:
                value = int(part)
                if value < 0:
                    raise ValueError
                seeds.add(value)
        except ValueError:
            raise ClbenchError(
                f"malformed --seeds value {text!r}: use a range like 0-9, a list like 0,3,7 or one seed like 4"
            ) from None
    if not seeds:
        raise ClbenchError(f"--seeds {text!r} names no seed: use e.g. 0-9, 0,3,7 or 4")
    return sorted(seeds)


def parse_methods(text: str) -> list[str]:
    """Split `hat,sgd` (or `path/to/file.py:Class,sgd`) into entries (validated later against the registry)."""
    methods = [name.strip() for name in text.split(",") if name.strip()]
    if not methods:
        raise ClbenchError("--method names no approach: use e.g. -m hat or -m sgd,sgd-f,joint,random")
    return methods


def load_methods(text: str) -> list[str]:
    """Parse `--method` and register its plugins (`file.py:Class`, `package.module:Class`, entry points).

    Returns registered names. Call it before loading the spec: plugin sections and `--set <name>.<key>` are
    validated against the registry. Imports torch (call it inside a command).
    """
    from clbench.approaches.registry import load_methods as register_methods  # built-ins registered first

    return register_methods(parse_methods(text))


def default_data_dir() -> Path:
    """The data cache: $CLBENCH_DATA, else $XDG_CACHE_HOME/clbench, else ~/.cache/clbench (made absolute)."""
    explicit = os.environ.get("CLBENCH_DATA")
    if explicit:
        return absolute_folder(Path(explicit))
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return absolute_folder(Path(cache) / "clbench")


def absolute_folder(value: Path) -> Path:
    """A folder option resolved once, against the folder the command started in (`~` expanded)."""
    return value.expanduser().absolute()


def absolute_location(value: str | None) -> str | None:
    """A mirror option (`--mirror` / $CLBENCH_MIRROR): a folder made absolute as `absolute_folder`, a URL kept; a
    URL of another scheme than `clbench.data.download` opens (http, https, file) is a usage error (exit 2)."""
    if not value:
        return value
    if "://" in value:
        if value.split("://", 1)[0].lower() not in MIRROR_SCHEMES:
            raise typer.BadParameter(f"unsupported URL {value!r}: use http://, https://, file:// or a local folder")
        return value
    return str(absolute_folder(Path(value)))

