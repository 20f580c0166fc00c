"""`golden_runs.compare_with_golden` by hand: exact on the recording kernels, within tolerance elsewhere, and the
hashes, cells and NaN losses always held exactly.

`test_contract.py` passes as long as the runs agree with their records, which a comparison that had become lax
would not show (a tolerance used on the recording kernels, cells not compared, a lost hash): these tests give it
records that must be refused. Each takes a stored record and changes one thing; a row ends with (n_test, accuracy,
loss), whatever comes before.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest
from golden_runs import EXACT, TOLERANCE, compare_with_golden, load_golden, same_loss

KEY, NAN_KEY = "sgd/mlp", "random/mlp"  # a run with losses, and one whose losses are all NaN


def stored() -> dict[str, Any]:
    return {key: load_golden()[key] for key in (KEY, NAN_KEY)}


def here(key: str, other_kernels: bool) -> dict[str, Any]:
    """A copy of the stored record of `key`, as a run here would make it: on the recording kernels or not."""
    record = copy.deepcopy(stored()[key])
    if other_kernels:
        record["kernels"]["cpu_capability"] = "DEFAULT" if record["kernels"]["cpu_capability"] != "DEFAULT" else "AVX2"
    return record


@pytest.mark.parametrize("other_kernels, mode", [(False, EXACT), (True, TOLERANCE)])
def test_an_unchanged_record_passes_and_says_how_it_was_compared(other_kernels: bool, mode: str) -> None:
    for key in (KEY, NAN_KEY):
        comparison = compare_with_golden(key, here(key, other_kernels), stored())
        assert comparison.mode == mode and comparison.key == key


def test_on_the_recording_kernels_a_loss_off_in_its_last_digits_is_refused() -> None:
    record = here(KEY, other_kernels=False)
    record["rows"][-1][-1] = math.nextafter(record["rows"][-1][-1], math.inf)  # one ulp: far within LOSS_RTOL
    with pytest.raises(AssertionError, match="numbers differ"):
        compare_with_golden(KEY, record, stored())
    record = here(KEY, other_kernels=True)  # the same change on other kernels: rounding, accepted
    record["rows"][-1][-1] = math.nextafter(record["rows"][-1][-1], math.inf)
    assert compare_with_golden(KEY, record, stored()).mode == TOLERANCE


# The numbers below are those of golden_runs' docstring, not its constants: a constant changed by mistake must fail.
@pytest.mark.parametrize("change", [0.05, -0.05])
def test_on_other_kernels_an_accuracy_moved_by_0_05_either_way_is_refused(change: float) -> None:
    record = here(KEY, other_kernels=True)
    record["rows"][3][-2] += change
    with pytest.raises(AssertionError, match="accuracy"):
        compare_with_golden(KEY, record, stored())


@pytest.mark.parametrize("factor", [1 + 1e-3, 1 - 1e-3])
def test_on_other_kernels_a_loss_moved_by_1e_3_relative_is_refused_and_by_1e_5_accepted(factor: float) -> None:
    record = here(KEY, other_kernels=True)
    record["rows"][3][-1] *= factor  # ten times LOSS_RTOL (1e-4)
    with pytest.raises(AssertionError, match="loss"):
        compare_with_golden(KEY, record, stored())
    record = here(KEY, other_kernels=True)
    record["rows"][3][-1] *= 1 + (factor - 1) / 100  # about 4 times the largest change measured (2.7e-6)
    assert compare_with_golden(KEY, record, stored()).mode == TOLERANCE


@pytest.mark.parametrize("other_kernels", [False, True])
def test_the_cells_are_held_exactly_on_any_kernels(other_kernels: bool) -> None:
    record = here(KEY, other_kernels)
    record["rows"][3][-3] += 1  # one more test image in a cell, its numbers unchanged
    with pytest.raises(AssertionError, match="cells"):
        compare_with_golden(KEY, record, stored())
    record = here(KEY, other_kernels)
    del record["rows"][-1]  # a cell no longer stored
    with pytest.raises(AssertionError, match="cells"):
        compare_with_golden(KEY, record, stored())


@pytest.mark.parametrize("other_kernels", [False, True])
@pytest.mark.parametrize("name", ["config_hash", "data_hash", "reference_hash"])
def test_each_hash_is_held_exactly_on_any_kernels(name: str, other_kernels: bool) -> None:
    record = here(KEY, other_kernels)
    record[name] = "0" * len(record[name])
    with pytest.raises(AssertionError, match=name):
        compare_with_golden(KEY, record, stored())


def test_a_nan_loss_only_equals_nan() -> None:
    assert same_loss(math.nan, math.nan)
    assert not same_loss(2.3, math.nan) and not same_loss(math.nan, 2.3)
    record = here(NAN_KEY, other_kernels=True)
    record["rows"][0][-1] = 2.3  # a loss where the record has none
    with pytest.raises(AssertionError, match="loss"):
        compare_with_golden(NAN_KEY, record, stored())


def test_within_tolerance_the_largest_changes_are_measured_and_summed_up_over_the_runs() -> None:
    from golden_runs import Comparison, summary_lines

    record = here(KEY, other_kernels=True)
    record["rows"][3][-2] += 0.0125  # an accuracy moved by 0.0125
    record["rows"][5][-1] *= 1 - 2e-5  # a loss by 2e-5 relative, another row's by 1e-5
    record["rows"][6][-1] *= 1 + 1e-5
    comparison = compare_with_golden(KEY, record, stored())
    assert comparison.largest_accuracy_change == pytest.approx(0.0125, rel=1e-9)
    assert comparison.largest_loss_change == pytest.approx(2e-5, rel=1e-6)
    assert compare_with_golden(NAN_KEY, here(NAN_KEY, other_kernels=True), stored()).largest_loss_change == 0.0
    exact = compare_with_golden(KEY, here(KEY, other_kernels=False), stored())
    assert (exact.largest_accuracy_change, exact.largest_loss_change) == (0.0, 0.0)
    kernels = here(KEY, other_kernels=True)["kernels"]
    other = Comparison("other", TOLERANCE, stored()[KEY]["kernels"], 0.03, 1e-6)
    lines = summary_lines([(comparison, kernels), (other, kernels)])
    assert lines[0].endswith("largest changes: accuracy 0.03, loss 2e-05 relative, 0 absolute under 0.01"), lines


NEAR_ZERO_KEY = "gdumb/mlp/class"  # its fit of the memory: losses of 3.8e-6 and 0.0


def near_zero_row(record: dict[str, Any]) -> int:
    return next(i for i, row in enumerate(record["rows"]) if 0 < row[-1] < 1e-5)


def test_on_other_kernels_a_loss_near_zero_is_held_within_an_absolute_floor() -> None:
    """A loss of a few 1e-6 moved by 5e-7 (over 10% relative: float32 rounding near zero, golden_runs' LOSS_ATOL)
    is accepted on other kernels, and the change is reported as absolute; moved by 2e-6 it is refused; a loss of 0.0
    likewise. On the recording kernels every digit still counts."""
    golden = {NEAR_ZERO_KEY: load_golden()[NEAR_ZERO_KEY]}
    record = copy.deepcopy(golden[NEAR_ZERO_KEY])
    record["kernels"]["cpu_capability"] = "OTHER"
    row = near_zero_row(record)
    record["rows"][row][-1] += 5e-7
    comparison = compare_with_golden(NEAR_ZERO_KEY, record, golden)
    assert comparison.largest_near_zero_loss_change == pytest.approx(5e-7, rel=1e-6)
    assert comparison.largest_loss_change < 1e-9  # no loss of 0.01 or more moved
    record["rows"][row][-1] += 1.5e-6
    with pytest.raises(AssertionError, match="loss"):
        compare_with_golden(NEAR_ZERO_KEY, record, golden)
    zero = next(i for i, each in enumerate(golden[NEAR_ZERO_KEY]["rows"]) if each[-1] == 0.0)
    record = copy.deepcopy(golden[NEAR_ZERO_KEY])
    record["kernels"]["cpu_capability"] = "OTHER"
    record["rows"][zero][-1] = 2e-6
    with pytest.raises(AssertionError, match="loss"):
        compare_with_golden(NEAR_ZERO_KEY, record, golden)
    assert same_loss(0.0, 9e-7) and not same_loss(0.0, 1.1e-6)
    exact = copy.deepcopy(golden[NEAR_ZERO_KEY])
    exact["rows"][row][-1] += 5e-7
    with pytest.raises(AssertionError, match="numbers differ"):
        compare_with_golden(NEAR_ZERO_KEY, exact, golden)


@pytest.mark.parametrize("factor", [1.01, 0.99])
def test_every_golden_record_with_its_losses_moved_by_1_percent_is_refused_on_any_kernels(factor: float) -> None:
    """Every record of tests/golden/runs.json, every loss times 1.01 (or 0.99), compared as a run on other kernels
    would be (`avx2`, `default`, another CPU): refused, as on the recording kernels."""
    golden = load_golden()
    for key, recorded in golden.items():
        if all(math.isnan(row[-1]) for row in recorded["rows"]):
            continue  # random: no loss
        for capability in ("DEFAULT", "AVX2", "AVX512", recorded["kernels"]["cpu_capability"]):
            record = copy.deepcopy(recorded)
            record["kernels"]["cpu_capability"] = capability
            for row in record["rows"]:
                row[-1] *= factor
            with pytest.raises(AssertionError, match="loss|numbers differ"):
                compare_with_golden(key, record, golden)
