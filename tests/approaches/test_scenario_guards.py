"""The class scenario's targets, losses and stored rows, by hand on a network whose weights are set.

The network (tests/handnet.py): features = the input itself (2 values), then three linear heads of 2, 3 and 4
classes, so that every logit is written down by hand. In the class scenario the heads side by side are one output:
task 1's classes at global indices 0-1, task 2's at 2-4, task 3's at 5-8 (offsets 0, 2, 5).
"""

from __future__ import annotations

import math

import pytest
import torch
from handnet import approach_of, hand_net, hand_tasks, input_net
from synthetic import tiny_spec

from clbench.approaches.datatypes import TASK_AGNOSTIC, TASK_AWARE, StepInfo
from clbench.approaches.sgd import SGD
from clbench.data.batches import Batch
from clbench.run.plan import plan_runs
from clbench.run.rows import evaluate_stage_rows

# ---------------------------------------------------------------------- the targets of a batch that mixes tasks

MIXED = Batch(torch.zeros(4, 2), torch.tensor([1, 2, 0, 0]), -1, torch.tensor([0, 1, 2, 1]))


@pytest.mark.parametrize("method", ["sgd", "er", "derpp", "icarl", "agem", "joint"])
def test_a_batch_that_mixes_tasks_has_global_targets_at_each_task_offset(method: str) -> None:
    approach = approach_of(method, "class")
    # task ids (0, 1, 2, 1), local labels (1, 2, 0, 0); offsets (0, 2, 5): (0 + 1, 2 + 2, 5 + 0, 2 + 0)
    assert approach.class_targets(MIXED).tolist() == [1, 4, 5, 2]
    one_task = Batch(torch.zeros(2, 2), torch.tensor([0, 2]), 1)
    assert approach.class_targets(one_task).tolist() == [2, 4]  # task 2: offset 2


# Bias-only heads with logits ln(w): softmax over the 9 classes is w / 12 for w = (1, 2 | 1, 1, 3 | 1, 1, 1, 1).
WEIGHTED = ([[[0, 0]] * 2, [[0, 0]] * 3, [[0, 0]] * 4],
            [[0, math.log(2)], [0, 0, math.log(3)], [0, 0, 0, 0]])


@pytest.mark.parametrize("method", ["sgd", "er", "derpp", "icarl", "agem", "joint"])
def test_the_class_scenario_loss_of_a_mixed_batch_uses_each_samples_global_class(method: str) -> None:
    approach = approach_of(method, "class")
    approach.network = hand_net(*WEIGHTED)
    loss, correct = approach.scenario_cross_entropy(MIXED.inputs, MIXED, 2)
    # global targets (1, 4, 5, 2): w = 2, 3, 1, 1 -> cross-entropies ln(12/2), ln(12/3), ln 12, ln 12
    assert loss.item() == pytest.approx((math.log(6) + math.log(4) + 2 * math.log(12)) / 4, rel=1e-6)  # 2.0367
    assert correct.item() == 1  # the argmax is class 4 (w = 3): only the second sample's


def test_er_trains_replayed_samples_as_their_own_tasks_classes() -> None:
    er = approach_of("er", "class")
    er.network = hand_net(*WEIGHTED)
    er.begin_task(2, hand_tasks())
    # the memory: (task 1, label 1), (task 2, label 2), (task 2, label 0); all replayed (64 >= 3, the order of a
    # mean does not matter)
    er.buffer.set_contents(torch.zeros(3, 1, 1, 2, dtype=torch.uint8), torch.tensor([1, 2, 0]),
                           torch.tensor([0, 1, 1]))
    batch = Batch(torch.zeros(1, 2), torch.tensor([0]), 2, images=torch.zeros(1, 1, 1, 2, dtype=torch.uint8))
    loss = er.training_step(batch, StepInfo(2, 0, 0, 1), torch.optim.SGD(er.network.parameters(), lr=0.0))
    # global targets: the batch's 5 + 0 = 5 (w 1), replayed 0 + 1 = 1 (w 2), 2 + 2 = 4 (w 3), 2 + 0 = 2 (w 1)
    assert loss.item() == pytest.approx((math.log(12) + math.log(6) + math.log(4) + math.log(12)) / 4, rel=1e-6)


# ---------------------------------------------------------------------- the stored loss of each evaluation

