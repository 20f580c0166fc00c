"""iCaRL's two losses against values worked out by hand, its validation loss, its class means (flipped exemplars
included or not) and their place in a checkpoint.

Notation in the comments: L2 = ln 2, L3 = ln 3; sigmoid(0) = 1/2, sigmoid(ln 3) = 3/4, sigmoid(-ln 3) = 1/4;
BCE(p, t) = -(t ln p + (1 - t) ln(1 - p)), so BCE(1/2, t) = L2 for every t, BCE(3/4, 1) = 2 L2 - L3,
BCE(3/4, 0) = BCE(1/4, 1) = 2 L2, BCE(3/4, 1/2) = 2 L2 - L3 / 2, BCE(3/4, 3/4) = 2 L2 - 3 L3 / 4.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from synthetic import TINY_TRAINING, make_approach, synthetic_loader, tiny_spec, tiny_tasks

from clbench.approaches.datatypes import StepInfo
from clbench.approaches.replay.functions import class_means, icarl_loss, nearest_mean_scores
from clbench.approaches.replay.icarl import ICaRL, ICaRLHyperparameters
from clbench.errors import SpecError
from clbench.run.checkpoints import load_checkpoint
from clbench.run.engine import execute
from clbench.run.plan import plan_runs
from clbench.spec.fields import build

L2, L3 = math.log(2), math.log(3)


def test_icarl_loss_by_hand() -> None:
    # 2 samples x 3 outputs; output 0 is an earlier class, its target the previous network's sigmoid.
    # sample 0 (class 0, an exemplar): p = (3/4, 3/4, 1/2), t = (sigmoid(ln 3) = 3/4, 0, 0):
    #   (2 L2 - 3 L3 / 4) + 2 L2 + L2 = 5 L2 - 3 L3 / 4, over 3 outputs
    # sample 1 (class 2): p = (3/4, 1/2, 1/4), t = (sigmoid(0) = 1/2, 0, 1): (2 L2 - L3 / 2) + L2 + 2 L2
    logits = torch.tensor([[L3, L3, 0.0], [L3, 0.0, -L3]])
    old = torch.tensor([[L3], [0.0]])
    value = icarl_loss(logits, torch.tensor([0, 2]), old)
    assert value.tolist() == pytest.approx([(5 * L2 - 0.75 * L3) / 3, (5 * L2 - 0.5 * L3) / 3], rel=1e-6)
    # no earlier class: the one-hot targets alone; sample 0 (class 0): BCE(3/4, 1) + 2 L2 + L2
    first = icarl_loss(logits, torch.tensor([0, 2]), logits[:, :0])
    assert float(first[0]) == pytest.approx((5 * L2 - L3) / 3, rel=1e-6)


def with_heads(approach: ICaRL, biases: list[list[float]]) -> None:
    """Every head's weights zero and its biases `biases[t]`: each head outputs its biases for any input."""
    with torch.no_grad():
        for head, bias in zip(approach.multihead.heads, biases):
            head.weight.zero_()
            head.bias.copy_(torch.tensor(bias))


def icarl_at_task_2(scenario: str, **hparams: object) -> ICaRL:
    """iCaRL on the tiny 3-task sequence (heads of 4, 4, 2 classes) while it learns task index 1.

    Previous network: head 0 outputs (0, ln 3, 0, 0). Current network: heads 0 and 1 output (ln 3, 0, 0, 0).
    """
    spec = tiny_spec("mlp", scenario=scenario)
    approach = make_approach("icarl", spec, tiny_tasks(spec), **hparams)
    with_heads(approach, [[0.0, L3, 0.0, 0.0], [0.0] * 4, [0.0] * 2])
    approach.load_extra_state({"previous_network": approach.snapshot()})  # as a checkpoint restores it
    with_heads(approach, [[L3, 0.0, 0.0, 0.0], [L3, 0.0, 0.0, 0.0], [0.0] * 2])
    return approach


def task_2_batch(scenario: str):  # type: ignore[no-untyped-def]
    batch = tiny_tasks(tiny_spec("mlp", scenario=scenario))[1].valid.batch(slice(None))
    n, n0 = batch.targets.shape[0], int((batch.targets == 0).sum())
    assert 0 < n0 < n  # both kinds of sample below
    return batch, n, n0


