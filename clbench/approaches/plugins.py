"""Finding approaches outside clbench: a file or module named on the command line, or an installed entry point.

Two ways in, both registered like a built-in by `clbench.approaches.registry` (same hyper-parameter validation,
`--set <name>.<key>=...`, `clbench list`, results folder `<benchmark>/<name>/...`):
- a method spec `path/to/file.py:ClassName` or `package.module:ClassName` (`import_method`);
- an entry point in the group `clbench.approaches` of an installed distribution, e.g. in its pyproject.toml
  `[project.entry-points."clbench.approaches"] l2transfer = "my_package.module:L2Transfer"`
  (`entry_point_approaches`).

This module imports, checks and describes the classes: each comes with its origin (kind, module, file + sha256, or
distribution + version), which the registry keeps in `ORIGINS` and every run stores, and with what identifies its
code in the runs' config hash (`origin_code_identity`). It never reads or writes the registry's table.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.metadata
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from clbench.approaches.base import Approach
from clbench.approaches.datatypes import Hyperparameters
from clbench.errors import SpecError

ENTRY_POINT_GROUP = "clbench.approaches"
FILE_MODULE_PREFIX = "clbench_plugin_file"


def user_name(thing: Any) -> str:
    """A module or class as the user knows it: a plugin file's by its path (`path/to/file.py`, `Params in
    path/to/file.py`), never by the internal module name clbench imports it under (`FILE_MODULE_PREFIX_...`);
    another module or class by its dotted name; anything else as its repr."""
    if isinstance(thing, type):
        module = sys.modules.get(thing.__module__)
        if thing.__module__.startswith(FILE_MODULE_PREFIX):
            return f"{thing.__qualname__} in {getattr(module, '__file__', 'a plugin file')}"
        return thing.__qualname__ if thing.__module__ == "builtins" else f"{thing.__module__}.{thing.__qualname__}"
    name = getattr(thing, "__name__", None)
    if isinstance(name, str):
        return str(getattr(thing, "__file__", name)) if name.startswith(FILE_MODULE_PREFIX) else name
    return repr(thing)


def is_method_spec(text: str) -> bool:
    """True for `file.py:Class` or `package.module:Class` (a plain name like `hat` is a registered approach)."""
    return ":" in text


def import_method(text: str) -> tuple[type[Approach], dict[str, Any]]:
    """The approach class a method spec names, imported and checked, with its origin."""
    target, _, class_name = text.rpartition(":")
    if not target or not class_name.isidentifier():
        raise SpecError(f"--method {text!r}: use path/to/file.py:ClassName or package.module:ClassName")
    if target.endswith(".py") or "/" in target or "\\" in target:
        path = Path(target).expanduser().resolve()
        module = _import_file(path, text)
        origin = {"kind": "file", "path": str(path), "sha256": file_sha256(path)}
    else:
        module = _import_module(target, text)
        origin = {"kind": "module", "module": target, "path": getattr(module, "__file__", None)}
    cls = _approach_class(module, class_name, text)
    origin.update(cls=f"{cls.__module__}.{cls.__qualname__}", spec=text, reload=text,
                  description=_describe(origin, text))
    return cls, origin


def plain_name(text: str) -> str:
    """`text` (a registered name), or SpecError when it is a file without `:ClassName` (`-m my_method.py`)."""
    if not (text.endswith(".py") or "/" in text or "\\" in text):
        return text
    classes = ""
    path = Path(text).expanduser().resolve()
    if path.is_file():
        try:
            found = approach_classes(_import_file(path, f"{text}:?"))
            classes = f" (Approach subclasses in it: {', '.join(found)})" if found else " (it has no Approach subclass)"
        except SpecError:
            classes = ""
    raise SpecError(f"--method {text!r} names a file: add the approach class after a colon, {text}:ClassName"
                    f"{classes}")


def approach_classes(module: Any) -> list[str]:
    """The names of the Approach subclasses a module defines or imports, sorted."""
    return sorted(name for name, value in vars(module).items()
                  if isinstance(value, type) and issubclass(value, Approach) and value is not Approach)


def entry_point_approaches() -> Iterator[tuple[type[Approach], dict[str, Any]]]:
    """Each approach class of the `clbench.approaches` entry-point group, loaded and checked, with its origin (one at
    a time: the registry registers each before the next is loaded)."""
    for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        distribution = entry_point.dist
        dist_name = distribution.metadata["Name"] if distribution is not None else None
        version = distribution.version if distribution is not None else None
        where = f"entry point {entry_point.name!r} = {entry_point.value!r} of {dist_name or 'an unknown package'}"
        try:
            cls = entry_point.load()
        except Exception as error:
            raise SpecError(f"{where} ({ENTRY_POINT_GROUP}) cannot be loaded ({type(error).__name__}: {error}); "
                            f"fix or uninstall that package") from error
        _check_approach_class(cls, where)
        origin = {"kind": "entry-point", "entry_point": entry_point.name, "value": entry_point.value,
                  "distribution": dist_name, "version": version, "module": cls.__module__,
                  "cls": f"{cls.__module__}.{cls.__qualname__}", "reload": f"entry-point:{entry_point.name}",
                  "description": f"{where} {version or ''}".strip()}
        yield cls, origin


def origin_code_identity(origin: dict[str, Any], module_name: str) -> dict[str, Any]:
    """What identifies a plugin's code in its runs' config hash, from its origin and its class's module.

    A plugin file: its sha256. A module or an installed entry point: the sha256 of its package's Python files
    (where they can be found), and for an entry point its distribution and version.
    """
    if origin["kind"] == "file":
        return {"kind": "file", "sha256": origin["sha256"]}
    identity: dict[str, Any] = {"kind": origin["kind"]}
    if origin["kind"] == "entry-point":
        identity.update(distribution=origin.get("distribution"), version=origin.get("version"))
    files_hash = package_sha256(module_name)
    if files_hash is not None:
        identity["sha256"] = files_hash
    return identity


def package_sha256(module_name: str) -> str | None:
    """sha256 over the relative paths and contents of the Python files of `module_name`'s top-level package (or
    of the module's own file when it is not in a package); None when no file can be found."""
    top = sys.modules.get(module_name.partition(".")[0])
    roots = [Path(folder) for folder in getattr(top, "__path__", None) or []]
    if roots:
        files = sorted((path.relative_to(root).as_posix(), path) for root in roots for path in root.rglob("*.py"))
    else:
        file = getattr(top, "__file__", None)
        files = [(Path(file).name, Path(file))] if file and Path(file).is_file() else []
    if not files:
        return None
    digest = hashlib.sha256()
    for relative, path in files:
        digest.update(f"{relative}\0{file_sha256(path)}\n".encode())
    return digest.hexdigest()


def code_text(identity: dict[str, Any] | None) -> str:
    """A code identity in a message: `sha256 1a2b3c4d5e6f` (with the package version), or `built-in`."""
    if not identity:
        return "built-in code (no code identity)"
    version = f"{identity['distribution']} {identity['version']}, " if identity.get("version") else ""
    digest = identity.get("sha256")
    return f"{version}sha256 {digest[:12]}" if digest else f"{version}files not hashed".rstrip(", ")


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _describe(origin: dict[str, Any], text: str) -> str:
    if origin["kind"] == "file":
        return f"plugin file {origin['path']} (--method {text})"
    return f"plugin module {origin['module']} (--method {text})"


def _import_file(path: Path, text: str) -> Any:
    """Import a Python file once per content (a stable module name from its path and sha256)."""
    if not path.is_file():
        raise SpecError(f"--method {text!r}: plugin file {path} does not exist; give the path of a .py file "
                        f"(relative to the current folder) followed by :ClassName")
    digest = hashlib.sha256(f"{path}:{file_sha256(path)}".encode()).hexdigest()[:16]
    module_name = f"{FILE_MODULE_PREFIX}_{path.stem.replace('-', '_')}_{digest}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise SpecError(f"--method {text!r}: {path} cannot be imported as a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except SpecError:
        del sys.modules[module_name]
        raise
    except Exception as error:
        del sys.modules[module_name]
        raise SpecError(f"--method {text!r}: importing {path} failed ({type(error).__name__}: {error})") from error
    return module


def _import_module(name: str, text: str) -> Any:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as error:
        raise SpecError(f"--method {text!r}: module {name!r} is not importable ({error}); install its package "
                        f"or give a file path like path/to/file.py:ClassName") from error


def _approach_class(module: Any, class_name: str, text: str) -> type[Approach]:
    cls = getattr(module, class_name, None)
    if cls is None:
        public = approach_classes(module)
        raise SpecError(f"--method {text!r}: {user_name(module)} has no class {class_name!r} "
                        f"(Approach subclasses there: {', '.join(public) or 'none'})")
    _check_approach_class(cls, f"--method {text!r}")
    return cls


def _check_approach_class(cls: Any, where: str) -> None:
    if not (isinstance(cls, type) and issubclass(cls, Approach)) or cls is Approach:
        raise SpecError(f"{where}: {user_name(cls)} is not a subclass of clbench.api.Approach; derive your class from "
                        f"it")
    if not cls.name:
        raise SpecError(f"{where}: {cls.__qualname__} has no `name`; set the class attribute, e.g. "
                        f"name = \"my-method\"")
    _check_class_attributes(cls, where)


def _check_class_attributes(cls: type[Approach], where: str) -> None:
    """`name` a string that follows the name rule (it becomes a results folder); `hyperparameters_class` a
    dataclass derived from `Hyperparameters`."""
    from clbench.spec import check_name

    if not isinstance(cls.name, str):
        raise SpecError(f"{where}: {cls.__qualname__}.name is {cls.name!r} ({type(cls.name).__name__}); set it to "
                        f"a string, e.g. name = \"my-method\"")
    check_name(cls.name, f"{where}: {cls.__qualname__}.name")
    hyperparameters = cls.hyperparameters_class
    if not (isinstance(hyperparameters, type) and dataclasses.is_dataclass(hyperparameters)
            and issubclass(hyperparameters, Hyperparameters)):
        raise SpecError(f"{where}: {cls.__qualname__}.hyperparameters_class is {user_name(hyperparameters)}, not a "
                        f"dataclass "
                        f"derived from clbench.api.Hyperparameters; declare it with @dataclass(frozen=True) and "
                        f"derive it from cl.Hyperparameters")

