"""The base loop's pure pieces, on hand-made tensors: the scenarios' losses and targets, the evaluation sums,
and the refusals' messages."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from clbench.approaches.base import Approach
from clbench.approaches.evaluation import aware_and_agnostic_sums
from clbench.approaches.losses import class_targets, head_cross_entropy, multihead_loss
from clbench.approaches.refusals import (
    early_stopping_problem,
    scenario_network_problem,
    scenario_refusal,
    unsupported_network_problem,
)
from clbench.data.batches import Batch
from clbench.spec import DataSpec, TrainingSpec


def test_head_cross_entropy_is_the_mean_negative_log_softmax_and_the_count_right() -> None:
    logits = torch.tensor([[0.0, math.log(3.0)], [0.0, 0.0]])  # softmax rows: (1/4, 3/4), (1/2, 1/2)
    loss, correct = head_cross_entropy(logits, torch.tensor([1, 0]), "sum")
    assert loss.item() == pytest.approx(math.log(4 / 3) + math.log(2))
    assert correct.item() == 2  # row 2 is a tie: argmax picks the first class


def test_class_targets_add_each_samples_task_offset() -> None:
    offsets = (0, 2, 5)
    mixed = Batch(torch.zeros(3, 1), torch.tensor([1, 0, 2]), -1, torch.tensor([0, 1, 2]))
    single = Batch(torch.zeros(2, 1), torch.tensor([0, 1]), 1)
    assert class_targets(mixed, torch.tensor(offsets), offsets).tolist() == [1, 2, 7]
    assert class_targets(single, torch.tensor(offsets), offsets).tolist() == [2, 3]


def test_multihead_loss_puts_each_sample_on_its_own_head() -> None:
    heads = nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 3)])
    features = torch.randn(4, 2, generator=torch.Generator().manual_seed(0))
    batch = Batch(torch.zeros(4, 1), torch.tensor([1, 2, 0, 1]), -1, torch.tensor([0, 1, 1, 0]))
    loss, correct = multihead_loss(features, heads, batch, 2, "sum")
    own = [head_cross_entropy(heads[t](features[i:i + 1]), batch.targets[i:i + 1], "sum")
           for i, t in enumerate(batch.task_ids.tolist())]
    assert loss.item() == pytest.approx(sum(part[0].item() for part in own), abs=1e-6)
    assert correct.item() == sum(part[1].item() for part in own)


def test_aware_and_agnostic_sums_split_the_task_head_from_every_class() -> None:
    logits = torch.tensor([[0.0, 5.0, 1.0, 0.0], [0.0, 0.0, 1.0, 3.0]])  # task 1's classes are outputs 2..3
    sums = aware_and_agnostic_sums(logits, torch.tensor([0, 1]), 2, 2)
    aware = head_cross_entropy(logits[:, 2:4], torch.tensor([0, 1]), "sum")
    agnostic = head_cross_entropy(logits, torch.tensor([2, 3]), "sum")
    assert sums.tolist() == pytest.approx([aware[0].item(), 2.0, agnostic[0].item(), 1.0])


class NeedsTaskId(Approach):
    name = "needs-task-id"
    needs_task_id = True


class RefusesDomain(Approach):
    name = "refuses-domain"
    refuses_domain = "it keeps one prototype per class of each task"


def test_scenario_refusals_only_in_the_domain_scenario() -> None:
    assert all(scenario_refusal(cls, scenario) is None for cls in (Approach, NeedsTaskId, RefusesDomain)
               for scenario in ("task", "class"))
    assert scenario_refusal(Approach, "domain") is None
    assert "needs the task id" in str(scenario_refusal(NeedsTaskId, "domain"))
    assert str(scenario_refusal(RefusesDomain, "domain")).endswith(RefusesDomain.refuses_domain)


def test_scenario_network_problems_need_a_multihead_net_with_tied_heads_in_the_domain_scenario() -> None:
    plain = nn.Linear(2, 2)
    assert "data.scenario=class needs a network" in str(scenario_network_problem(Approach, "class", plain, True))
    assert scenario_network_problem(Approach, "class", plain, False) is None  # its own loss
    assert scenario_network_problem(NeedsTaskId, "class", plain, True) is None  # trains on its task's head
    assert "one head shared" in str(scenario_network_problem(Approach, "domain", plain, True))
    assert scenario_network_problem(NeedsTaskId, "domain", plain, True) == scenario_refusal(NeedsTaskId, "domain")
    assert scenario_network_problem(Approach, "task", plain, True) is None


def test_network_and_protocol_refusals() -> None:
    assert unsupported_network_problem("hat", {"resnet18": "why"}, "mlp") is None
    assert unsupported_network_problem("hat", {"resnet18": "why"}, "resnet18") == (
        "approach hat does not run on `network.kind` resnet18: why")
    no_validation = DataSpec(kind="split", datasets=("mnist",), classes_per_task=(2,), validation_fraction=0.0)
    assert "early stopping needs a validation split" in str(early_stopping_problem(TrainingSpec(), no_validation))
    assert early_stopping_problem(TrainingSpec(early_stopping=False), no_validation) is None
