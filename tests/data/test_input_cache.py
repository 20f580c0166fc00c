"""`InputCache`, the one mechanism that keeps normalised inputs: its budget and eviction order, its validity rule
(version stamps of the sources and of the kept tensor), its write-through update, and its entries' lifetime."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch

from clbench.data.input_cache import TRAINING, InputCache, version_stamp


class Owner:
    """An owner of `rows` rows of 2 float32 inputs (8 bytes a row), computed from `images` (as many pixels: the same
    size) as 10 x image; `computed` counts the computations."""

    def __init__(self, rows: int, start: int = 0) -> None:
        self.images = torch.arange(start, start + rows, dtype=torch.float32).view(rows, 1).expand(rows, 2).clone()
        self.task_ids = torch.zeros(rows, dtype=torch.long)
        self.computed = 0

    def sources(self) -> tuple[torch.Tensor, ...]:
        return self.images, self.task_ids

    def compute(self) -> torch.Tensor:
        self.computed += 1
        return self.images * 10.0

    def kept(self, cache: InputCache, role: str | None = None) -> torch.Tensor | None:
        return cache.inputs(self, self.sources(), self.compute, role)


def test_an_owners_inputs_are_computed_once_and_kept_while_unchanged() -> None:
    cache, owner = InputCache(1000), Owner(3, start=1)
    first = owner.kept(cache)
    assert first is not None and first.tolist() == [[10.0, 10.0], [20.0, 20.0], [30.0, 30.0]]
    assert owner.kept(cache) is first and owner.computed == 1 and cache.used_bytes == 24


def test_the_least_recently_used_entries_leave_for_a_new_one_that_does_not_fit() -> None:
    """A budget of 100 bytes: a (24), b (32) and c (40) fit together (96); then, in the order of their last use,
    the least recently used leave until a new entry fits."""
    cache = InputCache(100)
    a, b, c, d, e = Owner(3), Owner(4), Owner(5), Owner(2), Owner(6)
    for owner in (a, b, c):
        owner.kept(cache)
    b.kept(cache), c.kept(cache), a.kept(cache)  # last used: b, then c, then a
    assert cache.used_bytes == 96
    d.kept(cache)  # 96 + 16 > 100: b leaves (64 + 16 = 80 kept)
    assert [len(entry.inputs) for entry in cache.entries.values()] == [5, 3, 2]  # c, a, d
    assert cache.used_bytes == 80
    e.kept(cache)  # 80 + 48 > 100: c leaves (40 + 48 = 88 fits)
    assert [len(entry.inputs) for entry in cache.entries.values()] == [3, 2, 6]  # a, d, e
    b.kept(cache)  # 88 + 32 > 100: a leaves (64 + 32 = 96); b computed again
    assert [len(entry.inputs) for entry in cache.entries.values()] == [2, 6, 4] and b.computed == 2
    assert cache.used_bytes == 96 and a.computed == c.computed == 1


def test_inputs_larger_than_the_whole_budget_are_not_kept_and_evict_nothing() -> None:
    cache, small, large = InputCache(64), Owner(2), Owner(9)  # 16 bytes; 72 bytes
    small.kept(cache)
    assert large.kept(cache) is None and large.computed == 0
    assert cache.used_bytes == 16 and small.kept(cache) is not None and small.computed == 1
    full = Owner(8)
    assert full.kept(cache) is not None  # 64 bytes: exactly the budget, once small has left
    assert cache.used_bytes == 64 and list(cache.entries) == [id(full)]


def test_a_new_training_entry_replaces_the_last_one_even_with_room_left() -> None:
    cache = InputCache(1 << 20)
    first, second, evaluated = Owner(3), Owner(4), Owner(5)
    evaluated.kept(cache)
    first.kept(cache, TRAINING)
    second.kept(cache, TRAINING)
    assert [len(entry.inputs) for entry in cache.entries.values()] == [5, 4]  # first left, the other stays
    assert first.kept(cache, TRAINING) is not None and first.computed == 2
    assert [len(entry.inputs) for entry in cache.entries.values()] == [5, 3]


@pytest.mark.parametrize("written", ["images", "task_ids"])
def test_inputs_are_computed_again_when_a_source_is_written_in_place(written: str,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    cache, owner = InputCache(1000), Owner(3)
    kept = owner.kept(cache)
    getattr(owner, written)[0] += 7  # images 7, 1, 2 (or a task id changed)
    with caplog.at_level("WARNING"):
        again = owner.kept(cache)
    assert again is not kept and owner.computed == 2 and caplog.text == ""  # a changed source: silently recomputed
    assert again is not None and again[:, 0].tolist() == ([70.0, 10.0, 20.0] if written == "images" else
                                                          [0.0, 10.0, 20.0])


def test_kept_inputs_written_into_are_computed_again_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    cache, owner = InputCache(1000), Owner(3)
    kept = owner.kept(cache)
    assert kept is not None
    kept[1:2].mul_(0.0)  # a batch that was a view of the kept inputs, written into
    with caplog.at_level("WARNING"):
        again = owner.kept(cache)
    assert again is not None and again is not kept and again[:, 0].tolist() == [0.0, 10.0, 20.0]
    assert "changed in place" in caplog.text and owner.kept(cache) is again


def test_version_stamp_moves_with_every_in_place_change_and_views_share_their_base() -> None:
    a, b = torch.zeros(4), torch.zeros(2)
    before = version_stamp((a, b))
    a[1:3].add_(1.0)  # through a view
    after = version_stamp((a, b))
    assert after[0] != before[0] and after[1] == before[1]
    assert version_stamp((a + 1, b)) == (0, after[1])  # a new tensor starts a counter of its own


def test_a_write_through_keeps_the_entry_valid() -> None:
    """An owner that writes a row of its images and the row's inputs together (a replay memory): the entry stays,
    with the rows a fresh computation gives; writing the images alone invalidates it."""
    cache, owner = InputCache(1000), Owner(3)
    kept = owner.kept(cache)
    with cache.updating(owner, owner.sources()) as through:
        assert through is kept and through is not None
        owner.images[2] = 5.0
        through[2] = 50.0
    assert owner.kept(cache) is kept and owner.computed == 1
    assert kept.tolist() == [[0.0, 0.0], [10.0, 10.0], [50.0, 50.0]]
    owner.images[0] = 4.0  # without its inputs
    assert owner.kept(cache).tolist() == [[40.0, 40.0], [10.0, 10.0], [50.0, 50.0]] and owner.computed == 2


def test_updating_yields_nothing_for_a_stale_or_absent_entry_and_forget_drops_one() -> None:
    cache, owner = InputCache(1000), Owner(3)
    with cache.updating(owner, owner.sources()) as through:
        assert through is None  # nothing kept yet
    owner.kept(cache)
    owner.images.add_(1.0)
    with cache.updating(owner, owner.sources()) as through:
        assert through is None and not cache.entries  # stale: dropped, not re-stamped
    owner.kept(cache)
    cache.forget(owner)
    assert not cache.entries and cache.inputs(owner, owner.sources(), None) is None  # a look computes nothing


def test_an_entry_leaves_with_its_owner_and_the_cache_holds_no_cycle() -> None:
    cache, owner = InputCache(1000), Owner(3)
    alive = weakref.ref(owner.kept(cache))
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        del owner
        assert not cache.entries and alive() is None  # freed with its owner, without the garbage collector
        other = Owner(2)
        other.kept(cache)
        tracked = weakref.ref(cache)
        del cache
        assert tracked() is None  # nothing (the owners' callbacks included) keeps the cache alive
    finally:
        if gc_was_enabled:
            gc.enable()


def test_inputs_computed_in_inference_mode_are_ordinary_tensors() -> None:
    cache, owner = InputCache(1000), Owner(3)
    with torch.inference_mode():
        kept = owner.kept(cache)
    assert kept is not None and not kept.is_inference()
    weight = torch.ones(2, 1, requires_grad=True)
    (kept @ weight).sum().backward()  # an inference tensor here would raise
    assert weight.grad is not None
