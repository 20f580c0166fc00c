"""ER-ACE (`clbench.approaches.replay.er_ace`): which logits each loss sees, masked by hand, against Mammoth's
`models/er_ace.py` `observe`; its cosine head; its first task; its task scenario; its checkpointed state."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
import torch
from stopping import Stop, StopInTask2, same_numbers
from synthetic import TINY_TRAINING, synthetic_loader, tiny_spec
from torch.nn import functional

from clbench.approaches.datatypes import ApproachContext, StepInfo
from clbench.approaches.registry import REGISTRY
from clbench.approaches.replay.er_ace import CosineHead, ace_kept_classes, asymmetric_logits
from clbench.data.batches import Batch
from clbench.data.transform import InputTransform
from clbench.errors import SpecError
from clbench.run.engine import execute
from clbench.run.plan import plan_runs
from clbench.spec import NetworkSpec

HEADS = (4, 4, 2)  # classes 0-3 (task 0), 4-7 (task 1), 8-9 (task 2)
TRANSFORM = InputTransform(torch.zeros(3, 1), torch.full((3, 1), 0.5), None, True)  # pixels / 255 * 2, flattened


def hand_made(scenario: str = "class", class_loss: str = "seen", **hparams: object):  # type: ignore[no-untyped-def]
    training = replace(TINY_TRAINING, class_loss=class_loss)
    context = ApproachContext(NetworkSpec(kind="mlp", hidden=(6,)), training, (1, 1, 5), HEADS,
                              torch.device("cpu"), 0, scenario)
    cls = REGISTRY["er-ace"]
    torch.manual_seed(0)
    approach = cls(context, replace(cls.hyperparameters_class(), **hparams))
    approach.network.eval()
    approach.transform = TRANSFORM  # what begin_task sets: the replayed images' normalisation
    return approach


def task_batch(task: int, targets: list[int], seed: int) -> Batch:
    """A batch of task `task` (targets within the task): random uint8 images and their inputs."""
    generator = torch.Generator().manual_seed(seed)
    n = len(targets)
    images = torch.randint(0, 256, (n, 1, 1, 5), generator=generator, dtype=torch.uint8)
    return Batch(TRANSFORM(images, task), torch.tensor(targets), task, None, images)


def fill_memory(approach, batch: Batch) -> None:  # type: ignore[no-untyped-def]
    """The memory holds exactly `batch` (replayed through `TRANSFORM`)."""
    approach.buffer.add_reservoir(batch.images, batch.targets, torch.full_like(batch.targets, batch.task),
                                  torch.Generator())


def every_logit(approach, inputs: torch.Tensor) -> torch.Tensor:  # type: ignore[no-untyped-def]
    """Every head side by side on `inputs`: (B, 10)."""
    features = approach.multihead.features(inputs)
    return torch.cat([head(features) for head in approach.multihead.heads], dim=1)


def mean_cross_entropy(logits: torch.Tensor, columns: list[int], targets: list[int]) -> float:
    """-mean log softmax over the explicitly chosen `columns` at each sample's target column (a global class)."""
    log_p = torch.log_softmax(logits[:, columns], dim=1)
    return -sum(float(log_p[i, columns.index(t)]) for i, t in enumerate(targets)) / len(targets)


def test_the_kept_classes_by_hand() -> None:
    seen = torch.zeros(10, dtype=torch.bool)
    seen[:6] = True  # classes 0-5 met in incoming batches; the largest is 5
    # present {5}: kept 5 and every class from 5 on (the current task's unmet 6, 7 and, over 10 logits, 8, 9)
    assert ace_kept_classes(torch.tensor([5, 5]), seen, 8).tolist() == [False] * 5 + [True] * 3
    # present {4}: 4 kept, 5 kept (it is the largest seen), 0-3 masked
    assert ace_kept_classes(torch.tensor([4]), seen, 10).tolist() == [False] * 4 + [True] * 6
    seen[6] = True  # a current-task class met before but absent from this batch is masked (Mammoth's rule)
    assert ace_kept_classes(torch.tensor([6, 4]), seen, 8).tolist() == [False] * 4 + [True, False, True, True]


def test_masked_logits_take_no_probability_and_no_gradient() -> None:
    logits = torch.tensor([[1.0, 2.0, 3.0, 0.5], [0.0, -1.0, 2.0, 1.0]], requires_grad=True)
    kept = torch.tensor([False, True, True, False])
    loss = functional.cross_entropy(asymmetric_logits(logits, kept), torch.tensor([1, 2]))
    loss.backward()
    assert loss.item() == pytest.approx(mean_cross_entropy(logits.detach(), [1, 2], [1, 2]), rel=1e-6)
    assert logits.grad is not None
    assert logits.grad[:, [0, 3]].abs().max().item() == 0.0
    assert logits.grad[:, [1, 2]].abs().min().item() > 0.0


