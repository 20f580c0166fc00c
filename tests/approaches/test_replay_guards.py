"""The replay memory's byte count with logits, its count of samples seen and its filled size, by hand."""

from __future__ import annotations

import math

import torch

from clbench.approaches.replay.buffer import ReplayBuffer


def offer(buffer: ReplayBuffer, start: int, n: int, generator: torch.Generator,
          logits: torch.Tensor | None = None) -> None:
    """Samples numbered start..start+n-1 (the number is the label and every pixel of a 1x2x2 image), task 0."""
    numbers = torch.arange(start, start + n)
    buffer.add_reservoir(numbers.to(torch.uint8).view(n, 1, 1, 1).expand(n, 1, 2, 2).clone(), numbers,
                         torch.zeros(n, dtype=torch.long), generator, logits)


def test_the_bytes_of_a_memory_with_logits_count_the_logits_of_the_filled_slots() -> None:
    generator = torch.Generator().manual_seed(0)
    buffer = ReplayBuffer(8)
    offer(buffer, 0, 5, generator, torch.zeros(5, 3, dtype=torch.float32))
    # per sample: a 1x2x2 uint8 image 4 bytes, int64 label 8, int64 task id 8, 3 float32 logits 12 = 32 bytes
    assert len(buffer) == 5 and buffer.nbytes == 5 * (4 + 8 + 8 + 12)  # 160
    offer(buffer, 5, 5, generator, torch.zeros(5, 3, dtype=torch.float32))
    assert len(buffer) == 8 and buffer.nbytes == 8 * (4 + 8 + 8 + 12)  # 256: the memory is full
    restored = ReplayBuffer(8)
    restored.load_state_dict(buffer.state_dict())
    assert restored.nbytes == 256


def test_the_logits_are_counted_in_the_dtype_the_memory_keeps() -> None:
    buffer = ReplayBuffer(4)
    offer(buffer, 0, 2, torch.Generator().manual_seed(0), torch.zeros(2, 5, dtype=torch.float16))
    # 4 + 8 + 8 bytes, and 5 float16 logits of 2 bytes: 30 bytes per sample
    assert buffer.nbytes == 2 * (4 + 8 + 8 + 5 * 2)  # 60


def exemplars(n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """n samples labelled 100..100+n-1 (images, labels, task ids)."""
    labels = torch.arange(100, 100 + n)
    return labels.to(torch.uint8).view(n, 1, 1, 1).expand(n, 1, 2, 2).clone(), labels, torch.ones(n, dtype=torch.long)


def test_set_contents_keeps_the_count_of_samples_seen_when_it_keeps_fewer() -> None:
    buffer = ReplayBuffer(6)
    offer(buffer, 0, 10, torch.Generator().manual_seed(0))
    assert (len(buffer), buffer.seen) == (6, 10)
    buffer.set_contents(*exemplars(4))
    # 4 samples kept, in the order given; 10 samples were seen, whatever the memory keeps now
    assert len(buffer) == 4 and buffer.contents().labels.tolist() == [100, 101, 102, 103]
    assert buffer.seen == 10 and buffer.state_dict()["seen"] == 10
    restored = ReplayBuffer(6)
    restored.load_state_dict(buffer.state_dict())
    assert (len(restored), restored.seen) == (4, 10)


def test_set_contents_of_more_samples_than_seen_counts_them_as_seen() -> None:
    buffer = ReplayBuffer(6)
    offer(buffer, 0, 2, torch.Generator().manual_seed(0))
    assert buffer.seen == 2
    buffer.set_contents(*exemplars(5))
    assert (len(buffer), buffer.seen) == (5, 5)  # at least the samples it holds: max(2, 5)
    empty = ReplayBuffer(6)
    empty.set_contents(*exemplars(3))
    assert (len(empty), empty.seen) == (3, 3)
    buffer.set_contents(*exemplars(0))
    assert (len(buffer), buffer.seen) == (0, 5)  # emptied: nothing held, still 5 seen


def test_after_set_contents_the_next_sample_fills_an_empty_slot_and_no_discarded_sample_comes_back() -> None:
    buffer = ReplayBuffer(6)
    offer(buffer, 0, 10, torch.Generator().manual_seed(0))  # samples 0..9: 6 of them kept
    buffer.set_contents(*exemplars(4))  # 100..103 in slots 0-3; slots 4 and 5 empty (their samples discarded)
    offer(buffer, 50, 1, torch.Generator().manual_seed(0))
    # the first empty slot (4) takes sample 50; slot 5 stays empty: 5 samples, none of 0..9
    assert len(buffer) == 5 and buffer.seen == 11
    assert buffer.contents().labels.tolist() == [100, 101, 102, 103, 50]
    assert buffer.contents().images[:, 0, 0, 0].tolist() == [100, 101, 102, 103, 50]
    assert buffer.contents().task_ids.tolist() == [1, 1, 1, 1, 0]
    offer(buffer, 51, 1, torch.Generator().manual_seed(0))  # the last empty slot
    assert len(buffer) == 6 and buffer.seen == 12
    assert buffer.contents().labels.tolist() == [100, 101, 102, 103, 50, 51]
    restored = ReplayBuffer(6)
    restored.load_state_dict(buffer.state_dict())
    assert (len(restored), restored.seen, restored.contents().labels.tolist()) == (6, 12, [100, 101, 102, 103, 50, 51])


def test_a_batch_after_set_contents_fills_the_empty_slots_then_samples_at_the_stream_position() -> None:
    buffer = ReplayBuffer(6)
    offer(buffer, 0, 10, torch.Generator().manual_seed(0))
    buffer.set_contents(*exemplars(4))
    offer(buffer, 50, 5, torch.Generator().manual_seed(0))  # samples 50..54 at stream positions i = 10..14
    draws = torch.rand(5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    # 50 and 51 fill the empty slots 4 and 5; 52..54 (i = 12, 13, 14) draw r = floor(u (i + 1)) in [0, i]:
    # r = 5 (52 replaces 51, written earlier in the same batch), 12 and 9 (53 and 54 not kept: r >= 6)
    assert [math.floor(float(draws[k]) * (10 + k + 1)) for k in (2, 3, 4)] == [5, 12, 9]
    assert len(buffer) == 6 and buffer.seen == 15
    assert buffer.contents().labels.tolist() == [100, 101, 102, 103, 50, 52]
    assert buffer.contents().images[:, 0, 0, 0].tolist() == [100, 101, 102, 103, 50, 52]
