"""The replay family's building blocks against hand-computed values, and its approaches' memories."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
import torch
from synthetic import TINY_TRAINING, make_approach, synthetic_loader, tiny_spec, tiny_tasks
from torch.nn import functional

from clbench.approaches.datatypes import StepInfo
from clbench.approaches.replay.buffer import ReplayBuffer
from clbench.approaches.replay.functions import (
    agem_project,
    herding_order,
    icarl_distillation,
    logit_matching_loss,
    nearest_mean_scores,
)
from clbench.run.engine import execute
from clbench.run.plan import plan_runs


def offer(buffer: ReplayBuffer, start: int, n: int, generator: torch.Generator) -> None:
    """Samples numbered start..start+n-1 (the number is the label and every pixel)."""
    numbers = torch.arange(start, start + n)
    buffer.add_reservoir(numbers.to(torch.uint8).view(n, 1, 1, 1).expand(n, 1, 2, 2).clone(), numbers,
                         torch.zeros(n, dtype=torch.long), generator)


def test_reservoir_sampling_keeps_each_seen_sample_with_probability_capacity_over_n() -> None:
    capacity, n, repetitions = 10, 50, 2000
    kept = torch.zeros(n)
    generator = torch.Generator().manual_seed(0)
    for _ in range(repetitions):
        buffer = ReplayBuffer(capacity)
        for start in range(0, n, 7):  # batches of 7, the last one of 1
            offer(buffer, start, min(7, n - start), generator)
        assert len(buffer) == capacity and buffer.seen == n
        kept[buffer.contents().labels] += 1
    frequency = kept / repetitions
    # each count is Binomial(2000, 0.2): standard error sqrt(0.2 * 0.8 / 2000) = 0.0089; 0.045 is 5 standard
    # errors, so a correct sampler fails with probability < 50 * 6e-7; keeping the first or the last 10 fails
    assert (frequency - capacity / n).abs().max() < 0.045
    assert frequency.sum() == pytest.approx(capacity)


def test_a_batch_added_at_once_equals_the_sequential_algorithm_with_the_same_draws() -> None:
    capacity, n = 3, 40  # a small memory: several samples of one batch often land on the same slot
    buffer = ReplayBuffer(capacity)
    offer(buffer, 0, n, torch.Generator().manual_seed(5))

    draws = torch.rand(n, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    slots = [-1] * capacity
    for i in range(n):  # Vitter's algorithm R, one sample at a time
        if i < capacity:
            slots[i] = i
        else:
            r = math.floor(float(draws[i]) * (i + 1))
            if r < capacity:
                slots[r] = i
    assert buffer.contents().labels.tolist() == slots
    assert buffer.contents().images[:, 0, 0, 0].tolist() == slots


def test_a_restored_buffer_draws_the_same_samples() -> None:
    generator = torch.Generator().manual_seed(1)
    buffer = ReplayBuffer(8)
    offer(buffer, 0, 20, generator)
    restored = ReplayBuffer(8)
    restored.load_state_dict(buffer.state_dict())
    state = generator.get_state()
    first = buffer.sample(5, generator).labels
    generator.set_state(state)
    assert torch.equal(restored.sample(5, generator).labels, first)
    assert restored.seen == 20 and restored.nbytes == 8 * (4 + 8 + 8)  # 2x2 uint8 image, int64 label and task


def test_agem_projection_by_hand() -> None:
    unchanged = agem_project(torch.tensor([1.0, 1.0]), torch.tensor([1.0, 0.0]))  # g . g_ref = 1 >= 0
    assert unchanged.tolist() == [1.0, 1.0]
    # g . g_ref = -1, g_ref . g_ref = 2: g - (-1 / 2) g_ref = (1, 0) + 0.5 (-1, 1) = (0.5, 0.5)
    projected = agem_project(torch.tensor([1.0, 0.0]), torch.tensor([-1.0, 1.0]))
    assert projected.tolist() == [0.5, 0.5]
    assert float(torch.dot(projected, torch.tensor([-1.0, 1.0]))) == 0.0
    assert agem_project(torch.tensor([1.0, 2.0]), torch.zeros(2)).tolist() == [1.0, 2.0]


def test_herding_order_by_hand() -> None:
    # mean (0.65, 0.45). k=1: distances 0.570, 0.570, 0.851, 0.354 -> 3; k=2: (x + (.6, .8)) / 2 closest for
    # (1, 0) (0.158; index 0 before its twin 1) -> 0; k=3: (0, 1) gives 0.190 against (1, 0)'s 0.284 -> 2; then 1
    features = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.6, 0.8]])
    assert herding_order(features, 4).tolist() == [3, 0, 2, 1]
    assert herding_order(features * 7, 2).tolist() == [3, 0]  # features are L2-normalised first


def test_nearest_mean_of_exemplars_by_hand() -> None:
    means = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    scores = nearest_mean_scores(torch.tensor([[2.0, 1.0]]), means)  # normalised: (0.894, 0.447)
    assert scores[0].tolist() == pytest.approx([-(0.10557**2 + 0.44721**2), -(0.89443**2 + 0.55279**2)], abs=1e-4)
    assert int(scores.argmax()) == 0


def test_icarl_distillation_by_hand() -> None:
    # sigmoid(0) = 0.5 against 0.5: BCE = ln 2 per class, summed over 2 old classes
    assert float(icarl_distillation(torch.zeros(3, 2), torch.zeros(3, 2))) == pytest.approx(2 * math.log(2))
    # one class, target sigmoid(0) = 0.5, prediction sigmoid(ln 3) = 0.75: -(0.5 ln 0.75 + 0.5 ln 0.25)
    value = icarl_distillation(torch.full((1, 1), math.log(3)), torch.zeros(1, 1))
    assert float(value) == pytest.approx(-(0.5 * math.log(0.75) + 0.5 * math.log(0.25)))


def test_derpp_loss_terms_by_hand() -> None:
    spec = tiny_spec("mlp")
    tasks = tiny_tasks(spec)
    approach = make_approach("derpp", spec, tasks, alpha=0.3, beta=0.7, buffer_size=6, replay_batch_size=6)
    approach.begin_task(1, tasks)
    old = tasks[0].train.batch(slice(0, 6))
    stored_logits = torch.randn(6, sum(tasks.head_sizes), generator=torch.Generator().manual_seed(0))
    approach.buffer.add_reservoir(old.images, old.targets, torch.zeros(6, dtype=torch.long),
                                  torch.Generator(), stored_logits)
    batch = tasks[1].train.batch(slice(0, 8))
    net = approach.multihead
    net.eval()  # no dropout in the tiny MLP anyway; eval keeps the by-hand forward identical
    loss = approach.training_step(batch, StepInfo(1, 0, 0, 1), torch.optim.SGD(net.parameters(), lr=0.0))
    # every memory sample is replayed twice (replay_batch_size = size), in some order: the means do not depend on it
    features = net.features(batch.inputs)
    old_features = net.features(old.inputs)
    all_heads = torch.cat([head(old_features) for head in net.heads], dim=1)
    by_hand = (functional.cross_entropy(net.heads[1](features), batch.targets)
               + 0.3 * ((all_heads - stored_logits) ** 2).mean()
               + 0.7 * functional.cross_entropy(net.heads[0](old_features), old.targets))
    assert loss.item() == pytest.approx(by_hand.item(), rel=1e-5)
    assert logit_matching_loss(torch.ones(2, 2), torch.zeros(2, 2)).item() == 1.0


def train(tmp_path: Path, method: str, scenario: str = "task", n_train: int = 160,  # type: ignore[no-untyped-def]
          **settings: object):
    spec = tiny_spec("mlp", training=replace(TINY_TRAINING, max_epochs=2), scenario=scenario)
    spec = replace(spec, approaches={method: dict(settings)})
    [plan] = plan_runs(spec, [method], [0], tmp_path)
    return plan, execute(plan, device=torch.device("cpu"), loader=synthetic_loader(n_train=n_train, n_test=60))


@pytest.mark.parametrize("method", ["er", "derpp"])
def test_reservoir_methods_report_the_memory_they_keep(method: str, tmp_path: Path) -> None:
    _, outcome = train(tmp_path, method, buffer_size=50)
    rows = pd.DataFrame(outcome.rows)
    assert set(rows.loc[rows["stage"] >= 1, "memory_samples"]) == {50}  # 136 training samples a task: full
    per_sample = 28 * 28 + 8 + 8 + (4 * 10 if method == "derpp" else 0)  # image, label, task (, 10 float logits)
    assert set(rows.loc[rows["stage"] >= 1, "memory_bytes"]) == {50 * per_sample}


def test_agem_keeps_its_quota_of_each_task(tmp_path: Path) -> None:
    plan, outcome = train(tmp_path, "agem", buffer_size=30)
    rows = pd.DataFrame(outcome.rows)
    assert rows.groupby("stage")["memory_samples"].first().tolist() == [0, 10, 20, 30]  # 30 // 3 tasks each


def test_icarl_keeps_the_same_number_of_exemplars_of_every_class_seen(tmp_path: Path) -> None:
    from clbench.run.checkpoints import load_checkpoint

    plan, outcome = train(tmp_path, "icarl", "class", n_train=600, buffer_size=50)  # > 12 samples of each class
    head_sizes = (4, 4, 2)
    for stage, classes in ((0, 4), (1, 8), (2, 10)):
        buffer = load_checkpoint(plan.run_dir, stage)["approach"]["extra"]["buffer"]
        offsets = torch.tensor([0, 4, 8])
        labels = buffer["labels"] + offsets[buffer["task_ids"]]
        counts = torch.bincount(labels, minlength=sum(head_sizes))[:classes]
        assert counts.tolist() == [50 // classes] * classes
    assert set(pd.DataFrame(outcome.rows)["evaluation"]) == {"task-aware", "task-agnostic"}
