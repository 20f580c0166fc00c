"""The sections of a spec as typed objects: `data`, `network`, `training`, a spec's own `datasets:` entries,
and `BenchmarkSpec`, the validated whole (`clbench.spec.benchmark.load_benchmark` builds it).

Every field carries its doc, range and choices (`clbench.spec.fields.field`); `clbench spec` writes them back as
comments.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from dataclasses import field as dataclass_field
from typing import Any

from clbench.errors import SpecError
from clbench.spec.catalogue import FORMS
from clbench.spec.fields import field, origin_of, results_only
from clbench.spec.grid import GridAxis

TOP_LEVEL_KEYS = ("name", "description", "data", "network", "training", "approaches", "variant", "variants",
                  "datasets", "grids")


@dataclass(frozen=True)
class DatasetEntry:
    """A spec's own data set (`datasets: {NAME: {format: ..., path: ...}}`), prepared like the built-ins."""

    format: str = field(doc="imagefolder: PATH/train/<class>/*.png|jpg and PATH/test/<class>/*; "
                            "npz: one .npz file with x_train, y_train, x_test, y_test", choices=("imagefolder", "npz"))
    path: str = field(doc="the folder or .npz file; a relative path resolves against the spec file's folder")


@dataclass(frozen=True)
class DataSpec:
    """How the sequence of tasks is built from data sets."""

    kind: str = field(doc="mixture: each data set is a task; split: class blocks of each data set; "
                          "permuted: pixel permutations of one data set; rotated: rotations of one data set by a "
                          "seeded angle per task (Mammoth's rot-mnist)",
                      choices=("mixture", "split", "permuted", "rotated"))
    datasets: tuple[str, ...] = field(doc="data sets used, by their `clbench fetch` names")
    form: str = field("image32", doc="image32: 3x32x32 (conv net); mnist28: 28x28 originals, flattened for MLPs",
                      choices=FORMS)
    classes_per_task: tuple[int, ...] | None = field(
        None, doc="split: classes per task for each data set, e.g. [5] for split MNIST, [2, 20] for CIFAR", minimum=1)
    remainder: str = field("error", doc="split: classes left over when a block size does not divide a data set's "
                                        "class count: error, keep (a smaller last task), drop, or merge (into the "
                                        "last task)", choices=("error", "keep", "drop", "merge"))
    n_tasks: int | None = field(None, doc="permuted, rotated: the number of permutations or rotations (tasks)",
                                minimum=1)
    shuffle_tasks: bool = field(True, doc="task order shuffled by the seed (paper: yes; split MNIST: fixed)")
    validation_fraction: float = field(0.15, doc="held-out share of each task's training set (paper: 15%); 0: no "
                                                 "validation split (the online protocol: needs "
                                                 "training.early_stopping false)", minimum=0.0, maximum=0.9)
    max_train_samples: int | None = field(
        None, doc="seeded, stratified subsample of each task's training set (quick runs); null = all", minimum=10)
    max_test_samples: int | None = field(
        None, doc="seeded, stratified subsample of each task's test set (quick runs); null = all", minimum=10)
    augment: bool = field(False, doc="random crop (padding 4, zeros) and horizontal flip of every training batch and "
                                     "replayed batch (Mammoth's seq-cifar10 TRANSFORM); image32 only; never on "
                                     "validation or test", added=True)
    normalize: bool = field(True, doc="inputs normalised by each data set's per-channel mean and std (paper, "
                                      "FACIL); false: the pixels / 255, in [0, 1] (Mammoth's seq-mnist)", added=True)
    scenario: str = field("task", doc="task: the task id is given (one head per task, the paper's setting); "
                                      "class: no task id, one output over every class seen so far (FACIL's "
                                      "task-agnostic training: cross-entropy over the seen tasks' heads, or over "
                                      "every output: training.class_loss); domain: no task id, every task has the "
                                      "same classes, class c of every task is output c of one head shared by all "
                                      "tasks",
                          choices=("task", "class", "domain"), added=True)


IMAGE_NETWORKS = ("alexnet", "resnet18")  # the conv bodies: they need `data.form` image32


