"""Which loggers a run writes: `--log tensorboard,csv,wandb` (or `CLBENCH_LOG`), checked before any training.

Torch-free and import-free: whether a logger's package is installed is looked up without importing it, so that
`clbench --help` and a bad `--log` stay fast.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from clbench.errors import ClbenchError

ENVIRONMENT_VARIABLE = "CLBENCH_LOG"


@dataclass(frozen=True)
class LoggerKind:
    """A logger: the module it needs (None: the standard library's) and the clbench extra that installs it."""

    module: str | None
    extra: str | None


LOGGERS = {
    "tensorboard": LoggerKind("tensorboard", "tensorboard"),
    "csv": LoggerKind(None, None),
    "wandb": LoggerKind("wandb", "wandb"),
}


def parse_loggers(text: str | None) -> tuple[str, ...]:
    """`tensorboard,csv` -> ("tensorboard", "csv"): each name once, in the order given; "" or None: none.

    An unknown name is a ClbenchError that lists the known ones.
    """
    names: list[str] = []
    for part in (text or "").split(","):
        name = part.strip().lower()
        if not name or name in names:
            continue
        if name not in LOGGERS:
            raise ClbenchError(f"--log {text}: unknown logger {name!r}; choose from {', '.join(LOGGERS)} "
                               f"(comma-separated)")
        names.append(name)
    return tuple(names)


def check_loggers(names: tuple[str, ...]) -> tuple[str, ...]:
    """`names` if every logger's package is installed; else a one-line ClbenchError naming the extra to install."""
    for name in names:
        kind = LOGGERS[name]
        if kind.module is not None and not module_installed(kind.module):
            raise ClbenchError(f"--log {name}: the package {kind.module} is not installed; install it with "
                               f"`pip install 'clbench[{kind.extra}]'`")
    return names


def module_installed(module: str) -> bool:
    """Whether `module` (a top-level name) can be imported, without importing it; a module hidden by an entry
    None in `sys.modules` or by an import hook that refuses it counts as missing."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False
