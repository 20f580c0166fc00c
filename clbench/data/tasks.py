"""Task construction: a benchmark's data spec + a seed -> a sequence of tasks as tensors on one device.

Images stay uint8 on the device; `InputTransform` normalises them on the fly per batch (and applies the
pixel permutation of permuted MNIST), so no per-sample Python runs on the hot path. A rotated task (`data.kind:
rotated`) is rotated once, when its tensors are made (`rotate_images`: the task's kept samples only, uint8 in,
uint8 out), so its batches cost what any other task's cost. The evaluation splits (test,
validation) are evaluated at every stage, so their normalised inputs are computed once, at their first
evaluation, and kept (`InputCache`, within a byte budget): the same values, since the transform is elementwise
(and a gather of pixels), whatever the batch.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from clbench.errors import ClbenchError
from clbench.seeding import numpy_generator
from clbench.spec import ONE_DATASET_KINDS, DataSpec, class_blocks, domain_class_problem, task_problem, validation_count

if TYPE_CHECKING:
    from clbench.data.sources import PreparedDataset


log = logging.getLogger(__name__)

ImageAugmentation = Callable[[torch.Tensor], torch.Tensor]
"""uint8 images (B, C, H, W) -> augmented uint8 images of the same shape (`clbench.data.augment`)."""


@dataclass(frozen=True)
class Batch:
    """One batch: normalised inputs, targets, and the task they belong to."""

    inputs: torch.Tensor  # (B, C, H, W) float, or (B, D) for flattened inputs
    targets: torch.Tensor  # (B,) int64, class index within the task
    task: int  # the task of every sample, or -1 when `task_ids` is set
    task_ids: torch.Tensor | None = None  # (B,) int64, per-sample task (joint training, replay)
    images: torch.Tensor | None = None  # (B, C, H, W) uint8: the samples as stored (what a replay buffer keeps)


@dataclass(frozen=True)
class InputTransform:
    """Per-task normalisation tables; row t belongs to task t of the sequence."""

    mean: torch.Tensor  # (T, C)
    std: torch.Tensor  # (T, C)
    permutations: torch.Tensor | None  # (T, D) pixel permutations, or None
    flatten: bool  # MLP inputs: (B, C*H*W)

    def __call__(self, images: torch.Tensor, task: int | torch.Tensor) -> torch.Tensor:
        """uint8 (B, C, H, W) -> normalised float (B, C, H, W) or (B, D)."""
        x = images.float().div_(255.0)
        mean, std = self.mean[task], self.std[task]  # (C,) or (B, C)
        x = (x - mean[..., None, None]) / std[..., None, None]
        if not self.flatten:
            return x
        x = x.flatten(1)  # (B, D)
        if self.permutations is None:
            return x
        permutation = self.permutations[task]  # (D,) or (B, D)
        # index_select: the same gather as x[:, permutation], several times faster on CPU
        return x.index_select(1, permutation) if permutation.dim() == 1 else x.gather(1, permutation)

    def to(self, device: torch.device) -> InputTransform:
        permutations = None if self.permutations is None else self.permutations.to(device)
        return InputTransform(self.mean.to(device), self.std.to(device), permutations, self.flatten)

    def whole(self, images: torch.Tensor, task: int | torch.Tensor, rows: int = 1024) -> torch.Tensor:
        """`self(images, task)` for a whole split, `rows` images at a time into one output tensor: the same values
        (each image's own elementwise operations and pixel gather), without the full-size temporaries that one call
        makes (a float copy, the normalised copy, the permuted copy: 3 x 31 MB for a permuted-MNIST test set).
        `task`: the split's task, or one task id per image."""
        def chunk(start: int) -> torch.Tensor:
            ids = task if isinstance(task, int) else task[start:start + rows]
            return self(images[start:start + rows], ids)

        first = chunk(0)
        if first.shape[0] == images.shape[0]:
            return first
        out = first.new_empty((images.shape[0], *first.shape[1:]))
        out[:rows] = first
        for start in range(rows, images.shape[0], rows):
            out[start:start + rows] = chunk(start)
        return out


# Budget of one task sequence's cache of normalised evaluation inputs (float32, 4 bytes per pixel: a permuted
# MNIST test set is 31.4 MB, a 32x32 RGB test image 12 KB). Beyond it, splits are normalised batch by batch.
EVAL_CACHE_BYTES = 1 << 30


@dataclass(eq=False)
class InputCache:
    """The normalised inputs of whole evaluation splits, each computed at its first use and kept, while the bytes
    kept stay within `budget_bytes` (a split that does not fit is normalised batch by batch, as before).

    A cached split's batch is a slice of the same values the transform gives the slice's images: the transform is
    elementwise, followed by a fixed gather of pixels. The tensors are ordinary (not inference) tensors, so a
    batch may also enter autograd.
    """

    budget_bytes: int = EVAL_CACHE_BYTES
    used_bytes: int = 0
    # id(split) -> (a weak reference to the split, its inputs or None when over budget, their version counter when
    # kept); weak, so that the cache holds no reference back to the splits that hold it (no cycle: a finished run's
    # tensors are freed at once)
    entries: dict[int, tuple[weakref.ref[LabelledData], torch.Tensor | None, int]] = field(default_factory=dict,
                                                                                             repr=False)

    def inputs(self, data: LabelledData) -> torch.Tensor | None:
        """`data`'s normalised inputs (N, ...) float32, or None when they do not fit in the budget.

        Batches are views of the kept inputs: inputs changed in place since they were kept (torch's version counter
        moved: an approach wrote into a batch) are computed again, with a warning, rather than handed out changed."""
        entry = self.entries.get(id(data))
        if entry is None or entry[0]() is not data:
            size = normalised_bytes(data)
            fits = self.used_bytes + size <= self.budget_bytes
            if fits:
                self.used_bytes += size
            entry = self.entries[id(data)] = _cache_entry(data, normalised_split(data) if fits else None)
        elif entry[1] is not None and entry[1]._version != entry[2]:
            log.warning("the kept normalised inputs of a %d-image split of task %d were changed in place (a batch "
                        "written into); they are computed again", len(data), data.task)
            entry = self.entries[id(data)] = _cache_entry(data, normalised_split(data))
        return entry[1]


def normalised_split(data: LabelledData) -> torch.Tensor:
    """A split's normalised inputs, each sample by its own task's tables (`InputTransform.whole`), as ordinary
    tensors (usable in autograd) without a gradient."""
    with torch.inference_mode(False), torch.no_grad():
        return data.transform.whole(data.images, data.task if data.task >= 0 else data.task_ids)


def normalised_bytes(data: LabelledData) -> int:
    """The bytes of a split's normalised inputs: float32, 4 per pixel."""
    return data.images.numel() * torch.finfo(torch.float32).bits // 8


def _cache_entry(data: LabelledData,
                 inputs: torch.Tensor | None) -> tuple[weakref.ref[LabelledData], torch.Tensor | None, int]:
    return weakref.ref(data), inputs, 0 if inputs is None else inputs._version


# Budget of the normalised inputs of the training split being learned (`TrainingInputs`): a permuted MNIST task's
# 60,000 images are 188 MB as float32; beyond it (e.g. SVHN's 73,257 32x32 RGB images, 900 MB), batch by batch.
TRAINING_INPUTS_BYTES = 256 << 20


@dataclass(eq=False)
class TrainingInputs:
    """The normalised inputs of one training split at a time (the task being learned, or the mixed-task split of a
    stage: joint training, iCaRL's exemplars with the task), computed at its first batch and dropped when another
    split asks: a training batch gathers its rows instead of normalising (and permuting) its images again at every
    step. The same values as the transform of the batch's images (elementwise, then a gather of pixels fixed per
    sample's task); None over the budget."""

    budget_bytes: int = TRAINING_INPUTS_BYTES
    split: weakref.ref[LabelledData] | None = field(default=None, repr=False)
    inputs: torch.Tensor | None = field(default=None, repr=False)

    def of(self, data: LabelledData) -> torch.Tensor | None:
        if self.split is None or self.split() is not data:
            self.split, self.inputs = weakref.ref(data), None  # the last split's inputs freed first
            if normalised_bytes(data) <= self.budget_bytes:
                self.inputs = normalised_split(data)
        return self.inputs


@dataclass(frozen=True)
class LabelledData:
    """Images and labels of one split, from one task or (joint training) several, on one device."""

    images: torch.Tensor  # (N, C, H, W) uint8
    labels: torch.Tensor  # (N,) int64
    task_ids: torch.Tensor  # (N,) int64
    transform: InputTransform
    task: int  # the single task of all samples, or -1 if mixed
    # evaluation splits: where their normalised inputs are kept (slices of them are the batches); None: normalise
    # every batch (training data, replay buffers)
    cache: InputCache | None = field(default=None, compare=False, repr=False)

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    def batch(self, indices: torch.Tensor | slice, augment: ImageAugmentation | None = None,
              training_inputs: TrainingInputs | None = None) -> Batch:
        """The samples at `indices`: a slice (views) or a 1-D index tensor on the data's device (gathered).

        `augment` (training batches, `data.augment`) changes the uint8 images before they are normalised; the batch's
        `images` stay the stored ones (what a replay buffer keeps), its `inputs` are the augmented ones.
        `training_inputs` (training batches without augmentation): the split's normalised inputs, gathered.
        """
        images, labels = _take(self.images, indices), _take(self.labels, indices)
        seen = images if augment is None else augment(images)  # (B, C, H, W) uint8
        if training_inputs is not None and augment is None and isinstance(indices, torch.Tensor):
            inputs = training_inputs.of(self)
            if inputs is not None:  # a copy (index_select): the kept inputs are never changed through a batch
                task_ids = None if self.task >= 0 else _take(self.task_ids, indices)
                return Batch(inputs.index_select(0, indices), labels, self.task, task_ids, images)
        if self.task >= 0:
            use_cache = self.cache is not None and augment is None and isinstance(indices, slice)
            cached = self.cache.inputs(self) if use_cache else None  # type: ignore[union-attr]
            inputs = self.transform(seen, self.task) if cached is None else cached[indices]
            return Batch(inputs, labels, self.task, images=images)
        task_ids = _take(self.task_ids, indices)
        return Batch(self.transform(seen, task_ids), labels, -1, task_ids, images)

    def batches(self, batch_size: int) -> list[slice]:
        """Contiguous slices covering the data in order (evaluation)."""
        return [slice(start, start + batch_size) for start in range(0, len(self), batch_size)]

    @staticmethod
    def concatenate(parts: Sequence[LabelledData]) -> LabelledData:
        """Several tasks' data as one mixed set (joint training)."""
        return LabelledData(
            torch.cat([p.images for p in parts]), torch.cat([p.labels for p in parts]),
            torch.cat([p.task_ids for p in parts]), parts[0].transform, -1,
        )


def _take(tensor: torch.Tensor, indices: torch.Tensor | slice) -> torch.Tensor:
    """tensor[indices] along dim 0; index tensors go through index_select (on CPU ~10x faster than [])."""
    return tensor[indices] if isinstance(indices, slice) else tensor.index_select(0, indices)


@dataclass(frozen=True)
class Task:
    """One task of the sequence: its position, name, classes and its three splits."""

    index: int  # 0-based position in the sequence
    name: str
    n_classes: int
    train: LabelledData
    valid: LabelledData
    test: LabelledData


@dataclass(frozen=True)
class TaskSequence:
    """All tasks of one run, in the seeded order."""

    tasks: tuple[Task, ...]
    input_shape: tuple[int, ...]  # network input shape, e.g. (784,) or (3, 32, 32)

    def __len__(self) -> int:
        return len(self.tasks)

    def __getitem__(self, index: int) -> Task:
        return self.tasks[index]

    @property
    def head_sizes(self) -> tuple[int, ...]:
        return tuple(task.n_classes for task in self.tasks)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(task.name for task in self.tasks)


@dataclass(frozen=True)
class RawTask:
    """A task before splitting: numpy arrays and normalisation statistics."""

    name: str
    n_classes: int
    train_images: np.ndarray  # (N, C, H, W) uint8
    train_labels: np.ndarray  # (N,) int64
    test_images: np.ndarray
    test_labels: np.ndarray
    mean: tuple[float, ...]
    std: tuple[float, ...]
    permutation: np.ndarray | None = None  # (D,) for permuted tasks
    rotation: float | None = None  # degrees counter-clockwise, for rotated tasks (applied by `rotate_images`)
    classes: tuple[int, ...] | None = None  # the data set's labels of the task's classes (None: 0..n_classes-1)

    def check(self, validation_fraction: float) -> None:
        """ClbenchError naming the task and its classes if it has one class or a split without samples."""
        problem = task_problem(self.n_classes, len(self.train_labels), len(self.test_labels), validation_fraction)
        if problem is not None:
            classes = self.classes if self.classes is not None else tuple(range(self.n_classes))
            raise ClbenchError(f"task {self.name} (classes {', '.join(map(str, classes))}): {problem}")


DatasetLoader = Callable[[str, str], "PreparedDataset"]  # (name, form) -> the prepared data set


def raw_tasks(spec: DataSpec, seed: int, load: DatasetLoader) -> list[RawTask]:
    """The tasks named by the spec, in their canonical (unshuffled) order."""
    if spec.kind == "mixture":
        return [_whole_dataset(load(name, spec.form)) for name in spec.datasets]
    if spec.kind == "split":
        tasks: list[RawTask] = []
        for name, block in zip(spec.datasets, spec.classes_per_task or ()):
            tasks.extend(_class_blocks(load(name, spec.form), block, spec.remainder))
        return tasks
    if spec.kind == "rotated":
        return _rotations(load(spec.datasets[0], spec.form), spec.n_tasks or 1, seed)
    return _permutations(load(spec.datasets[0], spec.form), spec.n_tasks or 1, seed)


def _whole_dataset(d: PreparedDataset) -> RawTask:
    return RawTask(d.name, d.n_classes, d.train.images, d.train.labels, d.test.images, d.test.labels,
                   tuple(d.mean), tuple(d.std))


def _class_blocks(d: PreparedDataset, block: int, remainder: str) -> list[RawTask]:
    tasks = []
    for blocked in class_blocks(d.name, d.n_classes, block, remainder):
        first = blocked.start
        classes = np.arange(blocked.start, blocked.stop)
        train = np.isin(d.train.labels, classes)
        test = np.isin(d.test.labels, classes)
        name = f"{d.name}:{classes[0]}-{classes[-1]}"
        tasks.append(RawTask(name, len(classes), d.train.images[train], d.train.labels[train] - first,
                             d.test.images[test], d.test.labels[test] - first, tuple(d.mean), tuple(d.std),
                             classes=tuple(int(c) for c in classes)))
    return tasks


def _permutations(d: PreparedDataset, n_tasks: int, seed: int) -> list[RawTask]:
    rng = numpy_generator(seed, "permutations")
    size = int(np.prod(d.train.images.shape[1:]))
    return [
        RawTask(f"{d.name}:perm{k}", d.n_classes, d.train.images, d.train.labels,
                d.test.images, d.test.labels, tuple(d.mean), tuple(d.std), rng.permutation(size))
        for k in range(n_tasks)
    ]


ROTATION_RANGE = (0.0, 180.0)
"""Where each rotated task's angle is drawn uniformly, in degrees: Mammoth's rot-mnist (aimagelab/mammoth@e75a491
`datasets/rot_mnist.py` builds each task's loaders with a new `Rotation()`, and `datasets/transforms/rotation.py`
`Rotation.__init__` draws `np.random.uniform(deg_min=0, deg_max=180)` once per task)."""


def rotation_angles(n_tasks: int, seed: int) -> np.ndarray:
    """The angle of each rotated task in canonical order, in degrees: `n_tasks` independent draws, uniform in
    [0, 180) (`ROTATION_RANGE`), from the run seed's `rotations` stream (`clbench.seeding`)."""
    return numpy_generator(seed, "rotations").uniform(*ROTATION_RANGE, size=n_tasks)


def _rotations(d: PreparedDataset, n_tasks: int, seed: int) -> list[RawTask]:
    return [
        RawTask(f"{d.name}:rot{k}:{angle:.1f}deg", d.n_classes, d.train.images, d.train.labels,
                d.test.images, d.test.labels, tuple(d.mean), tuple(d.std), rotation=float(angle))
        for k, angle in enumerate(rotation_angles(n_tasks, seed))
    ]


def rotation_sources(height: int, width: int, degrees: float) -> torch.Tensor:
    """For each output pixel of an H x W image rotated by `degrees` counter-clockwise about its centre, the flat
    index of the input pixel it takes (nearest neighbour), or -1 where that falls outside the image: (H * W,).

    Output pixel (r, c) at x = c - cx, y = cy - r (y up; cx = (W - 1) / 2, cy = (H - 1) / 2) takes the input at
    the inverse rotation: x' = cos a x + sin a y, y' = -sin a x + cos a y, i.e. row cy - y', column cx + x',
    rounded. So 90 degrees on a square image is exactly the transpose flipped upside down (numpy's rot90), and
    0 degrees the identity. The convention (counter-clockwise, nearest neighbour, same size, 0 outside) is
    torchvision's `rotate`, which Mammoth's `Rotation` calls; the centre is the middle of the pixel grid.
    """
    angle = torch.tensor(degrees, dtype=torch.float64).deg2rad()
    rows = torch.arange(height, dtype=torch.float64).unsqueeze(1).expand(height, width)  # (H, W)
    cols = torch.arange(width, dtype=torch.float64).unsqueeze(0).expand(height, width)  # (H, W)
    cy, cx = (height - 1) / 2, (width - 1) / 2
    x, y = cols - cx, cy - rows
    x_in = torch.cos(angle) * x + torch.sin(angle) * y
    y_in = -torch.sin(angle) * x + torch.cos(angle) * y
    r_in, c_in = torch.round(cy - y_in).long(), torch.round(cx + x_in).long()  # (H, W)
    inside = (r_in >= 0) & (r_in < height) & (c_in >= 0) & (c_in < width)
    return torch.where(inside, r_in * width + c_in, torch.full_like(r_in, -1)).flatten()  # (H * W,)


def rotate_images(images: torch.Tensor, degrees: float) -> torch.Tensor:
    """uint8 (N, C, H, W) images rotated by `degrees` counter-clockwise (`rotation_sources`), uint8 (N, C, H, W);
    pixels that come from outside the image are 0."""
    n, channels, height, width = images.shape
    sources = rotation_sources(height, width, degrees).to(images.device)  # (H * W,)
    flat = images.reshape(n, channels, height * width)  # (N, C, H * W)
    rotated = flat.index_select(2, sources.clamp(min=0))  # (N, C, H * W)
    rotated = rotated.masked_fill(sources < 0, 0)
    return rotated.reshape(n, channels, height, width)


def validation_split(n: int, fraction: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A seeded shuffle split: (train indices, validation indices), validation = round(fraction * n)."""
    order = rng.permutation(n)
    n_valid = validation_count(n, fraction)
    return np.sort(order[n_valid:]), np.sort(order[:n_valid])


def stratified_subsample(labels: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """Indices of a seeded subsample of `size` samples with (up to rounding) the class proportions of `labels`."""
    if size >= len(labels):
        return np.arange(len(labels))
    classes, counts = np.unique(labels, return_counts=True)
    quotas = np.floor(counts / counts.sum() * size).astype(int)
    remainder = size - quotas.sum()
    quotas[np.argsort(-(counts / counts.sum() * size - quotas), kind="stable")[:remainder]] += 1
    chosen = [rng.permutation(np.flatnonzero(labels == c))[:q] for c, q in zip(classes, quotas)]
    return np.sort(np.concatenate(chosen))


def task_order(n_tasks: int, shuffle: bool, seed: int) -> list[int]:
    """The seeded order of the tasks (identity when not shuffled)."""
    return list(numpy_generator(seed, "task-order").permutation(n_tasks)) if shuffle else list(range(n_tasks))


def build_tasks(spec: DataSpec, seed: int, load: DatasetLoader, device: torch.device | str = "cpu",
                max_tasks: int | None = None, eval_cache_bytes: int = EVAL_CACHE_BYTES) -> TaskSequence:
    """Build the seeded task sequence: order, validation split, subsamples, tensors on `device`.

    `max_tasks` keeps only the first tasks of the seeded order (`clbench bench` needs two); they are the same
    tensors as in the full sequence, since every seeded stream is consumed task by task in that order.
    `eval_cache_bytes`: the budget of the validation and test splits' normalised inputs (`InputCache`; 0: none).
    """
    raws = raw_tasks(spec, seed, load)
    order = task_order(len(raws), spec.shuffle_tasks, seed)
    raws = [raws[i] for i in order][:max_tasks]
    if spec.scenario == "domain":
        problem = domain_class_problem([raw.n_classes for raw in raws], [raw.name for raw in raws])
        if problem is not None:
            raise ClbenchError(problem)
    flatten = spec.form == "mnist28"
    transform = _transform(raws, flatten).to(torch.device(device))
    split_rng = numpy_generator(seed, "validation-split")
    sample_rng = numpy_generator(seed, "subsample")
    cache = InputCache(eval_cache_bytes)
    tasks = tuple(_task(t, raw, spec, transform, split_rng, sample_rng, device, cache) for t, raw in enumerate(raws))
    shape = raws[0].train_images.shape[1:]
    input_shape = (int(np.prod(shape)),) if flatten else tuple(int(s) for s in shape)
    return TaskSequence(tasks, input_shape)


def _transform(raws: Sequence[RawTask], flatten: bool) -> InputTransform:
    mean = torch.tensor([raw.mean for raw in raws], dtype=torch.float32)
    std = torch.tensor([raw.std for raw in raws], dtype=torch.float32)
    permutations = None
    if raws[0].permutation is not None:
        permutations = torch.from_numpy(np.stack([raw.permutation for raw in raws])).long()
    return InputTransform(mean, std, permutations, flatten)


def _task(index: int, raw: RawTask, spec: DataSpec, transform: InputTransform, split_rng: np.random.Generator,
          sample_rng: np.random.Generator, device: torch.device | str, cache: InputCache | None = None) -> Task:
    raw.check(spec.validation_fraction)
    train_idx, valid_idx = validation_split(len(raw.train_labels), spec.validation_fraction, split_rng)
    if spec.max_train_samples is not None:
        train_idx = train_idx[stratified_subsample(raw.train_labels[train_idx], spec.max_train_samples, sample_rng)]
        n_valid = 0 if spec.validation_fraction == 0 else max(
            1, int(round(len(train_idx) * spec.validation_fraction / (1 - spec.validation_fraction))))
        valid_idx = valid_idx[stratified_subsample(raw.train_labels[valid_idx], n_valid, sample_rng)]
    test_idx = np.arange(len(raw.test_labels))
    if spec.max_test_samples is not None:
        test_idx = stratified_subsample(raw.test_labels, spec.max_test_samples, sample_rng)

    def tensors(images: np.ndarray, labels: np.ndarray, idx: np.ndarray, kept: InputCache | None) -> LabelledData:
        x = torch.from_numpy(np.ascontiguousarray(images[idx]))
        x = (x if raw.rotation is None else rotate_images(x, raw.rotation)).to(device)
        y = torch.from_numpy(labels[idx].astype(np.int64)).to(device)
        ids = torch.full_like(y, index)
        return LabelledData(x, y, ids, transform, index, kept)

    return Task(index, raw.name, raw.n_classes, tensors(raw.train_images, raw.train_labels, train_idx, None),
                tensors(raw.train_images, raw.train_labels, valid_idx, cache),
                tensors(raw.test_images, raw.test_labels, test_idx, cache))


def prepared_loader(data_dir: Path) -> DatasetLoader:
    """A loader reading the prepared cache of `clbench fetch` (fails with a clear message if missing)."""
    from clbench.data.sources import load_dataset

    return lambda name, form: load_dataset(name, data_dir, form)


def head_sizes_for(spec: DataSpec, n_classes: Callable[[str], int]) -> tuple[int, ...]:
    """Classes per task in canonical order, from the spec and each data set's class count (no data needed)."""
    if spec.kind == "mixture":
        return tuple(n_classes(name) for name in spec.datasets)
    if spec.kind in ONE_DATASET_KINDS:
        return (n_classes(spec.datasets[0]),) * (spec.n_tasks or 1)
    sizes: list[int] = []
    for name, block in zip(spec.datasets, spec.classes_per_task or ()):
        sizes.extend(len(blocked) for blocked in class_blocks(name, n_classes(name), block, spec.remainder))
    return tuple(sizes)


def input_shape_for(spec: DataSpec) -> tuple[int, ...]:
    """The network input shape of a data form: (784,) for mnist28, (3, 32, 32) for image32."""
    return (784,) if spec.form == "mnist28" else (3, 32, 32)
