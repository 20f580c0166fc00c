"""A network whose weights a test sets by hand, and its tasks: features = the input itself (2 values), then three
linear heads of 2, 3 and 4 classes, so that every logit is written down by hand. In the class scenario the heads
side by side are one output: task 1's classes at global indices 0-1, task 2's at 2-4, task 3's at 5-8 (offsets 0,
2, 5). Shared by the scenario and evaluation-cache tests."""

from __future__ import annotations

import torch
from synthetic import tiny_spec

from clbench.approaches.base import Approach
from clbench.approaches.datatypes import ApproachContext
from clbench.approaches.resolution import resolve
from clbench.data.batches import LabelledData, Task, TaskSequence
from clbench.data.transform import InputTransform
from clbench.nets import MultiHeadNet

HEAD_SIZES = (2, 3, 4)
# uint8 images of 1x1x2 pixels, normalised by mean 0 and std 1 of x / 255: sample A is the input (1, 0), B is (0, 1)
IMAGES = torch.tensor([[[[255, 0]]], [[[0, 255]]]], dtype=torch.uint8)  # (2, 1, 1, 2)
TRANSFORM = InputTransform(torch.zeros(3, 1), torch.ones(3, 1), None, flatten=True)


class HandNet(MultiHeadNet):
    """features(x) = x; heads of 2, 3 and 4 classes whose weights the test sets."""

    def __init__(self) -> None:
        super().__init__()
        self.feature_size = 2
        self.heads = self.make_heads(2, HEAD_SIZES)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return x.flatten(1)  # (B, 2)


def hand_net(weights: list[list[list[float]]], biases: list[list[float]]) -> HandNet:
    net = HandNet()
    with torch.no_grad():
        for head, weight, bias in zip(net.heads, weights, biases):
            head.weight.copy_(torch.tensor(weight))
            head.bias.copy_(torch.tensor(bias))
    return net


def input_net() -> HandNet:
    """Logits that depend on the input: task 1's head gives A (1, 0) and B (0, 0); task 2's A (0, 0, 0) and
    B (0, 2, 0); task 3's head is 5 on every class (it must never enter a stage-2 row)."""
    return hand_net([[[1, 0], [0, 0]], [[0, 0], [0, 2], [0, 0]], [[0, 0]] * 4],
                    [[0, 0], [0, 0, 0], [5, 5, 5, 5]])


def approach_of(method: str, scenario: str, cls: type[Approach] | None = None) -> Approach:
    """An approach built as `synthetic.make_approach` builds it, over heads of 2, 3 and 4 classes."""
    spec = tiny_spec("mlp", scenario=scenario)
    resolved = resolve(spec, method)
    context = ApproachContext(spec.network, resolved.training, (2,), HEAD_SIZES, torch.device("cpu"), 0, scenario)
    return (cls or resolved.cls)(context, resolved.hyperparameters)


def hand_tasks() -> TaskSequence:
    """Three tasks whose splits are the samples A (label 0) and B (label 1)."""
    def split(task: int) -> LabelledData:
        return LabelledData(IMAGES, torch.tensor([0, 1]), torch.full((2,), task), TRANSFORM, task)

    return TaskSequence(tuple(Task(u, f"task{u + 1}", n, split(u), split(u), split(u))
                              for u, n in enumerate(HEAD_SIZES)), (2,))