# The paper's loss over the 8 classes seen, per sample: the 4 earlier outputs, p = (3/4, 1/2, 1/2, 1/2) against
# the previous network's (1/2, 3/4, 1/2, 1/2): (2 L2 - L3 / 2) + 3 L2 = 5 L2 - L3 / 2 (the same for every sample);
# task 2's outputs, p = (3/4, 1/2, 1/2, 1/2): class 0: (2 L2 - L3) + 3 L2, another class: 2 L2 + 3 L2
PAPER_CLASS_0 = (10 * L2 - 1.5 * L3) / 8
PAPER_OTHER = (10 * L2 - 0.5 * L3) / 8
DISTILLATION = 5 * L2 - 0.5 * L3  # FACIL's: the sum over the 4 earlier classes of the batch's mean BCE


@pytest.mark.parametrize("scenario", ["class", "task"])
def test_icarl_trains_with_the_papers_loss_by_default(scenario: str) -> None:
    approach = icarl_at_task_2(scenario)
    assert approach.hparams.loss == "paper"
    batch, n, n0 = task_2_batch(scenario)
    total = n0 * PAPER_CLASS_0 + (n - n0) * PAPER_OTHER  # the same in both scenarios
    assert approach.loss(batch, StepInfo(1, 0, 0, 1)).item() == pytest.approx(total / n, rel=1e-5)
    loss, correct = approach.validation_loss(batch, 1)
    assert loss.item() == pytest.approx(total, rel=1e-5)  # summed over the batch
    # class scenario: the argmax over the 8 outputs is class 0 of task 1, never right; task scenario: the argmax of
    # the sample's own head (ln 3, 0, 0, 0) is its class 0
    assert int(correct) == (0 if scenario == "class" else n0)


@pytest.mark.parametrize("scenario", ["class", "task"])
def test_icarl_facil_loss_is_cross_entropy_plus_lamb_times_distillation(scenario: str) -> None:
    approach = icarl_at_task_2(scenario, loss="facil", lamb=2.0)
    batch, n, n0 = task_2_batch(scenario)
    if scenario == "class":  # over the 8 outputs (ln 3, 0, 0, 0, ln 3, 0, 0, 0): sum of exponentials 12
        cross_entropy = n0 * math.log(12 / 3) + (n - n0) * math.log(12)
    else:  # on the own head (ln 3, 0, 0, 0): sum of exponentials 6
        cross_entropy = n0 * math.log(6 / 3) + (n - n0) * math.log(6)
    mean = approach.loss(batch, StepInfo(1, 0, 0, 1)).item()
    assert mean == pytest.approx(cross_entropy / n + 2.0 * DISTILLATION, rel=1e-5)
    loss, correct = approach.validation_loss(batch, 1)
    assert int(correct) == (0 if scenario == "class" else n0)
    # the validation loss (lr schedule, early stopping) is a sum over the batch: the distillation n times too
    assert loss.item() == pytest.approx(cross_entropy + 2.0 * n * DISTILLATION, rel=1e-5)


def test_icarl_losses_differ_and_stage_0_has_no_distillation() -> None:
    spec = tiny_spec("mlp", scenario="class")
    batch = tiny_tasks(spec)[0].valid.batch(slice(None))
    n, n0 = batch.targets.shape[0], int((batch.targets == 0).sum())
    paper = make_approach("icarl", spec, tiny_tasks(spec))
    facil = make_approach("icarl", spec, tiny_tasks(spec), loss="facil")
    for approach in (paper, facil):
        with_heads(approach, [[L3, 0.0, 0.0, 0.0], [0.0] * 4, [0.0] * 2])
    # task 0's 4 outputs (ln 3, 0, 0, 0): paper, class 0: (2 L2 - L3) + 3 L2, another: 2 L2 + 3 L2
    paper_sum = n0 * (5 * L2 - L3) / 4 + (n - n0) * 5 * L2 / 4
    assert paper.validation_loss(batch, 0)[0].item() == pytest.approx(paper_sum, rel=1e-5)
    # facil: the cross-entropy over the 4 outputs alone, sum of exponentials 6
    facil_sum = n0 * math.log(2) + (n - n0) * math.log(6)
    assert facil.validation_loss(batch, 0)[0].item() == pytest.approx(facil_sum, rel=1e-5)


def test_icarl_refuses_a_distillation_weight_with_the_papers_loss() -> None:
    where, source = "approaches.icarl", "test.yaml"
    for lamb in (0.0, 0.5, 2.0):  # any weight but 1, below it as well as above
        with pytest.raises(SpecError, match="lamb.*paper"):
            build(ICaRLHyperparameters, {"lamb": lamb}, where=where, source=source)
    assert build(ICaRLHyperparameters, {"lamb": 1.0}, where=where, source=source).lamb == 1.0
    with pytest.raises(SpecError, match="expected one of paper, facil"):
        build(ICaRLHyperparameters, {"loss": "authors"}, where=where, source=source)
    assert build(ICaRLHyperparameters, {"lamb": 2.0, "loss": "facil"}, where=where, source=source).lamb == 2.0
    assert build(ICaRLHyperparameters, {}, where=where, source=source).loss == "paper"


