"""The shipped `cifar10-5` spec: Mammoth's seq-cifar10 settings, value by value, in each buffer-size variant.

BEST_ARGS is copied by hand from aimagelab/mammoth@e75a491 utils/best_args.py, section 'seq-cifar10' (lr, batch_size,
n_epochs, minibatch_size, alpha, beta per buffer size); the spec must resolve to it.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import torch
from synthetic import synthetic_loader

from clbench.approaches.resolution import resolve
from clbench.cli.listing import parameter_counts
from clbench.run.engine import execute
from clbench.run.plan import plan_runs
from clbench.spec import load_benchmark

BEST_ARGS = {  # buffer size -> method -> (lr, minibatch_size, alpha, beta); every method: batch_size 32, n_epochs 50
    200: {"er": (0.1, 32, None, None), "agem": (0.03, 32, None, None), "derpp": (0.03, 32, 0.1, 0.5),
          "icarl": (0.1, None, None, None), "xder": (0.03, 32, 0.1, 0.5), "bic": (0.03, None, None, None)},
    500: {"er": (0.1, 32, None, None), "agem": (0.03, 32, None, None), "derpp": (0.03, 32, 0.2, 0.5),
          "icarl": (0.1, None, None, None), "xder": (0.03, 32, 0.2, 0.5), "bic": (0.03, None, None, None)},
    5120: {"er": (0.1, 32, None, None), "agem": (0.03, 32, None, None), "derpp": (0.03, 32, 0.1, 1.0),
           "icarl": (0.03, None, None, None), "xder": (0.03, 32, 0.1, 1.0), "bic": (0.03, None, None, None)},
}
# bic: best_args has no seq-cifar10 entry; its seq-cifar100 bic (500, 2000) has lr 0.03
SGD_LR = 0.1  # best_args seq-cifar10 sgd {-1: lr 0.1}


def test_the_data_network_and_protocol_are_seq_cifar10s() -> None:
    spec = load_benchmark("cifar10-5")
    data = spec.data
    assert (data.kind, data.datasets, data.classes_per_task, data.form) == ("split", ("cifar10",), (2,), "image32")
    assert not data.shuffle_tasks and data.augment and data.scenario == "class"  # Mammoth: class-il
    assert data.validation_fraction == 0  # Mammoth holds nothing out
    assert (spec.network.kind, spec.network.nf) == ("resnet18", 64)
    training = spec.training
    assert (training.lr, training.batch_size, training.max_epochs) == (SGD_LR, 32, 50)
    assert not training.early_stopping and training.class_loss == "all"  # constant lr, last weights; one output
    assert load_benchmark("cifar10-5", ["data.scenario=task"]).data.scenario == "task"


@pytest.mark.parametrize("buffer", sorted(BEST_ARGS))
def test_lucir_resolves_to_mammoths_lucir_defaults_at_lr_0_1(buffer: int) -> None:
    # no best_args entry: models/config/lucir.yaml (seq-cifar100) lr 0.1; models/lucir.py get_parser defaults
    resolved = resolve(load_benchmark("cifar10-5", [f"variant=buffer-{buffer}"]), "lucir")
    hyper = resolved.hyperparameters
    assert (resolved.training.lr, hyper.buffer_size, hyper.clip_grad_norm) == (0.1, buffer, 0)
    assert (hyper.finetune_epochs, hyper.finetune_lr, hyper.finetune_milestone, hyper.imprint) == (20, 0.01, 10, True)


@pytest.mark.parametrize("buffer", sorted(BEST_ARGS))
def test_every_approach_section_resolves_to_mammoths_best_args(buffer: int) -> None:
    spec = load_benchmark("cifar10-5", [f"variant=buffer-{buffer}"])
    assert sorted(spec.approaches) == ["agem", "bic", "derpp", "er", "er-ace", "gdumb", "icarl", "joint", "lucir",
                                       "random", "sgd", "xder"]
    for method in ("sgd", "joint"):
        assert resolve(spec, method).training.lr == SGD_LR
    for method, (lr, minibatch, alpha, beta) in BEST_ARGS[buffer].items():
        resolved = resolve(spec, method)
        hyper = resolved.hyperparameters
        assert (resolved.training.lr, resolved.training.batch_size, resolved.training.max_epochs) == (lr, 32, 50)
        assert not resolved.training.early_stopping and hyper.clip_grad_norm == 0  # Mammoth clips nothing
        assert hyper.buffer_size == buffer, method
        if minibatch is not None:
            assert hyper.replay_batch_size == minibatch, method
        if alpha is not None:
            assert (hyper.alpha, hyper.beta) == (alpha, beta)


@pytest.mark.parametrize("buffer", sorted(BEST_ARGS))
def test_er_ace_resolves_to_mammoths_er_ace_config(buffer: int) -> None:
    """models/config/er_ace.yaml seq-cifar10 200: lr 0.1, task_free 1 (kept at 500 and 5120, which it does not
    have); minibatch_size Mammoth's default, the batch size (main.py lines 433-436)."""
    resolved = resolve(load_benchmark("cifar10-5", [f"variant=buffer-{buffer}"]), "er-ace")
    hyper = resolved.hyperparameters
    assert (resolved.training.lr, resolved.training.batch_size, resolved.training.max_epochs) == (0.1, 32, 50)
    assert (hyper.buffer_size, hyper.replay_batch_size, hyper.clip_grad_norm) == (buffer, 32, 0)
    assert hyper.task_free and hyper.cosine_classifier and hyper.cosine_scale == 10