def test_the_cosine_head_by_hand() -> None:
    head = CosineHead(2, 3, scale=10.0)
    with torch.no_grad():
        head.weight.copy_(torch.tensor([[2.0, 0.0], [0.0, 0.5], [-3.0, -4.0]]))
    logits = head(torch.tensor([[3.0, 4.0]]))
    # unit features (0.6, 0.8); unit rows (1, 0), (0, 1), (-0.6, -0.8): cosines 0.6, 0.8, -1 (eps 1e-5 aside)
    assert logits[0].tolist() == pytest.approx([6.0, 8.0, -10.0], rel=1e-4)
    assert head.bias is None


@pytest.mark.parametrize(("class_loss", "n_logits"), [("seen", 8), ("all", 10)])
@pytest.mark.parametrize("cosine", [True, False])
def test_the_incoming_loss_is_masked_and_the_replayed_one_is_over_every_class(class_loss: str, n_logits: int,
                                                                              cosine: bool) -> None:
    """Stage 1: incoming targets 4 and 6 (global), class 6 the largest met: kept 4, 6, 7 (and 8, 9 with `all`);
    masked 0-3 and 5. The replayed task-0 samples: the cross-entropy over all n_logits, nothing masked."""
    approach = hand_made(class_loss=class_loss, cosine_classifier=cosine, replay_batch_size=5)
    approach.seen_classes[:4] = True  # task 0 met
    old = task_batch(0, [0, 3, 1, 2, 3], seed=1)
    fill_memory(approach, old)
    batch = task_batch(1, [0, 2, 2, 0, 0, 2], seed=2)  # classes 4 and 6
    loss = approach.objective(batch, 1)
    logits = every_logit(approach, batch.inputs).detach()
    kept = [4, 6, 7] + ([8, 9] if class_loss == "all" else [])
    incoming = mean_cross_entropy(logits, kept, [4, 6, 6, 4, 4, 6])
    replayed = mean_cross_entropy(every_logit(approach, old.inputs).detach(), list(range(n_logits)), [0, 3, 1, 2, 3])
    assert loss.item() == pytest.approx(incoming + replayed, rel=1e-5)
    assert approach.seen_classes.tolist() == [True] * 5 + [False, True] + [False] * 3


def test_no_gradient_reaches_the_masked_classes_heads_from_the_incoming_batch() -> None:
    approach = hand_made(cosine_classifier=True)
    approach.seen_classes[:4] = True
    batch = task_batch(1, [0, 1, 0], seed=3)  # classes 4, 5: masked 0-3; kept 4-7
    approach.objective(batch, 1).backward()  # the memory is empty: the incoming loss alone
    heads = approach.multihead.heads
    assert heads[0].weight.grad is not None and heads[0].weight.grad.abs().max().item() == 0.0
    assert heads[1].weight.grad is not None and heads[1].weight.grad[:2].abs().min().item() > 0.0
    assert heads[2].weight.grad is None  # task 2's head is not among the seen logits


def test_the_first_task_masks_nothing_and_replays_nothing_unless_task_free() -> None:
    approach = hand_made(replay_batch_size=4)
    fill_memory(approach, task_batch(0, [0, 1, 2, 3], seed=4))
    batch = task_batch(0, [1, 1, 2], seed=5)  # classes 1, 2: class 0 would be masked, 3 kept (>= 2)
    logits = every_logit(approach, batch.inputs).detach()
    state = approach.replay_generator.get_state()
    loss = approach.objective(batch, 0)
    assert loss.item() == pytest.approx(mean_cross_entropy(logits, [0, 1, 2, 3], [1, 1, 2]), rel=1e-5)
    assert torch.equal(approach.replay_generator.get_state(), state)  # nothing drawn from the memory

    task_free = hand_made(replay_batch_size=4, task_free=True)
    old = task_batch(0, [0, 1, 2, 3], seed=4)
    fill_memory(task_free, old)
    loss = task_free.objective(batch, 0)
    replayed = mean_cross_entropy(every_logit(task_free, old.inputs).detach(), [0, 1, 2, 3], [0, 1, 2, 3])
    assert loss.item() == pytest.approx(mean_cross_entropy(logits, [1, 2, 3], [1, 1, 2]) + replayed, rel=1e-5)


