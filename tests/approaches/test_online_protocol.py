"""The online protocol and the class scenario's loss: `training.early_stopping: false` (exactly max_epochs epochs at
the protocol's lr, the last weights kept), `data.validation_fraction: 0` (no validation split, no validation rows),
`training.class_loss` (seen / all: its loss by hand, stored with every row, noted in reports that mix the two),
`clip_grad_norm: 0` (no clipping), the config hashes of runs stored before those fields, and the shipped
seq-mnist spec (Mammoth's seq-MNIST with the DER paper's arguments)."""

from __future__ import annotations

import math
import shutil
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from synthetic import TINY_TRAINING, make_approach, synthetic_loader, tiny_spec, tiny_tasks

import clbench.approaches.base as base
from clbench.approaches.datatypes import ApproachContext, EpochLog, StepInfo
from clbench.approaches.registry import REGISTRY
from clbench.approaches.resolution import resolve
from clbench.data.batches import Batch, LabelledData
from clbench.data.tasks import build_tasks
from clbench.errors import SpecError
from clbench.report.loading import load_results
from clbench.report.tables import build_report
from clbench.run.engine import execute
from clbench.run.plan import plan_runs
from clbench.spec import BenchmarkSpec, NetworkSpec, TrainingSpec, load_benchmark
from clbench.spec.fields import identity_dict

CPU = torch.device("cpu")
ONLINE = replace(TINY_TRAINING, early_stopping=False, max_epochs=1)


def with_data(spec: BenchmarkSpec, **data: object) -> BenchmarkSpec:
    return replace(spec, data=replace(spec.data, **data))


def run_rows(spec: BenchmarkSpec, results: Path, method: str = "sgd") -> pd.DataFrame:
    """One engine run of `spec` on the synthetic data: its stored accuracy rows."""
    [plan] = plan_runs(spec, [method], [0], results)
    execute(plan, device=CPU, loader=synthetic_loader())
    return pd.read_parquet(plan.run_dir / "accuracy.parquet")


