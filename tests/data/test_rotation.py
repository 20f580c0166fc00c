"""Rotated tasks (`data.kind: rotated`): the rotation by hand on tiny images, the seeded angles, the stored tasks."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
from synthetic import synthetic_loader

from clbench.data.rotation import ROTATION_RANGE, rotate_images, rotation_angles, rotation_sources
from clbench.data.tasks import build_tasks
from clbench.errors import ClbenchError, SpecError
from clbench.spec import DataSpec, load_benchmark


def image(rows: list[list[int]]) -> torch.Tensor:
    """One uint8 image (1, 1, H, W) from its rows."""
    return torch.tensor(rows, dtype=torch.uint8)[None, None]


FOUR = [[1, 2, 3, 4],
        [5, 6, 7, 8],
        [9, 10, 11, 12],
        [13, 14, 15, 16]]


def test_ninety_degrees_is_the_transpose_flipped_upside_down() -> None:
    # counter-clockwise: the right column comes to the top row, read top to bottom
    expected = [[4, 8, 12, 16],
                [3, 7, 11, 15],
                [2, 6, 10, 14],
                [1, 5, 9, 13]]
    assert rotate_images(image(FOUR), 90.0)[0, 0].tolist() == expected
    three = [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
    assert rotate_images(image(three), 90.0)[0, 0].tolist() == [[3, 6, 9], [2, 5, 8], [1, 4, 7]]


def test_zero_degrees_is_the_identity_and_180_flips_both_ways() -> None:
    assert rotate_images(image(FOUR), 0.0)[0, 0].tolist() == FOUR
    assert rotate_images(image(FOUR), 180.0)[0, 0].tolist() == [row[::-1] for row in FOUR[::-1]]


def test_forty_five_degrees_keeps_the_centre_and_fills_what_comes_from_outside_with_zero() -> None:
    three = [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
    rotated = rotate_images(image(three), 45.0)[0, 0]
    # centre (1, 1) fixed. Output (0, 1): x = 0, y = 1 -> x' = sin 45 = 0.71, y' = cos 45 = 0.71 -> input row
    # 1 - 0.71 = 0.29 -> 0, column 1 + 0.71 -> 2: pixel 3. Output corner (0, 0): x = -1, y = 1 -> x' = 0,
    # y' = 1.41 -> row -0.41 -> 0, column 1: pixel 2. Output (0, 2): x = 1, y = 1 -> x' = 1.41, y' = 0 -> row 1,
    # column 2.41 -> 2: pixel 6.
    assert rotated[1, 1] == 5 and rotated[0, 1] == 3 and rotated[0, 0] == 2 and rotated[0, 2] == 6
    four = rotate_images(image(FOUR), 45.0)[0, 0]
    # corner (0, 0) of a 4x4 (centre 1.5, 1.5): x = -1.5, y = 1.5 -> x' = 0, y' = 2.12 -> row -0.62 -> -1: outside
    assert four[0, 0] == 0 and rotation_sources(4, 4, 45.0)[0] == -1
    assert four.dtype == torch.uint8


def rotated_by_hand(rows: list[list[int]], degrees: float) -> tuple[list[list[int]], int]:
    """The docstring's rule pixel by pixel in plain Python: output (r, c) takes input (round(cy - y'), round(cx +
    x')), 0 when that is outside; and how many output pixels take column W of a row inside, just past the right
    edge. Asserts that no rounding is within 0.01 of a tie (so float64 noise cannot decide it)."""
    height, width = len(rows), len(rows[0])
    angle = math.radians(degrees)
    cy, cx = (height - 1) / 2, (width - 1) / 2
    out, past_the_edge = [[0] * width for _ in range(height)], 0
    for r in range(height):
        for c in range(width):
            x, y = c - cx, cy - r
            row = cy - (-math.sin(angle) * x + math.cos(angle) * y)
            column = cx + (math.cos(angle) * x + math.sin(angle) * y)
            assert min(abs(row % 1 - 0.5), abs(column % 1 - 0.5)) > 0.01, (r, c)
            r_in, c_in = round(row), round(column)
            if 0 <= r_in < height and 0 <= c_in < width:
                out[r][c] = rows[r_in][c_in]
            past_the_edge += 0 <= r_in < height and c_in == width
    return out, past_the_edge


def test_a_non_right_angle_on_28x28_is_the_rule_pixel_by_pixel() -> None:
    """37 degrees on MNIST's size; pixels numbered 1..251 (mod 251), so one taken from the wrong place shows. Eleven
    output pixels round to column 28, just past the right edge: they are 0, not the next row's first pixel."""
    rows = [[(28 * r + c) % 251 + 1 for c in range(28)] for r in range(28)]
    expected, past_the_edge = rotated_by_hand(rows, 37.0)
    assert past_the_edge == 11
    assert rotate_images(image(rows), 37.0)[0, 0].tolist() == expected
    assert sum(value == 0 for row in expected for value in row) == int((rotation_sources(28, 28, 37.0) < 0).sum())


def test_every_channel_and_image_is_rotated_alike() -> None:
    images = torch.arange(2 * 3 * 16, dtype=torch.uint8).reshape(2, 3, 4, 4)
    rotated = rotate_images(images, 90.0)
    assert torch.equal(rotated, torch.rot90(images, 1, dims=(2, 3)))


def test_the_angles_are_seeded_uniform_draws_one_per_task() -> None:
    angles = rotation_angles(20, seed=0)
    assert np.array_equal(angles, rotation_angles(20, seed=0))  # reproducible
    assert len(set(angles.tolist())) == 20  # each task its own angle
    assert not np.array_equal(angles, rotation_angles(20, seed=1))  # another seed, other angles
    assert ROTATION_RANGE == (0.0, 180.0) and ((angles >= 0) & (angles < 180)).all()
    assert np.array_equal(rotation_angles(5, seed=0), angles[:5])  # task k's angle does not depend on how many


def rotated_spec(n_tasks: int = 2, **changes: object) -> DataSpec:
    return dataclasses.replace(DataSpec(kind="rotated", datasets=("mnist",), form="mnist28", n_tasks=n_tasks,
                                        shuffle_tasks=False), **changes)


def test_each_task_stores_its_images_rotated_by_its_angle_as_uint8() -> None:
    loader = synthetic_loader(n_train=40, n_test=12)
    tasks = build_tasks(rotated_spec(), 3, loader)
    original = torch.from_numpy(loader("mnist", "mnist28").test.images)  # (12, 1, 28, 28)
    angles = rotation_angles(2, seed=3)
    for task, angle in zip(tasks, angles):
        assert task.name == f"mnist:rot{task.index}:{angle:.1f}deg"
        assert task.test.images.dtype == torch.uint8
        assert torch.equal(task.test.images, rotate_images(original, float(angle)))
    assert not torch.equal(tasks[0].test.images, tasks[1].test.images)
    assert tasks.head_sizes == (10, 10)


def test_a_domain_sequence_with_unequal_class_counts_is_refused_with_the_counts() -> None:
    spec = DataSpec(kind="mixture", datasets=("mnist", "cifar10"), form="image32", scenario="domain",
                    shuffle_tasks=False)
    loader = synthetic_loader(n_train=40, n_test=12)  # mnist 10 classes, cifar10 10: allowed
    assert build_tasks(spec, 0, loader).head_sizes == (10, 10)
    uneven = dataclasses.replace(spec, datasets=("mnist", "cifar100"))  # the synthetic cifar100 has 20 classes
    with pytest.raises(ClbenchError, match="the tasks have mnist 10, cifar100 20 classes"):
        build_tasks(uneven, 0, loader)


def test_a_spec_whose_tasks_differ_in_class_count_is_refused_at_load() -> None:
    with pytest.raises(SpecError) as error:
        load_benchmark("mnist5", ["data.scenario=domain", "data.classes_per_task=[4]", "data.remainder=keep"])
    message = str(error.value)
    assert "\n" not in message and message.startswith("--set data.scenario=domain: ")
    assert "the tasks have mnist:0-3 4, mnist:4-7 4, mnist:8-9 2 classes" in message
    assert load_benchmark("pmnist", ["data.scenario=domain"]).data.scenario == "domain"  # 10 classes per task


def test_rot_mnist_is_mammoths_twenty_tasks_in_the_domain_scenario() -> None:
    spec = load_benchmark("rot-mnist")
    assert (spec.data.kind, spec.data.n_tasks, spec.data.scenario) == ("rotated", 20, "domain")
    assert spec.network.hidden == (100, 100)
