"""LUCIR's mathematics against values worked out by hand, and its mechanics on the tiny 3-task sequence.

The tiny sequence's heads have 4, 4 and 2 classes; the approach is seen while it learns task index 1 (4 old
classes, 4 new ones).
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
import torch
from synthetic import TINY_TRAINING, make_approach, synthetic_loader, tiny_spec, tiny_tasks

from clbench.approaches.datatypes import StepInfo
from clbench.approaches.lucir.approach import LUCIR
from clbench.approaches.lucir.cosine import CosineHead, cosine_heads
from clbench.approaches.lucir.functions import (
    adaptive_weight,
    imprinted_weights,
    less_forget_loss,
    margin_ranking_loss,
)
from clbench.approaches.resolution import resolve
from clbench.errors import SpecError
from clbench.run.engine import execute
from clbench.run.plan import plan_runs

S2 = math.sqrt(2)


def test_cosine_head_by_hand() -> None:
    head = CosineHead(2, 2, torch.nn.Parameter(torch.tensor([2.0])))
    with torch.no_grad():
        head.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 2.0]]))  # normalised: the unit vectors e1, e2
    features = torch.tensor([[3.0, 4.0], [0.0, -5.0]])  # normalised: (0.6, 0.8), (0, -1)
    assert head.scores(features).flatten().tolist() == pytest.approx([0.6, 0.8, 0.0, -1.0])
    assert head(features).flatten().tolist() == pytest.approx([1.2, 1.6, 0.0, -2.0])  # times sigma = 2


def test_cosine_heads_share_one_sigma_initialised_to_one() -> None:
    heads = cosine_heads(3, [2, 2, 1])
    assert heads[0].sigma is heads[1].sigma is heads[2].sigma
    assert float(heads[0].sigma.detach()) == 1.0
    assert all(float(head.weight.detach().abs().max()) <= 1 / math.sqrt(3) for head in heads)  # uniform in +-1/sqrt(F)


def test_margin_ranking_loss_by_hand() -> None:
    # 2 old classes (columns 0, 1), 2 new ones (2, 3); K = 2, m = 0.5
    scores = torch.tensor([[0.9, 0.1, 0.7, 0.2],    # class 0: gt 0.9 vs 0.7, 0.2 -> max(0, .5 - .2), max(0, .5 - .7)
                           [0.0, 0.3, 0.6, 0.5],    # class 1: gt 0.3 vs 0.6, 0.5 -> 0.8, 0.7
                           [0.9, 0.9, 0.0, 0.1]])   # class 3 (new): not ranked
    targets = torch.tensor([0, 1, 3])
    assert float(margin_ranking_loss(scores, targets, 2, 2, 0.5)) == pytest.approx((0.3 + 0.0 + 0.8 + 0.7) / 4)
    assert float(margin_ranking_loss(scores, targets, 2, 1, 0.5)) == pytest.approx((0.3 + 0.8) / 2)  # top-1: .7, .6
    assert float(margin_ranking_loss(scores, targets, 2, 2, 0.0)) == pytest.approx((0.0 + 0.3 + 0.2) / 4)
    assert float(margin_ranking_loss(scores[2:], targets[2:], 2, 2, 0.5)) == 0.0  # no old-class sample


def test_less_forget_loss_by_hand() -> None:
    features = torch.tensor([[1.0, 0.0], [2.0, 2.0]], requires_grad=True)
    old = torch.tensor([[0.0, 3.0], [1.0, 1.0]], requires_grad=True)  # cos: 0 and 1 -> 1 - cos: 1 and 0
    value = less_forget_loss(features, old)
    assert float(value.detach()) == pytest.approx(0.5)
    value.backward()
    assert old.grad is None and features.grad is not None  # the old network's features are a fixed target


def test_adaptive_weight_is_lamb_base_times_root_of_old_over_new() -> None:
    assert adaptive_weight(5.0, 4, 2) == pytest.approx(5 * S2)
    assert adaptive_weight(5.0, 8, 2) == pytest.approx(10.0)


def test_imprinted_weights_by_hand() -> None:
    features = torch.tensor([[2.0, 0.0], [0.0, 3.0], [-1.0, 0.0]])  # class 0: e1, e2 -> mean (.5, .5); class 1: -e1
    weights = imprinted_weights(features, torch.tensor([0, 0, 1]), 2, 3.0)
    assert weights.flatten().tolist() == pytest.approx([3 / S2, 3 / S2, -3.0, 0.0])


# ---------------------------------------------------------------------------------------------- the approach
def lucir_at_task_2(scenario: str = "class", **hparams: object) -> LUCIR:
    spec = tiny_spec("mlp", scenario=scenario)
    approach = make_approach("lucir", spec, tiny_tasks(spec), **hparams)
    assert isinstance(approach, LUCIR)
    approach.load_extra_state({"previous_network": approach.snapshot()})  # the previous network: this one, now
    return approach


def test_the_logits_are_sigma_times_the_cosines_of_every_head() -> None:
    approach = lucir_at_task_2()
    with torch.no_grad():
        approach.head(0).sigma.fill_(3.0)
    features = torch.randn(5, 32)
    by_hand = torch.cat([3.0 * torch.nn.functional.normalize(features) @ torch.nn.functional.normalize(h.weight).T
                         for h in approach.multihead.heads[:2]], dim=1)
    assert torch.allclose(approach.seen_logits(features, 2), by_hand, atol=1e-6)
    assert approach.head(2).sigma is approach.head(0).sigma


def test_only_the_body_the_new_head_and_sigma_train() -> None:
    approach = lucir_at_task_2()
    trained = {id(p) for p in approach.trainable_parameters(1)}
    heads = approach.multihead.heads
    assert id(heads[1].weight) in trained and id(heads[0].sigma) in trained
    assert id(heads[0].weight) not in trained and id(heads[2].weight) not in trained
    assert all(id(p) in trained for p in approach.multihead.body_parameters())


@pytest.mark.parametrize("scenario", ["class", "task"])
def test_the_loss_adds_the_less_forget_and_the_margin_ranking_terms(scenario: str) -> None:
    approach = lucir_at_task_2(scenario, lamb_base=5.0, lamb_mr=2.0)
    batch = tiny_tasks(tiny_spec("mlp", scenario=scenario))[1].valid.batch(slice(None))
    features = approach.multihead.features(batch.inputs)
    cross_entropy = approach.scenario_cross_entropy(features, batch, 1)[0]
    # previous network = this one: no less-forget; the batch has only new classes: no ranking
    assert float(approach.loss(batch, StepInfo(1, 0, 0, 1)).detach()) == pytest.approx(float(cross_entropy), rel=1e-6)
    moved = {key: value + 0.3 * torch.randn_like(value) for key, value in approach.snapshot().items()}
    approach.load_extra_state({"previous_network": moved})  # the previous network's features now differ
    old = approach.previous.features(batch.inputs, 1)
    less_forget = (1 - torch.nn.functional.cosine_similarity(features, old)).mean()
    expected = cross_entropy + 5.0 * math.sqrt(4 / 4) * less_forget  # 4 old classes, 4 new ones
    assert float(approach.loss(batch, StepInfo(1, 0, 0, 1))) == pytest.approx(float(expected), rel=1e-5)
    # samples of old classes (task 0's) in the batch: the ranking joins, weighted by lamb_mr
    exemplars = tiny_tasks(tiny_spec("mlp", scenario=scenario))[0].valid.batch(slice(None))
    first = approach.scenario_cross_entropy(approach.multihead.features(exemplars.inputs), exemplars, 0)[0]
    assert float(approach.loss(exemplars, StepInfo(0, 0, 0, 1))) == pytest.approx(float(first), rel=1e-6)  # task 1
    ranking = approach.ranking(approach.multihead.features(exemplars.inputs), exemplars, 1)
    assert float(ranking) > 0
    with_ranking = approach.loss(exemplars, StepInfo(1, 0, 0, 1))
    no_ranking = make_like(approach, scenario, lamb_mr=0.0).loss(exemplars, StepInfo(1, 0, 0, 1))
    assert float(with_ranking - no_ranking) == pytest.approx(2.0 * float(ranking), rel=1e-4)


def make_like(approach: LUCIR, scenario: str, **hparams: object) -> LUCIR:
    """Another LUCIR with `approach`'s weights and previous network, hyper-parameters changed."""
    other = lucir_at_task_2(scenario, **{"lamb_base": 5.0, "lamb_mr": 2.0, **hparams})
    other.restore(approach.snapshot())
    other.load_extra_state(approach.previous.state())
    return other