def test_in_the_task_scenario_each_sample_is_on_its_own_head() -> None:
    """ER's loss written as two means: the incoming batch on task 1's head, the replayed on task 0's."""
    approach = hand_made(scenario="task", replay_batch_size=3)
    old = task_batch(0, [3, 0, 1], seed=6)
    fill_memory(approach, old)
    batch = task_batch(1, [1, 1, 2], seed=7)  # class 0 and 3 of task 1 absent: nothing is masked on the head
    loss = approach.objective(batch, 1)
    logits = every_logit(approach, batch.inputs).detach()
    incoming = mean_cross_entropy(logits, [4, 5, 6, 7], [5, 5, 6])
    replayed = mean_cross_entropy(every_logit(approach, old.inputs).detach(), [0, 1, 2, 3], [3, 0, 1])
    assert loss.item() == pytest.approx(incoming + replayed, rel=1e-5)


def test_the_step_stores_the_batch_after_the_optimiser_step_and_checkpoints_the_seen_classes() -> None:
    """Stage 1, the memory empty: the step's loss is the incoming batch's alone (the batch is not replayed to
    itself), with the weights before the step; then the batch is in the memory."""
    approach = hand_made(buffer_size=10)
    batch = task_batch(1, [0, 1, 2], seed=8)  # classes 4, 5, 6: 0-3 masked
    logits = every_logit(approach, batch.inputs).detach()
    optimizer = torch.optim.SGD(approach.network.parameters(), lr=0.5)
    loss = approach.training_step(batch, StepInfo(1, 0, 0, 1), optimizer)
    assert loss.item() == pytest.approx(mean_cross_entropy(logits, [4, 5, 6, 7], [4, 5, 6]), rel=1e-5)
    assert not torch.equal(every_logit(approach, batch.inputs).detach(), logits)  # the optimiser stepped
    assert approach.buffer.contents().labels.tolist() == [0, 1, 2]
    restored = hand_made(buffer_size=10)
    restored.load_extra_state(approach.extra_state())
    assert restored.seen_classes.tolist() == [False] * 4 + [True] * 3 + [False] * 3
    assert len(restored.buffer) == 3


def test_the_domain_scenario_is_refused(tmp_path: Path) -> None:
    spec = tiny_spec("mlp", kind="permuted", scenario="domain")
    with pytest.raises(SpecError, match="er-ace"):
        plan_runs(replace(spec, approaches={"er-ace": {}}), ["er-ace"], [0], tmp_path)


@pytest.mark.parametrize("scenario", ["class", "task"])
def test_a_tiny_run_learns_and_keeps_its_memory(scenario: str, tmp_path: Path) -> None:
    spec = tiny_spec("mlp", training=replace(TINY_TRAINING, max_epochs=2), scenario=scenario)
    spec = replace(spec, approaches={"er-ace": {"buffer_size": 40}})
    [plan] = plan_runs(spec, ["er-ace"], [0], tmp_path)
    outcome = execute(plan, device=torch.device("cpu"), loader=synthetic_loader(n_train=160, n_test=60))
    frame = pd.DataFrame(outcome.rows)
    test = frame[(frame["split"] == "test") & (frame["stage"] == 3) & (frame["task"] <= 3)]
    assert set(test["evaluation"]) == {"task-aware", "task-agnostic"}
    assert test["accuracy"].notna().all() and not math.isnan(test["accuracy"].mean())
    assert (frame.loc[frame["stage"] >= 1, "memory_samples"] == 40).all()


def test_a_class_scenario_run_resumes_with_the_uninterrupted_numbers(tmp_path: Path) -> None:
    """Stopped in task 2 (after task 1's checkpoint), then resumed: the memory and its stream come back (the seen
    classes too, though at a task's start only the earlier tasks' are in them, below every class the mask reads)."""
    spec = tiny_spec("mlp", training=replace(TINY_TRAINING, max_epochs=3), scenario="class")
    spec = replace(spec, approaches={"er-ace": {"buffer_size": 30}})

    def run(results: Path, observer: StopInTask2 | None = None):  # type: ignore[no-untyped-def]
        [plan] = plan_runs(spec, ["er-ace"], [0], results)
        return execute(plan, device=torch.device("cpu"), loader=synthetic_loader(), observer=observer)

    reference = run(tmp_path / "reference")
    with pytest.raises(Stop):
        run(tmp_path / "stopped", StopInTask2())
    torch.rand(1000)
    resumed = run(tmp_path / "stopped")
    assert resumed.resumed_after_stage == 1 and same_numbers(reference.rows, resumed.rows)
