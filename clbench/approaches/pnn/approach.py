"""Progressive neural networks (Rusu et al. 2016): one column per task, earlier columns frozen.

Task t trains only column t (its layers, its lateral adapters from columns 0..t-1 and its head); the logits of
task t use columns 0..t, so earlier tasks' functions never change. All T columns are built up front with one
common width per layer, chosen by `clbench.nets.sizing` so that the whole network (columns, adapters, heads) has as
many parameters as the base network with its heads (the reference scaled each column to 1.117 / T of the base).

Achieved parameter counts (base -> PNN; tests/test_pnn.py checks them):
- mixture8, AlexNet, 8 tasks, 293 classes: 7,104,229 -> 7,099,424 (-0.07%), columns (9, 18, 35, 284, 284)
  (scale 1.109 / T; the reference: 1.117 / T with truncation)
- mnist2, MLP 784-800-800-800, two 5-class heads: 1,917,610 -> 1,913,781 (-0.20%), columns (381, 381, 381)
- pmnist small, MLP 784-100-100, ten 10-class heads: 98,700 -> 97,902 (-0.81%), columns (10, 14)
  (one multiplier for all layers gives 91,950 or 102,316; `match_widths` then widens the last layer alone)

Bodies: the MLP and the AlexNet-like net, whose layers the columns and adapters are built from
(`pathnet.network.body_plan`). `network.kind` resnet18 is refused (`unsupported_networks`): no ResNet column with
lateral adapters is implemented.

Differences from the reference (joansj/hat), following the paper: the head's adapter has the same
non-linearity as the others (the reference's has none), and the adapter scalars alpha start at small random
values U(0, 0.1) ("initialized by a random small value"; the reference drew them from N(0, 1)).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from torch import nn

from clbench.approaches.base import Approach
from clbench.approaches.datatypes import Hyperparameters
from clbench.approaches.pathnet.network import base_widths, body_plan, pathnet_parameter_count
from clbench.approaches.pnn.network import ProgressiveNet, build_progressive, progressive_parameter_count
from clbench.data.batches import TaskSequence
from clbench.nets.sizing import WidthMatch, match_widths
from clbench.spec import NetworkSpec
from clbench.spec.fields import field


@dataclass(frozen=True)
class PNNHyperparameters(Hyperparameters):
    """PNN has no hyper-parameter of its own: the column widths follow from the parameter budget."""

    clip_grad_norm: float = field(10000.0, doc="gradient-norm clipping (reference for pnn: 10000)",
                                  minimum=0.0, special={0.0: "no clipping"})


def progressive_widths(spec: NetworkSpec, input_shape: Sequence[int], head_sizes: Sequence[int]) -> WidthMatch:
    """Column widths giving the base network's parameter count (heads included) over all columns."""
    base = base_widths(spec)
    target = pathnet_parameter_count(body_plan(spec, input_shape, base), head_sizes, 1)
    return match_widths(target, lambda widths: progressive_parameter_count(body_plan(spec, input_shape, widths),
                                                                           head_sizes), base)


class ProgressiveNetworks(Approach):
    """One column per task; a column is trained on its task only and frozen afterwards.

    The HAT authors' code for this baseline of the paper: joansj/hat@6fd0b9d `src/approaches/progressive.py`,
    `src/networks/alexnet_progressive.py`.
    """

    name = "pnn"
    summary = "progressive networks: a new column per task with lateral adapters, older columns frozen"
    needs_task_id = True  # its prediction uses the task's column: task-aware evaluation only
    refuses_bias_free = "PNN's columns and lateral adapters (pnn/network.py) are built with biases"
    unsupported_networks = {"resnet18": "PNN's columns and lateral adapters are built from the layers of the MLP or "
                                        "the AlexNet-like net (body_plan); no ResNet column with adapters is "
                                        "implemented"}
    hyperparameters_class = PNNHyperparameters

    def build_network(self) -> nn.Module:
        self.widths = progressive_widths(self.context.network, self.context.input_shape, self.context.head_sizes)
        return build_progressive(self.context.network, self.context.input_shape, self.context.head_sizes,
                                 self.widths.widths)

    @property
    def progressive(self) -> ProgressiveNet:
        assert isinstance(self.network, ProgressiveNet)
        return self.network

    def begin_task(self, stage: int, tasks: TaskSequence) -> None:
        """Only column `stage` needs gradients (no backward pass through the frozen columns' weights)."""
        for index, column in enumerate(self.progressive.columns):
            column.requires_grad_(index == stage)

    def trainable_parameters(self, stage: int) -> Iterable[nn.Parameter]:
        """Column `stage`: its layers, adapters and head."""
        return list(self.progressive.columns[stage].parameters())

    def monitoring(self, stage: int, tasks: TaskSequence) -> dict[str, list[dict[str, Any]]]:
        """The column widths and the parameter budget they achieve (one row per layer)."""
        return {"pnn_columns": [
            {"layer": index + 1, "width": width, "parameters": self.widths.parameters, "target": self.widths.target}
            for index, width in enumerate(self.widths.widths)
        ]}

    def extra_state(self) -> dict[str, Any]:
        """Every column lives in the network's state; the widths are kept to check a checkpoint's shape."""
        return {"column_widths": list(self.widths.widths)}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        widths = state.get("column_widths")
        if widths is not None and tuple(widths) != self.widths.widths:
            raise ValueError(f"checkpoint has PNN column widths {tuple(widths)}, this network {self.widths.widths}")
