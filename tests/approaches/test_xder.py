"""X-DER against values computed by hand: the stored logits' updates, each loss term, the memory at a task's end."""

from __future__ import annotations

import math

import pytest
import torch
from synthetic import make_approach, tiny_resnet_spec, tiny_spec, tiny_tasks
from torch.nn import functional

from clbench.approaches.datatypes import StepInfo
from clbench.approaches.replay.xder_terms import (
    class_quotas,
    contrastive_consistency,
    first_occurrences,
    margin_violation,
    own_head_max,
    supervised_contrastive,
    update_logits,
)

# --------------------------------------------------------------------------- pure functions


def test_update_logits_replaces_the_block_and_scales_it_below_gamma_times_the_class_logit() -> None:
    old = torch.tensor([[2.0, 0.5, 9.0, 9.0],     # class 0, stored logit 2
                        [0.1, 3.0, 9.0, 9.0]])    # class 1, stored logit 3
    new = torch.tensor([[7.0, 7.0, 4.0, 1.0],     # block max 4 > 2: scaled by 0.85 * 2 / 4 = 0.425
                        [7.0, 7.0, 2.0, -1.0]])   # block max 2 < 3: replaced as it is
    updated = update_logits(old, new, torch.tensor([0, 1]), 2, 4, 0.85)
    expected = torch.tensor([[2.0, 0.5, 1.7, 0.425],
                             [0.1, 3.0, 2.0, -1.0]])
    torch.testing.assert_close(updated, expected)
    assert old[0, 2] == 9.0 and new[0, 2] == 4.0  # the inputs are left as they were


def test_update_logits_keeps_the_authors_formula_where_the_class_logit_is_negative() -> None:
    # stored class logit -2, block max -0.01 > -2: factor 0.85 x -2 / -0.01 = 170 (Mammoth's formula, unbounded;
    # the docs' X-DER section: the cause of a diverged seq-mnist seed)
    updated = update_logits(torch.tensor([[-2.0, 0.0, 0.0]]), torch.tensor([[0.0, -0.01, -0.5]]), torch.tensor([0]),
                            1, 3, 0.85)
    torch.testing.assert_close(updated, torch.tensor([[-2.0, -1.7, -85.0]]))


def test_the_past_update_at_a_tasks_end_scales_the_earlier_heads_by_the_current_class() -> None:
    # Mammoth end_task: update_logits(outputs, outputs, labels, 0, current_task): heads 0..t-1 of a new sample
    outputs = torch.tensor([[3.0, 1.0, 2.0, 0.5]])  # class 2 (task 1's head is 2:4), earlier max 3 > 2
    updated = update_logits(outputs, outputs, torch.tensor([2]), 0, 2, 0.85)
    torch.testing.assert_close(updated, torch.tensor([[0.85 * 2.0, 0.85 * 2.0 / 3.0, 2.0, 0.5]]))


def test_supervised_contrastive_by_hand() -> None:
    # sample 0: views [1,0], [0,1]; sample 1: views [1,0], [1,0]; different labels, T = 1
    features = torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [1.0, 0.0]]])
    e = math.e
    # anchors (view-major): s0 view a [1,0] -> positive s0 b (dot 0) among dots 1, 0, 1: log(2e + 1)
    # s0 view b [0,1] -> positive s0 a (dot 0) among 0, 0, 0: log 3; s1's views -> positive dot 1: log(2e + 1) - 1
    by_hand = (math.log(2 * e + 1) + math.log(3)) / 2 + (math.log(2 * e + 1) - 1)
    value = supervised_contrastive(features, torch.tensor([0, 1]), 1.0, 1.0)
    assert value.item() == pytest.approx(by_hand, rel=1e-6)
    # same labels: s1's views are positives of s0's too; anchor s0 a: positives s0 b (0), s1 a (1), s1 b (1)
    same = supervised_contrastive(features, torch.tensor([0, 0]), 1.0, 1.0)
    s0a = math.log(2 * e + 1) - 2 / 3
    s0b = math.log(3)  # all dots 0
    s1 = math.log(2 * e + 1) - 2 / 3  # s1 a: others s0 a (1), s0 b (0), s1 b (1), all positive
    assert same.item() == pytest.approx((s0a + s0b) / 2 + s1, rel=1e-6)
    # T / T_base scales the loss; the temperature divides the similarities
    scaled = supervised_contrastive(features, torch.tensor([0, 1]), 2.0, 1.0)
    e2 = math.exp(0.5)
    assert scaled.item() == pytest.approx(2 * ((math.log(2 * e2 + 1) + math.log(3)) / 2 + math.log(2 * e2 + 1) - 0.5),
                                          rel=1e-6)