def test_icarl_predicts_by_the_class_means_restored_from_a_checkpoint(tmp_path: Path) -> None:
    """`clbench evaluate` rebuilds the approach from a checkpoint: the means must come back with it."""
    spec = tiny_spec("mlp", training=replace(TINY_TRAINING, max_epochs=1), scenario="class")
    spec = replace(spec, approaches={"icarl": {"buffer_size": 30}})
    [plan] = plan_runs(spec, ["icarl"], [0], tmp_path)
    execute(plan, device=torch.device("cpu"), loader=synthetic_loader(n_train=160, n_test=60))
    state = load_checkpoint(plan.run_dir, 2)["approach"]
    stored = state["extra"]["means"]  # (10 classes, F)
    assert not torch.isnan(stored).any()

    tasks = tiny_tasks(spec)
    restored = make_approach("icarl", spec, tasks, buffer_size=30)
    restored.load_state(state)
    assert restored.means is not None and torch.equal(restored.means, stored)
    inputs = tasks[0].test.batch(slice(None)).inputs
    restored.network.eval()
    with torch.no_grad():
        scores = restored.predict_classes(inputs, 3)  # (B, 10)
        by_means = nearest_mean_scores(restored.multihead.features(inputs), stored)
        by_heads = restored.seen_logits(restored.multihead.features(inputs), 3)
    assert torch.equal(scores, by_means)
    assert not torch.equal(scores, by_heads)  # what predict_classes gives without the means


def test_class_means_with_flipped_features_by_hand() -> None:
    # class 0: phi = (3/5, 4/5), (0, 1): mean (0.3, 0.9); flipped: (0, 1), (1, 0): mean (0.5, 0.5);
    # their average (0.4, 0.7), normalised by sqrt(0.65). Class 1: (6, 8) -> (0.6, 0.8) either way. Class 2: none.
    features = torch.tensor([[3.0, 4.0], [0.0, 2.0], [6.0, 8.0]])
    flipped = torch.tensor([[0.0, 5.0], [7.0, 0.0], [3.0, 4.0]])
    labels = torch.tensor([0, 0, 1])
    means = class_means(features, labels, 3, flipped)
    root = math.sqrt(0.65)
    assert means[0].tolist() == pytest.approx([0.4 / root, 0.7 / root], rel=1e-6)
    assert means[1].tolist() == pytest.approx([0.6, 0.8], rel=1e-6)
    assert torch.isnan(means[2]).all()
    # without the mirrors: (0.3, 0.9) normalised by sqrt(0.9)
    assert class_means(features, labels, 3)[0].tolist() == pytest.approx([0.3 / math.sqrt(0.9),
                                                                           0.9 / math.sqrt(0.9)], rel=1e-6)


def icarl_means(memory: tuple[torch.Tensor, torch.Tensor, torch.Tensor], flip_means: bool) -> torch.Tensor:
    """The class means of an untrained iCaRL (tiny class-scenario sequence) holding `memory`."""
    spec = tiny_spec("mlp", scenario="class")
    tasks = tiny_tasks(spec)
    approach = make_approach("icarl", spec, tasks, buffer_size=64, flip_means=flip_means)
    approach.begin_task(0, tasks)
    approach.buffer.set_contents(*memory)
    approach.update_means()
    assert approach.means is not None
    return approach.means


def test_icarl_flip_means_averages_each_exemplar_with_its_mirror_image() -> None:
    """With flip_means, each class's mean is that of its exemplars and their left-right mirrors together (the
    average of the two means over as many samples): a memory holding both, without the switch, gives the same."""
    train = tiny_tasks(tiny_spec("mlp", scenario="class"))[0].train
    images, labels = train.images[:12], train.labels[:12]  # (12, 1, 28, 28) uint8, classes of task 0
    task_ids = torch.zeros_like(labels)
    assert not torch.equal(images, images.flip(3))
    flipped = icarl_means((images, labels, task_ids), flip_means=True)
    doubled = icarl_means((torch.cat([images, images.flip(3)]), labels.repeat(2), task_ids.repeat(2)), False)
    plain = icarl_means((images, labels, task_ids), flip_means=False)
    seen = ~torch.isnan(plain[:, 0])
    assert seen.sum() >= 2
    assert torch.allclose(flipped[seen], doubled[seen], atol=1e-6)
    assert not torch.allclose(flipped[seen], plain[seen], atol=1e-3)
