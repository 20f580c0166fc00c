"""A replay memory kept on the device as tensors: uint8 images, labels, task ids and optionally logits.

`add_reservoir` is Vitter's algorithm R as Chaudhry et al. (2019, "On tiny episodic memories in continual
learning") and Mammoth (aimagelab/mammoth `utils/buffer.py`, `reservoir`) use it: the i-th sample of the stream
(0-based) fills slot i while the memory is not full, else it replaces a uniformly drawn slot r in [0, i] when
r < capacity (so each of n seen samples is kept with probability capacity / n). A batch is added in one
vectorised step: the draws do not depend on the memory's content, so drawing them all at once and letting the
last writer of a slot win gives exactly the sequential algorithm. `set_contents` replaces the memory (iCaRL's
class-balanced exemplar sets).

The filled size is kept on its own, not derived from the count of samples seen: after `set_contents` of fewer
than `capacity` samples, the slots past them hold nothing (whatever was there before is discarded for good). The
next `add_reservoir` fills those empty slots first, in stream order (slot `size`, `size + 1`, ...), and once the
memory is full continues reservoir sampling at stream position `seen` (a sample at position i is kept with
probability capacity / (i + 1)): the memory's samples stand for the `seen` samples offered before. With
`add_reservoir` alone the memory fills while i < capacity, so size == min(capacity, seen) and this is algorithm R
unchanged, with the same draws (one per sample).

Beside the uint8 images the buffer may keep each sample's normalised inputs (float, what the network is fed), so
that a replayed batch is a gather instead of a normalisation at every step: in the task sequence's `InputCache`
(`clbench.data.input_cache`), handed by `use_input_cache` with the tasks' transform. They are a cache, not part of
the memory: not in `nbytes` (the memory's size is its samples as the data set stores them), not in checkpoints.
They are computed from the stored images at their first use (`kept_inputs`); from then on `add_reservoir` writes
the new slots' inputs with their images (the batch's own inputs: a write-through, which keeps the cache's entry
valid), and a write without inputs (an `add_reservoir` without them, `set_contents`, a loaded checkpoint) leaves
them to be computed again at their next use. The values are the same either way (the input transform is
elementwise, then a fixed gather).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from clbench.data.input_cache import InputCache


@dataclass(frozen=True)
class Memory:
    """Samples taken from the memory: uint8 images (B, C, H, W), labels and task ids (B,), logits (B, K) or None,
    and their normalised inputs when the buffer keeps them (else None; `ReplayBuffer.use_input_cache`)."""

    images: torch.Tensor
    labels: torch.Tensor
    task_ids: torch.Tensor
    logits: torch.Tensor | None
    inputs: torch.Tensor | None = None


InputTransform = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
"""(uint8 images (B, C, H, W), task ids (B,)) -> the network's normalised inputs (as
`clbench.data.transform.InputTransform`, whose `tables()` the kept inputs depend on too)."""


class ReplayBuffer:
    """At most `capacity` samples on `device` (total over all tasks: Mammoth's `buffer_size` convention)."""

    def __init__(self, capacity: int, device: torch.device | str = "cpu") -> None:
        if capacity < 1:
            raise ValueError(f"a replay buffer needs a capacity of at least 1 sample, got {capacity}")
        self.capacity = int(capacity)
        self.device = torch.device(device)
        self.images: torch.Tensor | None = None  # (capacity, C, H, W) uint8, allocated on the first add
        self.labels = torch.zeros(self.capacity, dtype=torch.long, device=self.device)
        self.task_ids = torch.zeros(self.capacity, dtype=torch.long, device=self.device)
        self.logits: torch.Tensor | None = None  # (capacity, K), when samples come with logits
        self.input_cache: InputCache | None = None  # where the samples' normalised inputs are kept (use_input_cache)
        self.transform: InputTransform | None = None  # what computes them
        self.size = 0  # filled slots
        self.seen = 0  # samples offered to `add_reservoir` so far

    def __len__(self) -> int:
        return self.size

    def _allocate(self, images: torch.Tensor, logits: torch.Tensor | None) -> None:
        if self.images is None:
            self.images = torch.zeros((self.capacity, *images.shape[1:]), dtype=images.dtype, device=self.device)
        if logits is not None and self.logits is None:
            self.logits = torch.zeros((self.capacity, logits.shape[1]), dtype=logits.dtype, device=self.device)

    def reservoir_slots(self, n: int, generator: torch.Generator) -> list[int]:
        """The slot of each of the next `n` stream samples (capacity: not kept), from one draw per sample.

        Sample k of the batch (stream position i = seen + k) fills the empty slot `size + k` while there is one,
        else replaces slot r = floor(u (i + 1)) for its draw u in [0, 1): float64 draws from `generator`, one per
        sample, multiplied and truncated in Python (the same double arithmetic as on tensors, without their
        per-call overhead at every step).
        """
        draws = torch.rand(n, generator=generator, dtype=torch.float64).tolist()
        return [self.size + k if self.size + k < self.capacity
                else min(int(draw * (self.seen + k + 1)), self.capacity)
                for k, draw in enumerate(draws)]

    def add_reservoir(self, images: torch.Tensor, labels: torch.Tensor, task_ids: torch.Tensor,
                      generator: torch.Generator, logits: torch.Tensor | None = None,
                      inputs: torch.Tensor | None = None) -> None:
        """Offer a batch to the memory by reservoir sampling (see the module docstring); `inputs`: the batch's
        normalised inputs, written into the kept inputs of the memory with the images."""
        n = int(labels.shape[0])
        if n == 0:
            return
        self._allocate(images, logits)
        # the slots are host-side bookkeeping (drawn on the CPU, one per sample): the last sample written to a slot
        # wins, as in the sequential algorithm
        last_writer = {slot: k for k, slot in enumerate(self.reservoir_slots(n, generator))
                       if slot < self.capacity}
        if last_writer:
            targets = torch.tensor(list(last_writer), dtype=torch.long, device=self.device)
            sources = torch.tensor(list(last_writer.values()), dtype=torch.long, device=images.device)
            with self._updating() as kept:
                self._write(targets, sources, images, labels, task_ids, logits)
                if kept is not None and inputs is not None:
                    with torch.no_grad():
                        kept[targets] = inputs.index_select(0, sources).to(self.device, kept.dtype)
                elif kept is not None:
                    self._forget_inputs()
        self.seen += n
        self.size = min(self.capacity, self.size + n)  # the empty slots filled first (see reservoir_slots)

    def _write(self, targets: torch.Tensor, sources: torch.Tensor, images: torch.Tensor, labels: torch.Tensor,
               task_ids: torch.Tensor, logits: torch.Tensor | None) -> None:
        assert self.images is not None
        self.images[targets] = images.index_select(0, sources).to(self.device)
        self.labels[targets] = labels.index_select(0, sources).to(self.device)
        self.task_ids[targets] = task_ids.index_select(0, sources).to(self.device)
        if logits is not None and self.logits is not None:
            self.logits[targets] = logits.index_select(0, sources).to(self.device, self.logits.dtype)

    def use_input_cache(self, cache: InputCache | None, transform: InputTransform | None) -> None:
        """Keep the samples' normalised inputs in `cache` (the task sequence's), computed by `transform` (the tasks'
        input transform); None: keep none (with `data.augment`, whose replayed inputs are augmented afresh)."""
        if self.input_cache is not None and self.input_cache is not cache:
            self.input_cache.forget(self)
        self.input_cache, self.transform = cache, transform

    def kept_inputs(self) -> torch.Tensor | None:
        """The normalised inputs of every slot (capacity, ...) (the filled ones meaningful), computed from the stored
        images at the first use; None without a cache, while empty, or over the cache's budget."""
        return self._kept_inputs(compute=True)

    def _kept_inputs(self, compute: bool) -> torch.Tensor | None:
        if self.input_cache is None or self.transform is None or self.images is None or self.size == 0:
            return None
        return self.input_cache.inputs(self, self._input_sources(), self._normalised if compute else None)

    def _normalised(self) -> torch.Tensor:
        assert self.images is not None and self.transform is not None
        filled = self.transform(self.images[: self.size], self.task_ids[: self.size])  # (size, ...)
        inputs = filled.new_zeros((self.capacity, *filled.shape[1:]))
        inputs[: self.size] = filled
        return inputs

    def _input_sources(self) -> tuple[torch.Tensor, ...]:
        """What the kept inputs are computed from: images (capacity, ...), task ids and the transform's tables."""
        assert self.images is not None
        tables = getattr(self.transform, "tables", tuple)()
        return (self.images, self.task_ids, *tables)

    def _updating(self) -> contextlib.AbstractContextManager[torch.Tensor | None]:
        """`InputCache.updating` of the memory (nothing kept: None)."""
        if self.input_cache is None or self.images is None:
            return contextlib.nullcontext()
        return self.input_cache.updating(self, self._input_sources())

    def _forget_inputs(self) -> None:
        if self.input_cache is not None:
            self.input_cache.forget(self)

    def set_contents(self, images: torch.Tensor, labels: torch.Tensor, task_ids: torch.Tensor) -> None:
        """Replace the memory by these samples (at most `capacity`), in this order (their inputs computed again at
        their next use)."""
        n = int(labels.shape[0])
        if n > self.capacity:
            raise ValueError(f"{n} samples do not fit a replay buffer of {self.capacity}")
        self._forget_inputs()
        if n:
            self._allocate(images, None)
            order = torch.arange(n, device=self.device)
            self._write(order, torch.arange(n, device=images.device), images, labels, task_ids, None)
        self.size = n
        self.seen = max(self.seen, n)

    def contents(self) -> Memory:
        """Every stored sample, in slot order; their inputs when they are kept (a view; none computed here)."""
        assert self.images is not None or self.size == 0
        images = self.images[: self.size] if self.images is not None else torch.zeros(0, dtype=torch.uint8)
        logits = self.logits[: self.size] if self.logits is not None else None
        kept = self._kept_inputs(compute=False)
        inputs = kept[: self.size] if kept is not None else None
        return Memory(images, self.labels[: self.size], self.task_ids[: self.size], logits, inputs)

    def sample(self, batch_size: int, generator: torch.Generator) -> Memory:
        """`batch_size` samples drawn uniformly without replacement (all of them when fewer are stored)."""
        chosen = torch.randperm(self.size, generator=generator)[:batch_size].to(self.device)
        assert self.images is not None
        logits = self.logits.index_select(0, chosen) if self.logits is not None else None
        kept = self.kept_inputs()
        inputs = kept.index_select(0, chosen) if kept is not None else None
        return Memory(self.images.index_select(0, chosen), self.labels.index_select(0, chosen),
                      self.task_ids.index_select(0, chosen), logits, inputs)

    @property
    def nbytes(self) -> int:
        """Bytes of the stored samples (images, labels, task ids, logits of the filled slots; not the inputs
        cache)."""
        stored = self.contents()
        tensors = [stored.images, stored.labels, stored.task_ids] + ([stored.logits] if stored.logits is not None
                                                                     else [])
        return sum(tensor.numel() * tensor.element_size() for tensor in tensors)

    def state_dict(self) -> dict[str, Any]:
        """The filled part and the counters (what a checkpoint keeps)."""
        stored = self.contents()
        return {"capacity": self.capacity, "seen": self.seen, "images": stored.images, "labels": stored.labels,
                "task_ids": stored.task_ids, **({"logits": stored.logits} if stored.logits is not None else {})}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if int(state["capacity"]) != self.capacity:
            raise ValueError(f"a buffer of {state['capacity']} samples cannot be loaded into one of {self.capacity}")
        n = int(state["labels"].shape[0])
        self._forget_inputs()  # the images are replaced by new tensors: their inputs computed again at the next use
        self.images, self.logits = None, None
        if n:
            self._allocate(state["images"], state.get("logits"))
            order = torch.arange(n, device=self.device)
            self._write(order, torch.arange(n), state["images"], state["labels"], state["task_ids"],
                        state.get("logits"))
        self.size, self.seen = n, int(state["seen"])
