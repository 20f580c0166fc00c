"""The approach registry: one table of approach names -> classes that built-ins and plugins share, where each
plugin came from, and the one place that writes them.

Importing this module registers every built-in (the `BUILTINS` table of `clbench.approaches`), each through its
"module:Class" string, as a plugin named on the command line is. `register` adds a class; a name taken twice is an
error that names both origins (`DuplicateApproachError`). Plugins found by `clbench.approaches.plugins` are
registered with their origin: a method spec (`file.py:Class`, `package.module:Class`; `load_method`) and the
installed entry points of the group `clbench.approaches` (`load_entry_points`, which `approach_names` and `lookup`
call first). What the table says about a name: `lookup`, `approach_names`, and its origin (`origin_of`,
`origin_label`, `method_argument`, `code_identity`, `reload_spec` for a worker process to `ensure_loaded` it).
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from clbench.approaches import BUILTINS
from clbench.approaches import avalanche as avalanche_table
from clbench.approaches.avalanche import STRATEGIES as AVALANCHE_STRATEGIES
from clbench.approaches.base import Approach
from clbench.approaches.plugins import (
    FILE_MODULE_PREFIX,
    entry_point_approaches,
    import_method,
    is_method_spec,
    origin_code_identity,
    plain_name,
    user_name,
)
from clbench.errors import SpecError
from clbench.spec import check_name

__all__ = ["ORIGINS", "REGISTRY", "DuplicateApproachError", "approach_names", "code_identity", "describe_origin",
           "ensure_loaded", "load_builtin", "load_entry_points", "load_method", "load_methods", "lookup",
           "method_argument", "origin_label", "origin_of", "register", "register_plugin", "reload_spec"]

REGISTRY: dict[str, type[Approach]] = {}
"""Approach name -> class: built-ins, installed entry points and plugins loaded so far."""

ORIGINS: dict[str, dict[str, Any]] = {}
"""Plugin name -> where it came from (kind, module, file + sha256, or distribution + version; stored with its runs)."""


class DuplicateApproachError(SpecError, ValueError):
    """Two approaches share a name; the message names both origins."""


def describe_origin(cls: type) -> str:
    """Where an approach class comes from, in words (its plugin origin if known, else its module and file)."""
    origin = ORIGINS.get(getattr(cls, "name", ""))
    if origin is not None and REGISTRY.get(cls.name) is cls:
        return origin["description"]
    if cls.__module__.startswith("clbench."):
        return f"built-in {builtin_module(cls)}"
    if cls.__module__.startswith(FILE_MODULE_PREFIX):
        return user_name(cls)
    path = getattr(sys.modules.get(cls.__module__), "__file__", None)
    return f"module {cls.__module__}" + (f" ({path})" if path else "")


def builtin_module(cls: type) -> str:
    """The module a built-in approach's runs record as their origin: the class's module, or for a method folder's
    `approach.py` (hat, packnet, pathnet, pnn) the folder's package, the name every stored run of these carries."""
    return cls.__module__.removesuffix(".approach")


def register(cls: type[Approach]) -> type[Approach]:
    """Class decorator: register an approach under `cls.name` (a duplicate name is an error)."""
    if not cls.name:
        raise SpecError(f"approach class {user_name(cls)} has no `name`: set the class "
                        f"attribute `name = \"my-method\"`")
    check_name(cls.name, f"the name of approach class {user_name(cls)}")
    if cls.name in REGISTRY and REGISTRY[cls.name] is not cls:
        raise DuplicateApproachError(f"approach name {cls.name!r} is taken twice: by "
                                     f"{describe_origin(REGISTRY[cls.name])} and by {describe_origin(cls)}; "
                                     f"rename one (its class attribute `name`)")
    REGISTRY[cls.name] = cls
    return cls


def register_plugin(cls: type[Approach], origin: dict[str, Any]) -> str:
    """Register a plugin's class (if its import did not already) with its origin; a name clash names both
    origins."""
    existing = REGISTRY.get(cls.name)
    if existing is not None and existing is not cls:
        raise SpecError(f"approach name {cls.name!r} is taken twice: by {describe_origin(existing)} and by "
                        f"{origin['description']}; rename one (its class attribute `name`)")
    register(cls)
    ORIGINS[cls.name] = origin
    return cls.name


def load_builtin(name: str, target: str) -> type[Approach]:
    """Import the class `target` ("module:Class") names and register it as the built-in approach `name`."""
    module_name, _, class_name = target.partition(":")
    cls = getattr(importlib.import_module(module_name), class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, Approach)) or cls.name != name:
        raise SpecError(f"clbench.approaches.BUILTINS[{name!r}] = {target!r} does not name an Approach subclass "
                        f"whose `name` is {name!r}")
    return register(cls)