@pytest.mark.parametrize("buffer", sorted(BEST_ARGS))
def test_gdumb_has_the_authors_cifar10_protocol(buffer: int) -> None:
    """drimpossible/GDumb scripts/replicate.sh (CIFAR10: 256 passes, cutmix) and src/opts.py's defaults."""
    hyper = resolve(load_benchmark("cifar10-5", [f"variant=buffer-{buffer}"]), "gdumb").hyperparameters
    assert hyper.buffer_size == buffer and hyper.fitting_epochs == 256
    assert (hyper.cutmix_alpha, hyper.cutmix_prob, hyper.replay_batch_size) == (1.0, 0.5, 16)
    assert (hyper.maxlr, hyper.minlr, hyper.momentum, hyper.weight_decay, hyper.clip_grad_norm) == (
        0.05, 0.0005, 0.9, 1e-6, 10.0)


def test_gdumb_runs_the_protocol_on_synthetic_cifar_images(tmp_path: Path) -> None:
    spec = load_benchmark("cifar10-5", ["network.nf=4", "training.max_epochs=1", "approaches.gdumb.fitting_epochs=1",
                                        "approaches.gdumb.buffer_size=20"])
    [plan] = plan_runs(spec, ["gdumb"], [0], tmp_path)
    outcome = execute(plan, device=torch.device("cpu"), loader=synthetic_loader(n_train=100, n_test=20))
    frame = pd.DataFrame(outcome.rows)
    assert set(frame["evaluation"]) == {"task-aware", "task-agnostic"} and frame["accuracy"].notna().all()
    assert set(frame.loc[frame["stage"] >= 1, "memory_samples"]) == {20}


def test_the_parameter_table_leaves_out_the_approaches_that_refuse_resnet18() -> None:
    counts = parameter_counts(load_benchmark("cifar10-5"))
    assert not {"adahat", "gpm", "hat", "packnet", "pathnet", "pnn", "supsup", "wsn"} & set(counts)
    assert counts["sgd"] == 11_173_962  # Mammoth's resnet18 with 10 outputs: five heads of two (tests/nets)


@pytest.mark.parametrize("scenario", ["task", "class"])
def test_the_protocol_runs_end_to_end_on_synthetic_cifar_images(scenario: str, tmp_path: Path) -> None:
    """The shipped spec with a narrow network, one epoch, synthetic 3x32x32 images: no validation rows, 5 stages
    of 5 tasks, both evaluations in the class scenario (Mammoth's Class-IL and Task-IL)."""
    spec = load_benchmark("cifar10-5", ["network.nf=4", "training.max_epochs=1", f"data.scenario={scenario}"])
    [plan] = plan_runs(spec, ["derpp"], [0], tmp_path)
    outcome = execute(plan, device=torch.device("cpu"), loader=synthetic_loader(n_train=200, n_test=50))
    frame = pd.DataFrame(outcome.rows)
    assert set(frame["split"]) == {"test"}  # validation_fraction 0: nothing held out, nothing evaluated there
    evaluations = {"task-aware", "task-agnostic"}
    assert set(frame["evaluation"]) == evaluations
    assert set(frame["class_loss"]) == {"all" if scenario == "class" else "seen"}  # the task scenario's loss: seen
    learned = frame[(frame["evaluation"] == "task-aware") & (frame["stage"] >= 1) & (frame["task"] <= frame["stage"])]
    assert len(learned) == 15 and frame["accuracy"].notna().all()
