"""The arithmetic of compute: a stage's FLOPs from its measured steps, and the real-time stream's rule.

Pure functions on integers and fractions (no torch, no numpy): the counting itself is
`clbench.approaches.flops` (torch's `torch.utils.flop_counter.FlopCounterMode` around measured steps), the report
reads what is stored.

FLOPs are those `FlopCounterMode` counts: the multiply-adds of matrix products and convolutions (forward and
backward), two FLOPs each; element-wise work (activations, the optimiser's update, a dot product) is not counted.

The real-time stream (Ghunaim et al., "Real-Time Evaluation in Online Continual Learning: A New Hope", CVPR 2023,
section 3): the stream reveals one batch per unit of compute; a method whose step costs k units is busy while k
batches arrive and trains on the batch that is the newest when it is free again. Their code
(Yasir-Ghunaim/RealtimeOCL at 0bc8bb4, `avalanche_extend/benchmarks/training/supervised/delay.py`,
`Delay.is_training_batch`, lines 89-101) trains batch i when `i % (int(batch_delay) + 1) == 0` for a whole cost
k = batch_delay + 1, and writes out the two fractional costs it uses by hand: k = 4/3 (LwF: `i % 4 < 3`, batches
0, 1, 2 of every 4) and k = 5/2 (MIR: `i % 5 in (0, 2)`). `realtime_batches` is one rule that gives all three:
step m starts at time m k (in batch arrivals) and trains batch floor(m k). Their k is a count of passes checked
against a profiler and rounded to it (`measuring_delay.md` lines 101-103: 1309.11 G / 657.93 G = 2, the delay
2 - 1 = 1); clbench's counts are exact, so k is the exact ratio of two FLOP counts, a `Fraction`, not rounded.
Their unit is their baseline ER's step (`measuring_delay.md` line 21); clbench's is SGD's step on the same network
and batch (issue 61), so a replay method that joins one replayed batch to the stream's costs 2 here and 1 there. A
step cheaper than the unit (k < 1: GDumb's stream step only stores) waits for the next batch: every batch is
trained once, none twice.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from fractions import Fraction

MEASURED_STEPS = 3
"""Steps of each kind counted under the FLOP counter in each stage; the later ones are charged the last count."""


def extrapolated_flops(measured: Sequence[int], steps: int) -> int:
    """The FLOPs of `steps` steps of which the first `len(measured)` were counted (`measured`, in order): their sum,
    plus the last count for each step after them (the steady state: a replay step's first one, before the memory
    holds anything, is cheaper than the next ones). `steps` fewer than counted: the first `steps` counts."""
    if steps <= len(measured):
        return sum(measured[:steps])
    if not measured:
        raise ValueError(f"extrapolated_flops: {steps} steps and none counted")
    return sum(measured) + (steps - len(measured)) * measured[-1]


def step_cost_units(step_flops: int, unit_flops: int) -> Fraction:
    """A step's cost in units of the stream (`unit_flops`: SGD's step on the same network and batch), exactly."""
    if unit_flops <= 0:
        raise ValueError(f"step_cost_units: the unit must be positive FLOPs, got {unit_flops}")
    return Fraction(step_flops, unit_flops)


def next_start(start: Fraction, batch: int, cost: Fraction) -> Fraction:
    """When the step after the one that started at `start` on batch `batch` and cost `cost` units can start (in
    batch arrivals, batch i arriving at time i): when it is done, or when the next batch arrives if that is later."""
    return max(start + cost, Fraction(batch + 1))


def trains_batch(start: Fraction, batch: int) -> bool:
    """Whether a method free from time `start` trains batch `batch` (arrived at time `batch`, the next at
    `batch + 1`): it is the newest batch when the method is free, start < batch + 1. (Batches are offered in order
    and `start` is never before the batch offered: `next_start`.)"""
    return start < batch + 1


def realtime_batches(costs: Iterable[Fraction], n_batches: int) -> list[int]:
    """The batches (0-based) a method trains on a stream of `n_batches` when its successive steps cost `costs` units
    (one per trained batch; the last one repeats when they run out): step m starts at the sum of the earlier steps'
    costs and trains the newest batch then. A constant k gives floor(m k): k = 3 trains 0, 3, 6, ...; k = 5/2 trains
    0, 2, 5, 7, ... (Ghunaim et al.'s MIR); k <= 1 trains every batch."""
    costs = iter(costs)
    trained: list[int] = []
    start, cost = Fraction(0), Fraction(1)
    for batch in range(n_batches):
        if not trains_batch(start, batch):
            continue
        trained.append(batch)
        cost = next(costs, cost)
        start = next_start(start, batch, cost)
    return trained


def flops_prefix(value: float) -> tuple[str, float]:
    """The SI prefix FLOPs of `value`'s size are written with, and its size: ("G", 1e9) for 1.25e9."""
    for prefix, size in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= size:
            return prefix, size
    return "", 1.0


def format_flops(value: float) -> str:
    """FLOPs in words: `3.80 MFLOP`, `1.25 GFLOP`, `2.10 TFLOP`, `640 FLOP`; `–` when not a number."""
    if not math.isfinite(value):
        return "–"
    prefix, size = flops_prefix(value)
    return f"{value / size:.2f} {prefix}FLOP" if prefix else f"{value:.0f} FLOP"
