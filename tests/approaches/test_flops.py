"""Counted FLOPs against hand counts (`clbench.approaches.flops`), the real-time stream in the base loop, and the
protocol check of `training.realtime`.

The network is one linear layer: the MLP without hidden layers in the class scenario with `class_loss: all`, so
every step computes the five heads of 2 classes side by side, one 784 -> 10 map. On a batch of B samples its
forward costs 2 B 784 10 FLOPs (a multiply-add is two), the gradient of its weight as much again, and the inputs
need no gradient: one SGD step is 4 B 784 10. The bias adds and the optimiser's update are element-wise, which
`FlopCounterMode` does not count.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from synthetic import TINY_TRAINING, make_approach, tiny_spec, tiny_tasks

from clbench.approaches.sgd import SGD
from clbench.errors import SpecError
from clbench.spec import NetworkSpec

B, M, INPUTS, OUTPUTS = 8, 8, 784, 10  # batch, replay batch, 28 x 28 pixels, five heads of 2
LINEAR = 2 * INPUTS * OUTPUTS  # FLOPs of one sample through the layer (forward), as much for its weight's gradient
STEP = 2 * LINEAR  # forward and the weight's gradient, per sample
TRAIN_SIZES = (57, 43)  # the synthetic tasks' training images (tasks 1 and 2): task 2 is 5 batches of 8 and one of 3


def one_layer_spec(method: str = "sgd", **settings: object):  # type: ignore[no-untyped-def]
    training = replace(TINY_TRAINING, max_epochs=1, early_stopping=False, batch_size=B, class_loss="all")
    spec = tiny_spec("mlp", training=training)
    return replace(spec, network=NetworkSpec(kind="mlp", hidden=()), approaches={method: settings},
                   data=replace(spec.data, classes_per_task=(2,), validation_fraction=0.0, scenario="class"))


def second_task_steps(method: str, **settings: object):  # type: ignore[no-untyped-def]
    """The approach after training tasks 1 and 2 (its memory filled on task 1), with task 2's count."""
    spec = one_layer_spec(method, **settings)
    tasks = tiny_tasks(spec)
    assert [len(tasks[u].train) for u in (0, 1)] == list(TRAIN_SIZES)
    approach = make_approach(method, spec, tasks)
    for stage in (0, 1):
        approach.flops.new_stage()
        with approach.flops.counted() as count:
            approach.learn_task(stage, tasks)
    return approach, count.flops


