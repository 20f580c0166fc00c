"""WSN's mathematics: a task's binary mask from per-weight scores (top-c, straight-through), the union of the
masks of earlier tasks (the frozen weights), and masks stored bit-packed (Kang et al., ICML 2022, Sec. 3).

Sources: the authors' code, ihaeyong/WSN@f066982, networks/subnet.py (the mask and its gradient) and
main_wsn_pmnist.py (the union, the gradient zeroing).
"""

from __future__ import annotations

from typing import Any

import torch

BIT_WEIGHTS = (128, 64, 32, 16, 8, 4, 2, 1)  # bit order within a byte: the first element in the high bit


def threshold_rank(numel: int, c: float) -> int:
    """The 1-based rank k of the threshold among `numel` scores, sorted ascending: the scores >= the k-th smallest
    form the mask. subnet.py:12-14 with its sparsity s = 1 - c (main_wsn_pmnist.py:333):
    k = 1 + round(0.01 * (100 s) * (numel - 1)), Python's round (half to even), in the authors' float arithmetic.
    Without ties, numel - k + 1 scores are kept, about c * numel."""
    sparsity = 1 - c
    return 1 + round(0.01 * float(sparsity * 100) * (numel - 1))


def top_c_mask(scores: torch.Tensor, c: float) -> torch.Tensor:
    """The binary mask (float, 0 or 1, the shape of `scores`) of the scores at or above the `threshold_rank`-th
    smallest (subnet.py:19-20: 0 where score < k-th value, else 1; ties at the threshold are all kept)."""
    threshold = scores.reshape(-1).kthvalue(threshold_rank(scores.numel(), c)).values
    return (scores >= threshold).to(scores.dtype)


class StraightThroughTopC(torch.autograd.Function):
    """`top_c_mask` forward; backward passes the mask's gradient to the scores unchanged (subnet.py:16-24,
    GetSubnetFaster: the straight-through estimator)."""

    @staticmethod
    def forward(ctx: Any, scores: torch.Tensor, c: float) -> torch.Tensor:  # type: ignore[override]
        return top_c_mask(scores, c)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:  # type: ignore[override]
        return grad, None


def straight_through_mask(scores: torch.Tensor, c: float) -> torch.Tensor:
    """The mask of the top-c of |scores| (subnet.py:109-112: the absolute scores are ranked), differentiable
    straight through: d mask / d |scores| = identity, so d loss / d scores = g * weight * sign(scores) for
    weight * mask."""
    return StraightThroughTopC.apply(scores.abs(), c)  # type: ignore[no-any-return]


def union(used: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The weights used by some task: used OR mask (main_wsn_pmnist.py:226, 1 - (1 - a)(1 - b)), as bool."""
    return used | mask.bool()


def pack_mask(mask: torch.Tensor) -> torch.Tensor:
    """A binary mask as uint8 bytes, 8 elements a byte (flattened, zero-padded to a multiple of 8; the first
    element in the high bit, as numpy.packbits): ceil(numel / 8) bytes."""
    bits = mask.reshape(-1).bool()
    padded = torch.zeros(-(-bits.numel() // 8) * 8, dtype=torch.uint8, device=bits.device)
    padded[: bits.numel()] = bits.to(torch.uint8)
    weights = torch.tensor(BIT_WEIGHTS, dtype=torch.uint8, device=bits.device)
    return (padded.view(-1, 8) * weights).sum(dim=1, dtype=torch.uint8)


def unpack_mask(packed: torch.Tensor, shape: torch.Size | tuple[int, ...]) -> torch.Tensor:
    """The bool mask of `shape` that `pack_mask` packed into `packed`."""
    numel = 1
    for size in shape:
        numel *= size
    weights = torch.tensor(BIT_WEIGHTS, dtype=torch.uint8, device=packed.device)
    bits = (packed.view(-1, 1) & weights) != 0  # (bytes, 8)
    return bits.reshape(-1)[:numel].reshape(shape)
