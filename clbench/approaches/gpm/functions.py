"""The mathematics of GPM (Saha, Garg & Roy, "Gradient Projection Memory for Continual Learning", ICLR 2021).

A layer's representation matrix holds its inputs as columns: for a linear layer the input vectors of a sample of the
task's training images, (in_features, n); for a convolution the unfolded input patches, (C_in * k * k, n * L), one
column per sample and output position (the authors' `get_representation_matrix`, sahagobinda/GPM main_cifar100.py:
188-226). A weight's gradient is a sum of outer products of output gradients with these columns, so a gradient whose
rows are orthogonal to the inputs of earlier tasks leaves those tasks' outputs of the layer unchanged (Sec. 3).

After each task, `update_basis` adds to the layer's stored orthonormal basis the fewest left singular vectors of the
projected residual that bring the captured energy to the threshold (Eq. 8-9; for the first task, an empty basis,
this is Eq. 5); `project_gradient` removes a gradient's component in the stored subspace (Eq. 10). Pure functions.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch.nn import functional


def layer_thresholds(thresholds: Sequence[float], increment: float, n_layers: int, stage: int) -> list[float]:
    """The energy threshold of each of `n_layers` layers after task `stage` (0-based): `thresholds` per layer (the
    last value repeated for the layers beyond it) plus `stage * increment` (the authors' CIFAR schedule, 0.97 +
    0.003 t: main_cifar100.py:297), at most 1."""
    per_layer = [thresholds[min(i, len(thresholds) - 1)] for i in range(n_layers)]
    return [min(1.0, value + stage * increment) for value in per_layer]


def retained_rank(residual_energy: torch.Tensor, total: float, captured: float, threshold: float) -> int:
    """How many of the residual's directions to keep (Eq. 9): the fewest r with captured + sum of the first r
    `residual_energy` / total >= threshold (`residual_energy`: squared singular values, largest first).

    The authors' loop (main_pmnist.py:173-179) adds a direction while the captured ratio is below the threshold;
    r is the number of prefix sums (before each direction) still below it.
    """
    before = captured + torch.cumsum(residual_energy / total, 0) - residual_energy / total  # (K,) ratio before k
    return int((before < threshold).sum())


def update_basis(activation: torch.Tensor, basis: torch.Tensor, threshold: float) -> torch.Tensor:
    """The layer's basis after a task: `basis` (d, r0, orthonormal columns; r0 = 0 after no task) extended by the
    leading left singular vectors of the task's representation `activation` (d, n) projected out of it.

    Eq. 8: residual = A - U U^T A; Eq. 9: keep the fewest r of its singular directions so that
    (||A||^2 - ||residual||^2 + sum_{i<=r} s_i^2) / ||A||^2 >= threshold (with an empty basis this is Eq. 5:
    ||A_r||^2 >= threshold ||A||^2). Directions whose singular value is zero to the activation's precision
    (below ||A|| max(d, n) eps, as numpy's matrix_rank) carry no energy and are never kept (SVD's vectors for them
    are arbitrary, not orthogonal to the basis), so a threshold of 1 keeps exactly the span of the representation.
    Computed in float64; returned in the basis' dtype, at most d columns.
    """
    a = activation.double()  # (d, n)
    u_old = basis.double()  # (d, r0)
    total = float((a * a).sum())
    if total == 0.0:
        return basis
    residual = a - u_old @ (u_old.T @ a)  # (d, n), Eq. 8
    u, s, _ = torch.linalg.svd(residual, full_matrices=False)  # u (d, K), s (K,)
    energy = s * s
    captured = (total - float(energy.sum())) / total
    rank = int((s > total**0.5 * max(a.shape) * torch.finfo(activation.dtype).eps).sum())  # numerical rank
    r = min(retained_rank(energy, total, captured, threshold), rank)
    if r == 0:
        return basis
    extended = torch.cat([u_old, u[:, :r]], dim=1)[:, : a.shape[0]]  # (d, <= d)
    return extended.to(basis.dtype)


def projection_matrix(basis: torch.Tensor) -> torch.Tensor:
    """U U^T (d, d): the orthogonal projector onto the span of the basis' columns."""
    return basis @ basis.T


def project_gradient(gradient: torch.Tensor, projection: torch.Tensor) -> torch.Tensor:
    """Eq. 10: the gradient minus its component in the stored input subspace, (out, ...) -> (out, ...).

    A conv kernel (out, C, k, k) is viewed as (out, C * k * k), the order of `unfold_patches`' rows."""
    flat = gradient.reshape(gradient.shape[0], -1)  # (out, d)
    return (flat - flat @ projection).view_as(gradient)


def unfold_patches(inputs: torch.Tensor, conv: torch.nn.Conv2d) -> torch.Tensor:
    """A convolution's representation matrix: its input patches as columns, (C * kh * kw, B * L) for inputs
    (B, C, H, W) and L output positions, with the conv's kernel, stride, padding and dilation; rows in the order of
    the kernel's flattened (C, kh, kw), columns sample by sample, each row-major over positions (as the authors'
    loops, main_cifar100.py:209-213)."""
    patches = functional.unfold(inputs, conv.kernel_size, dilation=conv.dilation, padding=conv.padding,  # type: ignore[arg-type]
                                stride=conv.stride)  # (B, C*kh*kw, L)
    return patches.permute(1, 0, 2).reshape(patches.shape[1], -1)  # (C*kh*kw, B*L)


def linear_representation(inputs: torch.Tensor) -> torch.Tensor:
    """A linear layer's representation matrix: its inputs (B, d) as columns, (d, B)."""
    return inputs.reshape(inputs.shape[0], -1).T
