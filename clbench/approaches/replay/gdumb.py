"""GDumb: a greedy class-balanced memory, and a network trained from scratch on it alone (Prabhu, Torr & Dokania,
ECCV 2020, "GDumb: A Simple Approach that Questions Our Progress in Continual Learning"; the authors' code
drimpossible/GDumb@4f412d7 `src/main.py`, `src/dataloader.py`, `src/opts.py`; Mammoth `models/gdumb.py`).

The pass over a task's stream takes no gradient step (Mammoth: `lr 0`, `observe` only stores): each sample is
offered to the memory by the greedy class-balanced sampler (`greedy_balanced_memory`): stored while the memory has
room; once it is full, stored in place of a random sample of the largest class when its own class has fewer samples
than the largest one (ties between largest classes drawn uniformly), else dropped. Classes are the sequence's global
ones (a task's offset plus its label; the one shared head's labels in the domain scenario). The stream is passed
once whatever `training.max_epochs` says (Mammoth forces `n_epochs 1`: "GDumb needs only 1 epoch to fill the
buffer"), and early stopping does not apply.

After each task (each of clbench's evaluations) the network is re-initialised from scratch and trained on the memory
only (`fit`), and that network is evaluated: `fitting_epochs` shuffled passes in batches of `replay_batch_size`, SGD
with momentum and weight decay, the lr `gdumb_lr` (one epoch at maxlr / 10, then cosine annealing with warm restarts
T_0 1, T_mult 2 between maxlr and minlr: the authors' `src/main.py` lines 14-28, as Mammoth's `fit_buffer`), the
gradient norm clipped to `clip_grad_norm` (`src/main.py` line 88), and CutMix (`cutmix`) with probability
`cutmix_prob` when `cutmix_alpha` > 0 (`src/main.py` lines 79-85; the authors use it on CIFAR, SVHN and
TinyImageNet, not on MNIST: `scripts/replicate.sh` `--regularization none` there). With `data.augment` the memory's
images are cropped and flipped afresh in every batch of the fit (the authors' RandomCrop with padding 4 and, beyond
MNIST and SVHN, the horizontal flip: `src/dataloader.py` `get_augment_transforms`). The loss is the scenario's
cross-entropy over the memory's mixed tasks (`Approach.scenario_cross_entropy`). Every draw of the fit (initial
weights, dropout, order, CutMix, augmentation) comes from streams derived from the run seed and the stage alone, so
the fitted network depends on the memory and nothing else of the run's history.

Where the authors' public code differs: it fills the memory offline, the first memory_size // classes samples of
each class in the data set's order (`src/dataloader.py` lines 74-77, "class-balanced greedy sampling"), and trains
once, on the final memory, reporting the best test accuracy over the passes (`src/main.py` lines 33-39); here the
sampler runs on the stream and the last epoch's network is evaluated after every task. Mammoth's GDumb
(aimagelab/mammoth@e75a491 `models/gdumb.py`) keeps a reservoir buffer (`Buffer(self.args.buffer_size)`), fits only
after the last task (line 93: the earlier evaluations see the untrained network), and has no gradient clipping.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import partial

import numpy as np
import torch
from torch import nn

from clbench.approaches.datatypes import Hyperparameters, StepInfo
from clbench.approaches.domains import BenchmarkFacts, DomainProblem
from clbench.approaches.optim import StepOptimizer, clip_grad_norm
from clbench.approaches.replay.approach import ReplayApproach, ReplayHyperparameters
from clbench.data.augment import random_crop, random_crop_and_flip
from clbench.data.batches import Batch, TaskSequence
from clbench.nets.mlp import BatchNormMLP
from clbench.seeding import derive_seed, numpy_generator, torch_generator
from clbench.spec import DataSpec, NetworkSpec, TrainingSpec
from clbench.spec.fields import field

BATCH_NORM_EPS = 1e-6  # the authors' src/opts.py line 40, --bn_eps 1e-6


@dataclass(frozen=True)
class GDumbHyperparameters(ReplayHyperparameters):
    """GDumb's hyper-parameters: the memory and the fit on it (the authors' `src/opts.py` defaults)."""

    replay_batch_size: int = field(16, doc="memory samples per step of the fit (authors' src/opts.py --batch_size "
                                           "16; Mammoth's fit_buffer: --batch_size)", minimum=1)
    fitting_epochs: int = field(256, doc="passes over the memory per fit (Mammoth models/gdumb.py --fitting_epochs "
                                         "256; the authors' --num_passes: 128 MNIST, 256 CIFAR, scripts/replicate.sh)",
                                minimum=1)
    maxlr: float = field(0.05, doc="the fit's peak lr (authors' src/opts.py --maxlr 0.05; Mammoth --maxlr 0.05)",
                         above=0.0)
    minlr: float = field(0.0005, doc="the fit's cosine floor (authors' src/opts.py --minlr 0.0005; Mammoth --minlr "
                                     "0.0005)", minimum=0.0)
    momentum: float = field(0.9, doc="the fit's SGD momentum (authors' src/main.py line 14: 0.9; Mammoth: optim_mom "
                                     "0)", minimum=0.0, maximum=1.0)
    weight_decay: float = field(1e-6, doc="the fit's SGD weight decay (authors' src/opts.py --weight_decay 1e-6; "
                                          "Mammoth: optim_wd 0)", minimum=0.0)
    cutmix_alpha: float = field(0.0, doc="CutMix's Beta(alpha, alpha); 0: no CutMix (authors' --regularization none "
                                         "by default and on MNIST, cutmix with --cutmix_alpha 1.0 on CIFAR; Mammoth "
                                         "1.0)", minimum=0.0)
    cutmix_prob: float = field(0.5, doc="probability that a batch of the fit is CutMixed (authors' src/opts.py "
                                        "--cutmix_prob 0.5; Mammoth's cutmix_data default 0.5)",
                               minimum=0.0, maximum=1.0)
    clip_grad_norm: float = field(10.0, doc="the fit's gradient-norm clipping (authors' src/opts.py --clip 10); 0: "
                                            "none (Mammoth)", minimum=0.0, special={0.0: "no clipping"})
    batch_norm: bool = field(False, doc="mlp only: a BatchNorm1d (eps 1e-6) after every linear layer, the heads' "
                                        "too, as the authors' MNIST MLP (src/models/mnist/mlp.py; --bn on by "
                                        "default, --bn_eps 1e-6: src/opts.py lines 38-40); clbench's mlp has none",
                             added=True)
    crop: bool = field(False, doc="each batch of the fit randomly cropped from a 4-pixel zero padding, without the "
                                  "flip (the authors' RandomCrop(28, padding=4) on MNIST, which they do not flip: "
                                  "src/dataloader.py lines 118-126); with data.augment its crop and flip instead",
                       added=True)


# ------------------------------------------------------------------------------------------- the pure functions
def greedy_balanced_memory(stored: Sequence[int], incoming: Sequence[int], capacity: int,
                           generator: torch.Generator) -> list[int]:
    """The memory after offering `incoming` samples, one at a time, to the greedy class-balanced sampler.

    `stored`: the class of each filled slot; `incoming`: each offered sample's class, in stream order. Returns, per
    slot of the new memory, where its sample comes from: i < len(stored) is stored sample i (still in slot i), i >=
    len(stored) is incoming sample i - len(stored). A sample fills the next slot while the memory has fewer than
    `capacity`; once full, if its class has fewer samples than the largest class, it replaces a sample of that
    class (among several largest classes one drawn uniformly, then one of its slots uniformly, from `generator`);
    otherwise it is dropped.
    """
    sources = list(range(len(stored)))
    classes = list(stored)
    counts = Counter(classes)
    for k, label in enumerate(incoming):
        if len(classes) < capacity:
            sources.append(len(stored) + k)
            classes.append(label)
            counts[label] += 1
            continue
        largest = max(counts.values())
        if counts[label] >= largest:
            continue
        tied = sorted(c for c, n in counts.items() if n == largest)
        evicted = tied[int(torch.randint(len(tied), (1,), generator=generator))] if len(tied) > 1 else tied[0]
        slots = [slot for slot, c in enumerate(classes) if c == evicted]
        slot = slots[int(torch.randint(len(slots), (1,), generator=generator))]
        sources[slot], classes[slot] = len(stored) + k, label
        counts[evicted] -= 1
        counts[label] += 1
    return sources


def gdumb_lr(epoch: int, maxlr: float, minlr: float) -> float:
    """The lr of the fit's epoch `epoch` (0-based): maxlr / 10 (warm start), then maxlr, then from epoch 2 on torch's
    CosineAnnealingWarmRestarts(T_0=1, T_mult=2, eta_min=minlr) stepped epoch - 1 times (authors' src/main.py lines
    15-28): the restarts fall on epochs 2, 4, 8, 16, ... and cycle c (from epoch 2^c, 2^c epochs long) reads
    minlr + (maxlr - minlr) (1 + cos(pi (epoch - 2^c) / 2^c)) / 2."""
    if epoch == 0:
        return maxlr * 0.1
    if epoch == 1:
        return maxlr
    cycle_start = 1 << (epoch.bit_length() - 1)  # the largest power of two <= epoch
    return minlr + (maxlr - minlr) * (1 + math.cos(math.pi * (epoch - cycle_start) / cycle_start)) / 2


def cutmix(inputs: torch.Tensor, alpha: float, rng: np.random.Generator,
           generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, float]:
    """CutMix (Yun et al. 2019) as the authors' `src/utils.py` `cutmix_data` / `rand_bbox`: lam ~ Beta(alpha, alpha);
    a box of side int(size * sqrt(1 - lam)) on each spatial axis centred at a uniform pixel, clipped to the image, is
    pasted from the batch in a random order (`generator`). Returns (mixed inputs (B, C, H, W), the partner of each
    sample (B,), lam: the fraction of each image left its own)."""
    batch, _, height, width = inputs.shape
    lam = float(rng.beta(alpha, alpha))
    partner = torch.randperm(batch, generator=generator).to(inputs.device)
    ratio = math.sqrt(1.0 - lam)
    cut_h, cut_w = int(height * ratio), int(width * ratio)
    centre_h, centre_w = int(rng.integers(height)), int(rng.integers(width))
    top, bottom = np.clip([centre_h - cut_h // 2, centre_h + cut_h // 2], 0, height)
    left, right = np.clip([centre_w - cut_w // 2, centre_w + cut_w // 2], 0, width)
    mixed = inputs.clone()
    mixed[:, :, top:bottom, left:right] = inputs[partner, :, top:bottom, left:right]
    return mixed, partner, 1.0 - float((bottom - top) * (right - left)) / (height * width)


# ------------------------------------------------------------------------------------------- the approach
class GDumb(ReplayApproach):
    """Greedy class-balanced sampler, and a network trained from scratch on the memory at each evaluation.

    The authors' code: drimpossible/GDumb `src/main.py` (the fit), `src/dataloader.py` (the memory); Mammoth's
    (aimagelab/mammoth@e75a491): `models/gdumb.py`.
    """

    name = "gdumb"
    summary = "greedy class-balanced memory, a network trained from scratch on it (Prabhu et al. 2020)"
    hyperparameters_class = GDumbHyperparameters
    per_class_memory = True
    hparams: GDumbHyperparameters
    # Mammoth lists GDumb for class-il and task-il only (aimagelab/mammoth@e75a491 models/gdumb.py line 62); with one
    # shared head every task has the same classes, so once the memory is full and balanced no later task's sample is
    # ever stored (its class is never below the largest) and the fit never sees a task after the first ones.
    refuses_domain = ("GDumb's memory balances classes, and in the domain scenario every task has the same classes: "
                      "once the memory is full no later task's sample would be stored (Mammoth models/gdumb.py "
                      "COMPATIBILITY: class-il, task-il); use er or derpp")

    # The stream takes no gradient step and is passed once without early stopping (`training_protocol`); every
    # evaluated network comes from `fit`, whose SGD, lr schedule and epochs are the hyper-parameters'.
    ignores_training = ("lr", "lr_factor", "lr_min", "patience", "max_epochs", "early_stopping", "optimizer",
                        "momentum", "weight_decay")
    ignores_training_reason = ("its stream takes no gradient step, and every network it evaluates is fitted on the "
                               "memory by its own SGD (gdumb.maxlr, gdumb.minlr, gdumb.momentum, gdumb.weight_decay, "
                               "gdumb.fitting_epochs)")

    @classmethod
    def hyperparameter_problem(cls, hyperparameters: Hyperparameters, facts: BenchmarkFacts) -> DomainProblem | None:
        """The memory's (`ReplayApproach`), then the fit's lr: its cosine runs from maxlr down to minlr."""
        problem = super().hyperparameter_problem(hyperparameters, facts)
        assert isinstance(hyperparameters, GDumbHyperparameters)
        if problem is None and hyperparameters.minlr > hyperparameters.maxlr:
            return DomainProblem("minlr", f"the fit's cosine runs from maxlr ({hyperparameters.maxlr:g}) down to "
                                          "minlr: use a minlr at most maxlr")
        return problem

    @classmethod
    def protocol_problem(cls, training: TrainingSpec, data: DataSpec, hyperparameters: Hyperparameters) -> str | None:
        """None: the stream is passed once without early stopping whatever the protocol says."""
        return None

    @classmethod
    def network_problem(cls, network: NetworkSpec, hyperparameters: Hyperparameters | None = None) -> str | None:
        """`batch_norm` is for the mlp; otherwise the base's refusals."""
        if isinstance(hyperparameters, GDumbHyperparameters) and hyperparameters.batch_norm and network.kind != "mlp":
            return (f"`approaches.gdumb.batch_norm` is true with network.kind {network.kind}: it puts batch norms in "
                    "the mlp (the authors' MNIST network); set gdumb.batch_norm=false (resnet18 has its own batch "
                    "norms)")
        return super().network_problem(network, hyperparameters)

    def build_network(self) -> nn.Module:
        """The spec's network, or with `batch_norm` the spec's MLP with a batch norm after every linear layer
        (`network_problem` refuses it on another body)."""
        if not self.hparams.batch_norm:
            return super().build_network()
        spec = self.context.network
        return BatchNormMLP(math.prod(self.context.input_shape), spec.hidden, self.context.head_sizes,
                            spec.input_dropout, spec.dropout, spec.bias, eps=BATCH_NORM_EPS)

    @property
    def training_protocol(self) -> TrainingSpec:
        """The spec's protocol with one pass over the stream and no early stopping (Mammoth models/gdumb.py: n_epochs
        forced to 1); the fit's own schedule is the hyper-parameters'."""
        return replace(self.context.training, max_epochs=1, early_stopping=False)

    def begin_task(self, stage: int, tasks: TaskSequence) -> None:
        """Only the tasks' input transform (the memory is never replayed during the stream: no inputs kept)."""
        self.transform = tasks[stage].train.transform

    def training_step(self, batch: Batch, step: StepInfo, optimizer: StepOptimizer) -> torch.Tensor:
        """No gradient step: the batch is offered to the memory (Mammoth `observe`); the loss reported is 0."""
        self.store_greedy(batch)
        return torch.zeros((), device=self.device)

    def store_greedy(self, batch: Batch) -> None:
        """Offer a batch's samples, in order, to the greedy class-balanced sampler (`greedy_balanced_memory`)."""
        assert batch.images is not None, "training batches carry their uint8 images"
        task_ids = self.task_ids(batch)
        stored = self.buffer.contents()
        sources = greedy_balanced_memory(self.global_classes(stored.labels, stored.task_ids),
                                         self.global_classes(batch.targets, task_ids), self.buffer.capacity,
                                         self.replay_generator)
        if sources == list(range(len(self.buffer))):
            return  # nothing stored
        order = torch.tensor(sources, dtype=torch.long, device=self.device)
        kept_images = stored.images if len(self.buffer) else batch.images[:0]  # (0,) while nothing is stored
        images = torch.cat([kept_images.to(self.device), batch.images.to(self.device)]).index_select(0, order)
        labels = torch.cat([stored.labels, batch.targets.to(self.device)]).index_select(0, order)
        tasks = torch.cat([stored.task_ids, task_ids.to(self.device)]).index_select(0, order)
        self.buffer.set_contents(images, labels, tasks)

    def global_classes(self, labels: torch.Tensor, task_ids: torch.Tensor) -> list[int]:
        """Each sample's class in the sequence: its task's offset plus its label (the shared head's in the domain
        scenario, where every offset is 0)."""
        return (self.offsets[task_ids.to(self.device)] + labels.to(self.device)).tolist()

    def end_task(self, stage: int, tasks: TaskSequence) -> None:
        """Re-initialise the network and train it on the memory alone: the network every evaluation sees."""
        self.fit(stage)

    # ------------------------------------------------------------------ the fit
    def fit(self, stage: int) -> None:
        """`fitting_epochs` passes over the memory from freshly initialised weights, every draw from the run seed
        and `stage` alone (the global RNG of the initialisation and dropout, the order, CutMix, augmentation)."""
        purpose = f"gdumb-fit-{stage}"
        devices = ([self.device.index if self.device.index is not None else torch.cuda.current_device()]
                   if self.device.type == "cuda" else [])
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(derive_seed(self.context.seed, purpose))
            fresh = self.build_network()
            self.network.load_state_dict(fresh.state_dict())
            if len(self.buffer) > 0:
                self.fit_epochs(stage, torch_generator(self.context.seed, purpose),
                                numpy_generator(self.context.seed, purpose))

    def fit_epochs(self, stage: int, generator: torch.Generator, rng: np.random.Generator) -> None:
        hp = self.hparams
        memory = self.buffer.contents()
        assert self.transform is not None, "begin_task sets the input transform"
        # data.augment: its crop and flip; gdumb.crop: the crop alone; neither: the stored images' inputs, once
        augment = random_crop_and_flip if self.augment_generator is not None else random_crop if hp.crop else None
        inputs = None if augment is not None else self.transform(memory.images, memory.task_ids)
        optimizer = torch.optim.SGD(self.network.parameters(), lr=hp.maxlr, momentum=hp.momentum,
                                    weight_decay=hp.weight_decay)
        self.network.train()
        for epoch in range(hp.fitting_epochs):
            for group in optimizer.param_groups:
                group["lr"] = gdumb_lr(epoch, hp.maxlr, hp.minlr)
            order = torch.randperm(len(memory.labels), generator=generator).to(self.device)
            for indices in order.split(hp.replay_batch_size):
                if hp.batch_norm and len(indices) == 1:
                    continue  # a batch norm cannot train on one sample (torch raises); the last batch of a pass
                images = memory.images.index_select(0, indices)  # (B, C, H, W) uint8
                task_ids = memory.task_ids.index_select(0, indices)
                if augment is not None:
                    batch_inputs = self.transform(augment(images, generator), task_ids)
                else:
                    batch_inputs = inputs.index_select(0, indices)
                batch = Batch(batch_inputs, memory.labels.index_select(0, indices), -1, task_ids, images)
                # sampled by the FLOP counter as the base loop's steps (`clbench.approaches.flops`)
                self.flops.step("gdumb-fit", partial(self.fit_step, batch, stage, optimizer, generator, rng),
                                len(indices))

    def fit_step(self, batch: Batch, stage: int, optimizer: torch.optim.Optimizer, generator: torch.Generator,
                 rng: np.random.Generator) -> None:
        """One step of the fit: the scenario's cross-entropy, mixed by CutMix with probability `cutmix_prob`
        (lam x the loss of the own labels + (1 - lam) x the partners', authors' src/main.py line 85)."""
        hp = self.hparams
        with self.autocast():
            if hp.cutmix_alpha > 0 and float(rng.random()) < hp.cutmix_prob:
                assert batch.images is not None and batch.task_ids is not None
                shaped = batch.inputs.reshape(batch.images.shape)  # (B, C, H, W), also for flattened inputs
                mixed, partner, lam = cutmix(shaped, hp.cutmix_alpha, rng, generator)
                features = self.multihead.features(mixed.reshape(batch.inputs.shape))
                other = Batch(mixed, batch.targets[partner], -1, batch.task_ids[partner])
                loss = (lam * self.scenario_cross_entropy(features, batch, stage)[0]
                        + (1 - lam) * self.scenario_cross_entropy(features, other, stage)[0])
            else:
                loss = self.scenario_cross_entropy(self.multihead.features(batch.inputs), batch, stage)[0]
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if hp.clip_grad_norm > 0:
            clip_grad_norm([p for p in self.network.parameters() if p.grad is not None], hp.clip_grad_norm)
        optimizer.step()
