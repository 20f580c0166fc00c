"""GDumb: the greedy class-balanced memory, the lr of its fit and CutMix against hand-computed values, and the fit
from scratch (nothing of the run's history survives it)."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd
import pytest
import torch
from synthetic import TINY_TRAINING, make_approach, synthetic_loader, tiny_spec, tiny_tasks

from clbench.approaches.datatypes import StepInfo
from clbench.approaches.replay.gdumb import cutmix, gdumb_lr, greedy_balanced_memory
from clbench.run.checkpoints import load_checkpoint
from clbench.run.engine import execute
from clbench.run.plan import plan_runs


# ------------------------------------------------------------------------------------------- the sampler
def test_the_memory_fills_while_it_has_room_then_keeps_what_is_balanced() -> None:
    generator = torch.Generator().manual_seed(0)
    # capacity 4, empty: samples 0-3 (classes 0, 0, 1, 1) fill slots 0-3; sample 4 (class 0) and 5 (class 1) find
    # their class as large as the largest (2 = 2): dropped, and nothing is drawn
    state = generator.get_state()
    assert greedy_balanced_memory([], [0, 0, 1, 1, 0, 1], 4, generator) == [0, 1, 2, 3]
    assert torch.equal(generator.get_state(), state)
    # stored (0, 1, 1) with room for 2: incoming 0 and 2 take slots 3 and 4 (sources 3 + 0, 3 + 1), the third
    # incoming sample (class 1: 2 = the largest) is dropped
    assert greedy_balanced_memory([0, 1, 1], [0, 2, 1], 5, generator) == [0, 1, 2, 3, 4]


def test_a_sample_of_a_smaller_class_replaces_one_of_the_single_largest_class() -> None:
    # full memory (0, 0, 0, 1): class 1 (1 < 3) replaces one of the class-0 slots 0-2, drawn uniformly; class 0 is the
    # only largest class, so one draw: slot [0, 1, 2][randint(3)]
    seed = 3
    slot = [0, 1, 2][int(torch.randint(3, (1,), generator=torch.Generator().manual_seed(seed)))]
    expected = [0, 1, 2, 3]
    expected[slot] = 4  # incoming sample 0 (4 stored before it)
    assert greedy_balanced_memory([0, 0, 0, 1], [1], 4, torch.Generator().manual_seed(seed)) == expected
    # a second class-1 sample then finds 2 = 2 (after the first one's replacement): dropped
    result = greedy_balanced_memory([0, 0, 0, 1], [1, 1], 4, torch.Generator().manual_seed(seed))
    assert result == expected


def test_a_hand_traced_stream_ends_balanced_whatever_the_draws() -> None:
    # capacity 4, stream classes 0 0 0 0 1 1 2 2 0 (samples 0-8): the first four fill; 4 and 5 (class 1) replace
    # two class-0 samples (counts 2, 2); 6 (class 2) replaces one of the tied classes 0 or 1 (2, 1, 1 in some
    # order); 7 (class 2, 1 < 2) replaces one of the class now at 2; 8 (class 0, 1 < 2) replaces one of class 2's
    # two. Whatever the draws: counts 0: 2, 1: 1, 2: 1, and sample 8 is kept.
    stream = [0, 0, 0, 0, 1, 1, 2, 2, 0]
    for seed in range(20):
        sources = greedy_balanced_memory([], stream, 4, torch.Generator().manual_seed(seed))
        assert len(sources) == 4 and 8 in sources
        assert Counter(stream[source] for source in sources) == {0: 2, 1: 1, 2: 1}


def test_evictions_are_uniform_over_the_largest_class_and_over_tied_classes() -> None:
    generator = torch.Generator().manual_seed(0)
    repetitions = 4000
    single = Counter(greedy_balanced_memory([0, 0, 0, 0], [1], 4, generator).index(4) for _ in range(repetitions))
    tied = Counter(greedy_balanced_memory([0, 0, 1, 1], [2], 4, generator).index(4) for _ in range(repetitions))
    # each slot Binomial(4000, 1/4): standard error 27; 5 standard errors = 137
    for counts in (single, tied):
        assert set(counts) == {0, 1, 2, 3}
        assert all(abs(n - repetitions / 4) < 137 for n in counts.values())


def test_a_long_stream_of_three_classes_ends_as_balanced_as_the_capacity_allows() -> None:
    stream = torch.randint(3, (600,), generator=torch.Generator().manual_seed(1)).tolist()
    sources = greedy_balanced_memory([], stream, 10, torch.Generator().manual_seed(2))
    assert sorted(Counter(stream[source] for source in sources).values()) == [3, 3, 4]


# ------------------------------------------------------------------------------------------- the fit's pieces
def test_the_lr_of_the_fit_by_hand() -> None:
    maxlr, minlr = 0.05, 0.0005
    half = minlr + (maxlr - minlr) * 0.5  # cos(pi / 2) = 0
    by_hand = {0: 0.005, 1: 0.05, 2: 0.05, 3: half, 4: 0.05,
               5: minlr + (maxlr - minlr) * (1 + math.sqrt(0.5)) / 2, 6: half,
               7: minlr + (maxlr - minlr) * (1 - math.sqrt(0.5)) / 2, 8: 0.05, 16: 0.05}
    for epoch, lr in by_hand.items():
        assert gdumb_lr(epoch, maxlr, minlr) == pytest.approx(lr, rel=1e-12), epoch


def test_the_lr_of_the_fit_is_the_authors_loop_over_torchs_scheduler() -> None:
    maxlr, minlr = 0.05, 0.0005
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=maxlr)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(optimizer, T_0=1, T_mult=2, eta_min=minlr)
    for epoch in range(70):  # drimpossible/GDumb src/main.py lines 19-28
        if epoch <= 0:
            optimizer.param_groups[0]["lr"] = maxlr * 0.1
        elif epoch == 1:
            optimizer.param_groups[0]["lr"] = maxlr
        else:
            scheduler.step()
        assert gdumb_lr(epoch, maxlr, minlr) == pytest.approx(optimizer.param_groups[0]["lr"], rel=1e-9), epoch


class FixedDraws:
    """A stand-in for numpy's Generator with CutMix's draws fixed: lam 0.75, then the box centre (2, 7)."""

    def __init__(self) -> None:
        self.centres = [2, 7]

    def beta(self, a: float, b: float) -> float:
        return 0.75

    def integers(self, high: int) -> int:
        return self.centres.pop(0)


def test_cutmix_by_hand() -> None:
    inputs = torch.arange(3, dtype=torch.float32).view(3, 1, 1, 1).expand(3, 2, 8, 8).clone()  # sample i: all i
    mixed, partner, lam = cutmix(inputs, 1.0, cast(np.random.Generator, FixedDraws()),
                                 torch.Generator().manual_seed(0))
    # lam 0.75: side int(8 x sqrt(0.25)) = 4 on both axes; rows 2 -+ 2 -> 0..4, columns 7 -+ 2 -> 5..9 clipped to 8:
    # a 4 x 3 box of 64 pixels, so 1 - 12 / 64 of each image stays its own
    assert lam == 1 - 12 / 64
    assert sorted(partner.tolist()) == [0, 1, 2]
    box = torch.zeros(8, 8, dtype=torch.bool)
    box[0:4, 5:8] = True
    for i in range(3):
        assert torch.equal(mixed[i][:, box], torch.full((2, 12), float(partner[i])))
        assert torch.equal(mixed[i][:, ~box], torch.full((2, 52), float(i)))
    assert torch.equal(inputs[:, 0, 0, 0], torch.arange(3.0))  # the inputs are left as they were


# ------------------------------------------------------------------------------------------- the approach
def gdumb(scenario: str = "class", **hparams: Any):  # type: ignore[no-untyped-def]
    spec = tiny_spec("mlp", scenario=scenario)
    tasks = tiny_tasks(spec)
    settings = {"buffer_size": 20, "fitting_epochs": 3, "replay_batch_size": 8, **hparams}
    return make_approach("gdumb", spec, tasks, **settings), tasks


def test_the_stream_takes_no_gradient_step_and_fills_the_memory() -> None:
    approach, tasks = gdumb()
    before = approach.snapshot()
    approach.begin_task(0, tasks)
    batch = tasks[0].train.batch(torch.arange(32), training=True)
    loss = approach.training_step(batch, StepInfo(0, 0, 0, 1), approach.make_optimizer(0, 0.05))
    assert float(loss) == 0.0
    assert all(torch.equal(before[key], value) for key, value in approach.snapshot().items())
    assert len(approach.buffer) == 20
    # the first 20 samples fill it; of the next 12 only those of a class below the largest can enter
    assert approach.buffer.contents().images.shape[0] == 20


def test_the_stream_is_passed_once_without_early_stopping() -> None:
    approach, _ = gdumb()
    assert approach.training_protocol.max_epochs == 1 and not approach.training_protocol.early_stopping
    assert approach.context.training.max_epochs == TINY_TRAINING.max_epochs


def fill(approach, tasks, stage: int) -> None:  # type: ignore[no-untyped-def]
    """The same memory for any approach: the first 20 training samples of tasks 0..stage, set directly."""
    parts = [tasks[task].train.batch(slice(0, 20 // (stage + 1))) for task in range(stage + 1)]
    images = torch.cat([part.images for part in parts])
    labels = torch.cat([part.targets for part in parts])
    task_ids = torch.cat([torch.full((part.targets.shape[0],), task) for task, part in enumerate(parts)])
    approach.buffer.set_contents(images, labels, task_ids)


@pytest.mark.parametrize(("scenario", "batch_norm"), [("class", False), ("task", False), ("class", True)])
def test_the_fitted_network_depends_on_the_memory_alone(scenario: str, batch_norm: bool) -> None:
    """With `batch_norm` the history also moved the norms' running statistics (buffers in the snapshot)."""
    first, tasks = gdumb(scenario, cutmix_alpha=1.0, batch_norm=batch_norm)
    second, _ = gdumb(scenario, cutmix_alpha=1.0, batch_norm=batch_norm)
    # two histories: the second approach's network trained on a task, its generators and the global RNG moved
    second.begin_task(0, tasks)
    optimizer = torch.optim.SGD(second.network.parameters(), lr=0.5)
    for start in range(0, 64, 16):
        batch = tasks[0].train.batch(torch.arange(start, start + 16), training=True)
        second.scenario_cross_entropy(second.multihead.features(batch.inputs), batch, 0)[0].backward()
        optimizer.step()
        optimizer.zero_grad()
    torch.randint(10, (5,), generator=second.replay_generator)
    torch.rand(100)
    untrained = first.snapshot()
    assert any(not torch.equal(untrained[key], value) for key, value in second.snapshot().items())
    for approach in (first, second):
        approach.begin_task(1, tasks)
        fill(approach, tasks, 1)
        approach.end_task(1, tasks)
    fitted = first.snapshot()
    assert all(torch.equal(fitted[key], value) for key, value in second.snapshot().items())
    assert any(not torch.equal(fitted[key], untrained[key]) for key in fitted)  # the fit did train
    # another stage's fit draws other initial weights and another order
    first.end_task(2, tasks)
    assert any(not torch.equal(fitted[key], value) for key, value in first.snapshot().items())


