"""An Avalanche strategy's checkpoint holds what its buffers hold, not the storages they were indexed out of.

torch pickles a tensor with its whole storage: a replay buffer of single samples indexed out of a task's tensors was
saved as one copy of the task per sample (av-replay on seq-mnist: 100 MB per task for 500 samples). Skipped without
avalanche-lib (`pip install -e ".[avalanche]"`)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("avalanche.training")

from clbench.approaches.avalanche import bridge  # noqa: E402


class Holder:
    """Stands for a strategy: `dump_strategy` pickles its `__dict__`."""


def test_samples_indexed_out_of_a_task_are_saved_without_the_task() -> None:
    labels = torch.arange(12_000)                      # a task's labels: 96,000 bytes of int64
    inputs = torch.randn(12_000, 4)
    holder = Holder()
    holder.buffer = [labels[i] for i in range(0, 1_000, 2)]   # 500 views of one label each
    holder.rows = inputs[10:20]                                # a view of 10 of 12,000 rows
    holder.own = torch.ones(3, requires_grad=True)             # a tensor that is its whole storage
    data = bridge.dump_strategy(holder, {"inputs": inputs})
    # By hand: 500 storages of 96,000 bytes would be 48 MB; 500 one-label tensors and 10 rows of 4 floats with their
    # pickling overhead are far below 500 x 1,000 bytes.
    assert len(data) < 500_000
    restored = Holder()
    bridge.load_strategy(restored, data, {"inputs": inputs})
    assert [int(value) for value in restored.buffer] == list(range(0, 1_000, 2))
    assert torch.equal(restored.rows, inputs[10:20])
    assert restored.own.requires_grad and torch.equal(restored.own.detach(), torch.ones(3))


def test_a_shared_tensor_stays_a_reference() -> None:
    inputs = torch.randn(100, 4)
    holder = Holder()
    holder.inputs = inputs
    restored = Holder()
    bridge.load_strategy(restored, bridge.dump_strategy(holder, {"inputs": inputs}), {"inputs": inputs})
    assert restored.inputs is inputs