def test_k_larger_than_a_later_task_is_refused_before_the_run() -> None:
    spec = tiny_spec("mlp", scenario="class")  # tasks of 4, 4 and 2 classes
    given = replace(spec, approaches={"lucir": {"k": 3}})
    with pytest.raises(SpecError) as refused:
        resolve(given, "lucir")
    assert str(refused.value) == ("<test>: approach lucir: `approaches.lucir.k` is 3; a task after the first has 2 "
                                  "classes, and the margin ranking needs k of a task's new classes: use k <= 2")
    resolve(replace(spec, approaches={"lucir": {"k": 2}}), "lucir")  # the largest k allowed


def test_imprinting_sets_the_new_head_from_its_classes_features() -> None:
    approach = lucir_at_task_2()
    tasks = tiny_tasks(tiny_spec("mlp", scenario="class"))
    approach.begin_task(1, tasks)
    train = tasks[1].train
    features = approach.features_of(train)
    weight = approach.head(1).weight
    for label in range(4):
        mean = torch.nn.functional.normalize(features[train.labels == label], dim=1).mean(0)
        assert torch.allclose(torch.nn.functional.normalize(weight[label], dim=0),
                              torch.nn.functional.normalize(mean, dim=0), atol=1e-5)
    norm = float(approach.head(0).weight.norm(dim=1).mean())
    assert weight.norm(dim=1).tolist() == pytest.approx([norm] * 4, rel=1e-5)


