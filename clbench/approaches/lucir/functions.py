"""LUCIR's mathematics as small functions on tensors (Hou, Pan, Loy, Wang & Lin 2019, CVPR, "Learning a Unified
Classifier Incrementally via Rebalancing"; FACIL mmasana/FACIL@e09d2c8 `src/approach/lucir.py`, Mammoth
aimagelab/mammoth@e75a491 `models/lucir.py`).

`cosine_scores` (Eq. 4 without the scale), `less_forget_loss` (Eq. 6), `adaptive_weight` (Eq. 7),
`margin_ranking_loss` (Eq. 8), `imprinted_weights` (the new heads' initialisation of the authors' code, as
Mammoth's `imprint_weights`).
"""

from __future__ import annotations

import math

import torch
from torch.nn import functional


def cosine_scores(features: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """<f/|f|, w_c/|w_c|> for every sample and class: (B, F), (C, F) -> (B, C), in [-1, 1] (Eq. 4 before the
    scale eta; FACIL `CosineLinear.forward`: `F.linear(F.normalize(input), F.normalize(weight))`)."""
    return functional.linear(functional.normalize(features, p=2, dim=1), functional.normalize(weights, p=2, dim=1))


def less_forget_loss(features: torch.Tensor, old_features: torch.Tensor) -> torch.Tensor:
    """The batch's mean of 1 - cos(f(x), f_old(x)) (Eq. 6; FACIL and Mammoth: `CosineEmbeddingLoss` with target 1,
    whose mean reduction this is); `old_features` get no gradient. (B, F), (B, F) -> scalar."""
    cosine = functional.cosine_similarity(features, old_features.detach(), dim=1)  # (B,)
    return (1 - cosine).mean()


def adaptive_weight(lamb_base: float, old_classes: int, new_classes: int) -> float:
    """lambda = lambda_base * sqrt(|C_old| / |C_new|) (Eq. 7; FACIL `pre_train_process`: the old heads' outputs over
    the new head's)."""
    return lamb_base * math.sqrt(old_classes / new_classes)


def margin_ranking_loss(scores: torch.Tensor, targets: torch.Tensor, old_classes: int, k: int,
                        margin: float) -> torch.Tensor:
    """Eq. 8: for each sample of an old class (target < `old_classes`), the mean over its K hardest new classes
    (the K highest scores among the columns from `old_classes` on) of max(0, margin - (score of its class - that
    score)), averaged over every (sample, new class) pair; 0 when the batch has no old-class sample. FACIL
    `criterion` and Mammoth `lucir_batch_hard_triplet_loss`: `MarginRankingLoss(margin)` on those pairs.

    Args:
        scores: (B, C) unscaled cosine scores of the classes taken into account; the new classes are the columns
            from `old_classes` on, at least `k` of them.
        targets: (B,) each sample's class, an index into the C columns.
        old_classes: how many columns are old classes.
        k: hard negatives per sample (the paper's K).
        margin: the paper's m.
    """
    hard = targets < old_classes  # (B,) samples of old classes (the memory's)
    if not bool(hard.any()):
        return scores.new_zeros(())
    ground_truth = scores[hard].gather(1, targets[hard].unsqueeze(1))  # (H, 1)
    novel = scores[hard, old_classes:].topk(k, dim=1).values  # (H, K)
    return functional.relu(margin - (ground_truth - novel)).mean()


def imprinted_weights(features: torch.Tensor, labels: torch.Tensor, n_classes: int, norm: float) -> torch.Tensor:
    """New classes' weights from their samples' features: each the normalised mean of its samples' normalised
    features, scaled to `norm` (the mean norm of the old classes' weights); (N, F), (N,) -> (n_classes, F).
    Mammoth `imprint_weights`, after the authors' code (FACIL's lucir has no imprinting: its `pre_train_process`
    comment)."""
    phi = functional.normalize(features, p=2, dim=1)  # (N, F)
    means = torch.stack([phi[labels == label].mean(0) for label in range(n_classes)])  # (n_classes, F)
    return functional.normalize(means, p=2, dim=1) * norm
