"""SupSup's mathematics as pure functions (Wortsman et al., NeurIPS 2020; RAIVNLab/supsup@6a31878).

- Fixed weights, the signed Kaiming constant: every weight is +-sqrt(2 / fan_in), its sign a fair coin
  (`models/init.py:7-11` `signed_constant`: the sign of torch's default init times gain(relu) / sqrt(fan_in),
  mode fan_in and nonlinearity relu by default, `args.py:127-130`).
- Scores, one tensor per task and layer, initialised as torch's default weights: kaiming_uniform(a=sqrt(5)), i.e.
  U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (`models/module_util.py:8-11` `mask_init`).
- A task's supermask from its scores, by one of the authors' two rules: `threshold`, an edge is in when its score
  is >= 0 (`mnist.ipynb` cell 3 `GetSubnet`; `models/module_util.py:118-129` `GetSubnetFast`, the layer of their
  permuted-MNIST GNu runs `experiments/GNu/MNISTPerm/FC-250-tasks/supsup_h.py:13`), or `top-k`, edge-popup's
  rule: the `density` fraction of the layer's edges with the largest |score| (`models/module_util.py:48-66`
  `GetSubnet`: the int((1 - k) numel) smallest zeroed, called on `scores.abs()` in `models/modules.py:99-101`).
  Both pass the gradient straight through to the scores (their `backward` returns g).
- One-shot task inference (GNu): superpose the candidate tasks' masks with weights alpha_k = 1/K, take the
  gradient of the output entropy with respect to alpha, and pick the task with the most negative one
  (`adaptors.py:76-113` `se_oneshot_minimization` with `adaptors.py:368-373` the entropy; `mnist.ipynb` cell 17).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import autograd
from torch.nn import functional

MASK_RULES = ("threshold", "top-k")


def signed_constant(out_features: int, in_features: int) -> torch.Tensor:
    """(out, in) fixed weights: +-sqrt(2 / in) with fair random signs (torch's global generator)."""
    signs = torch.randint(0, 2, (out_features, in_features)).float() * 2 - 1
    return signs * math.sqrt(2.0 / in_features)  # gain(relu) = sqrt(2); fan_in = in_features


def initial_scores(out_features: int, in_features: int) -> torch.Tensor:
    """(out, in) scores ~ U(-1/sqrt(in), 1/sqrt(in)): kaiming_uniform with a = sqrt(5), as the authors'."""
    bound = 1.0 / math.sqrt(in_features)  # gain sqrt(2 / (1 + 5)) * sqrt(3 / fan_in)
    return (torch.rand(out_features, in_features) * 2 - 1) * bound


def kept_count(numel: int, density: float) -> int:
    """Edges the top-k rule keeps in a layer of `numel`: numel - int((1 - density) numel), as the authors'."""
    return numel - int((1 - density) * numel)


def supermask(scores: torch.Tensor, rule: str, density: float) -> torch.Tensor:
    """The 0/1 mask (same shape, float) of `scores` under `rule` (no gradient: see `straight_through_mask`)."""
    scores = scores.detach()
    if rule == "threshold":
        return (scores >= 0).to(scores.dtype)
    if rule != "top-k":
        raise ValueError(f"mask rule {rule!r}: one of {', '.join(MASK_RULES)}")
    flat = scores.abs().flatten()
    mask = torch.zeros_like(flat)
    mask[flat.argsort(stable=True)[flat.numel() - kept_count(flat.numel(), density):]] = 1.0
    return mask.view_as(scores)


class _StraightThrough(autograd.Function):
    """Forward: the given mask; backward: the incoming gradient, unchanged, to the scores."""

    @staticmethod
    def forward(ctx: object, source: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:  # noqa: ARG004
        return mask

    @staticmethod
    def backward(ctx: object, gradient: torch.Tensor) -> tuple[torch.Tensor, None]:  # noqa: ARG004
        return gradient, None


def straight_through_mask(scores: torch.Tensor, rule: str, density: float) -> torch.Tensor:
    """The mask in the forward pass (exactly `supermask`), its gradient sent straight through to the scores:
    to `scores` itself for `threshold`, through |scores| for `top-k` (the authors apply it to `scores.abs()`)."""
    source = scores if rule == "threshold" else scores.abs()
    return _StraightThrough.apply(source, supermask(scores, rule, density))


def stacked_masks(scores: Sequence[torch.Tensor], rule: str, density: float) -> torch.Tensor:
    """(K, out, in): the masks of K tasks' scores of one layer."""
    return torch.stack([supermask(task_scores, rule, density) for task_scores in scores])


def superposed_logits(inputs: torch.Tensor, weights: Sequence[torch.Tensor], masks: Sequence[torch.Tensor],
                      alphas: torch.Tensor) -> torch.Tensor:
    """Logits (B, C) of the ReLU MLP whose layer l has the weight W_l * sum_k alphas[b, k] M_l[k] for sample b.

    `weights[l]` (out, in), `masks[l]` (K, out, in), `alphas` (B, K): one superposition per sample, so that the
    gradient of sample b's entropy is its own (the authors' alphas are one per batch). By linearity a layer is the
    alpha-weighted sum of the K masked layers' outputs.
    """
    h = inputs.flatten(1)  # (B, D)
    for index, (weight, mask) in enumerate(zip(weights, masks)):
        per_task = torch.einsum("bi,koi->bko", h, weight * mask)  # (B, K, out)
        h = torch.einsum("bk,bko->bo", alphas, per_task)  # (B, out)
        if index < len(weights) - 1:
            h = functional.relu(h)
    return h


def entropy(logits: torch.Tensor) -> torch.Tensor:
    """(B,) entropy of each row's softmax: -sum_c p_c log p_c."""
    return -(logits.softmax(dim=1) * logits.log_softmax(dim=1)).sum(dim=1)


def entropy_gradients(inputs: torch.Tensor, weights: Sequence[torch.Tensor],
                      masks: Sequence[torch.Tensor]) -> torch.Tensor:
    """(B, K): dH_b/dalpha_{b,k} at alpha = 1/K, H_b the entropy of sample b's superposed output over the K
    candidate tasks of `masks` (K, out, in per layer). Runs with autograd on (and out of inference mode) whatever
    the caller's mode."""
    n_candidates = masks[0].shape[0]
    with torch.inference_mode(False), torch.enable_grad():
        inputs = inputs.detach().clone()
        weights = [weight.detach().clone() for weight in weights]
        masks = [mask.detach().clone() for mask in masks]
        alphas = torch.full((inputs.shape[0], n_candidates), 1.0 / n_candidates, device=inputs.device,
                            dtype=weights[0].dtype, requires_grad=True)  # (B, K)
        total = entropy(superposed_logits(inputs, weights, masks, alphas)).sum()
        (gradient,) = autograd.grad(total, alphas)  # (B, K): row b is sample b's own gradient
    return gradient


def infer_tasks(inputs: torch.Tensor, weights: Sequence[torch.Tensor], masks: Sequence[torch.Tensor]) -> torch.Tensor:
    """(B,) long: each sample's task among the K candidates, by the one-shot rule argmin_k dH/dalpha_k (the
    steepest decrease of the entropy; the authors' `grad[0].min(dim=0)`, `adaptors.py:109-110`)."""
    return entropy_gradients(inputs, weights, masks).argmin(dim=1)
