"""Rotated tasks (`data.kind: rotated`): each task's angle, drawn from the run seed, and the rotation of its images.

A rotated task is rotated once, when its tensors are made (`rotate_images`: the task's kept samples only, uint8 in,
uint8 out), so its batches cost what any other task's cost.
"""

from __future__ import annotations

import numpy as np
import torch

from clbench.seeding import numpy_generator

ROTATION_RANGE = (0.0, 180.0)
"""Where each rotated task's angle is drawn uniformly, in degrees: Mammoth's rot-mnist (aimagelab/mammoth@e75a491
`datasets/rot_mnist.py` builds each task's loaders with a new `Rotation()`, and `datasets/transforms/rotation.py`
`Rotation.__init__` draws `np.random.uniform(deg_min=0, deg_max=180)` once per task)."""


def rotation_angles(n_tasks: int, seed: int) -> np.ndarray:
    """The angle of each rotated task in canonical order, in degrees: `n_tasks` independent draws, uniform in
    [0, 180) (`ROTATION_RANGE`), from the run seed's `rotations` stream (`clbench.seeding`)."""
    return numpy_generator(seed, "rotations").uniform(*ROTATION_RANGE, size=n_tasks)


def rotation_sources(height: int, width: int, degrees: float) -> torch.Tensor:
    """For each output pixel of an H x W image rotated by `degrees` counter-clockwise about its centre, the flat
    index of the input pixel it takes (nearest neighbour), or -1 where that falls outside the image: (H * W,).

    Output pixel (r, c) at x = c - cx, y = cy - r (y up; cx = (W - 1) / 2, cy = (H - 1) / 2) takes the input at
    the inverse rotation: x' = cos a x + sin a y, y' = -sin a x + cos a y, i.e. row cy - y', column cx + x',
    rounded. So 90 degrees on a square image is exactly the transpose flipped upside down (numpy's rot90), and
    0 degrees the identity. The convention (counter-clockwise, nearest neighbour, same size, 0 outside) is
    torchvision's `rotate`, which Mammoth's `Rotation` calls; the centre is the middle of the pixel grid.
    """
    angle = torch.tensor(degrees, dtype=torch.float64).deg2rad()
    rows = torch.arange(height, dtype=torch.float64).unsqueeze(1).expand(height, width)  # (H, W)
    cols = torch.arange(width, dtype=torch.float64).unsqueeze(0).expand(height, width)  # (H, W)
    cy, cx = (height - 1) / 2, (width - 1) / 2
    x, y = cols - cx, cy - rows
    x_in = torch.cos(angle) * x + torch.sin(angle) * y
    y_in = -torch.sin(angle) * x + torch.cos(angle) * y
    r_in, c_in = torch.round(cy - y_in).long(), torch.round(cx + x_in).long()  # (H, W)
    inside = (r_in >= 0) & (r_in < height) & (c_in >= 0) & (c_in < width)
    return torch.where(inside, r_in * width + c_in, torch.full_like(r_in, -1)).flatten()  # (H * W,)


def rotate_images(images: torch.Tensor, degrees: float) -> torch.Tensor:
    """uint8 (N, C, H, W) images rotated by `degrees` counter-clockwise (`rotation_sources`), uint8 (N, C, H, W);
    pixels that come from outside the image are 0."""
    n, channels, height, width = images.shape
    sources = rotation_sources(height, width, degrees).to(images.device)  # (H * W,)
    flat = images.reshape(n, channels, height * width)  # (N, C, H * W)
    rotated = flat.index_select(2, sources.clamp(min=0))  # (N, C, H * W)
    rotated = rotated.masked_fill(sources < 0, 0)
    return rotated.reshape(n, channels, height, width)