REPLAY = {"buffer_size": 40, "replay_batch_size": M}
# per step on task 2, by hand: the rows that go through the layer forward and backward
HAND_ROWS = {
    "sgd": ({}, B),
    "joint": ({}, B),  # tasks 1 and 2 together, one batch at a time
    "ewc": ({}, B),  # its penalty is element-wise; its Fisher estimate comes after the steps
    "er": (REPLAY, B + M),  # the batch and a replayed one, joined
    "er-ace": (REPLAY, B + M),
    "derpp": (REPLAY, B + M + M),  # the batch, a replayed batch for the logits' term, another for the labels'
    "xder": (REPLAY, B + M + M),
    "agem": (REPLAY, B + 40 // 5),  # the batch and the reference gradient on task 1's memory: 40 // 5 tasks = 8
    "gdumb": ({"buffer_size": 40, "fitting_epochs": 2, "replay_batch_size": M}, 0),  # the stream only stores
}


@pytest.mark.parametrize("method", sorted(HAND_ROWS))
def test_a_steps_counted_flops_are_the_hand_count(method: str) -> None:
    settings, rows = HAND_ROWS[method]
    approach, _ = second_task_steps(method, **settings)
    assert approach.flops.steps[("train", B)] == [rows * STEP] * 3  # the counted steps of task 2 (memory full)
    assert approach.flops.step_flops() == rows * STEP


def test_extra_passes_are_counted_derpp_over_er_over_sgd() -> None:
    costs = {method: second_task_steps(method, **HAND_ROWS[method][0])[0].flops.step_flops()
             for method in ("sgd", "er", "derpp")}
    assert costs["derpp"] > costs["er"] > costs["sgd"] > 0
    assert (costs["sgd"] * 3, costs["er"] * 3) == (costs["derpp"], costs["derpp"] * 2)  # 1 : 2 : 3 with M = B


def test_a_stage_counts_every_step_the_last_batch_on_its_own() -> None:
    _, sgd = second_task_steps("sgd")
    assert sgd == 43 * STEP  # 5 x 8 + 3 rows: the partial batch counted at its own size
    _, er = second_task_steps("er", **REPLAY)
    assert er == (43 + 6 * M) * STEP  # six steps, each replaying 8


def test_work_outside_the_steps_is_counted_gdumbs_fit() -> None:
    approach, flops = second_task_steps("gdumb", **HAND_ROWS["gdumb"][0])
    # the memory after task 2: 40 samples, the fit 2 epochs of 5 batches of 8, each an SGD step on the one layer
    assert approach.flops.steps[("gdumb-fit", M)] == [M * STEP] * 3
    assert flops == 2 * 5 * M * STEP


def test_ewcs_fisher_is_counted_each_batch_a_sampled_step() -> None:
    approach, flops = second_task_steps("ewc", fisher_batch_size=1)
    assert approach.flops.taken["fisher"] == 43  # task 2's 43 images, one per batch: 3 counted, 40 charged
    # the steps as sgd's; the Fisher's batches: forward and the weight's gradient over the 4 classes seen (2 tasks)
    assert flops == 43 * STEP + 43 * 2 * (2 * INPUTS * 4)


@pytest.mark.parametrize(("method", "settings", "kind"), [
    ("ewc", {"fisher_batch_size": 1}, "fisher"),
    ("lucir", {"buffer_size": 40, "finetune_epochs": 3, "replay_batch_size": M}, "lucir-finetune"),
    ("bic", {"buffer_size": 40, "bias_epochs": 5, "replay_batch_size": M}, "bic-bias"),
])
def test_a_loop_of_its_own_is_sampled_and_counts_as_if_counted_in_full(method, settings, kind, monkeypatch) -> None:
    approach, sampled = second_task_steps(method, **settings)
    assert approach.flops.taken[kind] > 3  # more steps than the counted ones: the rest are charged
    monkeypatch.setattr("clbench.approaches.flops.MEASURED_STEPS", 10**9)  # every step counted in full
    assert second_task_steps(method, **settings)[1] == sampled > 0


def test_an_evaluation_pass_is_forward_only() -> None:
    spec = one_layer_spec()
    tasks = tiny_tasks(spec)
    approach = make_approach("sgd", spec, tasks)
    data = tasks[0].test
    with approach.flops.counted() as count:
        approach.evaluate_task(data, 0, 1)  # both evaluations from one forward pass of the candidates' heads
    assert count.flops == len(data) * 2 * INPUTS * 2  # one candidate task: task 1's head of 2 classes, forward
    with approach.flops.counted() as count:
        approach.evaluate_task(data, 0, 5)  # every task a candidate: the five heads, the whole layer
    assert count.flops == len(data) * LINEAR


def test_the_stream_unit_is_an_sgd_step_and_draws_no_random_number() -> None:
    from clbench.approaches.base import Approach
    from clbench.approaches.flops import reference_step_flops

    spec = one_layer_spec()
    tasks = tiny_tasks(spec)
    approach = make_approach("er", spec, tasks, **REPLAY)
    batch = approach.training_batch(tasks[0].train, torch.arange(B))
    state = torch.random.get_rng_state()
    assert reference_step_flops(Approach, approach.context, batch, 0) == B * STEP
    assert torch.equal(torch.random.get_rng_state(), state)
    assert SGD.__dict__.keys() <= {"__module__", "__doc__", "name", "summary", "__firstlineno__",
                                   "__static_attributes__", "__qualname__"}  # SGD is the base's hooks


class TripleSGD(SGD):
    """SGD whose step does two more forward and backward passes (no update): a step of 3 units, by hand."""

    def training_step(self, batch, step, optimizer):  # type: ignore[no-untyped-def]
        for _ in range(2):
            self.loss(batch, step).backward()
        return super().training_step(batch, step, optimizer)


def realtime_approach(cls: type[SGD]) -> SGD:
    spec = one_layer_spec()
    spec = replace(spec, training=replace(spec.training, realtime=True))
    tasks = tiny_tasks(spec)
    approach = make_approach("sgd", spec, tasks)
    approach.__class__ = cls
    approach.flops.new_stage()
    approach.learn_task(0, tasks)
    return approach


def test_the_realtime_stream_trains_one_batch_in_three_for_a_step_of_three_units() -> None:
    approach = realtime_approach(TripleSGD)  # task 1: 57 images, 8 batches (7 of 8, one of 1)
    assert approach.flops.unit_flops == B * STEP
    assert approach.flops.step_flops() == 3 * B * STEP
    assert approach.flops.stream_batches == 8
    assert approach.flops.taken["train"] == 3  # batches 0, 3, 6
    plain = realtime_approach(SGD)
    assert (plain.flops.taken["train"], plain.flops.stream_batches) == (8, 8)


def test_realtime_needs_the_online_protocols_one_pass() -> None:
    from clbench.spec.sections import TrainingSpec, check_realtime

    with pytest.raises(SpecError, match=r"`training.realtime` is the online protocol's stream: it needs one pass"):
        check_realtime(TrainingSpec(realtime=True), "training", "spec.yaml")
    check_realtime(TrainingSpec(realtime=True, max_epochs=1, early_stopping=False), "training", "spec.yaml")