def test_contrastive_consistency_sums_the_heads_and_divides_by_heads_times_samples() -> None:
    outputs = torch.randn(2 * 3, 5, generator=torch.Generator().manual_seed(0))  # 2 samples x 3 views, heads 2+3
    labels = torch.tensor([4, 7])
    grouped = outputs.view(2, 3, 5)
    heads = [functional.normalize(grouped[:, :, :2], dim=2), functional.normalize(grouped[:, :, 2:], dim=2)]
    expected = sum(supervised_contrastive(h, labels, 5.0, 5.0) for h in heads) / (2 * 2)
    assert contrastive_consistency(outputs, labels, 3, [2, 3], 5.0).item() == pytest.approx(float(expected))


def test_margin_violation_means_the_violations_only() -> None:
    value = margin_violation(torch.tensor([1.0, 0.0, 2.0]), torch.tensor([1.0, 2.0, 1.0]), 0.3)
    assert value.item() == pytest.approx((0.3 + 1.3) / 2)
    assert margin_violation(torch.tensor([0.0]), torch.tensor([1.0]), 0.3).item() == 0.0


def test_bookkeeping_by_hand() -> None:
    assert first_occurrences(torch.tensor([3, 1, 3, 2, 1])).tolist() == [True, True, False, True, False]
    quotas = class_quotas(7, 3, torch.Generator().manual_seed(0))
    assert sorted(quotas.tolist()) == [2, 2, 3]
    assert class_quotas(6, 3, torch.Generator()).tolist() == [2, 2, 2]
    logits = torch.tensor([[5.0, 1.0, 2.0], [5.0, 1.0, 2.0]])
    column_task = torch.tensor([0, 1, 1])
    assert own_head_max(logits, torch.tensor([1, 0]), column_task).tolist() == [2.0, 5.0]


# --------------------------------------------------------------------------- the approach on hand-made data

def approach_with_memory(n_memory: int = 6, chosen: list[int] | None = None,  # type: ignore[no-untyped-def]
                         **hparams: object):
    """X-DER at task 1 of the tiny class-scenario benchmark (heads 4, 4, 2), its memory holding task 0's first
    samples (or those `chosen`) with random stored logits; every term off unless `hparams` turns it on."""
    spec = tiny_spec("mlp", scenario="class")
    tasks = tiny_tasks(spec)
    settings = dict(alpha=0.0, beta=0.0, lambd=0.0, future_constraint=False, past_constraint=False,
                    buffer_size=n_memory, replay_batch_size=n_memory)
    approach = make_approach("xder", spec, tasks, **{**settings, **hparams})
    approach.begin_task(1, tasks)
    old = tasks[0].train.batch(slice(0, n_memory) if chosen is None else torch.tensor(chosen))
    stored = torch.randn(n_memory, sum(tasks.head_sizes), generator=torch.Generator().manual_seed(0))
    approach.buffer.add_reservoir(old.images, old.targets, torch.zeros(n_memory, dtype=torch.long),
                                  torch.Generator(), stored)
    approach.network.eval()  # the tiny MLP has no dropout or batch norm; the by-hand forwards are the same
    return approach, tasks, old, stored


def step_loss(approach, batch) -> float:  # type: ignore[no-untyped-def]
    optimizer = torch.optim.SGD(approach.network.parameters(), lr=0.0)
    with torch.enable_grad():
        return approach.training_step(batch, StepInfo(1, 0, 0, 1), optimizer).item()


def every_head(approach, inputs: torch.Tensor) -> torch.Tensor:  # type: ignore[no-untyped-def]
    net = approach.multihead
    features = net.features(inputs)
    return torch.cat([head(features) for head in net.heads], dim=1)  # (B, 10)


