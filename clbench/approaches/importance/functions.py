"""Per-parameter importance of the synapse-consolidation baselines, as small functions on parameter dicts.

SI (Zenke, Poole & Ganguli 2017): `si_path_step` (the running path integral omega), `si_importance`
(Omega of a finished task), `clip_at_zero` (the accumulated Omega kept non-negative, as the authors' code keeps
it), `quadratic_penalty` and its gradient `quadratic_penalty_gradient`, and the penalty's step stability
under plain SGD, `penalty_stiffness` (shared with MAS).
MAS (Aljundi et al. 2018): `mas_importance` (mean absolute gradient of the squared L2 norm of the output).
Both accumulate their importance over tasks with `accumulate_importance` (a sum). The approach files
(`si.py`, `mas.py` in this folder) only wire these in.

A parameter dict maps parameter names (as in `named_parameters()`) to tensors of the parameter's shape.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from clbench.approaches.parameters import ParameterDict
from clbench.data.batches import LabelledData


# ---------------------------------------------------------------------------------------------- SI
def si_path_step(omega: Mapping[str, torch.Tensor], gradients: Mapping[str, torch.Tensor],
                 deltas: Mapping[str, torch.Tensor]) -> ParameterDict:
    """One step of SI's path integral (Zenke et al. 2017, eq. 3): omega_k <- omega_k - g_k * delta_k.

    g is the gradient of the task loss alone (no penalty) at the step's start and delta = theta_after -
    theta_before the step's parameter change, so -g * delta is the step's first-order decrease of the loss.
    """
    return {name: omega[name] - gradients[name] * deltas[name] for name in omega}


def si_importance(omega: Mapping[str, torch.Tensor], start: Mapping[str, torch.Tensor],
                  end: Mapping[str, torch.Tensor], xi: float) -> ParameterDict:
    """SI's importance of one task (Zenke et al. 2017, eq. 5): omega_k / ((theta_end - theta_start)_k^2 + xi)."""
    return {name: omega[name] / ((end[name] - start[name]).pow(2) + xi) for name in omega}


def accumulate_importance(new: Mapping[str, torch.Tensor],
                          old: Mapping[str, torch.Tensor] | None) -> ParameterDict:
    """Importance over tasks: Omega = Omega_old + Omega_new (SI eq. 5's sum over tasks; MAS, Aljundi's code)."""
    if not old:
        return {name: value.clone() for name, value in new.items()}
    return {name: old[name] + new[name] for name in new}


def clip_at_zero(importance: Mapping[str, torch.Tensor]) -> ParameterDict:
    """max(Omega, 0) per entry: SI's accumulated importance as the authors' code keeps it.

    Zenke et al.'s code (ganguli-lab/pathint, `pathint/protocols.py`, PATH_INT_PROTOCOL's `omega` task update)
    stores relu(Omega_old + omega / (delta^2 + xi)): a negative path integral (steps that raised the task loss
    to first order) would make the penalty concave for that weight and push it away from its anchor.
    """
    return {name: value.clamp(min=0) for name, value in importance.items()}


def quadratic_penalty(parameters: Mapping[str, torch.Tensor], anchor: Mapping[str, torch.Tensor],
                      importance: Mapping[str, torch.Tensor], strength: float) -> torch.Tensor:
    """strength * sum_k Omega_k (theta_k - theta*_k)^2 over `importance`'s names (SI eq. 4 with c; MAS eq. 3)."""
    total = sum((importance[name] * (parameters[name] - anchor[name]).pow(2)).sum() for name in importance)
    return torch.as_tensor(total) * strength


def quadratic_penalty_gradient(parameters: Mapping[str, torch.Tensor], anchor: Mapping[str, torch.Tensor],
                               importance: Mapping[str, torch.Tensor], strength: float) -> ParameterDict:
    """d quadratic_penalty / d theta = 2 * strength * Omega * (theta - theta*), per name of `importance`."""
    return {name: 2 * strength * importance[name] * (parameters[name].detach() - anchor[name])
            for name in importance}


def penalty_stiffness(importance: Mapping[str, torch.Tensor], strength: float, lr: float) -> ParameterDict:
    """Per parameter, lr * 2 * strength * Omega: the factor an SGD step at `lr` applies to the penalty's pull.

    On the penalty alone, one SGD step maps theta - theta* to (1 - lr * 2 * strength * Omega)(theta - theta*), so
    where this stiffness exceeds 2 plain SGD overshoots the anchor by more than it started: the weight oscillates
    with a growing amplitude (held only by gradient clipping and the lr decay) instead of settling.
    """
    return {name: 2.0 * lr * strength * value for name, value in importance.items()}


def stiffness_rows(importance: Mapping[str, torch.Tensor], strength: float, lr: float, limit: float = 2.0,
                   before_clipping: Mapping[str, torch.Tensor] | None = None) -> list[dict[str, float | int | str]]:
    """Per parameter tensor: its size, max and mean Omega, max stiffness and how many weights exceed `limit`.

    `min_importance` and `negative` (entries below 0) are those of `before_clipping` (SI's sum before
    `clip_at_zero`) when given, else of `importance` itself.
    """
    unclipped = importance if before_clipping is None else before_clipping
    rows: list[dict[str, float | int | str]] = []
    for name, stiffness in penalty_stiffness(importance, strength, lr).items():
        rows.append({"parameter": name, "weights": stiffness.numel(),
                     "max_importance": float(importance[name].max()), "mean_importance": float(importance[name].mean()),
                     "min_importance": float(unclipped[name].min()), "negative": int((unclipped[name] < 0).sum()),
                     "max_stiffness": float(stiffness.max()), "unstable": int((stiffness > limit).sum())})
    return rows


