"""The random crop (zero padding) and horizontal flip of training batches, by hand on tiny images."""

from __future__ import annotations

import torch

from clbench.data.augment import crop_and_flip, random_crop_and_flip
from clbench.data.batches import LabelledData

# a 1x4x4 image whose pixel (r, c) is 4r + c; with padding 1 it sits at rows 1-4, columns 1-4 of a 6x6 of zeros
from clbench.data.transform import InputTransform

IMAGE = torch.arange(16, dtype=torch.uint8).view(1, 1, 4, 4)


def test_crop_and_flip_element_by_element_on_a_4x4_image_with_padding_1() -> None:
    images = IMAGE.expand(4, 1, 4, 4)
    offsets = torch.tensor([[0, 2], [2, 0], [1, 1], [1, 1]])  # (row, column) of the crop's corner, padded image
    flips = torch.tensor([True, False, False, True])
    out = crop_and_flip(images, offsets, flips, padding=1)
    expected = torch.tensor([
        # rows -1..2, columns 1..4 (the last one padding), mirrored: row r of the image reads 4r+3, 4r+2, 4r+1, then 0
        [[0, 0, 0, 0], [0, 3, 2, 1], [0, 7, 6, 5], [0, 11, 10, 9]],
        # rows 1..4 (the last one padding), columns -1..2: the padding column first
        [[0, 4, 5, 6], [0, 8, 9, 10], [0, 12, 13, 14], [0, 0, 0, 0]],
        # no shift, no flip: the image itself
        [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15]],
        # no shift, flipped: each row mirrored
        [[3, 2, 1, 0], [7, 6, 5, 4], [11, 10, 9, 8], [15, 14, 13, 12]],
    ], dtype=torch.uint8).unsqueeze(1)  # (4, 1, 4, 4)
    assert out.dtype == torch.uint8 and torch.equal(out, expected)


def test_every_channel_of_a_sample_takes_the_same_crop() -> None:
    images = torch.cat([IMAGE, IMAGE + 100], dim=1)  # (1, 2, 4, 4): channel 1 is channel 0 + 100
    out = crop_and_flip(images, torch.tensor([[2, 0]]), torch.tensor([False]), padding=1)
    assert torch.equal(out[0, 0], torch.tensor([[0, 4, 5, 6], [0, 8, 9, 10], [0, 12, 13, 14], [0, 0, 0, 0]],
                                               dtype=torch.uint8))
    assert torch.equal(out[0, 1], torch.tensor([[0, 104, 105, 106], [0, 108, 109, 110], [0, 112, 113, 114],
                                                [0, 0, 0, 0]], dtype=torch.uint8))


def test_the_padding_is_the_pixel_value_0_normalised_as_mammoths_pipeline_gives_it() -> None:
    """Mammoth pads the raw image with 0 before ToTensor and Normalize: a padded pixel enters the network as
    (0 - mean) / std, here (0 - 0.2) / 0.3 = -2/3, not as 0 (which padding after normalisation would give)."""
    transform = InputTransform(torch.full((1, 1), 0.2), torch.full((1, 1), 0.3), None, flatten=False)
    white = torch.full((1, 1, 4, 4), 255, dtype=torch.uint8)
    data = LabelledData(white, torch.zeros(1, dtype=torch.long), torch.zeros(1, dtype=torch.long), transform, 0)
    batch = data.batch(slice(None), lambda images: crop_and_flip(images, torch.tensor([[0, 0]]),
                                                                  torch.tensor([False]), padding=1))
    padded, white_value = -0.2 / 0.3, 0.8 / 0.3  # (0 - 0.2) / 0.3 and (1 - 0.2) / 0.3
    expected = torch.full((4, 4), white_value)
    expected[0, :] = padded  # the top row and the left column are padding (the crop starts at the padded corner)
    expected[:, 0] = padded
    torch.testing.assert_close(batch.inputs[0, 0], expected)
    assert torch.equal(batch.images, white)  # the batch keeps the stored images, not the augmented ones


def test_random_crops_and_flips_are_drawn_offsets_then_coins_from_the_generator() -> None:
    images = torch.randint(0, 256, (64, 3, 8, 8), dtype=torch.uint8, generator=torch.Generator().manual_seed(1))
    draws = torch.Generator().manual_seed(7)
    offsets = torch.randint(0, 9, (64, 2), generator=draws)  # padding 4: corners 0..8
    flips = torch.randint(0, 2, (64,), generator=draws).bool()
    expected = crop_and_flip(images, offsets, flips, padding=4)
    first = random_crop_and_flip(images, torch.Generator().manual_seed(7))
    assert torch.equal(first, expected)  # same seed, same crops and flips
    assert not torch.equal(random_crop_and_flip(images, torch.Generator().manual_seed(8)), first)
    assert 0 < int(flips.sum()) < 64 and len(set(offsets.flatten().tolist())) == 9
