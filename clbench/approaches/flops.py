"""Counting an approach's FLOPs: torch's `FlopCounterMode` around what the run does, the repeated steps sampled.

`FlopLedger` (one per approach, `Approach.flops`) counts FLOPs in named regions: the engine wraps a stage's
training (`learn_task`: steps, validation passes, the approach's own work before and after: a Fisher estimate,
GDumb's fit, BiC's bias stage, LUCIR's fine-tuning, exemplar selection) and its evaluation in `counted`, so nothing
a method does is left out by default. A step of a loop (`step`: the base loop's `training_step`, the fits that
declare their steps) is counted under the counter only `MEASURED_STEPS` times per kind and stage and charged the
last count after that: the counter costs about six times a small network's step on a CPU, and a kind's steps cost
the same once its memory is filled (`clbench.compute.extrapolated_flops`). The curve's continual evaluation
(`training.eval_every`) is measurement, not training: `uncounted`.

What is counted is what `FlopCounterMode` counts (`clbench.compute`): matrix products and convolutions, forward and
backward, two FLOPs per multiply-add; a linear layer on a batch of B costs 2 B in out forward and as much again for
each of its weight's and its input's gradients.

`reference_step_flops`: the real-time stream's unit, one SGD step on the spec's network and the same batch, counted
on a throwaway approach with SGD's hooks under `torch.random.fork_rng` (no random stream of the run is drawn from).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any, TypeVar

import torch
from torch.utils.flop_counter import FlopCounterMode

from clbench.compute import MEASURED_STEPS, next_start, step_cost_units, trains_batch

if TYPE_CHECKING:
    from clbench.approaches.datatypes import ApproachContext
    from clbench.data.batches import Batch

T = TypeVar("T")
TRAIN_STEP = "train"  # the base loop's `training_step`: a stage's step cost (`stage_step_flops`)


class _GlobalOnly:
    """In place of `FlopCounterMode`'s module tracker: every count goes to the total ("Global"), no per-module
    table. The tracker's global module hooks fail on a parametrised module under inference mode (torch 2.14: WSN's
    masked layers, `register_multi_grad_hook` on a tensor without grad_fn) and cost most of the counter's time."""

    parents = frozenset({"Global"})

    def __enter__(self) -> _GlobalOnly:
        return self

    def __exit__(self, *args: object) -> None:
        return None


class TotalFlopCounter(FlopCounterMode):
    """`FlopCounterMode` counting the total only (`get_total_flops`), silent, without module hooks."""

    def __init__(self) -> None:
        super().__init__(display=False)
        self.mod_tracker = _GlobalOnly()  # type: ignore[assignment]


@dataclass
class Count:
    """The FLOPs counted in one region so far (those of the regions and steps inside it included)."""

    flops: int = 0