def test_the_stored_task_agnostic_loss_is_over_every_class_seen_and_the_task_aware_one_over_the_tasks_head(
        tmp_path) -> None:  # type: ignore[no-untyped-def]
    approach = approach_of("sgd", "class")
    approach.network = input_net()
    [plan] = plan_runs(tiny_spec("mlp", scenario="class"), ["sgd"], [0], tmp_path)
    header = dict.fromkeys(("clbench_version", "git_commit", "torch_version", "cuda_version", "device",
                            "hostname", "started_utc"))
    rows = evaluate_stage_rows(plan, approach, hand_tasks(), 1, None, header)  # after task 2: candidates tasks 1-2
    stored = {(row["task"], row["evaluation"]): (row["loss"], row["accuracy"]) for row in rows
              if row["task"] <= 2 and row["split"] == "test"}
    # task 1, own head: A (1, 0) label 0 -> ln(1 + e) - 1; B (0, 0) label 1 -> ln 2; argmax A 0 (right), B 0 (the
    # first of a tie: wrong)
    assert stored[1, TASK_AWARE] == pytest.approx(((math.log(1 + math.e) - 1 + math.log(2)) / 2, 0.5))  # 0.5032
    # task 1 over the 5 classes of tasks 1-2: A (1, 0, 0, 0, 0) class 0 -> ln(4 + e) - 1; B (0, 0, 0, 2, 0) class 1
    # -> ln(4 + e^2); argmax A 0 (right), B 3 (wrong)
    e2 = math.exp(2)
    assert stored[1, TASK_AGNOSTIC] == pytest.approx(((math.log(4 + math.e) - 1 + math.log(4 + e2)) / 2, 0.5))  # 1.6687
    # task 2, own head: A (0, 0, 0) label 0 -> ln 3; B (0, 2, 0) label 1 -> ln(2 + e^2) - 2; both argmaxes right
    assert stored[2, TASK_AWARE] == pytest.approx(((math.log(3) + math.log(2 + e2) - 2) / 2, 1.0))  # 0.6691
    # task 2 over the 5 classes: A class 2 -> ln(4 + e); B class 3 -> ln(4 + e^2) - 2; argmax A 0 (wrong), B 3 (right)
    assert stored[2, TASK_AGNOSTIC] == pytest.approx(((math.log(4 + math.e) + math.log(4 + e2) - 2) / 2, 0.5))  # 1.1687


# ---------------------------------------------------------------------- the validation loss and the penalty

class QuarterPenalty(SGD):
    """SGD with a constant penalty of 0.25."""

    def penalty(self, stage: int) -> torch.Tensor:
        return torch.tensor(0.25)


def test_the_class_scenario_validation_loss_adds_the_penalty_once_per_sample() -> None:
    approach = approach_of("sgd", "class", QuarterPenalty)
    approach.network = input_net()
    batch = hand_tasks()[1].valid.batch(slice(None))  # task 2: A label 0, B label 1
    loss, correct = approach.validation_loss(batch, 1)
    # over the 5 classes of tasks 1-2: A (1, 0, 0, 0, 0) class 2 -> ln(4 + e), B (0, 0, 0, 2, 0) class 3 ->
    # ln(4 + e^2) - 2; plus 2 x 0.25
    by_hand = math.log(4 + math.e) + math.log(4 + math.exp(2)) - 2 + 2 * 0.25  # 2.8375
    assert loss.item() == pytest.approx(by_hand, rel=1e-6)
    assert correct.item() == 1  # B
    # the mean over the split, as the learning-rate schedule and early stopping read it
    assert approach.evaluate_validation(hand_tasks()[1].valid, 1).loss == pytest.approx(by_hand / 2, rel=1e-6)


def test_the_task_scenario_validation_loss_adds_the_penalty_once_per_sample() -> None:
    approach = approach_of("sgd", "task", QuarterPenalty)
    approach.network = input_net()
    batch = hand_tasks()[1].valid.batch(slice(None))
    loss, correct = approach.validation_loss(batch, 1)
    # task 2's head: A (0, 0, 0) label 0 -> ln 3, B (0, 2, 0) label 1 -> ln(2 + e^2) - 2; plus 2 x 0.25
    assert loss.item() == pytest.approx(math.log(3) + math.log(2 + math.exp(2)) - 2 + 2 * 0.25, rel=1e-6)  # 1.8382
    assert correct.item() == 2

