"""GPM's mathematics by hand: the rank each threshold keeps (first task: Eq. 5; a later task: Eq. 8-9 on the
projected residual), projected gradients orthogonal to the stored bases, conv patches as the authors unfold them."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional

from clbench.approaches.gpm.functions import (
    layer_thresholds,
    linear_representation,
    project_gradient,
    projection_matrix,
    retained_rank,
    unfold_patches,
    update_basis,
)


def columns(*vectors: tuple[float, ...]) -> torch.Tensor:
    return torch.tensor(vectors, dtype=torch.float32).T  # (d, n)


# Singular values 3, 2, 1 along e1, e2, e3 of R^4: energies 9, 4, 1 of 14 (ratios .643, .286, .071).
FIRST = columns((3, 0, 0, 0), (0, 2, 0, 0), (0, 0, 1, 0))


@pytest.mark.parametrize(("threshold", "kept"), [(0.5, [0]), (0.64, [0]), (0.65, [0, 1]), (0.9, [0, 1]),
                                                 (0.92, [0, 1]), (0.93, [0, 1, 2]), (1.0, [0, 1, 2])])
def test_first_task_keeps_the_fewest_directions_reaching_the_threshold(threshold: float, kept: list[int]) -> None:
    # Eq. 5: smallest r with sum_{i<=r} s_i^2 >= threshold * 14: 9/14 = .643 < .65 <= 13/14 = .9286 < .93
    basis = update_basis(FIRST, torch.zeros(4, 0), threshold)
    expected = torch.zeros(4, 4)
    expected[kept, kept] = 1.0
    assert basis.shape == (4, len(kept))
    torch.testing.assert_close(projection_matrix(basis), expected, atol=1e-6, rtol=0)


def test_a_later_task_adds_directions_of_its_residual_counting_the_energy_already_captured() -> None:
    basis = torch.tensor([[1.0], [0.0], [0.0], [0.0]])  # e1 stored after an earlier task
    # columns 2 e1 (inside the basis), 3 e3, 1 e4: total 14, residual energies 9 (e3) and 1 (e4)
    later = columns((2, 0, 0, 0), (0, 0, 3, 0), (0, 0, 0, 1))
    # captured before adding anything: (14 - 10) / 14 = .286; + 9/14 = .929; + 1/14 = 1
    for threshold, added in [(0.2, []), (0.28, []), (0.29, [2]), (0.9, [2]), (0.95, [2, 3]), (1.0, [2, 3])]:
        updated = update_basis(later, basis, threshold)
        expected = torch.zeros(4, 4)
        expected[[0, *added], [0, *added]] = 1.0
        assert updated.shape == (4, 1 + len(added)), threshold
        torch.testing.assert_close(updated[:, :1], basis)  # the stored directions come first, unchanged
        torch.testing.assert_close(projection_matrix(updated), expected, atol=1e-6, rtol=0)


def test_retained_rank_counts_the_directions_added_before_the_threshold_is_reached() -> None:
    energy = torch.tensor([9.0, 1.0], dtype=torch.float64)
    assert retained_rank(energy, 14.0, 4 / 14, 0.9) == 1
    assert retained_rank(energy, 14.0, 4 / 14, 0.95) == 2
    assert retained_rank(energy, 14.0, 4 / 14, 0.25) == 0


def test_a_threshold_of_one_keeps_the_span_and_no_direction_without_energy() -> None:
    generator = torch.Generator().manual_seed(0)
    mixing = torch.randn(8, 3, generator=generator, dtype=torch.float64)
    activation = (mixing @ torch.randn(3, 20, generator=generator, dtype=torch.float64)).float()  # rank 3 of R^8
    basis = update_basis(activation, torch.zeros(8, 0), 1.0)
    assert basis.shape == (8, 3)
    q, _ = torch.linalg.qr(mixing)
    torch.testing.assert_close(projection_matrix(basis).double(), q @ q.T, atol=1e-5, rtol=0)
    # a second task inside the same span adds nothing; one with a new direction adds exactly that one
    assert update_basis(activation[:, :5], basis, 1.0).shape == (8, 3)
    new = torch.cat([activation, torch.eye(8)[:, 7:]], dim=1)
    assert update_basis(new, basis, 1.0).shape == (8, 4)


def test_the_basis_never_exceeds_the_layer_input_size_and_stays_orthonormal() -> None:
    generator = torch.Generator().manual_seed(1)
    basis = torch.zeros(5, 0)
    for _ in range(4):
        basis = update_basis(torch.randn(5, 3, generator=generator), basis, 0.99)
    assert basis.shape[1] <= 5
    torch.testing.assert_close(basis.T @ basis, torch.eye(basis.shape[1]), atol=1e-5, rtol=0)


def test_projected_gradients_are_orthogonal_to_the_stored_bases() -> None:
    generator = torch.Generator().manual_seed(2)
    basis, _ = torch.linalg.qr(torch.randn(12, 4, generator=generator))  # (12, 4) orthonormal
    projection = projection_matrix(basis)
    gradient = torch.randn(6, 12, generator=generator)
    projected = project_gradient(gradient, projection)
    torch.testing.assert_close(projected @ basis, torch.zeros(6, 4), atol=1e-5, rtol=0)
    removed = gradient - projected  # only the component inside the span is removed
    torch.testing.assert_close(removed - removed @ projection, torch.zeros(6, 12), atol=1e-5, rtol=0)
    # a conv kernel (out, C, k, k) is projected as (out, C*k*k)
    kernel_gradient = torch.randn(6, 3, 2, 2, generator=generator)
    projected_kernel = project_gradient(kernel_gradient, projection)
    assert projected_kernel.shape == (6, 3, 2, 2)
    torch.testing.assert_close(projected_kernel.reshape(6, 12) @ basis, torch.zeros(6, 4), atol=1e-5, rtol=0)


def test_unfold_patches_matches_the_authors_loops() -> None:
    inputs = torch.randn(2, 3, 5, 5, generator=torch.Generator().manual_seed(3))
    conv = torch.nn.Conv2d(3, 4, 2, bias=False)
    side, k = 4, 2
    # main_cifar100.py:209-213: for each sample, row ii, column jj: act[kk, :, ii:ii+k, jj:jj+k] flattened
    expected = torch.stack([inputs[b, :, i:i + k, j:j + k].reshape(-1)
                            for b in range(2) for i in range(side) for j in range(side)], dim=1)
    torch.testing.assert_close(unfold_patches(inputs, conv), expected)
    assert linear_representation(torch.arange(6.0).view(2, 3)).tolist() == [[0, 3], [1, 4], [2, 5]]


def test_a_conv_step_orthogonal_to_the_patches_leaves_the_outputs_on_those_inputs_unchanged() -> None:
    generator = torch.Generator().manual_seed(4)
    inputs = torch.randn(1, 2, 4, 4, generator=generator)  # 9 patches of 2*2*2 = 8 values: span up to 8 of R^8
    conv = torch.nn.Conv2d(2, 3, 2, bias=False)
    basis = update_basis(unfold_patches(inputs[:, :, :3, :3], conv), torch.zeros(8, 0), 1.0)  # top-left 4 patches
    step = project_gradient(torch.randn(3, 2, 2, 2, generator=generator), projection_matrix(basis))
    before = functional.conv2d(inputs[:, :, :3, :3], conv.weight)
    after = functional.conv2d(inputs[:, :, :3, :3], conv.weight + step)
    torch.testing.assert_close(after, before, atol=1e-5, rtol=0)
    assert not torch.allclose(functional.conv2d(inputs, conv.weight + step), functional.conv2d(inputs, conv.weight))


def test_layer_thresholds_repeat_the_last_and_rise_per_task() -> None:
    assert layer_thresholds((0.95, 0.99), 0.0, 3, 4) == [0.95, 0.99, 0.99]
    assert layer_thresholds((0.97,), 0.003, 2, 3) == pytest.approx([0.979, 0.979])
    assert layer_thresholds((0.99,), 0.003, 1, 9) == [1.0]