# ---------------------------------------------------------------------------------------------- early_stopping
def test_without_early_stopping_every_epoch_runs_at_the_lr_and_the_last_weights_are_kept(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Validation losses that only get worse: early stopping would decay the lr, stop and restore epoch 1's weights;
    without it, 3 epochs at lr 0.05 and the weights of the last optimiser step."""
    training = replace(TINY_TRAINING, early_stopping=False, max_epochs=3, patience=1, lr_factor=10.0, lr_min=0.01)
    spec = tiny_spec("mlp", training=training)
    tasks = tiny_tasks(spec)
    approach = make_approach("sgd", spec, tasks)

    def no_schedule(*args: object, **kwargs: object) -> None:
        raise AssertionError("PlateauSchedule used without early stopping")

    monkeypatch.setattr(base, "PlateauSchedule", no_schedule)
    monkeypatch.setattr(approach, "restore", lambda snapshot: pytest.fail("a snapshot was restored"))
    losses = iter([1.0, 2.0, 3.0])
    original_validation = approach.evaluate_validation
    monkeypatch.setattr(approach, "evaluate_validation",
                        lambda data, stage: replace(original_validation(data, stage), loss=next(losses)))
    optimizers, lrs, after_steps = [], [], []
    original_optimizer, original_after_step = approach.make_optimizer, approach.after_step

    def recorded_optimizer(stage: int, lr: float):  # type: ignore[no-untyped-def]
        optimizers.append(original_optimizer(stage, lr))
        return optimizers[-1]

    def recorded_after_step(step: StepInfo) -> None:
        original_after_step(step)
        lrs.extend(group["lr"] for group in optimizers[-1].param_groups)
        after_steps.append(approach.snapshot())

    monkeypatch.setattr(approach, "make_optimizer", recorded_optimizer)
    monkeypatch.setattr(approach, "after_step", recorded_after_step)
    initial = approach.snapshot()
    log = approach.learn_task(0, tasks)

    steps_per_epoch = -(-len(tasks[0].train) // training.batch_size)
    assert log.epochs == 3 and log.best_epoch == 3 and log.batches == 3 * steps_per_epoch
    assert log.final_lr == 0.05 and log.best_valid_loss == 3.0  # the last epoch's, not the best one's
    assert len(optimizers) == 1 and len(after_steps) == 3 * steps_per_epoch
    assert set(lrs) == {0.05}
    final = approach.network.state_dict()
    for key, value in after_steps[-1].items():
        assert torch.equal(final[key], value), key
    assert not torch.equal(initial["layers.0.weight"], final["layers.0.weight"])
    assert not torch.equal(after_steps[steps_per_epoch - 1]["layers.0.weight"], final["layers.0.weight"])


def test_the_online_single_pass_steps_once_per_batch_over_every_training_sample_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """max_epochs 1, no early stopping, a batch size that does not divide the training set: ceil(n / 7) optimiser
    steps, batches of 7 but the last, and each training sample in exactly one of them."""
    spec = tiny_spec("mlp", training=replace(ONLINE, batch_size=7))
    tasks = tiny_tasks(spec)
    train = tasks[0].train
    n_train = len(train)
    assert n_train % 7 != 0
    approach = make_approach("sgd", spec, tasks)
    batches: list[Batch] = []
    steps: list[StepInfo] = []
    original_loss, original_after_step = approach.loss, approach.after_step

    def recorded_loss(batch: Batch, step: StepInfo) -> torch.Tensor:
        batches.append(batch)
        return original_loss(batch, step)

    def recorded_after_step(step: StepInfo) -> None:
        steps.append(step)
        original_after_step(step)

    monkeypatch.setattr(approach, "loss", recorded_loss)
    monkeypatch.setattr(approach, "after_step", recorded_after_step)
    log = approach.learn_task(0, tasks)

    n_steps = math.ceil(n_train / 7)
    assert len(steps) == n_steps == log.batches and log.epochs == 1
    assert [step.batch for step in steps] == list(range(n_steps)) and {step.epoch for step in steps} == {0}
    assert [len(batch.targets) for batch in batches] == [7] * (n_steps - 1) + [n_train - 7 * (n_steps - 1)]

    def samples(images: torch.Tensor, labels: torch.Tensor) -> Counter[tuple[bytes, int]]:
        return Counter(zip((row.numpy().tobytes() for row in images.reshape(len(images), -1)), labels.tolist()))

    used = samples(torch.cat([b.images for b in batches]), torch.cat([b.targets for b in batches]))
    assert used == samples(train.images, train.labels)


# ---------------------------------------------------------------------------------------------- validation_fraction 0
def test_validation_fraction_0_keeps_every_training_sample_in_the_training_split() -> None:
    spec = with_data(tiny_spec("mlp", training=ONLINE), validation_fraction=0.0)
    labels = synthetic_loader()("mnist", "mnist28").train.labels
    per_class = np.bincount(labels, minlength=10)
    expected = [int(per_class[0:4].sum()), int(per_class[4:8].sum()), int(per_class[8:10].sum())]  # 4, 4, 2 classes
    tasks = build_tasks(spec.data, 0, synthetic_loader(), "cpu")
    assert [len(task.train) for task in tasks] == expected and sum(expected) == len(labels)
    assert [len(task.valid) for task in tasks] == [0, 0, 0]
    held_out = build_tasks(with_data(spec, validation_fraction=0.15).data, 0, synthetic_loader(), "cpu")
    assert all(len(task.valid) > 0 for task in held_out)

    assert min(expected) > 30
    subsampled = build_tasks(with_data(spec, max_train_samples=30).data, 0, synthetic_loader(), "cpu")
    assert [len(task.train) for task in subsampled] == [30, 30, 30]  # the subsample size itself, none held out
    assert [len(task.valid) for task in subsampled] == [0, 0, 0]


@pytest.mark.parametrize("validation_fraction", [0.0, 0.15])
def test_without_a_validation_split_the_epoch_logs_have_no_validation_numbers(validation_fraction: float) -> None:
    """No validation split: each epoch's validation loss and accuracy are NaN (not the 0 of a mean over no batch),
    and so is the task's; with one they are the split's numbers (a loss > 0)."""
    spec = with_data(tiny_spec("mlp", training=replace(ONLINE, max_epochs=2)), validation_fraction=validation_fraction)
    tasks = tiny_tasks(spec)
    approach = make_approach("sgd", spec, tasks)
    epochs: list[EpochLog] = []
    log = approach.learn_task(0, tasks, epochs.append)
    assert len(epochs) == 2 and log.epochs == 2
    numbers = [value for epoch in epochs for value in (epoch.valid_loss, epoch.valid_accuracy)] + [log.best_valid_loss]
    if validation_fraction == 0.0:
        assert all(math.isnan(value) for value in numbers), numbers
    else:
        assert all(math.isfinite(value) for value in numbers) and log.best_valid_loss > 0, numbers


def test_a_run_without_a_validation_split_stores_test_rows_and_no_validation_rows(tmp_path: Path) -> None:
    spec = tiny_spec("mlp", training=ONLINE)
    online = run_rows(with_data(spec, validation_fraction=0.0), tmp_path / "online")
    assert set(online["split"]) == {"test"}
    assert sorted(set(zip(online["stage"], online["task"]))) == [(s, u) for s in range(4) for u in (1, 2, 3)]
    assert online["accuracy"].notna().all()
    held_out = run_rows(spec, tmp_path / "held-out")  # validation_fraction 0.15
    assert set(held_out["split"]) == {"test", "validation"}
    assert len(held_out[held_out["split"] == "validation"]) == len(online)


# ---------------------------------------------------------------------------------------------- refusals
def test_early_stopping_without_a_validation_split_is_refused_naming_both_keys_but_random_runs() -> None:
    spec = with_data(tiny_spec("mlp"), validation_fraction=0.0)  # early_stopping true (the default)
    with pytest.raises(SpecError) as refused:
        resolve(spec, "sgd")
    assert "training.early_stopping" in str(refused.value) and "data.validation_fraction" in str(refused.value)
    assert "approach sgd" in str(refused.value)
    assert resolve(spec, "random").training.early_stopping  # trains nothing: accepted
    assert resolve(replace(spec, training=ONLINE), "sgd").training.early_stopping is False


@pytest.mark.parametrize(("validation_fraction", "early_stopping"), [(0.0, False), (0.15, False)])
def test_pathnet_needs_a_validation_split_and_early_stopping(validation_fraction: float,
                                                             early_stopping: bool) -> None:
    spec = with_data(tiny_spec("mlp", training=replace(TINY_TRAINING, early_stopping=early_stopping)),
                     validation_fraction=validation_fraction)
    with pytest.raises(SpecError, match="approach pathnet: its tournament") as refused:
        resolve(spec, "pathnet")
    assert "data.validation_fraction above 0" in str(refused.value)
    assert "training.early_stopping true" in str(refused.value)
    resolve(spec, "sgd")  # pathnet's own protocol problem refuses pathnet only
    resolve(with_data(tiny_spec("mlp"), validation_fraction=0.15), "pathnet")  # the paper's protocol: accepted


def test_a_protocol_one_approach_cannot_run_refuses_that_approach_only_not_the_others_of_the_spec() -> None:
    """mnist2 has a pathnet section and a pathnet grid, and hat's: `resolve` validates them for every method, but
    their protocol problems refuse pathnet and hat only (each through its section, or its grid, alone too)."""
    online = load_benchmark("mnist2", ["training.early_stopping=false"])
    assert "pathnet" in online.approaches and "pathnet" in online.grids
    assert resolve(online, "sgd").training.early_stopping is False
    sections_only = replace(online, grids={})
    grids_only = replace(online, approaches={k: v for k, v in online.approaches.items() if k != "pathnet"})
    for spec in (online, sections_only, grids_only):
        resolve(spec, "sgd")
    with pytest.raises(SpecError, match="approach pathnet: its tournament"):
        resolve(online, "pathnet")
    no_split = load_benchmark("mnist2", ["data.validation_fraction=0"])  # early stopping on
    assert resolve(no_split, "random").training.early_stopping
    with pytest.raises(SpecError, match="approach hat: training.early_stopping is true"):
        resolve(no_split, "hat")


# ---------------------------------------------------------------------------------------------- class_loss
LOGITS = [1.0, 2.0, 0.5, -1.0, 3.0, 0.0]  # the 3 heads' biases, side by side; every weight 0


def hand_made(method: str, scenario: str, class_loss: str):  # type: ignore[no-untyped-def]
    """An approach over 3 tasks of 2 classes whose heads output LOGITS for any input, and a batch of task 0
    (targets 0 and 1)."""
    training = replace(TINY_TRAINING, class_loss=class_loss)
    context = ApproachContext(NetworkSpec(kind="mlp", hidden=(4,)), training, (3,), (2, 2, 2), CPU, 0, scenario)
    cls = REGISTRY[method]
    approach = cls(context, cls.hyperparameters_class())
    with torch.no_grad():
        for head, biases in zip(approach.multihead.heads, (LOGITS[0:2], LOGITS[2:4], LOGITS[4:6])):
            head.weight.zero_()
            head.bias.copy_(torch.tensor(biases))
    batch = Batch(torch.randn(2, 3), torch.tensor([0, 1]), 0)
    return approach, batch


def cross_entropy(logits: list[float], target: int) -> float:
    return -logits[target] + math.log(sum(math.exp(z) for z in logits))


@pytest.mark.parametrize(("class_loss", "outputs"), [("seen", 2), ("all", 6)])
def test_the_class_scenario_cross_entropy_is_over_the_seen_classes_or_every_output(class_loss: str,
                                                                                   outputs: int) -> None:
    approach, batch = hand_made("sgd", "class", class_loss)
    logits = LOGITS[:outputs]
    expected = (cross_entropy(logits, 0) + cross_entropy(logits, 1)) / 2
    loss, correct = approach.class_cross_entropy(approach.multihead.features(batch.inputs), batch, 0)
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    assert int(correct) == (1 if outputs == 2 else 0)  # argmax: class 1 of the two, class 4 of the six
    assert approach.loss(batch, StepInfo(0, 0, 0, 1)).item() == pytest.approx(expected, rel=1e-6)
    assert [approach.loss_tasks(stage) for stage in range(3)] == ([1, 2, 3] if class_loss == "seen" else [3, 3, 3])


@pytest.mark.parametrize("class_loss", ["seen", "all"])
def test_the_task_agnostic_prediction_is_over_the_classes_seen_so_far_whatever_the_class_loss(
        class_loss: str) -> None:
    """Before the last stage the argmax runs over the tasks learned so far: after task 1 over LOGITS[:2] (class 1),
    after task 2 over LOGITS[:4] (class 1); after task 3 over all six (class 4, task 3's first class)."""
    approach, batch = hand_made("sgd", "class", class_loss)
    for n_tasks, outputs, predicted in ((1, 2, 1), (2, 4, 1), (3, 6, 4)):
        logits = approach.predict_classes(batch.inputs, n_tasks)
        assert logits.tolist() == [LOGITS[:outputs]] * 2, (n_tasks, logits.shape)
        assert logits.argmax(1).tolist() == [predicted, predicted]


def test_the_task_scenario_ignores_class_loss() -> None:
    approach, batch = hand_made("sgd", "task", "all")
    assert [approach.loss_tasks(stage) for stage in range(3)] == [1, 2, 3]
    expected = (cross_entropy(LOGITS[:2], 0) + cross_entropy(LOGITS[:2], 1)) / 2  # task 0's head
    assert approach.loss(batch, StepInfo(0, 0, 0, 1)).item() == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize(("class_loss", "outputs"), [("seen", 2), ("all", 6)])
def test_icarl_s_paper_loss_takes_the_mean_over_the_seen_outputs_or_every_output(class_loss: str,
                                                                                 outputs: int) -> None:
    """Stage 0 (no previous network): per sample the mean over the outputs of BCE(sigmoid(z_j), one-hot_j) =
    log(1 + e^z_j) - y_j z_j."""
    approach, batch = hand_made("icarl", "class", class_loss)
    logits = LOGITS[:outputs]

    def per_sample(target: int) -> float:
        return sum(math.log1p(math.exp(z)) - (z if j == target else 0.0) for j, z in enumerate(logits)) / outputs

    loss, _ = approach.objective(batch, 0)
    assert loss.item() == pytest.approx((per_sample(0) + per_sample(1)) / 2, rel=1e-6)


# ---------------------------------------------------------------------------------------------- clip_grad_norm 0
def test_clip_grad_norm_0_steps_with_the_whole_gradient_however_large(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = tiny_spec("mlp")
    tasks = tiny_tasks(spec)
    train = tasks[0].train
    data = LabelledData(train.images[:16], train.labels[:16], train.task_ids[:16], train.transform, 0)

    def one_step(clip: float) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor], float]:
        """(weights after one training step of the approach, by hand, the gradient's norm)."""
        approach = make_approach("sgd", spec, tasks, clip_grad_norm=clip)
        original_loss = approach.loss
        monkeypatch.setattr(approach, "loss", lambda batch, step: 1e4 * original_loss(batch, step))
        named = dict(approach.network.named_parameters())
        loss = approach.loss(data.batch(torch.arange(16)), StepInfo(0, 0, 0, 1))
        gradients = torch.autograd.grad(loss, list(named.values()), allow_unused=True)
        by_hand = {name: (p - 0.05 * g if g is not None else p).detach()
                   for (name, p), g in zip(named.items(), gradients)}
        norm = float(torch.linalg.vector_norm(torch.stack([g.norm() for g in gradients if g is not None])))
        assert approach.train_epoch(0, 0, data, approach.make_optimizer(0, 0.05)) == (pytest.approx(loss.item()), 1)
        return {name: p.detach() for name, p in named.items()}, by_hand, norm

    stepped, by_hand, norm = one_step(0.0)
    assert norm > 1000.0  # clipping at any threshold below would change the step
    for name, value in stepped.items():
        torch.testing.assert_close(value, by_hand[name], rtol=1e-5, atol=1e-6)
    clipped, by_hand, _ = one_step(10.0)
    assert not torch.allclose(clipped["heads.0.weight"], by_hand["heads.0.weight"], rtol=1e-3, atol=1e-4)


# ---------------------------------------------------------------------------------------------- config hashes
def test_the_default_protocol_leaves_stored_runs_hashes_and_other_values_change_them(tmp_path: Path) -> None:
    assert {"early_stopping", "class_loss"}.isdisjoint(identity_dict(TrainingSpec()))
    changed = identity_dict(TrainingSpec(early_stopping=False, class_loss="all"))
    assert (changed["early_stopping"], changed["class_loss"]) == (False, "all")

    def config_hash(*overrides: str) -> str:
        spec = load_benchmark("mnist2", list(overrides))
        return plan_runs(spec, ["sgd"], [0], tmp_path, overrides)[0].config_hash

    # measured with clbench at 22742d3 (a37d58c~1, before training.early_stopping and training.class_loss existed):
    # `plan_runs(load_benchmark("mnist2"), ["sgd"], [0], ...)[0].config_hash`
    assert config_hash() == "5ff51f1b4daa"
    assert config_hash("training.early_stopping=true", "training.class_loss=seen") == "5ff51f1b4daa"
    assert config_hash("training.class_loss=all") == "5ff51f1b4daa"  # the task scenario's loss: the default's run
    others = {config_hash("training.early_stopping=false"), config_hash("data.scenario=class"),
              config_hash("data.scenario=class", "training.class_loss=all")}
    assert len(others) == 3 and "5ff51f1b4daa" not in others


# ---------------------------------------------------------------------------------------------- rows and reports
@pytest.fixture(scope="module")
def class_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two class-scenario sgd runs of the tiny benchmark, one per class_loss, stored under one results folder."""
    results = tmp_path_factory.mktemp("class-loss")
    for class_loss in ("seen", "all"):
        spec = tiny_spec("mlp", training=replace(ONLINE, class_loss=class_loss), scenario="class")
        run_rows(spec, results)
    return results


def runs_of(results: Path, class_loss: str) -> list[Path]:
    return [path.parent for path in results.rglob("accuracy.parquet")
            if set(pd.read_parquet(path)["class_loss"]) == {class_loss}]


def test_every_row_stores_the_run_s_class_loss(class_runs: Path) -> None:
    folders = sorted(class_runs.rglob("accuracy.parquet"))
    assert len(folders) == 2
    values = [set(pd.read_parquet(path)["class_loss"]) for path in folders]
    assert sorted(map(sorted, values)) == [["all"], ["seen"]]
    [all_run] = runs_of(class_runs, "all")
    rows = pd.read_parquet(all_run / "accuracy.parquet")
    assert (rows["class_loss"] == "all").all() and (rows["scenario"] == "class").all() and len(rows) > 0


def test_a_results_file_without_the_class_loss_column_reads_as_seen(class_runs: Path, tmp_path: Path) -> None:
    shutil.copytree(class_runs, tmp_path / "results")
    [older] = runs_of(tmp_path / "results", "seen")
    path = older / "accuracy.parquet"
    pd.read_parquet(path).drop(columns=["class_loss"]).to_parquet(path)
    (older / "manifest.json").unlink()  # written before the column, and before the manifest
    frame = load_results(tmp_path / "results", "tiny").frame
    by_run = frame.groupby("config_hash")["class_loss"].agg(lambda values: set(values))
    assert sorted(map(sorted, by_run)) == [["all"], ["seen"]]
    assert frame["class_loss"].notna().all()


def test_a_report_of_both_class_losses_notes_it_and_one_of_a_single_loss_does_not(class_runs: Path,
                                                                                   tmp_path: Path) -> None:
    report = build_report(class_runs, "tiny", "accuracy")
    assert sorted(label for label, _ in report.rows) == ["sgd (class_loss=all)", "sgd (class_loss=seen)"]
    [note] = [note for note in report.notes if "training.class_loss" in note]
    assert "all (cross-entropy over every output): sgd (class_loss=all)" in note
    assert "seen (cross-entropy over the classes seen so far): sgd (class_loss=seen)" in note

    single = tmp_path / "results"
    shutil.copytree(class_runs, single)
    [seen_run] = runs_of(single, "seen")
    shutil.rmtree(seen_run.parent)  # the config folder of the `seen` run
    alone = build_report(single, "tiny", "accuracy")
    assert [label for label, _ in alone.rows] == ["sgd"]  # one config: nothing to tell apart
    assert not [note for note in alone.notes if "class_loss" in note]


# ---------------------------------------------------------------------------------------------- seq-mnist
def test_seq_mnist_is_mammoth_s_protocol_and_every_section_resolves() -> None:
    spec = load_benchmark("seq-mnist")
    assert (spec.data.validation_fraction, spec.data.scenario, spec.data.shuffle_tasks) == (0.0, "class", False)
    assert spec.network.hidden == (100, 100)
    assert set(spec.approaches) == {"sgd", "joint", "random", "er", "agem", "derpp", "icarl", "er-ace", "xder", "bic",
                                    "gdumb", "lucir"}
    for method in spec.approaches:
        resolved = resolve(spec, method)
        training = resolved.training
        assert (training.early_stopping, training.class_loss, training.batch_size, training.max_epochs) == \
            (False, "seen" if method == "bic" else "all", 10, 1), method  # bic: Mammoth's, over the classes seen
        if method != "random":
            assert resolved.hyperparameters.clip_grad_norm == 0.0, method
    assert resolve(spec, "icarl").hyperparameters.loss == "paper"
    # Mammoth models/icarl.py adds --opt_wd 1e-5 x the sum of squared weights to the loss (the authors' wght_decay
    # 1e-5 x Lasagne's l2): its gradient is SGD's weight_decay 2e-5, by hand
    assert resolve(spec, "icarl").training.weight_decay == 2e-5
    assert not resolve(spec, "icarl").hyperparameters.flip_means  # the class means of the exemplars alone
    assert resolve(spec, "xder").hyperparameters.lambd == 0  # no augmentation: the SupCon term is off
    bic = resolve(spec, "bic").hyperparameters  # Mammoth models/bic.py's bias fit: 250 epochs of Adam at 0.001
    assert (bic.bias_epochs, bic.bias_optimizer, bic.bias_lr, bic.beta_l2, bic.temperature) == (250, "adam", 0.001,
                                                                                                0.0, 2.0)
    gdumb = resolve(spec, "gdumb").hyperparameters  # Mammoth models/gdumb.py get_parser's defaults, batch 10
    assert (gdumb.buffer_size, gdumb.replay_batch_size, gdumb.fitting_epochs, gdumb.maxlr, gdumb.minlr) == (
        500, 10, 256, 0.05, 0.0005)
    assert (gdumb.cutmix_alpha, gdumb.cutmix_prob, gdumb.momentum, gdumb.weight_decay) == (1.0, 0.5, 0.0, 0.0)
    for variant, buffer in (("buffer-200", 200), ("buffer-5120", 5120)):
        variant_spec = load_benchmark("seq-mnist", [f"variant={variant}"])
        assert resolve(variant_spec, "gdumb").hyperparameters.buffer_size == buffer


@pytest.mark.parametrize(("variant", "expected"), [
    (None, {"er": (500, 10, 0.1), "agem": (500, 128, 0.1), "derpp": (500, 10, 0.03), "icarl": (500, 10, 0.1),
            "er-ace": (500, 10, 0.1), "bic": (500, 64, 0.03)}),
    ("buffer-200", {"er": (200, 10, 0.01), "agem": (200, 128, 0.1), "derpp": (200, 128, 0.03),
                    "icarl": (200, 10, 0.1), "er-ace": (200, 10, 0.1), "bic": (200, 64, 0.03)}),
    ("buffer-5120", {"er": (5120, 10, 0.1), "agem": (5120, 128, 0.1), "derpp": (5120, 64, 0.1),
                     "icarl": (5120, 10, 0.1), "er-ace": (5120, 10, 0.1), "bic": (5120, 64, 0.03)}),
])
def test_seq_mnist_variants_give_the_der_paper_s_buffer_sizes_and_lrs(variant: str | None,
                                                                      expected: dict[str, tuple]) -> None:
    """(buffer_size, replay_batch_size, lr) per approach, as benchmarks/seq-mnist.yaml cites Mammoth's best_args."""
    spec = load_benchmark("seq-mnist", [] if variant is None else [f"variant={variant}"])
    for method, values in expected.items():
        resolved = resolve(spec, method)
        hyper = resolved.hyperparameters
        assert (hyper.buffer_size, hyper.replay_batch_size, resolved.training.lr) == values, (variant, method)
        assert hyper.clip_grad_norm == 0.0 and resolved.training.early_stopping is False, (variant, method)
    derpp = resolve(spec, "derpp").hyperparameters
    assert (derpp.alpha, derpp.beta) == {None: (1.0, 0.5), "buffer-200": (0.2, 1.0), "buffer-5120": (0.2, 0.5)}[variant]
    xder = resolve(spec, "xder")  # DER++'s values (Mammoth has no seq-mnist X-DER setting)
    assert (xder.hyperparameters.alpha, xder.hyperparameters.beta) == (derpp.alpha, derpp.beta), variant
    assert (xder.hyperparameters.buffer_size, xder.hyperparameters.replay_batch_size, xder.training.lr) == \
        (derpp.buffer_size, derpp.replay_batch_size, resolve(spec, "derpp").training.lr), variant
    assert resolve(spec, "sgd").training.lr == 0.03
