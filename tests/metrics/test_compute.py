"""The arithmetic of compute (`clbench.compute`): a stage's FLOPs from its counted steps, and the real-time stream's
rule on hand-made cost ratios, each expected list written out by hand."""

from __future__ import annotations

from fractions import Fraction

import pytest

from clbench.compute import extrapolated_flops, format_flops, realtime_batches, step_cost_units


def test_a_stage_is_its_counted_steps_then_the_last_count_for_each_later_step() -> None:
    # ER's first step (empty memory) costs 1, the next ones 2: 1 + 2 + 2 counted, then 7 more steps at 2
    assert extrapolated_flops([1, 2, 2], 10) == 1 + 2 + 2 + 7 * 2
    assert extrapolated_flops([5, 6, 7], 2) == 11  # fewer steps than counted: those steps
    with pytest.raises(ValueError):
        extrapolated_flops([], 3)


def test_a_step_cost_is_the_exact_ratio_to_the_unit() -> None:
    assert step_cost_units(11_388_000, 3_796_000) == 3  # DER++ against SGD on seq-mnist's network (measured)
    assert step_cost_units(4, 3) == Fraction(4, 3)
    with pytest.raises(ValueError):
        step_cost_units(1, 0)


@pytest.mark.parametrize(("cost", "trained"), [
    (Fraction(1), list(range(10))),  # the unit: every batch
    (Fraction(3), [0, 3, 6, 9]),  # k = 3: one batch in three
    (Fraction(2), [0, 2, 4, 6, 8]),
    # Ghunaim et al.'s two fractional costs, as their code writes them out (delay.py `is_training_batch`)
    (Fraction(5, 2), [0, 2, 5, 7]),  # MIR: i % 5 in (0, 2)
    (Fraction(4, 3), [0, 1, 2, 4, 5, 6, 8, 9]),  # LwF: i % 4 < 3
    (Fraction(1, 2), list(range(10))),  # cheaper than the unit: still one batch per arrival, none twice
    (Fraction(0), list(range(10))),  # GDumb's stream step stores and trains nothing
])
def test_the_realtime_stream_trains_one_batch_in_k(cost: Fraction, trained: list[int]) -> None:
    assert realtime_batches([cost] * 20, 10) == trained


def test_a_cost_that_changes_moves_the_clock_by_each_steps_own_cost() -> None:
    # ER: its first step (nothing to replay) costs 1, then 2: batch 0 at 0, batch 1 at 1, then 3, 5, 7, 9
    assert realtime_batches([Fraction(1), Fraction(2)], 10) == [0, 1, 3, 5, 7, 9]
    # the count seen: 6 of 10
    assert len(realtime_batches([Fraction(1), Fraction(2)], 10)) == 6


def test_flops_are_written_with_a_prefix() -> None:
    assert format_flops(3_796_000) == "3.80 MFLOP"
    assert format_flops(1.25e9) == "1.25 GFLOP"
    assert format_flops(640) == "640 FLOP"
    assert format_flops(float("nan")) == "–"
