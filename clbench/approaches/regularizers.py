"""The mathematics of the regularisation baselines, as small functions on tensors and parameter dicts.

EWC (Kirkpatrick et al. 2017): `diagonal_fisher`, `merge_fisher`, `ewc_penalty`. IMM (Lee et al. 2017):
`l2_transfer_penalty`, `imm_mean_merge`, `fisher_weighted_average`, `imm_mode_merge`. LwF (Li & Hoiem 2017):
`distillation_loss`. LFL (Jung et al. 2016): `lfl_penalty`. The approach files only wire these in.

A parameter dict maps parameter names (as in `named_parameters()`) to tensors of the parameter's shape.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

import torch
from torch import nn
from torch.nn import functional

from clbench.approaches.parameters import ParameterDict
from clbench.data.batches import LabelledData


# ---------------------------------------------------------------------------------------------- EWC
def diagonal_fisher(parameters: Mapping[str, torch.Tensor], batch_losses: Iterable[tuple[torch.Tensor, int]],
                    steps: Iterable[AbstractContextManager[Any]] = ()) -> ParameterDict:
    """Diagonal empirical Fisher estimated batch-wise: F = (1/N) sum_b n_b * (dL_b/dtheta)^2.

    L_b is the mean loss of batch b (n_b samples, N = sum_b n_b). With batches of one sample this is the
    textbook per-sample estimate (1/N) sum_i (dl_i/dtheta)^2 (EWC, Kirkpatrick et al. 2017); with larger
    batches it is the reference's cheaper estimate (`utils.fisher_matrix_diag`), except that the reference
    weights its last, partial batch by the full batch size, and clbench by its true size.

    Args:
        parameters: name -> parameter (requires grad); the Fisher has one entry per name.
        batch_losses: (mean loss of a batch, its number of samples), each loss a graph over `parameters`.
        steps: a context per batch, entered around its loss and gradients (the FLOPs' sampled steps).
    """
    names = [name for name, p in parameters.items() if p.requires_grad]
    fisher = {name: torch.zeros_like(p, memory_format=torch.contiguous_format) for name, p in parameters.items()}
    total = 0
    batches, contexts = iter(batch_losses), iter(steps)
    while True:
        with next(contexts, contextlib.nullcontext()):
            item = next(batches, None)
            if item is not None:
                loss, size = item
                gradients = torch.autograd.grad(loss, [parameters[name] for name in names], allow_unused=True)
        if item is None:
            break
        for name, gradient in zip(names, gradients):
            if gradient is not None:
                fisher[name].add_(gradient.detach().pow(2), alpha=size)
        total += size
    return {name: value / max(total, 1) for name, value in fisher.items()}


def cross_entropy_batches(network: Callable[..., torch.Tensor], data: LabelledData, task: int,
                          batch_size: int, seen: bool = False) -> Iterator[tuple[torch.Tensor, int]]:
    """(mean cross-entropy with the true labels, batch size) over `data` in order, for `diagonal_fisher`.

    `seen` (the class scenario; `network` a MultiHeadNet): over every class of tasks 0..task, with the samples'
    global class indices, as the class scenario trains.
    """
    offset = network.class_offset(task) if seen else 0  # type: ignore[attr-defined]
    for chunk in data.batches(batch_size):
        batch = data.batch(chunk)
        logits = network(batch.inputs, task, seen=True) if seen else network(batch.inputs, task)  # (B, classes)
        yield functional.cross_entropy(logits, batch.targets + offset), int(batch.targets.shape[0])


def task_fisher(network: nn.Module, parameters: Mapping[str, torch.Tensor], data: LabelledData, task: int,
                batch_size: int, train_mode: bool, seen: bool = False,
                step: Callable[[int], AbstractContextManager[Any]] | None = None) -> ParameterDict:
    """Diagonal Fisher of `parameters` of `network` on a task's data (true labels; head `task`, or with `seen`
    the class scenario's output over the classes of tasks 0..task: FACIL's ewc.py takes the Fisher of the loss
    it trains with).

    `train_mode` runs the network in training mode (dropout active) as the reference does; the network's
    mode is restored afterwards, and so are its buffers: in training mode batch norm (resnet18) normalises by each
    batch and updates its running statistics, which the estimate must not leave changed in the model it measures.
    `step(batch size)`: a context around each batch's work (`FlopLedger.sampled`).
    """
    was_training = network.training
    buffers = {name: buffer.clone() for name, buffer in network.named_buffers()}
    network.train(train_mode)
    try:
        steps = () if step is None else (step(len(range(len(data))[chunk])) for chunk in data.batches(batch_size))
        return diagonal_fisher(parameters, cross_entropy_batches(network, data, task, batch_size, seen), steps)
    finally:
        network.train(was_training)
        with torch.no_grad():
            for name, buffer in network.named_buffers():
                buffer.copy_(buffers[name])


def running_average(new: Mapping[str, torch.Tensor], old: Mapping[str, torch.Tensor],
                    n_old: int) -> ParameterDict:
    """(new + n_old * old) / (n_old + 1): the mean over n_old + 1 items when `old` is the mean of n_old."""
    return {name: (new[name] + n_old * old[name]) / (n_old + 1) for name in new}


def merge_fisher(new: Mapping[str, torch.Tensor], old: Mapping[str, torch.Tensor],
                 previous_tasks: int) -> ParameterDict:
    """EWC's Fisher over tasks: F = (F_new + t * F_old) / (t + 1), t = number of earlier tasks (reference).

    With F_old the merge of t earlier tasks' Fishers, F is the mean of all t + 1 (one penalty, not t).
    """
    return running_average(new, old, previous_tasks)


def ewc_penalty(parameters: Mapping[str, torch.Tensor], anchor: Mapping[str, torch.Tensor],
                fisher: Mapping[str, torch.Tensor], lamb: float) -> torch.Tensor:
    """EWC (Kirkpatrick et al. 2017, eq. 3): lamb/2 * sum_i F_i (theta_i - theta*_i)^2 over `fisher`'s names."""
    total = sum((fisher[name] * (parameters[name] - anchor[name]).pow(2)).sum() for name in fisher)
    return torch.as_tensor(total) * (lamb / 2)


