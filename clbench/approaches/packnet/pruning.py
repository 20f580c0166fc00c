"""PackNet's weight ownership and magnitude pruning (Mallya & Lazebnik, CVPR 2018), as small tensor functions.

Each prunable weight tensor has an owner tensor of the same shape (int16): 0 = free (not owned by a finished
task; trainable by the current task), k >= 1 = owned by task k (1-based), frozen for every later task.
Task u is evaluated with the mask owner in {0, 1, ..., u}: free weights are zero after pruning, so the mask
only removes the weights of later tasks.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

OWNER_DTYPE = torch.int16
FREE = 0


def free_owner(weight: torch.Tensor) -> torch.Tensor:
    """An owner tensor with every weight free."""
    return torch.full(weight.shape, FREE, dtype=OWNER_DTYPE, device=weight.device)


def prune_free_weights(weight: torch.Tensor, owner: torch.Tensor, fraction: float,
                       task: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Prune `fraction` of a layer's free weights by magnitude; the rest become task `task`'s (1-based).

    Of the n free weights (owner == 0), the round(fraction * n) of smallest |w| stay free and are to be zeroed
    (ties broken by position); the others get owner `task`. Returns (new owner, mask of the pruned weights).
    """
    free = owner == FREE
    n_free = int(free.sum())
    n_prune = round(fraction * n_free)
    magnitude = weight.detach().abs().flatten()
    magnitude = torch.where(free.flatten(), magnitude, torch.full_like(magnitude, float("inf")))
    order = torch.argsort(magnitude, stable=True)
    pruned = torch.zeros(weight.numel(), dtype=torch.bool, device=weight.device)
    pruned[order[:n_prune]] = True
    pruned = pruned.view(weight.shape)
    new_owner = torch.where(free & ~pruned, torch.full_like(owner, task), owner)
    return new_owner, pruned


def claim_free_weights(owner: torch.Tensor, task: int) -> torch.Tensor:
    """Every free weight becomes task `task`'s (the last task, which is not pruned)."""
    return torch.where(owner == FREE, torch.full_like(owner, task), owner)


def evaluation_mask(owner: torch.Tensor, task: int) -> torch.Tensor:
    """Task `task`'s (1-based) binary mask: weights free or owned by tasks 1..task (float, the weight's dtype
    is applied by the caller)."""
    return owner <= task


def trainable_mask(owner: torch.Tensor, task: int | None) -> torch.Tensor:
    """Weights a training phase may change: the free ones (task None) or those of task `task` (retraining)."""
    return owner == (FREE if task is None else task)


def usage(owners: Mapping[str, torch.Tensor], task: int) -> dict[str, tuple[int, int]]:
    """Per layer: (weights owned by task `task`, weights in the layer)."""
    return {name: (int((owner == task).sum()), owner.numel()) for name, owner in owners.items()}