@torch.no_grad()
def test_each_loss_term_by_hand() -> None:
    approach, tasks, old, stored = approach_with_memory()
    batch = tasks[1].train.batch(slice(0, 8))
    outputs, memory = every_head(approach, batch.inputs), every_head(approach, old.inputs)
    stream = functional.cross_entropy(outputs[:, 4:8], batch.targets)  # task 1's head only
    assert step_loss(approach, batch) == pytest.approx(stream.item(), rel=1e-5)

    approach, *_ = approach_with_memory(alpha=0.3)
    mse = ((memory - stored) ** 2).mean()  # every head, the stored logits as they were before the step
    assert step_loss(approach, batch) == pytest.approx((stream + 0.3 * mse).item(), rel=1e-5)

    approach, *_ = approach_with_memory(beta=0.7)
    earlier = functional.cross_entropy(memory[:, :4], old.targets)  # task 0's classes 0..3, task 0's head
    assert step_loss(approach, batch) == pytest.approx((stream + 0.7 * earlier).item(), rel=1e-5)

    approach, *_ = approach_with_memory(future_constraint=True, constr_eta=0.1, constr_margin=0.3)
    bad = torch.cat([outputs[:, 8:].max(1).values, memory[:, 8:].max(1).values])  # task 2's head (the future)
    good = torch.cat([outputs[:, 4:8].max(1).values, memory[:, :4].max(1).values])  # each sample's own head
    violation = bad + 0.3 - good
    future = violation[violation > 0].mean() if (violation > 0).any() else torch.tensor(0.0)
    assert step_loss(approach, batch) == pytest.approx((stream + 0.1 * future).item(), rel=1e-5)

    approach, *_ = approach_with_memory(past_constraint=True, constr_eta=2.0, constr_margin=0.3)
    seen = functional.softmax(outputs[:, :8], dim=1)
    violation = seen[:, :4].max(1).values + 0.3 - seen[:, 4:8].max(1).values
    assert (violation > 0).any()
    past = violation[violation > 0].mean()
    assert step_loss(approach, batch) == pytest.approx((stream + 2.0 * past).item(), rel=1e-5)


def past_updated(stored_row: torch.Tensor, outputs_row: torch.Tensor, label: int, start: int, end: int,
                 gamma: float = 0.85) -> list[float]:
    """One row of Mammoth's update_logits written out: columns start:end from outputs, times gamma * the stored
    class logit / their max where that max is larger."""
    row = stored_row.tolist()
    block = outputs_row[start:end].tolist()
    factor = gamma * row[label] / max(block) if max(block) > row[label] else 1.0
    row[start:end] = [value * factor for value in block]
    return row


@torch.no_grad()
def test_a_step_updates_the_replayed_samples_heads_of_this_task_and_later() -> None:
    approach, tasks, old, stored = approach_with_memory(alpha=0.3)
    memory = every_head(approach, old.inputs)
    step_loss(approach, tasks[1].train.batch(slice(0, 8)))
    # each sample is replayed for the first time this task: accepted with probability 1 / 1
    expected = [past_updated(stored[i], memory[i], int(old.targets[i]), 4, 10) for i in range(6)]
    torch.testing.assert_close(approach.buffer.logits, torch.tensor(expected), rtol=1e-5, atol=1e-6)
    assert approach.replays.tolist() == [1.0] * 6
    assert torch.equal(approach.buffer.logits[:, :4], stored[:, :4])  # task 0's head is never rewritten


@torch.no_grad()
def test_the_memory_at_a_tasks_end_by_hand() -> None:
    train_labels = tiny_tasks(tiny_spec("mlp", scenario="class"))[0].train.labels.tolist()
    by_class = [[i for i, label in enumerate(train_labels) if label == c][:4] for c in range(4)]
    chosen = [by_class[c][k] for k in range(4) for c in (2, 0, 3, 1)]  # 4 of each class, interleaved
    approach, tasks, old, stored = approach_with_memory(n_memory=16, chosen=chosen)
    # 16 slots, 8 classes seen after task 1: 2 of each of task 0's classes stay (the first ones in slot order)
    labels = old.targets.tolist()
    kept = [i for c in range(4) for i in [j for j, label in enumerate(labels) if label == c][:2]]
    assert kept == [1, 5, 3, 7, 0, 4, 2, 6]
    approach.replays += 3
    approach.end_task(1, tasks)
    contents = approach.buffer.contents()
    assert len(approach.buffer) == 16 and approach.replays.tolist() == [0.0] * 16
    assert contents.task_ids.tolist() == [0] * 8 + [1] * 8
    assert contents.labels[:8].tolist() == [labels[i] for i in kept]
    assert torch.equal(contents.images[:8], old.images[kept])
    assert sorted(contents.labels[8:].tolist()) == [0, 0, 1, 1, 2, 2, 3, 3]  # 8 free slots / 4 classes
    # the earlier samples: task 0's head as stored, heads 1.. from the network now, scaled (the future update)
    memory = every_head(approach, old.inputs[kept])
    expected = [past_updated(stored[i], memory[k], labels[i], 4, 10) for k, i in enumerate(kept)]
    torch.testing.assert_close(contents.logits[:8], torch.tensor(expected), rtol=1e-5, atol=1e-6)
    # the new samples: the network's logits, task 0's head scaled below 0.85 x the class's (the past update)
    new = approach.transform(contents.images[8:], contents.task_ids[8:])
    outputs = every_head(approach, new)
    expected = [past_updated(outputs[k], outputs[k], 4 + int(contents.labels[8 + k]), 0, 4) for k in range(8)]
    torch.testing.assert_close(contents.logits[8:], torch.tensor(expected), rtol=1e-5, atol=1e-6)