# ---------------------------------------------------------------------------------------------- IMM
def l2_transfer_penalty(parameters: Mapping[str, torch.Tensor], anchor: Mapping[str, torch.Tensor],
                        strength: float) -> torch.Tensor:
    """L2-transfer (Lee et al. 2017): strength/2 * ||theta - theta_{t-1}||^2 over `anchor`'s names."""
    total = sum((parameters[name] - anchor[name]).pow(2).sum() for name in anchor)
    return torch.as_tensor(total) * (strength / 2)


def imm_mean_merge(current: Mapping[str, torch.Tensor], previous: Mapping[str, torch.Tensor],
                   previous_tasks: int) -> ParameterDict:
    """Mean-IMM (Lee et al. 2017, uniform mixing ratios alpha): (theta_t + t * theta_old) / (t + 1).

    With `previous` the mean-IMM model of the t earlier tasks, the result is the uniform average of all
    t + 1 task-trained models.
    """
    return running_average(current, previous, previous_tasks)


def fisher_weighted_average(parameters: Sequence[Mapping[str, torch.Tensor]],
                            fishers: Sequence[Mapping[str, torch.Tensor]], epsilon: float) -> ParameterDict:
    """Mode-IMM in closed form (Lee et al. 2017, uniform mixing ratios alpha): sum_k P_k theta_k / sum_k P_k.

    P_k = F_k + epsilon is task k's diagonal precision; epsilon > 0 keeps the ratio defined where every
    Fisher is zero (there the result is the plain mean).
    """
    names = list(parameters[0])
    weights = [{name: fisher[name] + epsilon for name in names} for fisher in fishers]
    numerator = {name: sum(w[name] * theta[name] for w, theta in zip(weights, parameters)) for name in names}
    denominator = {name: sum(w[name] for w in weights) for name in names}
    return {name: numerator[name] / denominator[name] for name in names}


def imm_mode_merge(previous: Mapping[str, torch.Tensor], previous_precision: Mapping[str, torch.Tensor],
                   current: Mapping[str, torch.Tensor], current_fisher: Mapping[str, torch.Tensor],
                   epsilon: float) -> tuple[ParameterDict, ParameterDict]:
    """One sequential step of mode-IMM: returns (merged parameters, accumulated precision).

    precision = previous_precision + F_t + epsilon; merged = (previous_precision * previous + (F_t + epsilon)
    * current) / precision. Started from a zero precision, step after step this equals
    `fisher_weighted_average` of all task-trained models, while keeping one model and one precision in memory.
    """
    merged, precision = {}, {}
    for name in current:
        weight = current_fisher[name] + epsilon
        precision[name] = previous_precision[name] + weight
        merged[name] = (previous_precision[name] * previous[name] + weight * current[name]) / precision[name]
    return merged, precision


# ---------------------------------------------------------------------------------------------- LwF, LFL
def distillation_loss(logits: torch.Tensor, old_logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """LwF's modified cross-entropy L_old (Li & Hoiem 2017), per sample: (B, C) x (B, C) -> (B,).

    -sum_j y'_j log yhat'_j with y' = softmax(old_logits / T) (the recorded outputs) and yhat' =
    softmax(logits / T) (the current ones); equal to the paper's y^(1/T) / sum y^(1/T) renormalisation.
    Computed with log_softmax (the reference smooths the probabilities with 1e-5 instead).
    """
    targets = functional.softmax(old_logits / temperature, dim=1)  # (B, C)
    return -(targets * functional.log_softmax(logits / temperature, dim=1)).sum(dim=1)


def lfl_penalty(features: torch.Tensor, old_features: torch.Tensor) -> torch.Tensor:
    """LFL (Jung et al. 2016) per sample: 1/2 ||h - h_old||^2 over the penultimate units, (B, F) -> (B,)."""
    return (features - old_features).pow(2).sum(dim=1) / 2


# ---------------------------------------------------------------------------------------------- helpers
def detached_copy(parameters: Mapping[str, torch.Tensor]) -> ParameterDict:
    """A detached clone of each tensor (an anchor, a checkpointable state)."""
    return {name: value.detach().clone() for name, value in parameters.items()}
