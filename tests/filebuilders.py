"""Files a spec's own data set reads (`datasets:`), built by hand: an npz of constant images and an image folder
of uniform squares. Shared by the custom-data, CLI and plugin tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

COLOURS = {"b_square": [(200, 100, 50), (0, 50, 250)], "a_circle": [(10, 20, 30), (40, 40, 40), (100, 0, 0)]}
TEST_COLOURS = {"b_square": [(1, 2, 3)], "a_circle": [(9, 9, 9)]}


def write_image_folder(root: Path, train: dict = COLOURS, test: dict = TEST_COLOURS, size: int = 8) -> Path:
    """`root/{train,test}/<class>/<i>.png`: uniform RGB squares of the given colours."""
    for split, classes in (("train", train), ("test", test)):
        for name, colours in classes.items():
            (root / split / name).mkdir(parents=True, exist_ok=True)
            for index, colour in enumerate(colours):
                Image.new("RGB", (size, size), colour).save(root / split / name / f"{index}.png")
    return root


def constant_images(values: list[int], side: int = 28) -> np.ndarray:
    return np.stack([np.full((side, side), value, np.uint8) for value in values])  # (N, side, side)


def write_npz(path: Path, **overrides: np.ndarray) -> Path:
    """x_train: 4 constant 28x28 images (10, 20, 30, 40) labelled 7, 3, 7, 3; x_test: 50 (3), 60 (7)."""
    arrays = {"x_train": constant_images([10, 20, 30, 40]), "y_train": np.array([7, 3, 7, 3]),
              "x_test": constant_images([50, 60]), "y_test": np.array([3, 7])}
    arrays.update(overrides)
    np.savez(path, **arrays)
    return path