@dataclass(frozen=True)
class NetworkSpec:
    """The shared network body; every task gets its own linear head (multi-head, task id known)."""

    kind: str = field(doc="mlp (MNIST benchmarks), alexnet (the paper's AlexNet-like conv net) or resnet18 (the "
                          "CIFAR ResNet-18 of the replay papers: Mammoth's resnet18, GEM's reduced one)",
                      choices=("mlp", "alexnet", "resnet18"))
    hidden: tuple[int, ...] = field((2048, 2048), doc="mlp: hidden layer sizes (paper pmnist: 100/500/2000 x2; "
                                                      "split MNIST: 800 x3)", minimum=1)
    input_dropout: float = field(0.0, doc="mlp: dropout on the input (EWC's large pmnist net: 0.2)",
                                 minimum=0.0, maximum=0.95)
    dropout: float = field(0.0, doc="mlp: dropout after each hidden layer", minimum=0.0, maximum=0.95)
    conv_channels: tuple[int, ...] = field((64, 128, 256), doc="alexnet: filters per conv layer", minimum=1)
    conv_kernels: tuple[int, ...] = field((4, 3, 2), doc="alexnet: kernel size per conv layer", minimum=1)
    conv_dropout: tuple[float, ...] = field((0.2, 0.2, 0.5), doc="alexnet: dropout after each conv layer",
                                            minimum=0.0, maximum=0.95)
    fc_units: tuple[int, ...] = field((2048, 2048), doc="alexnet: units per fully-connected layer", minimum=1)
    fc_dropout: float = field(0.5, doc="alexnet: dropout after each fully-connected layer",
                              minimum=0.0, maximum=0.95)
    nf: int = field(64, doc="resnet18: channels of the first stage (then 2nf, 4nf, 8nf); Mammoth's resnet18: 64, GEM's "
                            "reduced ResNet-18: 20", minimum=1, added=True)
    bias: bool = field(True, doc="mlp: biases in the hidden layers and heads (false: none, as GPM's, WSN's and "
                                 "SupSup's permuted-MNIST nets)", added=True)


@dataclass(frozen=True)
class TrainingSpec:
    """The paper's protocol (Experiments: Training), shared by every approach unless it overrides a value."""

    lr: float = field(0.05, doc="initial learning rate of the optimizer (`optimizer`; paper: 0.05, plain SGD)",
                      above=0.0)
    lr_factor: float = field(3.0, doc="divide the lr by this after `patience` epochs without improvement",
                             minimum=1.0)
    lr_min: float = field(1e-4, doc="stop the task when the lr falls below this (paper: 1e-4)", minimum=0.0)
    patience: int = field(5, doc="epochs without validation-loss improvement before an lr decay (paper: 5)",
                          minimum=1)
    max_epochs: int = field(200, doc="epochs per task at most (paper: 200)", minimum=1)
    batch_size: int = field(64, doc="training batch size (paper: 64)", minimum=1)
    eval_batch_size: int = field(4096, doc="batch size for validation and test (no effect on results)", minimum=1)
    compile: bool = field(False, doc="torch.compile the network's body (off: the paper's eager numerics; on: "
                                     "fused kernels whose float rounding differs slightly; first epoch slower)")
    amp: str = field("none", doc="autocast of the training forward/loss and of evaluation: none (float32, the "
                                 "paper) or bf16 (bfloat16 matmuls/convs: faster on GPUs, ~3 significant digits)",
                     choices=("none", "bf16"))
    early_stopping: bool = field(True, doc="the paper's protocol: validation loss each epoch, lr decay on a plateau, "
                                           "stop below lr_min, best weights restored; false: exactly max_epochs "
                                           "epochs at lr, the last weights kept (the online protocol: max_epochs 1)",
                                 added=True)
    optimizer: str = field("sgd", doc="sgd (the paper's: plain SGD unless momentum or weight_decay is set), adam "
                                      "(torch's Adam at lr, betas 0.9/0.999) or rmsprop (torch's RMSprop, alpha "
                                      "0.99); rebuilt, its state new, at every task and lr change",
                           choices=("sgd", "adam", "rmsprop"), added=True)
    momentum: float = field(0.0, doc="sgd's or rmsprop's momentum (0: none, as the paper's plain SGD)", minimum=0.0,
                            maximum=0.999, added=True)
    weight_decay: float = field(0.0, doc="L2 weight decay of the optimizer (0: none, the paper)", minimum=0.0,
                                added=True)
    class_loss: str = field("seen", doc="class scenario's cross-entropy (training and validation): seen, over the "
                                        "classes of the tasks seen so far (FACIL); all, over every output of the "
                                        "sequence, future classes included (Mammoth, the DER paper)",
                            choices=("seen", "all"), added=True)
    realtime: bool = field(False, doc="the real-time stream of the online protocol (Ghunaim et al. 2023; needs "
                                      "max_epochs 1 and early_stopping false): one batch arrives per SGD step's FLOPs "
                                      "and a method whose step costs k of them trains one batch in k",
                           added=True)
    eval_every: int = field(0, doc="continual evaluation (De Lange et al. 2023): every K optimiser steps, evaluate the "
                                   "learned tasks and the current one on `eval_subset` test images each, stored as "
                                   "curve.parquet in the run folder; 0: off (only the end-of-task evaluation)",
                            minimum=0, added=True, changes_results=False)
    eval_subset: int = field(500, doc="continual evaluation: test images per task, a seeded draw, the same images at "
                                      "every evaluation (the whole test set when it has fewer); no effect without "
                                      "eval_every", minimum=1,
                             added=True, changes_results=False)


