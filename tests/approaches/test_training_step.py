"""The training step: the default `training_step` calls its hooks in the order `base.py` documents, and an approach
that overrides `training_step` alone (here a gradient projection before the optimiser step, written as a plugin
would be) trains through the engine and resumes with the uninterrupted numbers."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch
from stopping import Stop, StopInTask2, same_numbers
from synthetic import TINY_TRAINING, make_approach, synthetic_loader, tiny_spec, tiny_tasks

import clbench.api as cl
from clbench.approaches import base
from clbench.approaches.optim import PlainSGD
from clbench.approaches.registry import register
from clbench.approaches.sgd import SGD
from clbench.run.engine import execute
from clbench.run.plan import plan_runs

CPU = torch.device("cpu")
# Dropout makes the global torch RNG matter: a resume that did not restore it would give other numbers.
SPEC = replace(tiny_spec("mlp", training=replace(TINY_TRAINING, max_epochs=3)),
               network=replace(tiny_spec("mlp").network, dropout=0.2))


# ---------------------------------------------------------------------------------------------- the default step
class RecordingOptimizer(PlainSGD):
    """Plain SGD that writes its calls into `calls`."""

    def __init__(self, parameters: list[torch.nn.Parameter], lr: float, calls: list[str]) -> None:
        super().__init__(parameters, lr=lr)
        self.calls = calls

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.calls.append("zero_grad")
        super().zero_grad(set_to_none)

    def step(self) -> None:
        self.calls.append("step")
        super().step()


class Recording(SGD):
    """SGD whose hooks write their calls into `calls` (backward: a hook on the loss's gradient)."""

    def __init__(self, context: cl.ApproachContext, hyperparameters: cl.Hyperparameters) -> None:
        super().__init__(context, hyperparameters)
        self.calls: list[str] = []

    def make_optimizer(self, stage: int, lr: float) -> RecordingOptimizer:
        return RecordingOptimizer(list(self.trainable_parameters(stage)), lr, self.calls)

    def loss(self, batch: cl.Batch, step: cl.StepInfo) -> torch.Tensor:
        self.calls.append("loss")
        loss = super().loss(batch, step)
        loss.register_hook(lambda gradient: self.calls.append("backward"))
        return loss

    def before_step(self, step: cl.StepInfo) -> None:
        assert all(p.grad is not None for p in self.multihead.body_parameters())  # after backward
        self.calls.append("before_step")

    def after_step(self, step: cl.StepInfo) -> None:
        self.calls.append("after_step")


@pytest.mark.parametrize("clip", [10000.0, 0.0])
def test_the_default_step_calls_the_hooks_in_the_documented_order(clip: float,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """loss, then `backward_and_step` (zero the gradients, backward, before_step, clipping, the optimiser step),
    then after_step: once per batch; no clipping with clip_grad_norm 0."""
    tasks = tiny_tasks(SPEC)
    sgd = make_approach("sgd", SPEC, tasks)
    approach = Recording(sgd.context, replace(sgd.hparams, clip_grad_norm=clip))
    clip_grad_norm = base.clip_grad_norm

    def recorded_clip(parameters: list[torch.nn.Parameter], max_norm: float) -> torch.Tensor:
        approach.calls.append("clip")
        return clip_grad_norm(parameters, max_norm)

    monkeypatch.setattr(base, "clip_grad_norm", recorded_clip)
    data = tasks[0].train
    loss, n_batches = approach.train_epoch(0, 0, data, approach.make_optimizer(0, 0.05))
    one_step = ["loss", "zero_grad", "backward", "before_step", *(["clip"] if clip else []), "step", "after_step"]
    assert n_batches == -(-len(data) // SPEC.training.batch_size) > 1
    assert approach.calls == one_step * n_batches and loss > 0


# ---------------------------------------------------------------------------------------------- a step of its own
class OrthogonalStep(cl.Approach):
    """A plugin whose step is its own: each body weight matrix's gradient projected orthogonal to the weights
    themselves before the optimiser step (a projection in the spirit of GPM's, Saha et al. 2021, with a trivial
    subspace), so that the step leaves each matrix's norm unchanged to first order. It overrides `training_step`
    and nothing else."""

    name = "test-orthogonal-step"
    summary = "gradients projected orthogonal to the weights (a test of `training_step`)"

    def training_step(self, batch: cl.Batch, step: cl.StepInfo, optimizer: cl.StepOptimizer) -> torch.Tensor:
        with self.autocast():
            loss = self.loss(batch, step)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        with torch.no_grad():
            for weight in self.multihead.body_parameters():
                if weight.grad is not None and weight.dim() > 1:
                    weight.grad -= (weight.grad * weight).sum() / (weight * weight).sum() * weight
        optimizer.step()
        return loss.detach()


@pytest.fixture
def orthogonal_step(restored_registry: None) -> str:  # noqa: ARG001  (the registry restored after the test)
    register(OrthogonalStep)
    return OrthogonalStep.name


def run(results: Path, method: str, observer=None):  # type: ignore[no-untyped-def]
    [plan] = plan_runs(SPEC, [method], [0], results)
    return execute(plan, device=CPU, loader=synthetic_loader(), observer=observer)


def test_a_step_of_its_own_moves_the_weights_orthogonally_to_them() -> None:
    tasks = tiny_tasks(SPEC)
    approach = OrthogonalStep(make_approach("sgd", SPEC, tasks).context, cl.Hyperparameters())
    approach.begin_task(0, tasks)
    approach.network.train()
    before = {name: p.detach().clone() for name, p in approach.multihead.named_parameters()}
    approach.training_step(approach.training_batch(tasks[0].train, torch.arange(32)), cl.StepInfo(0, 0, 0, 1),
                           approach.make_optimizer(0, 0.05))
    moved = 0
    for name, weight in approach.multihead.named_parameters():
        delta = weight.detach() - before[name]
        if name.startswith("layers.") and weight.dim() > 1:
            assert abs(float((delta * before[name]).sum())) < 1e-6 * float(delta.norm() * before[name].norm())
            moved += int(delta.abs().sum() > 0)
    assert moved == 2  # both hidden layers' matrices moved, along their projected gradients


def test_an_approach_overriding_only_training_step_trains_and_resumes(orthogonal_step: str, tmp_path: Path) -> None:
    reference = run(tmp_path / "reference", orthogonal_step)
    assert reference.status == "done"
    sgd = run(tmp_path / "sgd", "sgd")
    assert not same_numbers(reference.rows, sgd.rows)  # its step is not the default one
    learned = {(row["stage"], row["task"]) for row in reference.rows if row["task"] <= row["stage"]}
    assert learned == {(t, u) for t in (1, 2, 3) for u in range(1, t + 1)}  # stages and tasks 1-based
    assert all(0 <= row["accuracy"] <= 1 for row in reference.rows)
    with pytest.raises(Stop):
        run(tmp_path / "stopped", orthogonal_step, observer=StopInTask2())
    torch.rand(1000)  # whatever the process did meanwhile must not matter
    resumed = run(tmp_path / "stopped", orthogonal_step)
    assert resumed.status == "done" and resumed.resumed_after_stage == 1
    assert same_numbers(reference.rows, resumed.rows)
