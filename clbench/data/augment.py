"""Training-time augmentation of uint8 image batches on their device: random crop with zero padding, horizontal flip.

Mammoth's seq-cifar10 trains with `RandomCrop(32, padding=4)`, then `RandomHorizontalFlip()`, then `ToTensor()` and
`Normalize(MEAN, STD)` (aimagelab/mammoth@e75a491, datasets/seq_cifar10.py, `SequentialCIFAR10.TRANSFORM`; its
replay buffer applies the same transform to the samples it returns: utils/buffer.py `get_data(..., transform)`).
RandomCrop pads the raw 0-255 image with 0 before normalisation, so a padded pixel enters the network as
(0 - mean) / std. clbench does the same by augmenting the stored uint8 images, before `InputTransform` normalises
them: the padding is the pixel value 0.

Every sample of a batch draws its own crop offset (row and column of the crop's corner in the padded image, each
uniform in 0..2 * padding) and flip (probability 1/2), from one seeded CPU generator (the run's `augment` stream,
`clbench.seeding`), so the same seed crops the same way on every device. The crop and flip are two gathers of
the padded batch (rows, then columns; no loop over samples).
"""

from __future__ import annotations

import torch
from torch.nn import functional

CROP_PADDING = 4  # Mammoth's RandomCrop(32, padding=4)


def crop_and_flip(images: torch.Tensor, offsets: torch.Tensor, flips: torch.Tensor, padding: int) -> torch.Tensor:
    """Each image zero-padded by `padding` on every side, cropped back to its size at its offset, then mirrored
    left-right where `flips` is set.

    Args:
        images: (B, C, H, W), any dtype (uint8 images: the padding is the pixel value 0).
        offsets: (B, 2) integers in [0, 2 * padding]: the row and column, in the padded image, of the crop's top-left
            corner (`padding`, `padding`: no shift).
        flips: (B,) bool: mirror the crop horizontally.
        padding: pixels of zeros added on each side.

    Returns:
        (B, C, H, W) with out[b, c, i, j] = padded[b, c, offsets[b, 0] + i, offsets[b, 1] + j'], j' = W - 1 - j
        where flipped, else j.
    """
    batch, channels, height, width = images.shape
    padded = functional.pad(images, (padding, padding, padding, padding))  # (B, C, H + 2p, W + 2p), zeros
    offsets = offsets.to(images.device)
    flips = flips.to(images.device)
    rows = offsets[:, :1] + torch.arange(height, device=images.device)  # (B, H)
    columns = torch.arange(width, device=images.device).expand(batch, width)  # (B, W)
    columns = torch.where(flips[:, None], width - 1 - columns, columns) + offsets[:, 1:]  # (B, W)
    # two gathers, rows then columns (on the CPU twice as fast as one advanced index over B, C, H and W)
    kept_rows = padded.gather(2, rows[:, None, :, None].expand(batch, channels, height, padded.shape[3]))
    return kept_rows.gather(3, columns[:, None, None, :].expand(batch, channels, height, width))  # (B, C, H, W)


def random_crop_and_flip(images: torch.Tensor, generator: torch.Generator,
                         padding: int = CROP_PADDING) -> torch.Tensor:
    """`crop_and_flip` with offsets and flips drawn from `generator` (a CPU generator): per sample, two offsets
    uniform in 0..2 * padding, then one coin for the flip; (B, C, H, W) -> (B, C, H, W), same dtype and device."""
    batch = images.shape[0]
    offsets = torch.randint(0, 2 * padding + 1, (batch, 2), generator=generator)  # (B, 2)
    flips = torch.randint(0, 2, (batch,), generator=generator).bool()  # (B,)
    return crop_and_flip(images, offsets, flips, padding)


def random_crop(images: torch.Tensor, generator: torch.Generator, padding: int = CROP_PADDING) -> torch.Tensor:
    """`crop_and_flip` without the flip: per sample two offsets uniform in 0..2 * padding drawn from `generator`
    (the GDumb authors' `RandomCrop(28, padding=4)` on MNIST, where they do not flip); (B, C, H, W) -> same."""
    offsets = torch.randint(0, 2 * padding + 1, (images.shape[0], 2), generator=generator)  # (B, 2)
    return crop_and_flip(images, offsets, torch.zeros(images.shape[0], dtype=torch.bool), padding)
