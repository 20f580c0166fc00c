"""The mathematics of HAT (Serra et al., ICML 2018) as small pure functions on tensors.

Notation: a gated network has layers l = 1..L-1 (every conv layer and hidden fully-connected layer; not
the heads, not the input), each with one attention value per unit: `masks[l]` is a vector (N_l,). The
weight of layer l connects input units j (the units of layer l-1, or the network's input for l = 1) to
output units i; `LayerShape` says how: its weight tensor shape and, for the fully-connected layer after the
conv stack, how many flattened positions each conv channel spans.

Nothing here knows about approaches or training loops; `clbench.approaches.hat` wires these in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

COSH_CLAMP = 50.0  # the paper: clamp |s e| <= 50 inside the compensation's cosh
EMBEDDING_CLAMP = 6.0  # the paper: keep e within the active range of the standard sigmoid, [-6, 6]


@dataclass(frozen=True)
class LayerShape:
    """How a gated layer's weight connects input units to output units.

    Attributes:
        name: the layer's name in monitoring tables (e.g. ``conv1``, ``fc2``).
        weight_shape: (out, in) for a linear layer, (out, in, k, k) for a conv layer.
        input_repeat: consecutive weight columns per input unit: S*S for the fully-connected layer after a
            conv stack whose output (C, S, S) is flattened channel-major (column c*S*S + i belongs to
            channel c); 1 otherwise.
        gated_input: whether the input units carry a mask (False for the first layer: the network input).
    """

    name: str
    weight_shape: tuple[int, ...]
    input_repeat: int = 1
    gated_input: bool = True

    @property
    def n_weights(self) -> int:
        count = 1
        for size in self.weight_shape:
            count *= size
        return count


# ---------------------------------------------------------------------------------------------- gate, s
def annealed_scale(batch_index: int, n_batches: int, smax: float) -> float:
    """The paper's Eq. 3: s = 1/smax + (smax - 1/smax) (b - 1)/(B - 1), with b = batch_index + 1.

    Args:
        batch_index: 0-based index of the batch in the epoch (b - 1).
        n_batches: B, batches in the epoch. With B = 1 the single batch gets s = 1/smax (the ramp's start).
        smax: the stability hyper-parameter s_max >= 1.
    """
    progress = batch_index / (n_batches - 1) if n_batches > 1 else 0.0
    return 1.0 / smax + (smax - 1.0 / smax) * progress


def annealing_schedule(n_batches: int, smax: float, device: torch.device | str = "cpu") -> torch.Tensor:
    """Eq. 3 for every batch of an epoch at once: (B,) float32 tensor, entry b-1 is the s of batch b."""
    progress = torch.arange(n_batches, dtype=torch.float64) / max(1, n_batches - 1)  # (B,)
    return (1.0 / smax + (smax - 1.0 / smax) * progress).to(device=device, dtype=torch.float32)


def gate(embedding: torch.Tensor, s: torch.Tensor | float) -> torch.Tensor:
    """The paper's Eq. 1: a = sigmoid(s e), element-wise."""
    return torch.sigmoid(s * embedding)


def compensation_factor(embedding: torch.Tensor, s: torch.Tensor | float, smax: float) -> torch.Tensor:
    """Embedding gradient compensation (Sec. 2.5): q' = factor * q, with

    factor = smax sigma'(e) / (s sigma'(s e)) = smax [cosh(s e) + 1] / (s [cosh(e) + 1]),

    where |s e| is clamped to 50 inside the cosh for numerical stability (as in the paper).
    """
    scaled = torch.clamp(s * embedding, -COSH_CLAMP, COSH_CLAMP)
    return smax / s * (torch.cosh(scaled) + 1.0) / (torch.cosh(embedding) + 1.0)


# ---------------------------------------------------------------------------------------------- masks
def cumulative_masks(new: Sequence[torch.Tensor], previous: Sequence[torch.Tensor] | None) -> list[torch.Tensor]:
    """a^{<=t}_l = max(a^t_l, a^{<=t-1}_l) element-wise (Sec. 2.3); `previous` None is the all-zero a^{<=0}."""
    if previous is None:
        return [mask.detach().clone() for mask in new]
    return [torch.maximum(mask.detach(), old) for mask, old in zip(new, previous)]


@dataclass(frozen=True)
class RegulariserWeights:
    """Eq. 5's terms that depend only on the earlier tasks' masks, computed once per task.

    Attributes:
        free: (sum_l N_l,) the capacity not yet used, 1 - a^{<t}, concatenated over the layers (all ones for
            the first task, a^{<1} = 0).
        inverse_total: 0-dim, 1 / sum(free), or 0 when earlier tasks already use every unit fully (then
            nothing is left to regularise and R = 0).
    """

    free: torch.Tensor
    inverse_total: torch.Tensor


def regulariser_weights(previous: Sequence[torch.Tensor] | None, unit_counts: Sequence[int],
                        device: torch.device | str = "cpu") -> RegulariserWeights:
    """The weights of Eq. 5 for masks of `unit_counts` units per layer; `previous` None is a^{<1} = 0."""
    if previous is None:
        free = torch.ones(sum(unit_counts), device=device)
    else:
        free = 1.0 - torch.cat([old.detach() for old in previous]).to(device)
    total = free.sum()  # constants (no gradient flows here): 1/0 = inf is discarded by the where
    return RegulariserWeights(free, torch.where(total > 0, total.reciprocal(), torch.zeros_like(total)))


def weighted_attention(masks: Sequence[torch.Tensor], weights: RegulariserWeights) -> torch.Tensor:
    """R of Eq. 5 from precomputed `weights`: sum_l,i a^t_li free_li / sum_l,i free_li (0-dim).

    Differentiable with respect to `masks`; no host-device synchronisation; three operations whatever the
    number of layers.
    """
    return torch.dot(torch.cat(list(masks)), weights.free) * weights.inverse_total


def attention_regulariser(masks: Sequence[torch.Tensor], previous: Sequence[torch.Tensor] | None) -> torch.Tensor:
    """The paper's Eq. 5: R = sum_l,i a^t_li (1 - a^{<t}_li) / sum_l,i (1 - a^{<t}_li).

    With `previous` None (the first task, a^{<1} = 0) this is the mean attention over all gated units. When
    earlier tasks already use every unit fully (the denominator is 0), R = 0: nothing is left to regularise.
    Differentiable with respect to `masks`. A training loop computes `regulariser_weights` once per task and
    calls `weighted_attention` per batch.
    """
    weights = regulariser_weights(previous, [mask.numel() for mask in masks], masks[0].device)
    return weighted_attention(masks, weights)


def expand_input_mask(mask: torch.Tensor, repeat: int) -> torch.Tensor:
    """A conv channel mask (C,) as a mask over the flattened (C, S, S) features: (C * repeat,), channel-major."""
    return mask.repeat_interleave(repeat)


def weight_masks(masks: Sequence[torch.Tensor], layers: Sequence[LayerShape]) -> list[torch.Tensor]:
    """min(a_out_i, a_in_j) expanded to each layer's weight shape (Eq. 2); the first layer: a_out only.

    Args:
        masks: one (N_l,) attention vector per gated layer, in layer order.
        layers: the matching layer shapes.

    Returns:
        One tensor per layer, shaped like its weight: (out, in) or (out, in, k, k).
    """
    result = []
    for index, (mask, layer) in enumerate(zip(masks, layers)):
        trailing = (1,) * (len(layer.weight_shape) - 1)
        out = mask.view(-1, *trailing)  # (out, 1[, 1, 1])
        if not layer.gated_input:
            result.append(out.expand(layer.weight_shape).clone())
            continue
        incoming = expand_input_mask(masks[index - 1], layer.input_repeat)  # (in,)
        incoming = incoming.view(1, -1, *trailing[1:])  # (1, in[, 1, 1])
        result.append(torch.minimum(out, incoming).expand(layer.weight_shape).clone())
    return result


def gradient_multipliers(masks: Sequence[torch.Tensor],
                         layers: Sequence[LayerShape]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(weight multiplier, bias multiplier) per layer from the cumulative masks a^{<=t-1}.

    Weight: 1 - min(a_out, a_in) (Eq. 2); bias: 1 - a_out (the bias is a weight from a constant input unit).
    """
    return [(1.0 - weights, 1.0 - mask)
            for weights, mask in zip(weight_masks(masks, layers), masks)]


# ---------------------------------------------------------------------------------------------- monitoring
def binary_weight_masks(masks: Sequence[torch.Tensor], layers: Sequence[LayerShape],
                        threshold: float) -> list[torch.Tensor]:
    """Which weights a set of masks uses: min(a_out, a_in) > threshold, per layer (bool, weight-shaped)."""
    return [weights > threshold for weights in weight_masks(masks, layers)]


def capacity_usage(masks: Sequence[torch.Tensor], layers: Sequence[LayerShape],
                   threshold: float) -> list[tuple[int, int]]:
    """(weights used, weights in total) per layer (Sec. 4.3: network capacity, layer use; heads excluded)."""
    used = binary_weight_masks(masks, layers, threshold)
    return [(int(mask.sum()), layer.n_weights) for mask, layer in zip(used, layers)]


def weight_reuse(earlier: Sequence[torch.Tensor], later: Sequence[torch.Tensor], layers: Sequence[LayerShape],
                 threshold: float) -> tuple[int, int]:
    """(weights of the earlier task that the later task also uses, weights the earlier task uses), summed over
    layers (Sec. 4.3, weight reuse across tasks): their ratio is the fraction of t_i's weights reused in t_j."""
    first = binary_weight_masks(earlier, layers, threshold)
    second = binary_weight_masks(later, layers, threshold)
    shared = sum(int((a & b).sum()) for a, b in zip(first, second))
    used = sum(int(a.sum()) for a in first)
    return shared, used
