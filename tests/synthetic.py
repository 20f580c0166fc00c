"""Tiny synthetic benchmarks for fast tests: learnable, seeded, in the shapes of the real ones."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from clbench.approaches.datatypes import ApproachContext
from clbench.approaches.resolution import resolve
from clbench.data.batches import TaskSequence
from clbench.data.sources import ImageSet, PreparedDataset
from clbench.data.tasks import build_tasks
from clbench.spec import BenchmarkSpec, DataSpec, NetworkSpec, TrainingSpec


def synthetic_dataset(name: str, n_classes: int, n_train: int, n_test: int, shape: tuple[int, int, int],
                      seed: int = 0) -> PreparedDataset:
    """Images whose class is written in a class-specific block of bright pixels plus noise (learnable)."""
    rng = np.random.default_rng(seed)

    def make(n: int) -> ImageSet:
        labels = rng.integers(0, n_classes, size=n)
        images = rng.integers(0, 60, size=(n, *shape), dtype=np.int64)
        flat = images.reshape(n, -1)
        width = max(1, flat.shape[1] // (n_classes * 2))
        for c in range(n_classes):
            flat[labels == c, c * width:(c + 1) * width] += 180
        return ImageSet(np.clip(images, 0, 255).astype(np.uint8), labels.astype(np.int64))

    channels = shape[0]
    return PreparedDataset(name, n_classes, make(n_train), make(n_test), (0.2,) * channels, (0.3,) * channels)


def synthetic_loader(n_train: int = 240, n_test: int = 120):
    """A loader in the shape of `clbench.data.sources.load_dataset` that fabricates data sets."""
    shapes = {"mnist28": (1, 28, 28), "image32": (3, 32, 32)}
    classes = {"mnist": 10, "fashion-mnist": 10, "cifar10": 10, "cifar100": 20, "svhn": 10}

    def load(name: str, form: str) -> PreparedDataset:
        seed = sum(map(ord, name))
        return synthetic_dataset(name, classes.get(name, 4), n_train, n_test, shapes[form], seed)

    return load


@dataclass(frozen=True)
class SyntheticLoader:
    """`synthetic_loader()` as a picklable object, for worker processes and Ray tasks (they import `synthetic`:
    the tests folder must be on their path)."""

    def __call__(self, name: str, form: str) -> PreparedDataset:
        return synthetic_loader()(name, form)


TINY_TRAINING = TrainingSpec(lr=0.05, patience=2, max_epochs=4, batch_size=32, eval_batch_size=256)
# Settings of the approaches whose defaults cost far more than a tiny run, for the tests parametrised over every
# approach: GDumb's fit from scratch after each task is 256 passes over its memory by default (Mammoth's
# fitting_epochs), minutes on this CPU for the conv bodies.
SHORT_SETTINGS: dict[str, dict[str, object]] = {"gdumb": {"fitting_epochs": 3}}


def tiny_spec(network: str = "mlp", kind: str = "split", n_tasks: int = 3,
              training: TrainingSpec = TINY_TRAINING, scenario: str = "task") -> BenchmarkSpec:
    """A small benchmark: 3 tasks of an MLP (28x28 inputs) or of a narrow AlexNet (3x32x32 inputs)."""
    if kind == "permuted":
        data = DataSpec(kind="permuted", datasets=("mnist",), form="mnist28", n_tasks=n_tasks)
    elif network == "mlp":
        data = DataSpec(kind="split", datasets=("mnist",), form="mnist28", classes_per_task=(10 // n_tasks + 1,),
                        remainder="keep", shuffle_tasks=False)
    else:
        data = DataSpec(kind="mixture", datasets=("cifar10", "svhn", "fashion-mnist")[:n_tasks], form="image32")
    data = replace(data, scenario=scenario)
    net = (NetworkSpec(kind="mlp", hidden=(32, 32)) if network == "mlp" else
           NetworkSpec(kind="alexnet", conv_channels=(8, 8, 16), fc_units=(32, 32)))
    return BenchmarkSpec("tiny", "tiny synthetic benchmark", "<test>", None, data, net, training, {})


def tiny_resnet_spec(nf: int = 4, augment: bool = True, training: TrainingSpec = TINY_TRAINING) -> BenchmarkSpec:
    """`tiny_spec("alexnet")`'s 3x32x32 tasks on a narrow ResNet-18 (`nf` channels in the first stage), training
    batches cropped and flipped when `augment`."""
    spec = tiny_spec("alexnet", training=training)
    return replace(spec, network=NetworkSpec(kind="resnet18", nf=nf), data=replace(spec.data, augment=augment))


def tiny_tasks(spec: BenchmarkSpec, seed: int = 0) -> TaskSequence:
    return build_tasks(spec.data, seed, synthetic_loader(), "cpu")


def make_approach(method: str, spec: BenchmarkSpec, tasks: TaskSequence, seed: int = 0, **hparams):
    """An approach built as the engine builds it, with hyper-parameters overridden by keyword."""
    from clbench.seeding import seed_global_torch

    resolved = resolve(spec, method)
    hyper = replace(resolved.hyperparameters, **hparams)
    context = ApproachContext(spec.network, resolved.training, tasks.input_shape, tasks.head_sizes,
                              torch.device("cpu"), seed, spec.data.scenario, spec.data.augment)
    seed_global_torch(seed)
    return resolved.cls(context, hyper)