@pytest.mark.parametrize("batch_norm", [False, True])
def test_the_fit_learns_the_memory(batch_norm: bool) -> None:
    # with batch norm, 18 samples in batches of 17: the last batch of each pass is one sample, which it skips (torch
    # refuses to train a batch norm on one sample)
    approach, tasks = gdumb("class", fitting_epochs=40, buffer_size=30, replay_batch_size=17 if batch_norm else 10,
                            batch_norm=batch_norm)
    approach.begin_task(2, tasks)
    fill(approach, tasks, 2)
    memory = approach.buffer.contents()
    approach.end_task(2, tasks)
    approach.network.eval()
    inputs = approach.transform(memory.images, memory.task_ids)
    with torch.no_grad():
        predicted = approach.predict_classes(inputs, 3).argmax(dim=1)
    targets = approach.offsets[memory.task_ids] + memory.labels
    assert float((predicted == targets).float().mean()) >= 0.9  # chance: 0.1


def test_a_run_reports_its_balanced_memory(tmp_path: Path) -> None:
    spec = tiny_spec("mlp", training=replace(TINY_TRAINING, max_epochs=2), scenario="class")
    spec = replace(spec, approaches={"gdumb": {"buffer_size": 12, "fitting_epochs": 2}})
    [plan] = plan_runs(spec, ["gdumb"], [0], tmp_path)
    outcome = execute(plan, device=torch.device("cpu"), loader=synthetic_loader(n_train=600, n_test=60))
    rows = pd.DataFrame(outcome.rows)
    after = rows[rows["stage"] >= 1]  # stage 0: the untrained network's row, before any task
    assert set(after["memory_samples"]) == {12}
    assert set(after["memory_bytes"]) == {12 * (28 * 28 + 8 + 8)}  # uint8 image, int64 label and task id
    offsets = torch.tensor([0, 4, 8])
    for stage, classes, by_hand in ((0, 4, [3, 3, 3, 3]), (1, 8, [1, 1, 1, 1, 2, 2, 2, 2]),
                                    (2, 10, [1] * 8 + [2] * 2)):
        buffer = load_checkpoint(plan.run_dir, stage)["approach"]["extra"]["buffer"]
        counts = torch.bincount(buffer["labels"] + offsets[buffer["task_ids"]], minlength=10)[:classes]
        assert sorted(counts.tolist()) == by_hand, stage
    assert set(rows["evaluation"]) == {"task-aware", "task-agnostic"}


