"""The mathematics of the replay family as small functions on tensors.

A-GEM (Chaudhry et al. 2019, ICLR, "Efficient Lifelong Learning with A-GEM", Eq. 11): `agem_project`.
DER++ (Buzzega et al. 2020, "Dark Experience for General Continual Learning"): `logit_matching_loss`.
iCaRL (Rebuffi et al. 2017): `herding_order` (Algorithm 4), `class_means`, `nearest_mean_scores`
(Algorithm 1), `icarl_loss` (Algorithm 3's one loss, as the authors' code computes it), `icarl_distillation`
(FACIL's distillation term, added to a cross-entropy).
"""

from __future__ import annotations

import torch
from torch.nn import functional


def agem_project(gradient: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """g unchanged when g . g_ref >= 0, else g - (g . g_ref / g_ref . g_ref) g_ref (A-GEM, Eq. 11).

    Flat vectors; a zero reference gradient (g . g_ref = 0) leaves g unchanged.
    """
    dot = torch.dot(gradient, reference)
    if dot >= 0:
        return gradient
    return gradient - (dot / torch.dot(reference, reference)) * reference


def logit_matching_loss(current: torch.Tensor, stored: torch.Tensor) -> torch.Tensor:
    """DER's alpha term: the mean squared error between the network's logits now and the logits stored with the
    samples (Mammoth `models/derpp.py`: `F.mse_loss(buf_outputs, buf_logits)`, mean over samples and logits)."""
    return functional.mse_loss(current, stored)


def normalised(features: torch.Tensor) -> torch.Tensor:
    """Each row divided by its L2 norm (iCaRL: "All feature vectors are L2-normalized")."""
    return features / features.norm(dim=1, keepdim=True).clamp_min(1e-12)


def herding_order(features: torch.Tensor, m: int) -> torch.Tensor:
    """The indices of the first `m` exemplars chosen by herding (iCaRL, Algorithm 4), in selection order.

    With phi the L2-normalised features and mu their mean, step k picks the sample (not yet chosen) that
    minimises || mu - (1/k) (phi(x) + sum of the k-1 chosen) ||.
    """
    phi = normalised(features)  # (N, D)
    mean = phi.mean(0)  # (D,)
    chosen: list[int] = []
    total = torch.zeros_like(mean)
    available = torch.ones(phi.shape[0], dtype=torch.bool, device=phi.device)
    for k in range(1, min(m, phi.shape[0]) + 1):
        distances = (mean - (total + phi) / k).norm(dim=1)  # (N,)
        distances = torch.where(available, distances, torch.full_like(distances, float("inf")))
        index = int(distances.argmin())
        chosen.append(index)
        available[index] = False
        total = total + phi[index]
    return torch.tensor(chosen, dtype=torch.long)


def class_means(features: torch.Tensor, labels: torch.Tensor, n_classes: int,
                flipped: torch.Tensor | None = None) -> torch.Tensor:
    """(n_classes, D): the mean of each class's L2-normalised features, normalised again (iCaRL; FACIL
    `src/approach/icarl.py` `compute_mean_of_exemplars`); NaN rows for classes without samples.

    With `flipped` (N, D), the features of the same samples flipped left-right, a class's mean is the average of
    its two means, normalised: (mean phi(x) + mean phi(flip x)) / 2 (the authors' CIFAR code,
    `iCaRL-TheanoLasagne/main_cifar_100_theano.py` lines 259-271; Mammoth `models/icarl.py`
    `compute_class_means`).
    """
    phi = normalised(features)
    psi = None if flipped is None else normalised(flipped)
    means = torch.full((n_classes, phi.shape[1]), float("nan"), dtype=phi.dtype, device=phi.device)
    for label in labels.unique().tolist():
        members = labels == label
        means[label] = phi[members].mean(0) if psi is None else (phi[members].mean(0) + psi[members].mean(0)) / 2
    return normalised(means)


def nearest_mean_scores(features: torch.Tensor, means: torch.Tensor) -> torch.Tensor:
    """(B, C): minus the squared distance of each normalised feature to each class mean; the argmax is the
    nearest-mean-of-exemplars prediction (iCaRL, Algorithm 1; FACIL `classify`)."""
    return -torch.cdist(normalised(features), means).pow(2)


def icarl_distillation(logits: torch.Tensor, old_logits: torch.Tensor) -> torch.Tensor:
    """sum over the old classes y of BCE(sigmoid(g_y(x)), sigmoid(g_y^old(x))), each BCE a mean over the batch
    (FACIL `src/approach/icarl.py` `criterion`, the distillation term of Algorithm 3)."""
    current, target = torch.sigmoid(logits), torch.sigmoid(old_logits)
    per_class = functional.binary_cross_entropy(current, target, reduction="none").mean(0)  # (old classes,)
    return per_class.sum()


def icarl_loss(logits: torch.Tensor, targets: torch.Tensor, old_logits: torch.Tensor) -> torch.Tensor:
    """iCaRL's loss of each sample: the mean over the outputs of BCE(sigmoid(g_y(x)), target_y); (B,).

    The targets are the one-hot vector of the sample's class, except that the first `old_logits.shape[1]` outputs
    (the earlier classes) take the previous network's sigmoid outputs instead, for every sample (exemplars too).
    The authors' code forms this loss in `iCaRL-TheanoLasagne/main_cifar_100_theano.py` (sigmoid output layer,
    one-hot targets with the old classes' columns set to the copied network's outputs, Lasagne's
    `binary_crossentropy(...).mean()` over the batch and every output) and Mammoth in `models/icarl.py` `get_loss`
    (`binary_cross_entropy_with_logits` against the same targets, mean over the batch and every output). Here the
    mean over a sample's outputs; the caller takes the mean (training) or the sum (validation) over the batch.

    Args:
        logits: (B, C) the outputs of the classes taken into account (here: every class seen so far).
        targets: (B,) each sample's class, an index into those C outputs.
        old_logits: (B, C_old) the previous network's logits of the earlier classes (C_old may be 0).
    """
    hard = functional.one_hot(targets, logits.shape[1]).to(logits.dtype)  # (B, C)
    soft = torch.sigmoid(old_logits).to(logits.dtype)  # (B, C_old)
    target = torch.cat([soft, hard[:, soft.shape[1]:]], dim=1)  # (B, C)
    return functional.binary_cross_entropy_with_logits(logits, target, reduction="none").mean(1)
