"""BiC's mathematics as small pure functions on tensors.

Wu et al. 2019 (CVPR), Sec. 3-4: the bias correction layer (Eq. 5: q_k = o_k for the old classes, alpha o_k + beta
for the new ones), the distillation loss with temperature T (Eq. 1) and its weight lambda = n / (n + m) (Sec. 3;
n old classes, m new ones); FACIL (mmasana/FACIL@e09d2c8) `src/approach/bic.py` for the details the paper leaves
open (cited per function).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

import torch
from torch.nn import functional


def bias_correct(logits: torch.Tensor, column_task: torch.Tensor, alpha: torch.Tensor,
                 beta: torch.Tensor) -> torch.Tensor:
    """Each column c of `logits` (B, C) through its task's bias layer: alpha[t] * o_c + beta[t], t = column_task[c].

    `column_task` (C,): the task of each column; `alpha`, `beta` (T,): one pair per task (1 and 0: unchanged).
    Differentiable in alpha and beta (FACIL `bias_forward`: `BiasLayer` m applied to head m's outputs).
    """
    return logits * alpha[column_task] + beta[column_task]  # (B, C)


def distillation_weight(old_classes: int, seen_classes: int) -> float:
    """lambda = n / (n + m): the old classes over every class seen (Sec. 3; FACIL `criterion` with lamb=-1:
    `task_cls[:t].sum() / task_cls.sum()`)."""
    return old_classes / seen_classes


def loss_weights(schedule: str, stage: int, old_classes: int, seen_classes: int,
                 temperature: float) -> tuple[float, float]:
    """(weight of the cross-entropy, weight of the distillation) during task `stage` (0-based) with lamb -1.

    paper: 1 - lambda and lambda, lambda = n / (n + m) (`distillation_weight`). mammoth: Mammoth's models/bic.py
    (aimagelab/mammoth@e75a491): lambda = 1 / (t + 1) (`begin_task`, line 57) and the distillation times T^2
    (`observe`, line 152: `(1 - lamda) * class_loss + lamda * dist_loss * temp * temp`).
    """
    if schedule == "mammoth":
        weight = 1.0 / (stage + 1)
        return 1.0 - weight, weight * temperature * temperature
    weight = distillation_weight(old_classes, seen_classes)
    return 1.0 - weight, weight


def bic_distillation(current: torch.Tensor, old: torch.Tensor, temperature: float,
                     eps: float = 1e-5) -> torch.Tensor:
    """Eq. 1, -sum_k pi_hat_k(old / T) log pi_k(current / T), the mean over the batch, as FACIL computes it
    (`cross_entropy` with exp = 1/T): the softmax raised to 1/T and renormalised (= the softmax of logits / T),
    then `eps / C` added to the current network's probabilities and renormalised before the log.

    current, old: (B, C_old) logits of the old classes (bias-corrected where the earlier tasks have a layer).
    """
    n = current.shape[1]
    target = functional.softmax(old / temperature, dim=1)  # (B, C_old)
    probability = functional.softmax(current / temperature, dim=1) + eps / n
    probability = probability / probability.sum(1, keepdim=True)
    return -(target * probability.log()).sum(1).mean()


def held_out_per_class(buffer_size: int, seen_classes: int, fraction: float) -> tuple[int, int]:
    """(exemplars per class, of which held out for the bias fit): m = floor(buffer / classes seen), and
    ceil(fraction x m) held out (FACIL `train_loop` stage 0, with `--num-exemplars`; Sec. 6.1: "the ratio of
    train/validation split on the exemplars is 9:1")."""
    per_class = buffer_size // seen_classes
    return per_class, math.ceil(fraction * per_class)


# The authors' schedule of the bias fit's lr (wuyuebupt/LargeScaleIncrementalLearning@7f687a3 imagenet_main.py
# lines 388-394: with `flag_bias`, boundary_epochs [30, 60, 80, 90] x _BIAS_EPOCHS (2) and decay_rates [1, 0.1,
# 0.01, 0.001, 1e-4], over epochs_per_eval (100, line 548) x _BIAS_EPOCHS = 200 bias epochs, resnet.py line 743):
# the lr times 0.1 after 30%, 60%, 80% and 90% of the bias epochs. FACIL (src/approach/bic.py, stage 2) keeps it
# constant; with momentum 0.9 that iteration is under-damped on the two-parameter fit and, cut after a few epochs,
# stops wherever its swing is (issue 58: alpha -0.12 after 5 epochs, where the held-out loss is least at 0.42).
BIAS_LR_BOUNDARIES = (0.3, 0.6, 0.8, 0.9)
# Alpha is kept at or above this while it is fitted (projected after every step). Eq. 5 rescales the new classes'
# logits against the old ones' (Sec. 3.3); with alpha > 0 the layer does not reorder a task's own logits, so each
# head's task-aware prediction stays the network's; alpha <= 0 would flatten or reverse it (issue 58: task 5 at 1.9%
# in its 2-class head). The paper, the authors' code, FACIL and Mammoth leave alpha free. 1e-3 rather than 0: at
# that scale two logits of a head still differ after the layer unless they are within about 1e-4 x |beta| (float32).
ALPHA_FLOOR = 1e-3


def bias_lr_factor(epoch: int, epochs: int) -> float:
    """The factor of the bias fit's lr in epoch `epoch` (0-based) of `epochs`: 0.1 per boundary of
    `BIAS_LR_BOUNDARIES` (fractions of `epochs`) reached (the authors' step decay)."""
    return 0.1 ** sum(epoch >= fraction * epochs for fraction in BIAS_LR_BOUNDARIES)


def fit_bias(logits: torch.Tensor, targets: torch.Tensor, column_task: torch.Tensor, alpha: torch.Tensor,
             beta: torch.Tensor, task: int, *, epochs: int, batch_size: int, optimizer: str, lr: float,
             momentum: float, beta_l2: float, generator: torch.Generator,
             each_step: Callable[[int], AbstractContextManager[object]] = lambda size: nullcontext()
             ) -> tuple[float, float]:
    """Task `task`'s (alpha, beta) fitted on held-out samples' logits, every other task's pair fixed.

    logits (N, C): the frozen network's outputs on the held-out samples; targets (N,): their class in 0..C-1.
    Each epoch one pass in a random order (`generator`) by batches of `batch_size`, the loss the cross-entropy of
    the corrected logits over the C classes, without temperature (Eq. 4-5), plus `beta_l2` x beta^2 / 2 (FACIL:
    "in their code, they apply a 0.1 * L2-loss to the gamma variable"). `optimizer`: `sgd` (with `momentum`, the lr
    decayed as the authors' code does, `bias_lr_factor`; FACIL: SGD at the network's lr, momentum 0.9, constant)
    or `adam` (Mammoth `models/bic.py`: Adam, lr 0.001, constant). Alpha is held at `ALPHA_FLOOR` or above after
    every step (a projected fit), so that the layer never reorders the task's own logits.
    The network is frozen, so its logits are computed once rather than at every epoch: the same values.
    `each_step(batch size)`: a context entered around each step (the FLOP counter's sampling, `FlopLedger.sampled`).
    """
    start_alpha, start_beta = float(alpha[task]), float(beta[task])
    pair = torch.tensor([start_alpha, start_beta], dtype=logits.dtype, device=logits.device, requires_grad=True)
    step = (torch.optim.SGD([pair], lr=lr, momentum=momentum) if optimizer == "sgd"
            else torch.optim.Adam([pair], lr=lr))
    mine = (column_task == task).unsqueeze(0)  # (1, C)
    fixed = bias_correct(logits, column_task, alpha, beta)  # (N, C) the other tasks' columns
    for epoch in range(epochs):
        if optimizer == "sgd":
            step.param_groups[0]["lr"] = lr * bias_lr_factor(epoch, epochs)
        order = torch.randperm(logits.shape[0], generator=generator).to(logits.device)
        for indices in order.split(batch_size):
            with each_step(len(indices)):
                corrected = torch.where(mine, logits[indices] * pair[0] + pair[1], fixed[indices])  # (b, C)
                loss = functional.cross_entropy(corrected, targets[indices]) + beta_l2 * pair[1] ** 2 / 2
                step.zero_grad()
                loss.backward()
                step.step()
                with torch.no_grad():
                    pair[0].clamp_(min=ALPHA_FLOOR)
    fitted = pair.detach()
    return float(fitted[0]), float(fitted[1])
