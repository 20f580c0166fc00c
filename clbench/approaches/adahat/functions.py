"""The mathematics of AdaHAT (Wang et al., ECML-PKDD 2024) as small pure functions on tensors.

Notation as in `clbench.approaches.hat.functions`: gated layers l, one attention vector a^t_l (N_l,) per task t.
AdaHAT keeps HAT's masks and replaces HAT's gradient mask 1 - min(a^{<t}_{l,i}, a^{<t}_{l-1,j}) (HAT Eq. 2) by an
adjustment rate that lets weights used by earlier tasks move a little, less the more tasks use them and the more
of the free capacity the current task takes:

    m^{<t,sum}_l = sum_{i<t} a^i_l                                          (summative mask, AdaHAT Eq. 7)
    I_{l,ij}     = min(m^{<t,sum}_{l,i}, m^{<t,sum}_{l-1,j})                (parameter importance; bias: m_{l,i})
    R_l          = sum_i a^t_{l,i} (1 - a^{<t}_{l,i}) / sum_i (1 - a^{<t}_{l,i})   (network sparsity of layer l)
    r_l          = alpha / (epsilon + R_l)
    g'_{l,ij}    = g_{l,ij} r_l / (I_{l,ij} + r_l)                          (adjustment rate, AdaHAT Eqs. 8-9)

The authors' code is CLArena (pengxiang-wang/continual-learning-arena@bf58528): `clarena/cl_algorithms/adahat.py`
(the rate: lines 162-181; the summative mask: 121-125 and 228-233) and the per-layer network sparsity in
`clarena/cl_algorithms/regularizers/hat_mask_sparsity.py` lines 86-102, which it computes from the training
step's masks (`clarena/cl_algorithms/hat.py` lines 398-414). Nothing here knows about approaches or training loops.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from clbench.approaches.hat.functions import LayerShape, weight_masks

SPARSITY_MIN_AVAILABLE = 10.0
"""A layer's network sparsity R_l is 0 unless more than this many units are free, sum_i (1 - a^{<t}_{l,i}) > 10
(CLArena `hat_mask_sparsity.py` line 101: "to avoid division by a very small number")."""


def summative_masks(task_masks: Sequence[Sequence[torch.Tensor]]) -> list[torch.Tensor]:
    """m^{<t,sum}_l = sum over the finished tasks i < t of a^i_l (AdaHAT Eq. 7; CLArena `adahat.py` 228-233, from
    zeros at the first task, 121-125). `task_masks[i][l]` is a^i_l (N_l,); at least one task."""
    if not task_masks:
        raise ValueError("the summative mask needs the masks of at least one finished task")
    return [torch.stack([masks[layer].detach() for masks in task_masks]).sum(0)
            for layer in range(len(task_masks[0]))]


def parameter_importance(summative: Sequence[torch.Tensor],
                         layers: Sequence[LayerShape]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(weight importance, bias importance) per layer: I_{l,ij} = min(m_{l,i}, m_{l-1,j}) over the summative masks,
    weight-shaped (the first layer: m_{l,i} only; the fc after a conv stack: each channel repeated over its
    positions), and m_{l,i} for the bias (CLArena `adahat.py` 162-168, `backbones/base.py` 399-484: aggregation
    "min"). HAT's Eq. 2 aggregation applied to sums of masks instead of their maximum."""
    return list(zip(weight_masks(summative, layers), [mask.detach() for mask in summative]))


def network_sparsity(masks: Sequence[torch.Tensor], previous: Sequence[torch.Tensor] | None) -> torch.Tensor:
    """R_l per gated layer, (L,): sum_i a^t_{l,i} (1 - a^{<t}_{l,i}) / sum_i (1 - a^{<t}_{l,i}), the share of layer
    l's free units that task t's masks take; 0 for a layer with `SPARSITY_MIN_AVAILABLE` free units or fewer.

    `masks` are a^t of the training step (at its annealed s), `previous` the cumulative a^{<t} (None: a^{<1} = 0).
    CLArena `hat_mask_sparsity.py` lines 86-102 (HAT's Eq. 5 per layer). Not differentiated (a rate, not a loss).
    """
    values = []
    for index, mask in enumerate(masks):
        mask = mask.detach()
        free = torch.ones_like(mask) if previous is None else 1.0 - previous[index].detach()  # (N_l,)
        available = free.sum()
        ratio = torch.dot(mask, free) / available.clamp_min(torch.finfo(free.dtype).tiny)
        values.append(torch.where(available > SPARSITY_MIN_AVAILABLE, ratio, torch.zeros_like(ratio)))
    return torch.stack(values)


def layer_rate_scale(sparsity: torch.Tensor, intensity: float, epsilon: float) -> torch.Tensor:
    """r_l = alpha / (epsilon + R_l) per layer, (L,) (AdaHAT Eq. 9; CLArena `adahat.py` 173-175)."""
    return intensity / (epsilon + sparsity)


def adjustment_rates(importance: Sequence[tuple[torch.Tensor, torch.Tensor]], sparsity: torch.Tensor,
                     intensity: float, epsilon: float) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(weight rate, bias rate) per layer: r_l / (I + r_l) with r_l = alpha / (epsilon + R_l) (AdaHAT Eqs. 8-9;
    CLArena `adahat.py` 172-181). 1 where no earlier task used the parameter (I = 0), towards 0 as I grows.

    Args:
        importance: `parameter_importance` of the summative masks, per layer.
        sparsity: `network_sparsity`, (L,).
        intensity: alpha, the adjustment intensity (> 0).
        epsilon: the constant added to R_l (> 0 keeps r_l finite).
    """
    scales = layer_rate_scale(sparsity, intensity, epsilon)
    return [(scale / (weight + scale), scale / (bias + scale))
            for (weight, bias), scale in zip(importance, scales.unbind())]
