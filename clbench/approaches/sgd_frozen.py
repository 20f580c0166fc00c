"""SGD-F: after the first task, every parameter except the task heads is frozen.

A frozen body includes its batch norm (resnet18): from the second task on, its batch-norm layers stay in eval mode
while the new heads train, so their running statistics, like the weights, stay those of task 1 and the features
task 1's head was trained on do not drift.
"""

from __future__ import annotations

from collections.abc import Iterable

from torch import nn

from clbench.approaches.base import Approach


class SGDFrozen(Approach):
    """Train the whole network on task 1; afterwards only the new heads learn (the body is a fixed extractor).

    The HAT authors' code for this baseline of the paper: joansj/hat@6fd0b9d `src/approaches/sgd_frozen.py`.
    """

    name = "sgd-f"
    summary = "SGD with everything but the heads frozen after task 1"

    def trainable_parameters(self, stage: int) -> Iterable[nn.Parameter]:
        if stage == 0:
            return list(self.network.parameters())
        return list(self.multihead.heads[stage].parameters())

    def train_mode(self, stage: int) -> None:
        """Training mode; after task 1 the body's batch norm in eval mode (its running statistics frozen)."""
        super().train_mode(stage)
        if stage > 0:
            for module in self.network.modules():
                if isinstance(module, nn.modules.batchnorm._BatchNorm):
                    module.eval()
