"""What the CLI tests share: tiny training options, a spec over its own npz data set, rich's wrapped output as
one line, and a registry that forgets the plugins a command loaded."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

TINY = ["--set", "training.max_epochs=1", "--set", "training.batch_size=4", "--device", "cpu"]
NPZ_SPEC = """\
name: mine
datasets:
  my-arrays: {format: npz, path: ./arrays.npz}
data: {kind: split, datasets: [my-arrays], classes_per_task: [2], form: mnist28}
network: {kind: mlp, hidden: [8]}
"""


def flat(text: str) -> str:
    """Output as one line: rich wraps long lines."""
    return " ".join(text.split())


@contextmanager
def kept_registry() -> Iterator[None]:
    """The approach registry (and plugin origins) as before, after the block: as a new process would start."""
    from clbench.approaches import ORIGINS, REGISTRY

    registry, origins = dict(REGISTRY), dict(ORIGINS)
    try:
        yield
    finally:
        REGISTRY.clear()
        REGISTRY.update(registry)
        ORIGINS.clear()
        ORIGINS.update(origins)