# ---------------------------------------------------------------------------------------------- MAS
def output_norm_gradients(network: nn.Module, parameters: Mapping[str, torch.Tensor], inputs: torch.Tensor,
                          task: int, seen: bool = False) -> ParameterDict:
    """Per-sample gradients of ||f(x)||^2 (squared L2 norm of task `task`'s output; with `seen`, of the class
    scenario's output over the classes of tasks 0..task) w.r.t. `parameters`.

    Returns name -> (B, *shape) tensors, one gradient per sample of `inputs` (B, ...), computed in one
    vectorised pass (`torch.func.vmap` over `torch.func.grad`); the network's other tensors are held fixed.
    """
    from torch.func import functional_call, grad, vmap

    fixed = {name: value.detach() for name, value in network.state_dict().items() if name not in parameters}
    names = list(parameters)

    def squared_norm(weights: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        arguments = (x.unsqueeze(0), task)
        output = functional_call(network, {**fixed, **weights}, arguments, {"seen": True} if seen else None)  # (1, C)
        return output.pow(2).sum()

    weights = {name: parameters[name].detach() for name in names}
    return vmap(grad(squared_norm), in_dims=(None, 0), randomness="different")(weights, inputs)


def linear_absolute_gradient_sums(network: nn.Module, parameters: Mapping[str, torch.Tensor], inputs: torch.Tensor,
                                  task: int, seen: bool = False) -> ParameterDict | None:
    """sum_i |d ||f(x_i)||^2 / dtheta| over the samples of `inputs`, for `parameters` that all belong to `nn.Linear`
    layers each called once per forward pass; None otherwise (then `output_norm_gradients` per sample).

    A sample's gradient of a linear layer's weight is the outer product delta_i a_i^T of the gradient at the layer's
    output and the layer's input, so |delta_i a_i^T| = |delta_i| |a_i|^T and the sum over samples is one product,
    |Delta|^T |A|; the bias's is sum_i |delta_i|. With the loss summed over the batch and each sample's output
    depending on its own input only (eval mode), Delta's rows are the per-sample deltas: one forward and one backward
    pass give what `output_norm_gradients` gives sample by sample, up to float rounding.
    """
    owners: dict[str, tuple[str, str]] = {}  # parameter name -> (module name, "weight" or "bias")
    for module_name, module in network.named_modules():
        if isinstance(module, nn.Linear):
            for kind in ("weight", "bias"):
                if getattr(module, kind) is not None:
                    owners[f"{module_name}.{kind}" if module_name else kind] = (module_name, kind)
    if not parameters or any(name not in owners for name in parameters):
        return None
    wanted = {owners[name][0] for name in parameters}
    modules = dict(network.named_modules())
    calls: dict[str, list[tuple[torch.Tensor, torch.Tensor]]] = {name: [] for name in wanted}

    def keep(name: str):  # type: ignore[no-untyped-def]
        return lambda module, args, output: calls[name].append((args[0], output))

    handles = [modules[name].register_forward_hook(keep(name)) for name in wanted]
    try:
        with torch.enable_grad():
            output = network(inputs, task, seen=True) if seen else network(inputs, task)
            if any(len(found) != 1 for found in calls.values()):
                return None  # a layer called twice: its per-sample gradient sums the calls before the absolute value
            order = sorted(wanted)
            deltas = torch.autograd.grad(output.pow(2).sum(), [calls[name][0][1] for name in order])
    finally:
        for handle in handles:
            handle.remove()
    sums: ParameterDict = {}
    for module_name, delta in zip(order, deltas):
        layer_input = calls[module_name][0][0].detach().flatten(0, -2).abs()  # (B, in)
        delta = delta.detach().flatten(0, -2).abs()  # (B, out)
        for name, (owner, kind) in owners.items():
            if owner == module_name and name in parameters:
                sums[name] = delta.T @ layer_input if kind == "weight" else delta.sum(0)
    return sums


def mas_importance(network: nn.Module, parameters: Mapping[str, torch.Tensor], data: LabelledData, task: int,
                   batch_size: int, seen: bool = False) -> ParameterDict:
    """MAS importance (Aljundi et al. 2018, eq. 2 with the squared L2 norm): (1/N) sum_i |d ||f(x_i)||^2 / dtheta|.

    f is task `task`'s output (the logits of its head; with `seen`, the class scenario's output over every class
    seen so far, as FACIL's mas.py takes the norm of all heads' outputs) in eval mode; the labels are not used.
    `batch_size` only chunks the samples (the per-sample gradients' memory, batch_size x the parameters, where a
    layer is not linear: `linear_absolute_gradient_sums` sums a linear layer's in one pass); the network's mode is
    restored.
    """
    was_training = network.training
    network.eval()
    total = {name: torch.zeros_like(value) for name, value in parameters.items()}
    try:
        for chunk in data.batches(batch_size):
            inputs = data.batch(chunk).inputs
            sums = linear_absolute_gradient_sums(network, parameters, inputs, task, seen)
            if sums is None:
                gradients = output_norm_gradients(network, parameters, inputs, task, seen)
                sums = {name: gradients[name].abs().sum(0) for name in total}
            for name in total:
                total[name] += sums[name]
    finally:
        network.train(was_training)
    return {name: value / max(1, len(data)) for name, value in total.items()}