for _name, _target in BUILTINS.items():
    load_builtin(_name, _target)


def load_method(text: str) -> str:
    """Import the approach class a method spec names, register it, and return its registered name."""
    return register_plugin(*import_method(text))


def load_methods(texts: list[str]) -> list[str]:
    """Registered names of `--method` entries: plain names as given, method specs loaded (in order)."""
    load_entry_points()
    return [load_method(text) if is_method_spec(text) else plain_name(text) for text in texts]


def load_entry_points() -> list[str]:
    """Register every approach of the `clbench.approaches` entry-point group; returns their names."""
    return [register_plugin(cls, origin) for cls, origin in entry_point_approaches()]


def approach_names() -> list[str]:
    """Registered approach names (built-ins, installed entry points, plugins loaded so far), sorted; with the extra
    `avalanche` installed, also Avalanche's `av-*` strategies that can run here (loaded without importing
    Avalanche). Without it, or for a strategy refused everywhere (pre-trained weights, a generator), `-m av-...`
    is still looked up and refused in one line with the reason."""
    load_entry_points()
    return sorted({name for name in REGISTRY if name not in AVALANCHE_STRATEGIES} | set(avalanche_names()))


def avalanche_names() -> list[str]:
    """Avalanche's `av-*` methods that can run here: none without the extra (clbench runs as it does without it)."""
    if avalanche_table.avalanche_version() is None:
        return []
    return [name for name, target in AVALANCHE_STRATEGIES.items() if not getattr(_unregistered(target), "refusal", "")]


def _unregistered(target: str) -> type:
    """The class a "module:Class" names, imported but not registered (listing a name registers nothing)."""
    module_name, _, class_name = target.partition(":")
    return getattr(importlib.import_module(module_name), class_name)


def lookup(method: str) -> type[Approach]:
    """The approach class registered as `method` (or named by a method spec `file.py:Class`); an unknown name
    lists the valid ones."""
    if is_method_spec(method):
        method = load_method(method)
    if method not in REGISTRY and method in AVALANCHE_STRATEGIES:
        load_builtin(method, AVALANCHE_STRATEGIES[method])  # Avalanche's `av-*`: loaded when first named
    if method not in REGISTRY:
        load_entry_points()
    if method not in REGISTRY:
        raise SpecError(f"unknown method {method!r}; valid methods: {', '.join(approach_names())} (a plugin is named "
                        f"by its file or module: -m path/to/file.py:ClassName or -m package.module:ClassName)")
    return REGISTRY[method]


def reload_spec(name: str) -> str | None:
    """What a worker process passes to `ensure_loaded` to register approach `name` again (None: built-in)."""
    origin = ORIGINS.get(name)
    return origin["reload"] if origin else None


def ensure_loaded(reload: str | None) -> None:
    """Re-register a plugin in this process (a spawned worker) from its `reload_spec`."""
    if reload is None:
        return
    if reload.startswith("entry-point:"):
        load_entry_points()
    else:
        load_method(reload)


def origin_of(name: str) -> dict[str, Any]:
    """The provenance of approach `name`: its plugin origin, or `{"kind": "built-in", "module": ...}`."""
    if name in ORIGINS:
        return {key: value for key, value in ORIGINS[name].items() if key not in ("reload", "description")}
    library = getattr(REGISTRY[name], "library_origin", None)  # av-*: the Avalanche class and version that ran
    return {"kind": "built-in", "module": builtin_module(REGISTRY[name]), **(library() if library else {})}


def origin_label(name: str) -> str:
    """A short origin for tables: `built-in`, the file path, the module, or `dist version`."""
    origin = origin_of(name)
    if origin["kind"] == "file":
        return f"file {origin['path']}"
    if origin["kind"] == "module":
        return f"module {origin['module']}"
    if origin["kind"] == "entry-point":
        return f"package {origin['distribution']} {origin['version']}"
    return "built-in"


def method_argument(name: str) -> str:
    """How `--method` names approach `name` in a printed command: a plugin's file or module spec, else the name."""
    origin = ORIGINS.get(name)
    return str(origin["spec"]) if origin and origin.get("spec") else name


def code_identity(name: str) -> dict[str, Any] | None:
    """What identifies the code of approach `name` in its runs' config hash (`plugins.origin_code_identity`); None
    for a built-in, so that their config hashes (and existing results) stay as they were; their code is recorded by
    the clbench version and git commit in every run's provenance."""
    origin = ORIGINS.get(name)
    if origin is None:
        return None
    return origin_code_identity(origin, REGISTRY[name].__module__)
