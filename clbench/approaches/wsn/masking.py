"""WSN's masked layers: every weight and bias of a body's Linear and Conv2d layers becomes `tensor * mask`, the
mask either the top-c of the layer's learnable scores (training) or a given one (a task's stored mask).

The mask is a `torch.nn.utils.parametrize` parametrization of the layer's tensor, so clbench's bodies (the MLP, the
AlexNet-like net) become the authors' SubnetLinear / SubnetConv2d (ihaeyong/WSN@f066982 networks/subnet.py:44-249)
without a network of WSN's own: `layer.weight` is `original * mask`, the weight itself is
`layer.parametrizations.weight.original`, the scores `layer.parametrizations.weight[0].scores`; all of them are in
the network's state dict (and so in its best-epoch snapshots and checkpoints).
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn.utils import parametrize

from clbench.approaches.wsn.functions import straight_through_mask, top_c_mask


class SubnetMask(nn.Module):
    """tensor -> tensor * mask. With `fixed` None, the mask is the top-c of |scores| (straight-through: the scores
    learn), and is kept in `last` (subnet.py:107-115, mode "train"); with `fixed` set, that mask (subnet.py:
    125-137, modes "valid" and "test")."""

    def __init__(self, scores: torch.Tensor, c: float) -> None:
        super().__init__()
        self.scores = nn.Parameter(scores)
        self.c = c
        self.fixed: torch.Tensor | None = None  # a given mask (bool or 0/1), used instead of the scores' top-c
        self.last: torch.Tensor | None = None  # the last top-c mask computed from the scores (detached)

    def forward(self, tensor: torch.Tensor) -> torch.Tensor:
        if self.fixed is not None:
            return tensor * self.fixed
        mask = straight_through_mask(self.scores, self.c)
        self.last = mask.detach()
        return tensor * mask

    def current_mask(self) -> torch.Tensor:
        """The top-c mask of the scores as they are now (bool, no gradient)."""
        with torch.no_grad():
            return top_c_mask(self.scores.abs(), self.c).bool()


def initial_scores(module: nn.Linear | nn.Conv2d, name: str) -> torch.Tensor:
    """Scores drawn as the authors' (subnet.py:140-145, 244-249): a weight's as a Linear/Conv2d weight
    (Kaiming uniform, a = sqrt(5)); a bias's uniform in +-1/sqrt(fan_in) of the layer's weight."""
    weight = module.weight
    if name == "weight":
        scores = torch.empty_like(weight)
        nn.init.kaiming_uniform_(scores, a=math.sqrt(5))
        return scores
    fan_in = weight[0].numel()
    bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0
    return torch.empty_like(module.bias).uniform_(-bound, bound)


def mask_layers(body: nn.Module, c: float, skip: str = "heads") -> dict[str, SubnetMask]:
    """Put a `SubnetMask` on the weight and bias of every Linear and Conv2d of `body` outside the `skip` submodule
    (the task heads, unmasked as the authors' multi-head MLP's, networks/mlp.py:27-30,60); returns them by the
    tensor's name in the body ('layers.0.weight'). Any other module with parameters is an error: it would be
    neither masked nor frozen."""
    gates: dict[str, SubnetMask] = {}
    for module_name, module in list(body.named_modules()):
        if module_name == skip or module_name.startswith(skip + "."):
            continue
        own = [name for name, _ in module.named_parameters(recurse=False)]
        if not own:
            continue
        if not isinstance(module, (nn.Linear, nn.Conv2d)):
            raise ValueError(f"WSN masks Linear and Conv2d layers only; {module_name} is a {type(module).__name__}")
        for name in own:
            gate = SubnetMask(initial_scores(module, name), c)
            parametrize.register_parametrization(module, name, gate, unsafe=True)
            gates[f"{module_name}.{name}"] = gate
    return gates


def original(body: nn.Module, name: str) -> nn.Parameter:
    """The masked tensor itself (not `tensor * mask`) of a name `mask_layers` returned."""
    module_name, tensor_name = name.rsplit(".", 1)
    module = body.get_submodule(module_name)
    return module.parametrizations[tensor_name].original  # type: ignore[index,union-attr,return-value]
