"""Shell completion of the CLI's values (`clbench --install-completion`): benchmark names, method names, `--set` keys
and devices.

Completion runs the program once per key press (Click's `_CLBENCH_COMPLETE` protocol), so these read only torch-free
tables and files: the shipped specs and `./benchmarks/*.yaml`, the approaches' `BUILTINS` table (no registry, no
plugin) and the spec's typed sections.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import typer

SET_SECTIONS = ("data", "network", "training")
"""The spec's sections whose fields `--set SECTION.KEY=VALUE` overrides (`clbench.spec.sections`)."""
DEVICES = ("auto", "cpu", "cuda")
"""The devices every machine names (`cuda:N` is completed from `cuda`)."""


def benchmark_names(incomplete: str) -> list[str]:
    """The shipped benchmarks' names and the specs in `./benchmarks/` (as paths) that start with `incomplete`."""
    from clbench.spec import benchmark_names as shipped

    local = sorted(str(path) for path in Path("benchmarks").glob("*.yaml"))
    return [name for name in [*shipped(), *local] if name.startswith(incomplete)]


def method_names(incomplete: str) -> list[str]:
    """Built-in method names completing the last entry of a comma-separated `--method` (`hat,e` -> `hat,ewc`)."""
    from clbench.approaches import BUILTINS

    head, _, last = incomplete.rpartition(",")
    prefix = f"{head}," if head else ""
    return [prefix + name for name in sorted(BUILTINS) if name.startswith(last)]


def set_keys(ctx: typer.Context, incomplete: str) -> list[str]:
    """`--set` keys (`training.lr=`) from the benchmark named on the command line, else the spec's sections; none
    once the key is typed (after `=`)."""
    if "=" in incomplete:
        return []
    keys = _spec_keys(ctx.params.get("benchmark"))
    return [f"{key}=" if "." in key else f"{key}." for key in keys if key.startswith(incomplete)]


def devices(incomplete: str) -> list[str]:
    """`auto`, `cpu`, `cuda` (free text otherwise: `cuda:N` has no fixed list)."""
    return [name for name in DEVICES if name.startswith(incomplete)]


def _spec_keys(benchmark: str | None) -> list[str]:
    """Every `SECTION.FIELD` of the benchmark's typed spec, every built-in approach's `APPROACH.FIELD` (its
    hyper-parameters, `approach_fields`) and `APPROACH.training.FIELD`, and the keys of a plugin's section in the
    spec; the top-level keys (the sections and the built-in methods) when no benchmark is named or it cannot be
    read."""
    from clbench.approaches import BUILTINS
    from clbench.errors import ClbenchError
    from clbench.spec import load_benchmark

    if benchmark:
        try:
            spec = load_benchmark(benchmark)
        except (ClbenchError, OSError):
            pass
        else:
            fields = [f"{section}.{field.name}" for section in SET_SECTIONS
                      for field in dataclasses.fields(getattr(spec, section))]
            training = [f"training.{field.name}" for field in dataclasses.fields(spec.training)]
            own = [f"{method}.{key}" for method in sorted(BUILTINS)
                   for key in [*approach_fields(method), *training]]
            other = [f"{method}.{key}" for method, section in spec.approaches.items() if method not in BUILTINS
                     for key in section]  # a plugin's section in the spec file: the keys the file gives
            return sorted(fields) + own + sorted(other)
    return [*SET_SECTIONS, *sorted(BUILTINS)]


def approach_fields(method: str) -> list[str]:
    """The hyper-parameter fields of a built-in approach (`hyperparameters_class`, its bases' first), read from the
    source files with `ast`, not imported: an approach's module imports torch, and completion must not."""
    from clbench.approaches import BUILTINS

    module, _, name = BUILTINS[method].partition(":")
    found = _class(module, name)
    while found is not None:  # the approach class, then its bases, until one names its hyper-parameters class
        where, approach = found
        named = [statement.value for statement in approach.body
                 if isinstance(statement, ast.Assign) and any(getattr(target, "id", None) == "hyperparameters_class"
                                                              for target in statement.targets)
                 or isinstance(statement, ast.AnnAssign) and getattr(statement.target, "id", None) ==
                 "hyperparameters_class"]
        if named and isinstance(named[0], ast.Name):
            hyperparameters = _class(where, named[0].id)
            return [] if hyperparameters is None else list(dict.fromkeys(_fields(*hyperparameters)))
        bases = [base.id for base in approach.bases if isinstance(base, ast.Name)]
        found = _class(where, bases[0]) if bases else None
    return []


def _fields(module: str, definition: ast.ClassDef) -> list[str]:
    """The annotated fields of a dataclass definition, its bases' first (each base found through the imports)."""
    inherited = [field for base in definition.bases if isinstance(base, ast.Name)
                 if (found := _class(module, base.id)) is not None for field in _fields(*found)]
    own = [statement.target.id for statement in definition.body if isinstance(statement, ast.AnnAssign)
           and isinstance(statement.target, ast.Name) and "ClassVar" not in ast.unparse(statement.annotation)]
    return inherited + own


def _class(module: str, name: str) -> tuple[str, ast.ClassDef] | None:
    """(module, definition) of the class `name` seen in `module`: defined there, or imported into it (followed)."""
    import importlib.util

    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return None
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    for statement in tree.body:
        if isinstance(statement, ast.ClassDef) and statement.name == name:
            return module, statement
    for statement in tree.body:
        if isinstance(statement, ast.ImportFrom) and statement.module and statement.level == 0:
            if any((alias.asname or alias.name) == name for alias in statement.names):
                original = next(alias.name for alias in statement.names if (alias.asname or alias.name) == name)
                return _class(statement.module, original)
    return None


def dataset_names(incomplete: str) -> list[str]:
    """`clbench fetch` names: the built-in data sets (`clbench.spec.catalogue`), then the benchmarks."""
    from clbench.spec.catalogue import DATASET_NAMES

    return [name for name in DATASET_NAMES if name.startswith(incomplete)] + benchmark_names(incomplete)