def check_optimizer(training: TrainingSpec, where: str, source: str) -> None:
    """SpecError for a protocol whose keys contradict each other: momentum with Adam."""
    if training.optimizer == "adam" and training.momentum:
        raise SpecError(f"{source}: `{where}.momentum` applies to `{where}.optimizer: sgd` or rmsprop, not adam "
                        f"(Adam's betas are fixed at 0.9/0.999); remove it")


def check_realtime(training: TrainingSpec, where: str, source: str) -> None:
    """SpecError for the real-time stream without the online protocol's one pass: checked on a method's own protocol
    (its section may change the epochs), when the method is asked, as every global training option is."""
    if training.realtime and (training.max_epochs != 1 or training.early_stopping):
        raise SpecError(f"{source}: `{where}.realtime` is the online protocol's stream: it needs one pass "
                        f"(`{where}.max_epochs: 1`, `{where}.early_stopping: false`), not max_epochs "
                        f"{training.max_epochs} with early_stopping {str(training.early_stopping).lower()}; set both "
                        f"or leave realtime off")


@dataclass(frozen=True)
class BenchmarkSpec:
    """A validated benchmark: where it came from, its data, network, protocol, and raw approach sections."""

    name: str
    description: str
    source: str
    variant: str | None
    data: DataSpec
    network: NetworkSpec
    training: TrainingSpec
    approaches: dict[str, dict[str, Any]]
    datasets: dict[str, DatasetEntry] = dataclass_field(default_factory=dict)  # own data sets, absolute paths
    grids: dict[str, tuple[GridAxis, ...]] = dataclass_field(default_factory=dict)  # approach -> `tune`'s default grid
    overrides: tuple[str, ...] = ()  # the `--set`/`--grid` texts applied, to name them in errors
    origins: dict[str, str] = dataclass_field(default_factory=dict)  # dotted key -> the option that set it

    def approach_section(self, method: str) -> dict[str, Any]:
        """The raw (not yet validated) section of one approach; empty if the spec has none."""
        return dict(self.approaches.get(method, {}))



def scenario_training(training: TrainingSpec, scenario: str) -> TrainingSpec:
    """`training` as it acts in `scenario`: `class_loss` chooses the class scenario's loss and nothing else, so in
    the task and domain scenarios it reads as its default (`seen`). A run is identified by what changes its numbers:
    `--set training.class_loss=all` in the task scenario is the default's run (its config hash, its rows), not a
    second row of the same numbers (`ignored_class_loss` says so)."""
    default = TrainingSpec.class_loss
    if scenario == "class" or training.class_loss == default:
        return training
    return replace(training, class_loss=default)


def without_continual_evaluation(training: TrainingSpec) -> TrainingSpec:
    """`training` with the fields that change no number of a run at their defaults (`results_only`: the continual
    evaluation's `eval_every` and `eval_subset` measure a run), so a run with them shares its joint reference and
    its tuned file with the run without."""
    return results_only(training)


def ignored_class_loss(spec: BenchmarkSpec, method: str) -> str | None:
    """The warning, in one line, when the protocol of `method` on `spec` sets `training.class_loss` (in `training:`
    or the approach's own `training:` section) to a value that its scenario ignores (`scenario_training`); None
    when it does not."""
    section = spec.approach_section(method).get("training")
    own = isinstance(section, dict) and "class_loss" in section
    value = section["class_loss"] if own else spec.training.class_loss  # type: ignore[index]
    if spec.data.scenario == "class" or value == TrainingSpec.class_loss:
        return None
    key = f"approaches.{method}.training.class_loss" if own else "training.class_loss"
    return (f"{origin_of(key, spec.source, spec.origins)}: `{key}` {value} has no effect with data.scenario="
            f"{spec.data.scenario} (it chooses the class scenario's loss): the runs are those of the default "
            f"({TrainingSpec.class_loss}), under its config hash")