def train(tmp_path: Path, scenario: str = "class", **settings: object):  # type: ignore[no-untyped-def]
    spec = tiny_spec("mlp", training=replace(TINY_TRAINING, max_epochs=2), scenario=scenario)
    spec = replace(spec, approaches={"lucir": dict(settings)})
    [plan] = plan_runs(spec, ["lucir"], [0], tmp_path)
    return plan, execute(plan, device=torch.device("cpu"), loader=synthetic_loader(n_train=600, n_test=60))


def test_the_memory_keeps_the_same_number_of_exemplars_of_every_class_seen(tmp_path: Path) -> None:
    from clbench.run.checkpoints import load_checkpoint

    plan, outcome = train(tmp_path, buffer_size=50, finetune_epochs=2, finetune_milestone=3)
    for stage, classes in ((0, 4), (1, 8), (2, 10)):
        buffer = load_checkpoint(plan.run_dir, stage)["approach"]["extra"]["buffer"]
        labels = buffer["labels"] + torch.tensor([0, 4, 8])[buffer["task_ids"]]
        assert torch.bincount(labels, minlength=10)[:classes].tolist() == [50 // classes] * classes
    rows = pd.DataFrame(outcome.rows)
    assert rows.groupby("stage")["memory_samples"].first().tolist() == [0, 48, 48, 50]  # 50 // 4, 8, 10 classes
    assert set(rows["evaluation"]) == {"task-aware", "task-agnostic"}


def test_finetuning_trains_only_the_new_head_and_sigma() -> None:
    approach = lucir_at_task_2(finetune_epochs=1, finetune_lr=0.5)
    tasks = tiny_tasks(tiny_spec("mlp", scenario="class"))
    approach.begin_task(0, tasks)
    approach.select_exemplars(0, tasks[0].train)
    approach.begin_task(1, tasks)
    approach.select_exemplars(1, tasks[1].train)
    before = {key: value.clone() for key, value in approach.snapshot().items()}
    approach.finetune(1)
    after = approach.snapshot()
    changed = {key for key in before if not torch.equal(before[key], after[key])}
    assert {"heads.1.weight", "heads.0.sigma"} <= changed
    assert all(key.startswith("heads.") and (key == "heads.1.weight" or key.endswith("sigma")) for key in changed)


def test_the_domain_scenario_is_refused() -> None:
    from clbench.approaches.refusals import scenario_refusal

    assert "class-incremental" in str(scenario_refusal(LUCIR, "domain"))
