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


def write_block_arrays(path: Path, seed: int = 0, n_train: int = 24, n_test: int = 8) -> Path:
    """An npz of 4 classes (two tasks of two, `n_train` training and `n_test` test images each): a class is a bright
    band of 7 rows of its own (rows 7c..7c+6) plus noise, so a small MLP learns it in an epoch."""
    rng = np.random.default_rng(seed)

    def images(n: int) -> tuple[np.ndarray, np.ndarray]:
        labels = np.repeat(np.arange(4), n)
        pixels = rng.integers(0, 60, size=(len(labels), 28, 28))
        for label in range(4):
            pixels[labels == label, label * 7:(label + 1) * 7, :] += 180
        return pixels.clip(0, 255).astype(np.uint8), labels.astype(np.int64)  # (N, 28, 28), (N,)

    (x_train, y_train), (x_test, y_test) = images(n_train), images(n_test)
    np.savez(path, x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test)
    return path
