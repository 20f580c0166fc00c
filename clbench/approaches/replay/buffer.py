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

Beside the uint8 images the buffer may keep each sample's normalised inputs (`inputs`: float, what the network
is fed), so that a replayed batch is a gather instead of a normalisation at every step. They are a cache, not
part of the memory: not in `nbytes` (the memory's size is its samples as the data set stores them), not in
checkpoints. They are kept only while every filled slot has them: a write without inputs (`set_contents`, an
`add_reservoir` without them, a loaded checkpoint) drops them, and `fill_inputs` computes them again from the
stored images. The values are the same either way (the input transform is elementwise, then a fixed gather).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class Memory:
    """Samples taken from the memory: uint8 images (B, C, H, W), labels and task ids (B,), logits (B, K) or None,
    and their normalised inputs when the buffer keeps them (else None)."""

    images: torch.Tensor
    labels: torch.Tensor
    task_ids: torch.Tensor
    logits: torch.Tensor | None
    inputs: torch.Tensor | None = None


InputTransform = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
"""(uint8 images (B, C, H, W), task ids (B,)) -> the network's normalised inputs (as
`clbench.data.tasks.InputTransform`)."""


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
        self.inputs: torch.Tensor | None = None  # (capacity, ...) normalised inputs while every filled slot has them
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
        normalised inputs, kept beside the images while every filled slot has them."""
        n = int(labels.shape[0])
        if n == 0:
            return
        self._allocate(images, logits)
        self._keep_inputs(inputs)
        # the slots are host-side bookkeeping (drawn on the CPU, one per sample): the last sample written to a slot
        # wins, as in the sequential algorithm
        last_writer = {slot: k for k, slot in enumerate(self.reservoir_slots(n, generator))
                       if slot < self.capacity}
        if last_writer:
            targets = torch.tensor(list(last_writer), dtype=torch.long, device=self.device)
            sources = torch.tensor(list(last_writer.values()), dtype=torch.long, device=images.device)
            self._write(targets, sources, images, labels, task_ids, logits)
            if self.inputs is not None and inputs is not None:
                self.inputs[targets] = inputs.index_select(0, sources).to(self.device, self.inputs.dtype)
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

    def _keep_inputs(self, inputs: torch.Tensor | None) -> None:
        """Before a write: allocate the inputs cache when the memory is empty and the batch has inputs; drop it when
        the batch has none or when filled slots already lack theirs."""
        if inputs is None or (self.inputs is None and self.size > 0):
            self.inputs = None
        elif self.inputs is None:
            self.inputs = torch.zeros((self.capacity, *inputs.shape[1:]), dtype=inputs.dtype, device=self.device)

    def fill_inputs(self, transform: InputTransform) -> None:
        """Compute the normalised inputs of every filled slot from its stored image and task, when they are not
        kept (after `set_contents` or a loaded checkpoint); from then on `add_reservoir` with inputs keeps them."""
        if self.inputs is not None or self.size == 0:
            return
        assert self.images is not None
        with torch.no_grad():
            filled = transform(self.images[: self.size], self.task_ids[: self.size])
        self.inputs = torch.zeros((self.capacity, *filled.shape[1:]), dtype=filled.dtype, device=self.device)
        self.inputs[: self.size] = filled

    def set_contents(self, images: torch.Tensor, labels: torch.Tensor, task_ids: torch.Tensor) -> None:
        """Replace the memory by these samples (at most `capacity`), in this order (their inputs are dropped)."""
        n = int(labels.shape[0])
        if n > self.capacity:
            raise ValueError(f"{n} samples do not fit a replay buffer of {self.capacity}")
        self.inputs = None
        if n:
            self._allocate(images, None)
            order = torch.arange(n, device=self.device)
            self._write(order, torch.arange(n, device=images.device), images, labels, task_ids, None)
        self.size = n
        self.seen = max(self.seen, n)

    def contents(self) -> Memory:
        """Every stored sample, in slot order."""
        assert self.images is not None or self.size == 0
        images = self.images[: self.size] if self.images is not None else torch.zeros(0, dtype=torch.uint8)
        logits = self.logits[: self.size] if self.logits is not None else None
        inputs = self.inputs[: self.size] if self.inputs is not None else None
        return Memory(images, self.labels[: self.size], self.task_ids[: self.size], logits, inputs)

    def sample(self, batch_size: int, generator: torch.Generator) -> Memory:
        """`batch_size` samples drawn uniformly without replacement (all of them when fewer are stored)."""
        chosen = torch.randperm(self.size, generator=generator)[:batch_size].to(self.device)
        assert self.images is not None
        logits = self.logits.index_select(0, chosen) if self.logits is not None else None
        inputs = self.inputs.index_select(0, chosen) if self.inputs is not None else None
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
        self.images, self.logits, self.inputs = None, None, None
        if n:
            self._allocate(state["images"], state.get("logits"))
            order = torch.arange(n, device=self.device)
            self._write(order, torch.arange(n), state["images"], state["labels"], state["task_ids"],
                        state.get("logits"))
        self.size, self.seen = n, int(state["seen"])