def test_every_norm_of_the_authors_mlp_divides_by_the_authors_eps() -> None:
    """In eval mode with running means 0 and running variances 0 (scale 1, shift 0), each norm, hidden or head,
    turns x into x / sqrt(0 + eps): with the authors' --bn_eps 1e-6 (src/opts.py line 40) 1000 x, where torch's
    default 1e-5 would give 316 x. The logits written out by hand from the linear layers' weights."""
    approach, tasks = gdumb("class", batch_norm=True)
    network = approach.network.eval()
    with torch.no_grad():
        for norm in [*network.norms, *(head.norm for head in network.heads)]:
            norm.running_mean.zero_()
            norm.running_var.zero_()
            norm.weight.fill_(1.0)
            norm.bias.zero_()
        x = tasks[0].valid.batch(slice(0, 5)).inputs
        h = x.flatten(1)
        for layer in network.layers:
            h = torch.relu((h @ layer.weight.T + layer.bias) / 1e-3)
        expected = torch.cat([(h @ head.linear.weight.T + head.linear.bias) / 1e-3 for head in network.heads], 1)
        assert torch.allclose(network.all_heads(network.features(x)), expected, rtol=1e-4, atol=1e-3)


def test_batch_norm_is_the_authors_mlp_and_refused_on_other_networks() -> None:
    from clbench.errors import SpecError
    from clbench.nets.mlp import BatchNormMLP

    approach, _ = gdumb("class", batch_norm=True)
    network = approach.network
    assert isinstance(network, BatchNormMLP)
    assert [norm.eps for norm in network.norms] == [1e-6, 1e-6]  # the authors' --bn_eps
    assert [head.norm.num_features for head in network.heads] == [4, 4, 2]  # one norm per head's outputs
    spec = tiny_spec("alexnet", scenario="class")
    with pytest.raises(SpecError, match=r"gdumb.batch_norm.*network.kind alexnet.*gdumb.batch_norm=false"):
        make_approach("gdumb", spec, tiny_tasks(spec), buffer_size=20, batch_norm=True)


