"""A plugin file for the tests, written only against `clbench.api` (`-m tests/plugins/my_plugin.py:MyApproach`)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

import clbench.api as cl


@dataclass(frozen=True)
class MyHyperparameters(cl.Hyperparameters):
    """The test plugin's hyper-parameters."""

    strength: float = cl.field(0.001, doc="weight decay of the body towards 0", minimum=0.0)


class MyApproach(cl.Approach):
    """Fine-tuning with a small L2 penalty on the body's weights."""

    name = "my-plugin"
    summary = "test plugin: fine-tuning with weight decay"
    hyperparameters_class = MyHyperparameters
    hparams: MyHyperparameters

    def penalty(self, stage: int) -> torch.Tensor | float:
        return self.hparams.strength * sum((p ** 2).sum() for _, p in cl.named_body_parameters(self.multihead))


class ClashingSGD(cl.Approach):
    """Takes the name of a built-in approach (an error when loaded)."""

    name = "sgd"


class NotAnApproach:
    """Not derived from `clbench.api.Approach`."""

    name = "not-an-approach"
