"""SGD-F: after the first task, every parameter except the task heads is frozen."""

from __future__ import annotations

from collections.abc import Iterable

from torch import nn

from clbench.approaches.base import Approach


class SGDFrozen(Approach):
    """Train the whole network on task 1; afterwards only the new heads learn (the body is a fixed extractor)."""

    name = "sgd-f"
    summary = "SGD with everything but the heads frozen after task 1"

    def trainable_parameters(self, stage: int) -> Iterable[nn.Parameter]:
        if stage == 0:
            return list(self.network.parameters())
        return list(self.multihead.heads[stage].parameters())
