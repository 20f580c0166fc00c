"""AdaHAT: adaptive hard attention to the task (Wang, Bo, Hong, Liu & Mu, ECML-PKDD 2024).

HAT (`clbench.approaches.hat.approach.Hat`) with one change: after backward, each body weight's gradient is
multiplied by AdaHAT's adjustment rate r_l / (I + r_l) instead of HAT's 1 - min(a_out, a_in) of the cumulative mask
(`clbench.approaches.adahat.functions`): I is the parameter importance, the minimum of the two units' summative
masks m^{<t,sum} (the sum of the earlier tasks' masks, not their maximum), and r_l = alpha / (epsilon + R_l) with R_l
the share of layer l's free units that the training step's masks a^t take (recomputed every step). A weight no
earlier task used gets rate 1; a weight every earlier task used barely moves; none is frozen.

Everything else is HAT's, shared and not copied: the gated network, annealing of s, the attention regulariser
c R (Eqs. 4-5), the embedding compensation and clamping, the masks kept after each task (the summative mask is
the sum of HAT's stored a^i at s = smax), checkpoints and the monitoring tables (`hat_masks`, `hat_capacity`,
`hat_reuse`, reported by HAT's reporter).

The authors' code: CLArena (pengxiang-wang/continual-learning-arena@bf58528, `clarena/cl_algorithms/adahat.py`).
Differences kept on purpose: CLArena stores binary masks (embedding > 0) and sums those; here the masks are HAT's
a^i at s = smax (equal to those to float precision except for units whose embedding is within ~0.02 of 0).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from clbench.approaches.adahat import functions as adahat_functions
from clbench.approaches.datatypes import ApproachContext, Hyperparameters, StepInfo
from clbench.approaches.hat.approach import Hat, HatHyperparameters
from clbench.data.batches import Batch
from clbench.spec.fields import field

AUTHORS_CONFIG = "pengxiang-wang/continual-learning-research@07c8d26 configs/cl_algorithm/adahat.yaml"


@dataclass(frozen=True)
class AdaHatHyperparameters(HatHyperparameters):
    """AdaHAT's hyper-parameters: HAT's, with the authors' values, plus the adjustment's alpha and epsilon."""

    c: float = field(0.1, doc="compressibility c of HAT's attention regulariser (Eq. 4); AdaHAT's authors: "
                              f"mask_sparsity_reg_factor 0.1 ({AUTHORS_CONFIG} line 6)", minimum=0.0)
    adjustment_intensity: float = field(1e-6, doc="alpha of the adjustment rate r_l = alpha / (epsilon + R_l) "
                                                  f"(AdaHAT Eq. 9; authors: 1e-6, {AUTHORS_CONFIG} line 3)",
                                        above=0.0)
    epsilon: float = field(0.1, doc="epsilon added to the network sparsity R_l in r_l (AdaHAT Eq. 9; authors: 0.1, "
                                    f"{AUTHORS_CONFIG} line 9 and clarena/cl_algorithms/adahat.py line 42)",
                           above=0.0)


class AdaHat(Hat):
    """HAT whose gradient mask is AdaHAT's adaptive adjustment rate from the summative mask history.

    The authors' code: pengxiang-wang/continual-learning-arena@bf58528 `clarena/cl_algorithms/adahat.py` (the rate
    and the summative mask) and `clarena/cl_algorithms/regularizers/hat_mask_sparsity.py` (the per-layer sparsity).
    """

    name = "adahat"
    summary = "adaptive hard attention to the task (Wang et al. 2024)"
    unsupported_networks = {"resnet18": "AdaHAT adjusts the gradients of HAT's gated units (Wang et al. 2024, Sec. 3; "
                                        "HAT Sec. 2.2); a ResNet's batch norm and residual connections are not "
                                        "masked, and no gated ResNet is implemented"}
    hyperparameters_class = AdaHatHyperparameters
    hparams: AdaHatHyperparameters

    def __init__(self, context: ApproachContext, hyperparameters: Hyperparameters) -> None:
        super().__init__(context, hyperparameters)
        self.importance: list[tuple[torch.Tensor, torch.Tensor]] = []  # I per layer: (weight, bias)
        self.step_masks: list[torch.Tensor] | None = None  # a^t of the training step in progress

    def training_forward(self, batch: Batch, step: StepInfo) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """HAT's training forward; the step's masks a^t are kept for the network sparsity R_l."""
        logits, masks = super().training_forward(batch, step)
        self.step_masks = masks
        return logits, masks

    def gradient_masks(self, stage: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """(gradient, adjustment rate) of every gated weight and bias (AdaHAT Eqs. 8-9); none at the first task,
        where every rate is r / (0 + r) = 1."""
        if stage == 0:
            return []
        assert self.step_masks is not None
        hparams = self.hparams
        sparsity = adahat_functions.network_sparsity(self.step_masks, self.cumulative)
        rates = adahat_functions.adjustment_rates(self.importance, sparsity, hparams.adjustment_intensity,
                                                  hparams.epsilon)
        return [(parameter.grad, rate)
                for module, layer_rates in zip(self.network.gated_modules(), rates)
                for parameter, rate in zip((module.weight, module.bias), layer_rates)
                if parameter is not None and parameter.grad is not None]

    def update_multipliers(self) -> None:
        """The parameter importance from the summative mask m^{<t,sum} = sum of the finished tasks' a^i (Eq. 7),
        after each task and on resuming (HAT's own multipliers are not used)."""
        if not self.task_masks:
            self.importance = []
            return
        summative = adahat_functions.summative_masks(self.task_masks)
        self.importance = adahat_functions.parameter_importance(summative, self.layer_shapes)