def test_the_first_task_fills_the_memory_with_equal_quotas_and_raw_logits() -> None:
    spec = tiny_spec("mlp", scenario="class")
    tasks = tiny_tasks(spec)
    approach = make_approach("xder", spec, tasks, buffer_size=10)
    approach.begin_task(0, tasks)
    approach.end_task(0, tasks)
    contents = approach.buffer.contents()
    assert sorted(torch.bincount(contents.labels, minlength=4).tolist()) == [2, 2, 3, 3]  # 10 = 4 x 2 + 2 drawn
    approach.network.eval()
    with torch.no_grad():
        outputs = every_head(approach, approach.transform(contents.images, contents.task_ids))
    torch.testing.assert_close(contents.logits, outputs, rtol=1e-5, atol=1e-6)  # no earlier head, no later task


def test_xder_refuses_the_domain_scenario() -> None:
    from clbench.errors import SpecError

    spec = tiny_spec("mlp", kind="permuted", scenario="domain")
    with pytest.raises(SpecError, match="one shared head"):
        make_approach("xder", spec, tiny_tasks(spec))


def test_the_consistency_term_on_augmented_views_by_hand() -> None:
    """Task 0 of an augmented benchmark (memory empty): the stream's cross-entropy plus lambd times the SupCon loss
    of the future heads (tasks 1 and 2) on 4 cropped and flipped views of each image, over heads x images."""
    from clbench.data.augment import random_crop_and_flip

    spec = tiny_resnet_spec(nf=4, augment=True)
    tasks = tiny_tasks(spec)
    approach = make_approach("xder", spec, tasks, lambd=0.05, future_constraint=False)
    approach.begin_task(0, tasks)
    approach.network.train()
    batch = tasks[0].train.batch(slice(0, 6))
    state = approach.augment_generator.get_state()
    with torch.no_grad():
        outputs = every_head(approach, batch.inputs)
    step = approach.training_step(batch, StepInfo(0, 0, 0, 1), torch.optim.SGD(approach.network.parameters(), lr=0.0))
    generator = torch.Generator()
    generator.set_state(state)
    views = random_crop_and_flip(batch.images.repeat_interleave(4, 0), generator)  # (24, 3, 32, 32)
    first, *later = tasks.head_sizes
    with torch.no_grad():
        future = every_head(approach, approach.transform(views, 0))[:, first:].reshape(6, 4, sum(later))
    heads, start = [], 0
    for size in later:  # each later task's head: (images, views, its classes), L2-normalised
        heads.append(functional.normalize(future[:, :, start:start + size], dim=2))
        start += size
    consistency = sum(supervised_contrastive(h, batch.targets, 5.0, 5.0) for h in heads) / (len(later) * 6)
    stream = functional.cross_entropy(outputs[:, :first], batch.targets)
    assert step.item() - stream.item() == pytest.approx(0.05 * float(consistency), rel=1e-5, abs=0)
    assert float(consistency) > 0


def test_running_statistics_are_left_alone_inside_the_context() -> None:
    from torch import nn

    from clbench.approaches.replay.xder import running_statistics

    network = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)).train()
    inputs = torch.randn(8, 3, generator=torch.Generator().manual_seed(0))
    with running_statistics(network, update=False):
        network(inputs)
    assert torch.equal(network[1].running_mean, torch.zeros(4)) and network[1].track_running_stats
    with running_statistics(network, update=True):
        network(inputs)
    assert not torch.equal(network[1].running_mean, torch.zeros(4))
