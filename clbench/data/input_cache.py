"""`InputCache`: the normalised inputs of whole splits and replay memories, computed once and kept, within one budget.

The input transform is elementwise, then a gather of pixels fixed per task (`clbench.data.transform`), so an image's
normalised inputs are the same values whatever batch it comes in: normalising a whole split once and handing out
its rows gives every batch the bits that normalising the batch gives. `build_tasks` makes one cache per task
sequence, reachable from every split (`LabelledData.cache`); its owners are

- the evaluation splits (validation, test), evaluated at every stage: their slice batches are views of their kept
  inputs (`LabelledData.batch`);
- the training split being learned (or a stage's split of mixed tasks: joint training, iCaRL's exemplars with the
  task), role `training`: a training batch gathers its rows (`index_select`, a copy) instead of normalising (and
  permuting) its images at every step; a new training split replaces the last one;
- a replay memory (`ReplayBuffer.use_input_cache`), which writes its new slots' inputs with their images
  (`updating`), so that a replayed batch is a gather too.

One budget (`budget_bytes`, 4 bytes per pixel kept): an owner's inputs are kept when they fit, after evicting the
least recently used entries as needed; inputs larger than the whole budget are not kept (the owner normalises
batch by batch, as without a cache). An entry also leaves when its owner is freed (a weak reference; the cache
holds no reference back to its owners, so a finished run's tensors are freed at once, without the garbage
collector) and when a new entry of the same role arrives.

One validity rule: an entry is valid while torch's version counters (`version_stamp`) of what it was computed from
(the owner's images and task ids, the transform's tables) and of the kept tensor itself are those recorded. Any
in-place change moves one of them, and the inputs are computed again, with a warning when the kept tensor itself
was written into (a batch that was a view of it). An owner that replaces one of those tensors by another (a replay
memory loading a checkpoint) calls `forget`. `clbench.run.shared_tasks` checks a kept sequence by the same stamps.
"""

from __future__ import annotations

import contextlib
import logging
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial

import torch

log = logging.getLogger(__name__)

# The one budget of a task sequence's kept inputs (float32, 4 bytes per pixel): the sum of the two budgets the
# evaluation splits (1 GiB) and the training split (256 MiB) had apart. A permuted-MNIST test set is 31.4 MB, its
# training split 188 MB; SVHN's 73,257 32x32 RGB training images (900 MB) fit, mixture-8's evaluation splits (about
# 2 GB) in part.
INPUT_CACHE_BYTES = (1 << 30) + (256 << 20)

FLOAT32_BYTES = 4

TRAINING = "training"
"""The role of the training split being learned: one at a time, a new one replaces the last."""


def version_stamp(tensors: Iterable[torch.Tensor]) -> tuple[int, ...]:
    """torch's version counters of `tensors`, in order. Every in-place change of a tensor (or of a view of it: views
    share their base's counter) moves its counter, so an equal stamp later says that none was written into."""
    return tuple([tensor._version for tensor in tensors])


def normalised_bytes(images: torch.Tensor) -> int:
    """The bytes of the normalised inputs of `images`: float32, 4 per pixel (flattening and permuting keep the
    count)."""
    return images.numel() * FLOAT32_BYTES


@dataclass(eq=False)
class _Entry:
    owner: weakref.ref[object]
    inputs: torch.Tensor
    stamp: tuple[int, ...]  # version_stamp of the sources
    version: int  # the version of `inputs`
    nbytes: int
    role: str | None


def _forget_entry(cache: weakref.ref[InputCache], key: int, owner: weakref.ref[object]) -> None:
    """The weak reference's callback: the owner was freed, its entry leaves (a weak reference to the cache: no cycle
    through the callback)."""
    alive = cache()
    if alive is not None and key in alive.entries and alive.entries[key].owner is owner:
        del alive.entries[key]


class InputCache:
    """Normalised inputs kept per owner (a split, a replay memory) within `budget_bytes`; see the module docstring
    for the owners, the budget and the validity rule."""

    def __init__(self, budget_bytes: int = INPUT_CACHE_BYTES) -> None:
        self.budget_bytes = int(budget_bytes)
        self.entries: OrderedDict[int, _Entry] = OrderedDict()  # id(owner) -> entry, least recently used first

    @property
    def used_bytes(self) -> int:
        """The bytes of the inputs kept now."""
        return sum(entry.nbytes for entry in self.entries.values())

    def inputs(self, owner: object, sources: tuple[torch.Tensor, ...], compute: Callable[[], torch.Tensor] | None,
               role: str | None = None) -> torch.Tensor | None:
        """`owner`'s kept inputs, computed by `compute` when it has none valid and they fit the budget; None when
        they do not fit (or, with `compute` None, when none are kept: a look without computing).

        `sources`: the tensors the inputs are computed from, the images first (their size is the inputs' size:
        `normalised_bytes`), then the task ids and the transform's tables; the entry records their versions.
        `role`: a new entry replaces the entry of the same role (`TRAINING`).
        """
        entry = self._valid_entry(owner, sources)
        if entry is not None:
            self.entries.move_to_end(id(owner))
            return entry.inputs
        nbytes = normalised_bytes(sources[0])
        if compute is None or nbytes > self.budget_bytes:
            return None
        self._make_room(nbytes, role)
        with torch.inference_mode(False), torch.no_grad():  # ordinary tensors: a batch may enter autograd
            kept = compute()
        reference = weakref.ref(owner, partial(_forget_entry, weakref.ref(self), id(owner)))
        self.entries[id(owner)] = _Entry(reference, kept, version_stamp(sources), kept._version, nbytes, role)
        return kept

    @contextlib.contextmanager
    def updating(self, owner: object, sources: tuple[torch.Tensor, ...]) -> Iterator[torch.Tensor | None]:
        """For an owner that changes in step with its inputs (a replay memory's writes): yields its kept inputs while
        they are valid (else None), for the caller to write its sources and the kept rows of what it wrote; on
        exit the entry is stamped with the sources' new versions. A caller that cannot write the rows calls
        `forget` instead."""
        entry = self._valid_entry(owner, sources)
        yield None if entry is None else entry.inputs
        if entry is not None and self.entries.get(id(owner)) is entry:
            entry.stamp, entry.version = version_stamp(sources), entry.inputs._version

    def forget(self, owner: object) -> None:
        """Drop `owner`'s entry (computed again at its next use)."""
        entry = self.entries.get(id(owner))
        if entry is not None and entry.owner() is owner:
            del self.entries[id(owner)]

    def _valid_entry(self, owner: object, sources: tuple[torch.Tensor, ...]) -> _Entry | None:
        """`owner`'s entry when its stamp holds; a stale one is dropped (with a warning when the kept inputs
        themselves were written into)."""
        entry = self.entries.get(id(owner))
        if entry is None or entry.owner() is not owner:
            return None
        unchanged = entry.stamp == version_stamp(sources)
        if unchanged and entry.version == entry.inputs._version:
            return entry
        if unchanged:
            log.warning("the kept normalised inputs of %d images were changed in place (a batch written into); "
                        "they are computed again", entry.inputs.shape[0])
        del self.entries[id(owner)]
        return None

    def _make_room(self, nbytes: int, role: str | None) -> None:
        """Drop the entry of `role`, then the least recently used entries until `nbytes` more fit."""
        if role is not None:
            for key in [key for key, entry in self.entries.items() if entry.role == role]:
                del self.entries[key]
        used = self.used_bytes
        while self.entries and used + nbytes > self.budget_bytes:
            _, evicted = self.entries.popitem(last=False)
            used -= evicted.nbytes
