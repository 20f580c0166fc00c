"""`random_crop`: the crop of `crop_and_flip` without the flip, its offsets from the generator."""

from __future__ import annotations

import torch
from torch.nn import functional

from clbench.data.augment import random_crop


def test_each_image_is_its_zero_padded_self_cut_at_its_drawn_offset_never_flipped() -> None:
    images = torch.arange(2 * 1 * 5 * 5, dtype=torch.uint8).reshape(2, 1, 5, 5)  # asymmetric: a flip would show
    generator = torch.Generator().manual_seed(3)
    offsets = torch.randint(0, 2 * 2 + 1, (2, 2), generator=torch.Generator().manual_seed(3))  # the same draws
    out = random_crop(images, generator, padding=2)
    padded = functional.pad(images, (2, 2, 2, 2))  # (2, 1, 9, 9), zeros around
    for b in range(2):
        row, column = int(offsets[b, 0]), int(offsets[b, 1])
        assert torch.equal(out[b], padded[b, :, row:row + 5, column:column + 5])
    assert out.dtype == torch.uint8 and out.shape == images.shape
