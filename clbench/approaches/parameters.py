"""Shared parameter helpers: the named parameters of a multi-head network's body or of what its tasks share,
detached copies of them (anchors), moving them to a device, and counting the bytes an approach keeps."""

from __future__ import annotations

from typing import Any

import torch

from clbench.nets import MultiHeadNet

ParameterDict = dict[str, torch.Tensor]
"""Parameter name -> tensor, e.g. an anchor of weights kept in `extra_state`."""


def named_body_parameters(network: MultiHeadNet) -> list[tuple[str, torch.nn.Parameter]]:
    """(name, parameter) of a multi-head network's shared body: every parameter except the task heads'."""
    body = {id(parameter) for parameter in network.body_parameters()}
    return [(name, parameter) for name, parameter in network.named_parameters() if id(parameter) in body]


def named_shared_parameters(network: MultiHeadNet) -> list[tuple[str, torch.nn.Parameter]]:
    """(name, parameter) of what several tasks use: the body, and a head tied across tasks (the domain scenario's
    shared head, `MultiHeadNet.tie_heads`); a head used by one task only is left out. Without tied heads this is
    `named_body_parameters`."""
    if network.heads_tied:
        return list(network.named_parameters())
    private = {id(parameter) for parameter in network.heads.parameters()}
    return [(name, parameter) for name, parameter in network.named_parameters() if id(parameter) not in private]


def detached_parameters(module: torch.nn.Module | list[tuple[str, torch.nn.Parameter]]) -> ParameterDict:
    """A detached copy of named parameters (a module's, or `(name, parameter)` pairs): an anchor to keep."""
    pairs = module.named_parameters() if isinstance(module, torch.nn.Module) else module
    return {name: parameter.detach().clone() for name, parameter in pairs}


def tensors_to(tensors: ParameterDict, device: torch.device) -> ParameterDict:
    """Move a dict of tensors (from a checkpoint's `extra_state`) to the approach's device."""
    return {name: tensor.to(device) for name, tensor in tensors.items()}


def tensor_bytes(state: Any) -> int:
    """Bytes of the tensors in a nest of dicts, lists and tuples (keys naming a `generator` left out)."""
    if isinstance(state, torch.Tensor):
        return state.numel() * state.element_size()
    if isinstance(state, dict):
        return sum(tensor_bytes(value) for key, value in state.items() if "generator" not in str(key))
    if isinstance(state, (list, tuple)):
        return sum(tensor_bytes(value) for value in state)
    return 0