@pytest.mark.parametrize("crop", [False, True])
def test_the_fit_crops_the_memory_only_with_crop(crop: bool) -> None:
    """`crop`: every batch of the fit is a random crop of the stored images (the stored ones stay as they are);
    without it the batches are the stored images' inputs."""
    approach, tasks = gdumb("class", crop=crop)
    approach.begin_task(1, tasks)
    fill(approach, tasks, 1)
    stored = approach.buffer.contents().images.clone()
    seen = []

    def record(batch, stage, optimizer, generator, rng):  # type: ignore[no-untyped-def]
        seen.append(torch.equal(batch.inputs, approach.transform(batch.images, batch.task_ids)))

    approach.fit_step = record
    approach.end_task(1, tasks)
    assert len(seen) == 3 * 3  # 3 passes of 20 samples in batches of 8
    assert (not any(seen)) if crop else all(seen)
    assert torch.equal(approach.buffer.contents().images, stored)


def test_the_crop_only_translates_never_mirrors() -> None:
    """`crop` (the authors' RandomCrop(28, padding=4) on MNIST, no flip): each sample of every batch of the fit is
    one of the 81 windows of 28 x 28 of its stored image padded by 4 zero pixels on each side. The stored images
    (synthetic noise) are not mirror-symmetric, so a mirrored crop is none of them."""
    approach, tasks = gdumb("class", crop=True)
    approach.begin_task(1, tasks)
    fill(approach, tasks, 1)
    matched = []

    def record(batch, stage, optimizer, generator, rng):  # type: ignore[no-untyped-def]
        padded = torch.nn.functional.pad(batch.images, (4, 4, 4, 4))  # (B, C, 36, 36)
        for image, inputs, task_id in zip(padded, batch.inputs, batch.task_ids):
            assert not torch.equal(image, image.flip(-1))
            windows = torch.stack([image[:, top:top + 28, left:left + 28] for top in range(9) for left in range(9)])
            candidates = approach.transform(windows, task_id.repeat(81))  # (81, ...) as the network sees them
            matched.append(any(torch.equal(inputs, candidate) for candidate in candidates))

    approach.fit_step = record
    approach.end_task(1, tasks)
    assert len(matched) == 3 * 20 and all(matched)
