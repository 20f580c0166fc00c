"""Cosine-normalised heads with one learnable scale shared by every head (LUCIR Eq. 4, Sec. 3.2).

`CosineHead(F, n, sigma)`: logits sigma * <f/|f|, w_c/|w_c|>, no bias; every task's head holds the same `sigma`
Parameter (FACIL `src/approach/lucir.py` `pre_train_process`: "Share sigma (Eta in paper) between all the heads";
Mammoth `models/lucir.py` `CustomClassifier`: one sigma over every task's weights). Weights start uniform in
+-1/sqrt(F) and sigma at 1 (FACIL `CosineLinear.reset_parameters`, Mammoth `CustomClassifier.reset_parameters`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from clbench.approaches.lucir.functions import cosine_scores


class CosineHead(nn.Module):
    """sigma * cosine(features, weight rows): (B, F) -> (B, out_features); `sigma` may be shared with other heads."""

    bias = None  # no bias (MultiHeadNet.stacked_heads reads it)

    def __init__(self, in_features: int, out_features: int, sigma: nn.Parameter) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        bound = 1.0 / math.sqrt(in_features)
        self.weight = nn.Parameter(torch.empty(out_features, in_features).uniform_(-bound, bound))
        self.sigma = sigma

    def scores(self, features: torch.Tensor) -> torch.Tensor:
        """The unscaled cosine scores, in [-1, 1]: (B, out_features)."""
        return cosine_scores(features, self.weight)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.sigma * self.scores(features)


def cosine_heads(feature_size: int, head_sizes: Sequence[int]) -> nn.ModuleList:
    """One `CosineHead` per task, all holding one sigma (initialised to 1)."""
    sigma = nn.Parameter(torch.ones(1))
    return nn.ModuleList(CosineHead(feature_size, size, sigma) for size in head_sizes)
