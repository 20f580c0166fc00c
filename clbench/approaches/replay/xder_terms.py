"""X-DER's mathematics as small functions on tensors (Boschini, Bonicelli, Buzzega, Porrello & Calderara 2022,
TPAMI, "Class-Incremental Continual Learning into the eXtended DER-verse"; the authors' code: aimagelab/mammoth@e75a491
`models/xder.py`, whose line numbers are cited below).

- `update_logits`: the stored logits' update of Sec. 4.1 (Mammoth `update_logits`, lines 132-144): a block of
  heads is replaced by the network's outputs, scaled down where its largest value exceeds the stored logit of
  the sample's own class, to gamma times that logit.
- `supervised_contrastive`: the SupCon loss (Khosla et al. 2020) of the future heads' consistency term (Mammoth
  `utils/simclrloss.py` `SupConLoss`, contrast mode 'all', reduction 'sum').
- `margin_violation`: the hinge of the past and future constraints (lines 257-286): the mean over the samples where
  max(bad) + margin - max(good) > 0 of that amount; 0 where none.
- `first_occurrences`, `class_quotas`, `own_head_max`: the bookkeeping of the step and of the memory's update.
"""

from __future__ import annotations

import torch
from torch.nn import functional


def update_logits(old: torch.Tensor, new: torch.Tensor, targets: torch.Tensor, start: int, end: int,
                  gamma: float) -> torch.Tensor:
    """`old` (B, K) with its columns start:end replaced by `new`'s, each row of that block multiplied by
    gamma * old[target] / max(block) where max(block) > old[target] (Mammoth `models/xder.py` `update_logits`,
    lines 134-142: `coeff = gamma * gt_values / max_values`, applied where `max_values > gt_values`).

    `targets` (B,): each sample's class, a column of `old` outside start:end (its stored logit is the reference).
    Returns a new tensor; the inputs are not changed.
    """
    updated = old.clone()
    if end <= start:
        return updated
    block = new[:, start:end].clone()  # (B, end - start)
    reference = old[torch.arange(old.shape[0], device=old.device), targets]  # (B,)
    largest = block.max(1).values  # (B,)
    scaled = largest > reference
    block[scaled] *= (gamma * reference[scaled] / largest[scaled]).unsqueeze(1)
    updated[:, start:end] = block
    return updated


def supervised_contrastive(features: torch.Tensor, labels: torch.Tensor, temperature: float,
                           base_temperature: float) -> torch.Tensor:
    """The SupCon loss summed over the samples: features (N, A, D) (A views of each of N samples, each row
    L2-normalised by the caller), labels (N,).

    Every one of the N*A views is an anchor; its positives are the other views with the same label (its own
    sample's other views included), its contrast every other view: loss(anchor) = -(T / T_base) * mean over
    positives p of log(exp(z.z_p / T) / sum over the other views a of exp(z.z_a / T)). A sample's loss is the mean
    over its A views; the result is the sum over the N samples (`SupConLoss(reduction='sum')`, as X-DER builds it,
    Mammoth `models/xder.py` line 55).
    """
    n, views = features.shape[0], features.shape[1]
    contrast = torch.cat(torch.unbind(features, dim=1), dim=0)  # (A*N, D), view-major
    similarity = contrast @ contrast.T / temperature  # (A*N, A*N)
    similarity = similarity - similarity.max(1, keepdim=True).values.detach()
    others = ~torch.eye(n * views, dtype=torch.bool, device=features.device)  # (A*N, A*N)
    tiled = labels.repeat(views)  # (A*N,)
    positives = (tiled.unsqueeze(0) == tiled.unsqueeze(1)) & others  # (A*N, A*N)
    log_denominator = torch.log((similarity.exp() * others).sum(1, keepdim=True))  # (A*N, 1)
    log_probability = similarity - log_denominator
    mean_positive = (log_probability * positives).sum(1) / positives.sum(1)  # (A*N,)
    per_view = -(temperature / base_temperature) * mean_positive
    return per_view.view(views, n).mean(0).sum()


def margin_violation(bad: torch.Tensor, good: torch.Tensor, margin: float) -> torch.Tensor:
    """mean over the samples with v > 0 of v = bad + margin - good (B,) each; 0 when no sample violates the
    margin (Mammoth `models/xder.py` lines 267-271 and 281-286)."""
    violation = bad + margin - good  # (B,)
    violating = violation > 0
    if not bool(violating.any()):
        return violation.new_zeros(())
    return violation[violating].mean()


def first_occurrences(slots: torch.Tensor) -> torch.Tensor:
    """(B,) bool: True at the first occurrence of each slot of `slots` (B,) (Mammoth line 192-193: the two memory
    batches merged without duplicates, the first batch's copy kept)."""
    order = torch.arange(slots.shape[0], device=slots.device)
    same = slots.unsqueeze(0) == slots.unsqueeze(1)  # (B, B)
    earlier = order.unsqueeze(0) < order.unsqueeze(1)  # [i, j]: j before i
    return ~(same & earlier).any(1)


def class_quotas(free: int, n_classes: int, generator: torch.Generator) -> torch.Tensor:
    """How many samples of each of a task's classes enter the memory at the task's end (n_classes,): free //
    n_classes each, the remainder one more for as many classes drawn at random (Mammoth lines 81-84)."""
    quotas = torch.full((n_classes,), free // n_classes, dtype=torch.long)
    lucky = torch.randperm(n_classes, generator=generator)[: free - quotas[0].item() * n_classes]
    quotas[lucky] += 1
    return quotas


def own_head_max(logits: torch.Tensor, tasks: torch.Tensor, column_task: torch.Tensor) -> torch.Tensor:
    """The largest logit of each sample's own task head: logits (B, K), tasks (B,), column_task (K,) the task of
    each column; (B,)."""
    own = column_task.unsqueeze(0) == tasks.unsqueeze(1)  # (B, K)
    return logits.masked_fill(~own, float("-inf")).max(1).values


def contrastive_consistency(outputs: torch.Tensor, labels: torch.Tensor, views: int, head_sizes: list[int],
                            temperature: float) -> torch.Tensor:
    """X-DER's future heads' consistency term before its weight (Mammoth lines 233-241): outputs (N*A, K_future)
    of the future heads on A views of each of N samples (each sample's views consecutive), the SupCon loss of each
    head on its L2-normalised outputs, summed over the heads and divided by (heads x N)."""
    grouped = outputs.reshape(-1, views, outputs.shape[-1])  # (N, A, K_future)
    total = outputs.new_zeros(())
    for head in grouped.split(head_sizes, dim=2):  # (N, A, head size) each
        total = total + supervised_contrastive(functional.normalize(head, dim=2), labels, temperature, temperature)
    return total / (len(head_sizes) * grouped.shape[0])