@dataclass
class FlopLedger:
    """FLOPs of an approach's work in named regions, its repeated steps sampled (see the module docstring).

    `steps`: the counted costs of each (kind, batch size) of step in this stage, in order; `taken`: how many steps
    of each kind this stage took; `unit_flops`: the stage's real-time unit (SGD's step), once known;
    `stream_batches`: the batches the stream offered this stage (the real-time protocol)."""

    steps: dict[tuple[str, int | None], list[int]] = field(default_factory=dict)
    taken: dict[str, int] = field(default_factory=dict)
    unit_flops: int | None = None
    stream_batches: int = 0
    _regions: list[Count] = field(default_factory=list)
    _mode: TotalFlopCounter | None = None
    _free_at: Fraction | None = None  # the real-time stream: when the method is free (None: not real-time)
    _pass_start: int = 0  # the training steps taken before this pass
    _paused: int = 0  # open `uncounted` regions: no counter is opened inside them

    def new_stage(self) -> None:
        """Forget the last stage's step costs, unit and stream (each stage counts its own steps)."""
        self.steps, self.taken, self.unit_flops, self.stream_batches, self._pass_start = {}, {}, None, 0, 0

    def step_flops(self, kind: str = TRAIN_STEP) -> int | None:
        """The last counted cost of a step of `kind` this stage (the steady state) on its first batch size (a full
        batch), None if none was taken."""
        costs = next((costs for (name, _), costs in self.steps.items() if name == kind), None)
        return costs[-1] if costs else None

    @contextlib.contextmanager
    def counted(self) -> Iterator[Count]:
        """Count everything inside (the steps of `step` sampled): the region's `Count`, final on exit."""
        self._suspend()
        count = Count()
        self._regions.append(count)
        self._resume()
        try:
            yield count
        finally:
            self._suspend()
            self._regions.pop()
            if self._regions:
                self._regions[-1].flops += count.flops
            self._resume()

    @contextlib.contextmanager
    def uncounted(self) -> Iterator[None]:
        """Count nothing inside (the continual evaluation; the real-time unit's throwaway SGD step)."""
        self._suspend()
        self._paused += 1
        try:
            yield
        finally:
            self._paused -= 1
            self._resume()

    def step(self, kind: str, run: Callable[[], T], size: int | None = None) -> tuple[T, int]:
        """Run one step of `kind` on a batch of `size` samples (`sampled`). Returns (what `run` returned, the step's
        FLOPs)."""
        with self.sampled(kind, size) as count:
            result = run()
        return result, count.flops

    @contextlib.contextmanager
    def sampled(self, kind: str, size: int | None = None) -> Iterator[Count]:
        """One step of `kind` on a batch of `size` samples, what runs inside: counted the first `MEASURED_STEPS`
        times this stage for each size (a pass's last, smaller batch is counted on its own), else charged the last
        count; the cost goes to the open region and to the `Count` yielded (final on exit). For the loops that are
        not a callable per step: Avalanche's, entered and left in its iteration hooks."""
        measured = self.steps.setdefault((kind, size), [])
        self.taken[kind] = self.taken.get(kind, 0) + 1
        count = Count()
        if len(measured) < MEASURED_STEPS:
            self._suspend()
            try:
                with TotalFlopCounter() as mode:
                    yield count
            finally:
                self._resume()
            measured.append(int(mode.get_total_flops()))
        else:
            with self.uncounted():
                yield count
        count.flops = measured[-1]
        if self._regions:
            self._regions[-1].flops += count.flops

    def start_pass(self, realtime: bool) -> None:
        """A pass over a stage's stream starts: with `realtime`, the method is free at time 0 (`trains`)."""
        self._free_at = Fraction(0) if realtime else None

    def trains(self, batch: int) -> bool:
        """Whether the pass trains batch `batch` (0-based): always, but in the real-time protocol, where only the
        batch that is the newest when the method is free is (`clbench.compute.trains_batch`)."""
        return self._free_at is None or trains_batch(self._free_at, batch)

    def training_step(self, run: Callable[[], torch.Tensor], batch: int, size: int,
                      unit: Callable[[], int]) -> torch.Tensor:
        """One step of the base loop on batch `batch` of `size` samples (`step`, kind `TRAIN_STEP`): its loss. In
        the real-time protocol the method is busy for the step's cost in units (`unit`: SGD's step FLOPs, asked
        once per stage, outside the count)."""
        loss, cost = self.step(TRAIN_STEP, run, size)
        if self._free_at is not None:
            if self.unit_flops is None:
                with self.uncounted():
                    self.unit_flops = unit()
            self._free_at = next_start(self._free_at, batch, step_cost_units(cost, self.unit_flops))
        return loss

    def end_pass(self, offered: int) -> int:
        """The pass is over: `offered` batches came (added to `stream_batches`); the steps it took (batches
        trained)."""
        self.stream_batches += offered
        trained = self.taken.get(TRAIN_STEP, 0) - self._pass_start
        self._pass_start = self.taken.get(TRAIN_STEP, 0)
        return trained

    def _suspend(self) -> None:
        """Close the open region's counter, its FLOPs so far added to the region."""
        if self._mode is not None:
            self._mode.__exit__(None, None, None)
            self._regions[-1].flops += int(self._mode.get_total_flops())
            self._mode = None

    def _resume(self) -> None:
        """Open a counter for the innermost region, if any, unless inside `uncounted`."""
        if self._regions and self._mode is None and not self._paused:
            self._mode = TotalFlopCounter()
            self._mode.__enter__()


def reference_step_flops(base: Callable[..., Any], context: ApproachContext, batch: Batch, stage: int) -> int:
    """FLOPs of one SGD step (the scenario's cross-entropy, backward, the optimiser's step) on the spec's network and
    `batch` at task `stage`: the real-time stream's unit of compute. `base` is the `Approach` class, whose hooks are
    SGD's (`clbench.approaches.sgd.SGD` overrides none; given by the caller, as this module is beneath it). The
    throwaway approach draws its initial weights under `fork_rng`, so the run's random streams are as they were."""
    from clbench.approaches.datatypes import Hyperparameters, StepInfo

    device = context.device
    devices = ([device.index if device.index is not None else torch.cuda.current_device()]
               if device.type == "cuda" else [])
    with torch.random.fork_rng(devices=devices):
        reference = base(context, Hyperparameters())
        reference.train_mode(stage)
        optimizer = reference.make_optimizer(stage, context.training.lr)
        with TotalFlopCounter() as mode:
            reference.training_step(batch, StepInfo(stage, 0, 0, 1), optimizer)
    return int(mode.get_total_flops())


def stage_columns(ledger: FlopLedger, train: Count | None, realtime: bool) -> dict[str, Any]:
    """The rows' compute columns of a stage: its training FLOPs, its step's, and in the real-time protocol the
    batches its stream offered and the unit (None where not counted)."""
    return {"stage_train_flops": None if train is None else train.flops,
            "stage_step_flops": ledger.step_flops(),
            "stage_stream_batches": ledger.stream_batches if realtime else None,
            "stage_unit_flops": ledger.unit_flops if realtime else None}
