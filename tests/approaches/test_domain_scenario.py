"""The domain scenario (`data.scenario: domain`): one head shared by every task, no task id, one evaluation.

The hand-made network: input (2 values) -> Linear(2, 2) set to the identity -> ReLU -> the shared head of 2
classes, whose weights the tests set, so every logit is written down by hand. Inputs are non-negative, so the
body passes them through: features = x.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pandas as pd
import pytest
import torch
from synthetic import TINY_TRAINING, synthetic_loader, tiny_spec

from clbench.approaches.datatypes import TASK_AWARE, ApproachContext
from clbench.approaches.parameters import named_shared_parameters
from clbench.approaches.refusals import scenario_refusal
from clbench.approaches.registry import REGISTRY
from clbench.approaches.resolution import resolve
from clbench.data.batches import Batch, LabelledData
from clbench.data.transform import InputTransform
from clbench.errors import SpecError
from clbench.metrics import accuracy_matrix, is_complete_matrix
from clbench.nets import MultiHeadNet
from clbench.run.engine import execute
from clbench.run.plan import plan_runs
from clbench.spec import BenchmarkSpec, NetworkSpec

CPU = torch.device("cpu")
FAST = dataclasses.replace(TINY_TRAINING, max_epochs=2)
# samples: A = (1, 0), B = (0, 1); shared head W = [[1, 0], [0, 2]], b = 0: logits(A) = (1, 0), logits(B) = (0, 2)
A, B = [1.0, 0.0], [0.0, 1.0]


def domain_spec(kind: str = "rotated", n_tasks: int = 3) -> BenchmarkSpec:
    """The tiny MLP benchmark as `n_tasks` rotations (or permutations) of a 10-class data set, domain scenario."""
    spec = tiny_spec("mlp", kind="permuted", n_tasks=n_tasks, training=FAST)
    return dataclasses.replace(spec, data=dataclasses.replace(spec.data, kind=kind, scenario="domain"))


def hand_approach(method: str, n_tasks: int = 2):  # type: ignore[no-untyped-def]
    """`method` in the domain scenario over 2 inputs, a 2-unit identity body and heads of 2 classes (tied)."""
    spec = dataclasses.replace(domain_spec(), network=NetworkSpec(kind="mlp", hidden=(2,)))
    resolved = resolve(spec, method)
    context = ApproachContext(spec.network, resolved.training, (2,), (2,) * n_tasks, CPU, 0, "domain")
    approach = resolved.cls(context, resolved.hyperparameters)
    net = approach.multihead
    with torch.no_grad():
        net.layers[0].weight.copy_(torch.eye(2))
        net.layers[0].bias.zero_()
        net.heads[0].weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 2.0]]))
        net.heads[0].bias.zero_()
    return approach


# ---------------------------------------------------------------------- the shared head, by hand

def test_every_task_picks_the_one_shared_head_and_its_class_offsets_are_zero() -> None:
    approach = hand_approach("sgd", n_tasks=3)
    heads = approach.multihead.heads
    assert heads[0] is heads[1] is heads[2] and len(heads) == 3
    assert approach.context.class_offsets == (0, 0, 0)
    assert approach.multihead.distinct_heads(3) == [0]
    assert [name for name, _ in approach.network.named_parameters()] == [
        "layers.0.weight", "layers.0.bias", "heads.0.weight", "heads.0.bias"]  # stored once
    seen = approach.seen_logits(torch.tensor([A, B]), 3)  # "every class": the one head's 2 outputs, not 3 x 2
    assert seen.tolist() == [[1.0, 0.0], [0.0, 2.0]]


@pytest.mark.parametrize("method", ["sgd", "er", "joint", "agem", "derpp", "lwf"])
def test_a_batch_of_two_tasks_enters_the_loss_on_the_shared_head_with_the_class_within_its_task(method: str) -> None:
    approach = hand_approach(method)
    # task 1 sample A class 0; task 2 sample B class 1; task 2 sample A class 1 (the same class index as task 1's
    # class 1: no offset, unlike the class scenario's 2 + 1)
    batch = Batch(torch.tensor([A, B, A]), torch.tensor([0, 1, 1]), -1, torch.tensor([0, 1, 1]))
    loss, correct = approach.scenario_cross_entropy(approach.multihead.features(batch.inputs), batch, stage=1)
    # logits (1, 0), (0, 2), (1, 0); -log softmax at the targets: log(1 + e^-1), log(1 + e^-2), log(1 + e^1)
    by_hand = (math.log(1 + math.exp(-1)) + math.log(1 + math.exp(-2)) + math.log(1 + math.exp(1))) / 3
    assert loss.item() == pytest.approx(by_hand, rel=1e-6)
    assert int(correct) == 2  # A -> class 0 (right for task 1, wrong for task 2's class 1); B -> class 1
    loss.backward()
    assert approach.multihead.heads[1].weight.grad is approach.multihead.heads[0].weight.grad is not None


def test_the_base_loss_of_a_later_tasks_batch_is_the_shared_heads_cross_entropy() -> None:
    from clbench.approaches.datatypes import StepInfo

    approach = hand_approach("sgd")
    batch = Batch(torch.tensor([B, A]), torch.tensor([1, 1]), 1)  # task 2: B class 1, A class 1
    loss = approach.loss(batch, StepInfo(1, 0, 0, 1))
    assert loss.item() == pytest.approx((math.log(1 + math.exp(-2)) + math.log(1 + math.exp(1))) / 2, rel=1e-6)


def test_a_domain_run_evaluates_once_on_the_shared_head() -> None:
    approach = hand_approach("sgd")
    images = torch.tensor([[[[255, 0]]], [[[0, 255]]], [[[255, 0]]]], dtype=torch.uint8)  # A, B, A
    transform = InputTransform(torch.zeros(2, 1), torch.ones(2, 1), None, flatten=True)
    data = LabelledData(images, torch.tensor([0, 1, 1]), torch.full((3,), 1), transform, 1)  # task 2's test set
    evaluations = approach.evaluate_task(data, 1, 2)
    assert list(evaluations) == [TASK_AWARE]  # no second, identical task-agnostic evaluation
    assert evaluations[TASK_AWARE].accuracy == pytest.approx(2 / 3)  # A -> 0 (right), B -> 1 (right), A -> 0
    assert not approach.predicts_without_task_id()


def test_lwf_distils_the_shared_head_once() -> None:
    from clbench.approaches.regularizers import distillation_loss

    approach = hand_approach("lwf", n_tasks=3)
    approach.end_task(0, None)  # type: ignore[arg-type]  # the previous model: the hand-set weights
    with torch.no_grad():
        approach.multihead.heads[0].weight.copy_(torch.tensor([[0.0, 1.0], [1.0, 0.0]]))
    inputs = torch.tensor([A, B])
    features = approach.multihead.features(inputs)
    distillation = approach.distillation(inputs, features, stage=2)  # two earlier tasks, one head
    # now logits(A) = (0, 1), logits(B) = (1, 0); before (1, 0) and (0, 2); T = 1
    expected = distillation_loss(torch.tensor([[0.0, 1.0], [1.0, 0.0]]), torch.tensor([[1.0, 0.0], [0.0, 2.0]]), 1.0)
    assert distillation.tolist() == pytest.approx(expected.tolist(), rel=1e-6)


@pytest.mark.parametrize("method", ["si", "mas", "imm-mean", "imm-mode"])
def test_the_shared_head_is_protected_like_the_body(method: str) -> None:
    approach = hand_approach(method)
    names = [name for name, _ in named_shared_parameters(approach.multihead)]
    assert "heads.0.weight" in names and "heads.0.bias" in names
    spec = tiny_spec("mlp")
    resolved = resolve(spec, method)
    context = ApproachContext(spec.network, resolved.training, (784,), (4, 4, 2), CPU, 0, "task")
    task_net = resolved.cls(context, resolved.hyperparameters).multihead
    assert not any(name.startswith("heads.") for name, _ in named_shared_parameters(task_net))


# ---------------------------------------------------------------------- refusals

@pytest.mark.parametrize("method", sorted(name for name, cls in REGISTRY.items() if cls.needs_task_id or
                                          cls.refuses_domain))
def test_approaches_that_need_the_task_id_are_refused_before_any_run(method: str, tmp_path: Path) -> None:
    with pytest.raises(SpecError) as error:
        plan_runs(domain_spec(), [method], [0], tmp_path)
    message = str(error.value)
    assert "\n" not in message and f"approach {method} " in message and "data.scenario=domain" in message
    assert not (tmp_path / "tiny").exists()


def test_the_refused_approaches_are_those_that_need_the_task_id_and_icarl() -> None:
    refused = {name for name, cls in REGISTRY.items() if scenario_refusal(cls, "domain") is not None}
    assert refused == {"adahat", "bic", "gdumb", "hat", "packnet", "pathnet", "pnn", "icarl", "lucir", "supsup", "wsn",
                       "er-ace", "xder"}
    assert all(scenario_refusal(cls, "task") is None for cls in REGISTRY.values())
    # the class scenario: refused by GPM alone (`refuses_class`: one softmax over every head moves earlier heads)
    assert {name for name, cls in REGISTRY.items() if scenario_refusal(cls, "class") is not None} == {"gpm"}


def test_a_network_without_tied_heads_is_refused_in_the_domain_scenario() -> None:
    from clbench.approaches.sgd import SGD

    class Untied(SGD):
        def build_network(self) -> MultiHeadNet:
            return super().build_network() if self.context.scenario != "domain" else self._untied()

        def _untied(self) -> MultiHeadNet:
            from clbench.nets import build_network

            return build_network(self.context.network, self.context.input_shape, self.context.head_sizes)

    spec = domain_spec()
    resolved = resolve(spec, "sgd")
    context = ApproachContext(spec.network, resolved.training, (784,), (10, 10), CPU, 0, "domain")
    with pytest.raises(SpecError, match="one head shared by every task"):
        Untied(context, resolved.hyperparameters)


# ---------------------------------------------------------------------- every approach that runs

RUNS = sorted(name for name, cls in REGISTRY.items() if scenario_refusal(cls, "domain") is None)


@pytest.mark.parametrize("method", RUNS)
def test_every_approach_runs_in_the_domain_scenario_with_one_evaluation(method: str, tmp_path: Path) -> None:
    [plan] = plan_runs(domain_spec(), [method], [0], tmp_path)
    outcome = execute(plan, device=CPU, loader=synthetic_loader(n_train=160, n_test=60))
    frame = pd.DataFrame(outcome.rows)
    assert (frame["scenario"] == "domain").all() and set(frame["evaluation"]) == {TASK_AWARE}
    assert not frame.duplicated(["stage", "task", "split"]).any()  # one row per cell and split
    assert frame["accuracy"].between(0, 1).all() and not frame["accuracy"].isna().any()
    test = frame[(frame["split"] == "test") & (frame["stage"] >= 1) & (frame["task"] <= frame["stage"])]
    matrix = accuracy_matrix(test)
    assert matrix.shape == (3, 3) and is_complete_matrix(matrix)
    assert plan.config["data"]["scenario"] == "domain" and plan.config["data"]["kind"] == "rotated"
