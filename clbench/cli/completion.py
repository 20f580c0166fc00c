"""Shell completion of the CLI's values (`clbench --install-completion`): benchmark names, method names, `--set` keys
and devices.

Completion runs the program once per key press (Click's `_CLBENCH_COMPLETE` protocol), so these read only torch-free
tables and files: the shipped specs and `./benchmarks/*.yaml`, the approaches' `BUILTINS` table (no registry, no
plugin) and the spec's typed sections.
"""

from __future__ import annotations

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
    """Every `SECTION.FIELD` of the benchmark's typed spec and `APPROACH.KEY` of its approach sections; the top-level
    keys (the sections and the built-in methods) when no benchmark is named or it cannot be read."""
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
            own = [f"{method}.{key}" for method, section in spec.approaches.items() for key in section]
            return sorted(fields) + sorted(own)
    return [*SET_SECTIONS, *sorted(BUILTINS)]


def dataset_names(incomplete: str) -> list[str]:
    """`clbench fetch` names: the built-in data sets (`clbench.spec.catalogue`), then the benchmarks."""
    from clbench.spec.catalogue import DATASET_NAMES

    return [name for name in DATASET_NAMES if name.startswith(incomplete)] + benchmark_names(incomplete)
