"""A spec's own data sets (`datasets:` in a spec): an image folder or an npz file, prepared like the built-ins.

Formats:
    imagefolder: `PATH/train/<class>/*.png|jpg|jpeg|bmp|gif|webp` and `PATH/test/<class>/*`; the classes are the
        training split's folder names, sorted (label 0 is the first); hidden files and other suffixes are ignored.
    npz: one file with `x_train`, `y_train`, `x_test`, `y_test`. Images (N, H, W), (N, H, W, C) or (N, C, H, W)
        with C in 1, 3, 4 (channels last wins when both ends could be channels), uint8 0..255 or floats in [0, 1]
        (scaled by 255 and rounded); labels integers, numbered 0.. in the sorted order of `y_train`'s values.

Images are decoded by Pillow and converted into both forms: image32 (3x32x32 RGB, gray replicated) and mnist28
(1x28x28 gray, Pillow's ITU-R 601-2 luma), resized bilinearly (an image of the right size is kept as is); alpha
is dropped. The normalisation of each form is the per-channel mean and (population) standard deviation of the
training split's pixels on the [0, 1] scale.

The cache entry is `<data_dir>/custom/<name>-<content hash>/`, in the built-ins' cache format, so a changed folder
or file is converted again into a new entry, never mixed with the old one. The content hash is the sha256 of the
converter version, the format and, per input file in sorted order, its relative path and sha256.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from clbench import __version__
from clbench.data import cache
from clbench.data.download import file_digest
from clbench.errors import ClbenchError, DataNotFoundError, SpecError

if TYPE_CHECKING:
    from PIL import Image

    from clbench.data.sources import PreparedDataset
    from clbench.spec import BenchmarkSpec

CONVERTER_VERSION = 1
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp")
NPZ_KEYS = ("x_train", "y_train", "x_test", "y_test")
SPLITS = ("train", "test")
FORM_SIZES = {"image32": ("RGB", 32), "mnist28": ("L", 28)}  # form -> (Pillow mode, side)
# A channel whose std is at most this is constant: float rounding leaves ~1e-17 on a constant channel, while a
# channel that is not constant has std >= (1/255) / sqrt(N) on the [0, 1] scale, above 1e-9 for N < 1.5e13 pixels.
CONSTANT_STD = 1e-9

Split = tuple[list[Path] | np.ndarray, np.ndarray]  # image files or (N, H, W, C) uint8 arrays, labels (N,) int64


@dataclass(frozen=True)
class CustomDataset:
    """One entry of a spec's `datasets:` section, with its path resolved."""

    name: str
    format: str  # imagefolder or npz
    path: Path
    declared_in: str  # the spec file, for messages


def custom_datasets(spec: BenchmarkSpec) -> dict[str, CustomDataset]:
    """The spec's own data sets that its `data.datasets` uses, by name."""
    return {name: CustomDataset(name, entry.format, Path(entry.path), spec.source)
            for name, entry in spec.datasets.items() if name in spec.data.datasets}


def class_count(dataset: CustomDataset) -> int:
    """The number of classes, read without converting: training class folders or distinct `y_train` values."""
    _check_exists(dataset)
    if dataset.format == "imagefolder":
        return len(_class_folders(dataset, "train"))
    try:
        with np.load(dataset.path, allow_pickle=False) as archive:
            labels = archive["y_train"]
    except (OSError, ValueError, KeyError) as error:
        raise ClbenchError(f"data set {dataset.name!r} ({dataset.path}): cannot read y_train ({error})") from None
    return len(np.unique(labels))


def n_classes_lookup(spec: BenchmarkSpec) -> Callable[[str], int]:
    """name -> number of classes, for the built-ins and the spec's own data sets (for head sizes)."""
    from clbench.data.sources import get_source

    own = custom_datasets(spec)
    return lambda name: class_count(own[name]) if name in own else get_source(name).n_classes


def check_own_tasks(spec: BenchmarkSpec) -> None:
    """Refuse, before any run, a task of the spec's own data sets that cannot be trained and scored.

    Reads only class folders and label arrays (no conversion). Raises SpecError for a block size that does not
    divide a data set's classes (`data.classes_per_task`), ClbenchError naming the task and its classes for a
    one-class task or a split (training, validation, test) without samples.
    """
    from clbench.spec import task_problem

    for dataset in custom_datasets(spec).values():
        names, counts = split_class_counts(dataset)
        for classes in _task_classes(spec, dataset.name, len(names)):
            n_train, n_test = (sum(counts[split][label] for label in classes) for split in SPLITS)
            problem = task_problem(len(classes), n_train, n_test, spec.data.validation_fraction)
            if problem is not None:
                task = dataset.name if spec.data.kind != "split" else f"{dataset.name}:{classes[0]}-{classes[-1]}"
                raise ClbenchError(f"{spec.source}: data set {dataset.name!r}, task {task} (classes "
                                   f"{', '.join(names[label] for label in classes)}): {problem}; add samples of "
                                   f"these classes ({dataset.path}) or leave the data set out")


def _task_classes(spec: BenchmarkSpec, name: str, n_classes: int) -> list[range]:
    """The classes of each task a data set gives: its class blocks (split), else all of its classes."""
    from clbench.spec import class_blocks

    if spec.data.kind != "split":
        return [range(n_classes)]
    block = dict(zip(spec.data.datasets, spec.data.classes_per_task or ()))[name]
    try:
        return class_blocks(name, n_classes, block, spec.data.remainder)
    except SpecError as error:
        raise SpecError(f"{spec.source}: {error}") from None


def split_class_counts(dataset: CustomDataset) -> tuple[tuple[str, ...], dict[str, list[int]]]:
    """Class names (label order) and per split the samples of each class, from class folders or label arrays."""
    if dataset.format == "imagefolder":
        folders = {split: _class_folders(dataset, split) for split in SPLITS}
        names = tuple(sorted(folders["train"]))
        return names, {split: [len(folders[split].get(name, [])) for name in names] for split in SPLITS}
    _check_exists(dataset)
    where = f"data set {dataset.name!r} ({dataset.path})"
    try:
        with np.load(dataset.path, allow_pickle=False) as archive:
            labels = {split: _labels(archive[f"y_{split}"], f"{where} y_{split}") for split in SPLITS}
    except (OSError, ValueError, KeyError) as error:
        raise ClbenchError(f"{where}: cannot read y_train and y_test ({error})") from None
    values = np.unique(labels["train"])
    counts = {split: [int(np.sum(labels[split] == value)) for value in values] for split in SPLITS}
    return tuple(str(value) for value in values.tolist()), counts


# ---------------------------------------------------------------- content hash and cache folder


def input_files(dataset: CustomDataset) -> list[tuple[str, Path]]:
    """(relative path, path) of every input file, sorted; DataNotFoundError if the path is missing."""
    _check_exists(dataset)
    if dataset.format == "npz":
        return [(dataset.path.name, dataset.path)]
    files = [path for split in SPLITS if (dataset.path / split).is_dir()
             for path in (dataset.path / split).rglob("*") if _is_image_file(path)]
    return sorted((path.relative_to(dataset.path).as_posix(), path) for path in files)


def content_hash(dataset: CustomDataset) -> str:
    """sha256 of the converter version, the format and each input file's relative path and sha256."""
    digest = hashlib.sha256(f"clbench-custom-{CONVERTER_VERSION}:{dataset.format}\n".encode())
    for relative, path in input_files(dataset):
        digest.update(f"{relative}\0{file_digest(path, 'sha256')}\n".encode())
    return digest.hexdigest()


def cache_folder(data_dir: Path, name: str, digest: str) -> Path:
    """Where the version of data set `name` with content hash `digest` is prepared (inside `data_dir`)."""
    from clbench.results import inside

    root = Path(data_dir) / "custom"
    return inside(root, cache.dataset_folder(root, f"{name}-{digest[:16]}"))


def _check_exists(dataset: CustomDataset) -> None:
    where = f"data set {dataset.name!r} (`datasets.{dataset.name}.path` in {dataset.declared_in})"
    if dataset.format == "npz" and not dataset.path.is_file():
        raise DataNotFoundError(f"{where}: no npz file at {dataset.path}; relative paths are read from the spec "
                                f"file's folder")
    if dataset.format == "imagefolder" and not dataset.path.is_dir():
        raise DataNotFoundError(f"{where}: no folder at {dataset.path}; relative paths are read from the spec "
                                f"file's folder")


def _is_image_file(path: Path) -> bool:
    return path.is_file() and path.suffix.lower() in IMAGE_SUFFIXES and not path.name.startswith(".")


# ---------------------------------------------------------------- prepare and load


def prepare_custom(dataset: CustomDataset, data_dir: Path, force: bool = False) -> Path:
    """Convert `dataset` into the cache once (again if its content changed, or with `force`); its folder.

    Raises:
        DataNotFoundError: the path does not exist.
        ClbenchError: bad input (empty class folder, unknown test class, unreadable image, bad npz arrays).
    """
    digest = content_hash(dataset)
    folder = cache_folder(data_dir, dataset.name, digest)
    if not force and cache.read_manifest(folder) is not None:
        return folder
    class_names, splits = _read_imagefolder(dataset) if dataset.format == "imagefolder" else _read_npz(dataset)
    arrays = {form: {split: (_form_images(dataset, splits[split][0], form), splits[split][1]) for split in SPLITS}
              for form in FORM_SIZES}
    return cache.write_prepared(folder, arrays, _manifest(dataset, digest, class_names, arrays))


def load_custom(dataset: CustomDataset, data_dir: Path, form: str) -> PreparedDataset:
    """Memory-map the prepared current version of `dataset` in `form`, preparing it first if needed."""
    from clbench.data.sources import ImageSet, PreparedDataset

    folder = prepare_custom(dataset, data_dir)
    manifest = cache.read_manifest(folder)
    if manifest is None:  # removed between preparing and loading
        raise DataNotFoundError(f"data set {dataset.name!r} is not prepared in {data_dir}: run `clbench fetch "
                                f"{dataset.declared_in}`")
    splits = cache.load_form(folder, manifest, form)
    normalisation = manifest["normalisation"][form]
    return PreparedDataset(name=dataset.name, n_classes=int(manifest["n_classes"]),
                           train=ImageSet(*splits["train"]), test=ImageSet(*splits["test"]),
                           mean=tuple(normalisation["mean"]), std=tuple(normalisation["std"]))


def _manifest(dataset: CustomDataset, digest: str, class_names: tuple[str, ...],
              arrays: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]]) -> dict[str, Any]:
    labels = {split: arrays["image32"][split][1] for split in SPLITS}
    return {
        "name": dataset.name,
        "format": dataset.format,
        "path": str(dataset.path),
        "content_hash": digest,
        "clbench_version": __version__,
        "n_classes": len(class_names),
        "class_names": list(class_names),
        "n_train": int(len(labels["train"])),
        "n_test": int(len(labels["test"])),
        "class_counts": {split: np.bincount(labels[split], minlength=len(class_names)).tolist() for split in SPLITS},
        "normalisation": {form: channel_statistics(arrays[form]["train"][0]) for form in FORM_SIZES},
    }


def channel_statistics(images: np.ndarray) -> dict[str, list[float]]:
    """Per-channel mean and population std of uint8 (N, C, H, W) images on the [0, 1] scale; a constant channel
    (std <= `CONSTANT_STD`, float rounding included) gets std 1, so normalising it only subtracts its mean."""
    mean, std = [], []
    for channel in range(images.shape[1]):
        values = images[:, channel].astype(np.float64) / 255.0  # (N, H, W)
        mean.append(float(values.mean()))
        deviation = float(values.std())
        std.append(deviation if deviation > CONSTANT_STD else 1.0)
    return {"mean": mean, "std": std}


# ---------------------------------------------------------------- decoding


def _form_images(dataset: CustomDataset, images: list[Path] | np.ndarray, form: str) -> np.ndarray:
    """Image files or (N, H, W, C) uint8 arrays -> (N, C, side, side) uint8 in `form`."""
    mode, side = FORM_SIZES[form]
    channels = 3 if mode == "RGB" else 1
    out = np.empty((len(images), channels, side, side), np.uint8)
    for index, image in enumerate(_pil_images(dataset, images)):
        converted = image.convert(mode)
        if converted.size != (side, side):
            converted = converted.resize((side, side), _bilinear())
        pixels = np.asarray(converted, dtype=np.uint8)  # (side, side) or (side, side, 3)
        out[index] = pixels[None] if channels == 1 else pixels.transpose(2, 0, 1)
    return out


def _bilinear() -> Any:
    from PIL import Image

    return Image.Resampling.BILINEAR


def _pil_images(dataset: CustomDataset, images: list[Path] | np.ndarray) -> Iterable[Image.Image]:
    from PIL import Image, UnidentifiedImageError

    if isinstance(images, np.ndarray):  # (N, H, W, C) uint8
        for array in images:  # (H, W, C) -> L, RGB or RGBA
            yield Image.fromarray(array[..., 0] if array.shape[-1] == 1 else array)
        return
    for path in images:
        try:
            with Image.open(path) as image:
                image.load()
                yield image
        except (UnidentifiedImageError, OSError, ValueError) as error:
            raise ClbenchError(f"data set {dataset.name!r}: cannot read the image {path} ({error}); "
                               f"replace or delete it") from None


def _read_imagefolder(dataset: CustomDataset) -> tuple[tuple[str, ...], dict[str, Split]]:
    """Class names (sorted training folders) and per split (image files, labels)."""
    classes = {split: _class_folders(dataset, split) for split in SPLITS}
    names = tuple(sorted(classes["train"]))
    unknown = sorted(set(classes["test"]) - set(names))
    if unknown:
        raise ClbenchError(f"data set {dataset.name!r}: the test split has classes the training split lacks: "
                           f"{', '.join(unknown)} ({dataset.path / 'test'}); add them to train/ or remove them")
    splits: dict[str, Split] = {}
    for split in SPLITS:
        files = [(path, label) for label, name in enumerate(names) for path in classes[split].get(name, [])]
        splits[split] = ([path for path, _ in files], np.array([label for _, label in files], dtype=np.int64))
    return names, splits


def _class_folders(dataset: CustomDataset, split: str) -> dict[str, list[Path]]:
    """Class name -> its sorted image files in `PATH/split/`; errors for a missing split or an empty class."""
    root = dataset.path / split
    if not root.is_dir():
        raise DataNotFoundError(f"data set {dataset.name!r}: no folder {root}; an imagefolder data set needs "
                                f"{dataset.path}/train/<class>/ and {dataset.path}/test/<class>/")
    classes: dict[str, list[Path]] = {}
    for folder in sorted(path for path in root.iterdir() if path.is_dir() and not path.name.startswith(".")):
        files = sorted(path for path in folder.rglob("*") if _is_image_file(path))
        if not files:
            raise ClbenchError(f"data set {dataset.name!r}: the class folder {folder} has no images "
                               f"({', '.join(IMAGE_SUFFIXES)}); add some or delete the folder")
        classes[folder.name] = files
    if not classes:
        raise ClbenchError(f"data set {dataset.name!r}: {root} has no class folders; put images in {root}/<class>/")
    return classes


def _read_npz(dataset: CustomDataset) -> tuple[tuple[str, ...], dict[str, Split]]:
    """Class names (sorted training labels) and per split ((N, H, W, C) uint8 images, labels 0..K-1)."""
    where = f"data set {dataset.name!r} ({dataset.path})"
    try:
        with np.load(dataset.path, allow_pickle=False) as archive:
            missing = [key for key in NPZ_KEYS if key not in archive.files]
            if missing:
                raise ClbenchError(f"{where}: missing arrays {', '.join(missing)}; an npz data set needs "
                                   f"{', '.join(NPZ_KEYS)} (found: {', '.join(archive.files) or 'none'})")
            arrays = {key: archive[key] for key in NPZ_KEYS}
    except (OSError, ValueError) as error:
        raise ClbenchError(f"{where}: not a readable npz file ({error})") from None
    values = np.unique(_labels(arrays["y_train"], f"{where} y_train"))
    splits: dict[str, Split] = {}
    for split in SPLITS:
        images = npz_images(arrays[f"x_{split}"], f"{where} x_{split}")
        labels = _labels(arrays[f"y_{split}"], f"{where} y_{split}")
        if len(images) != len(labels):
            raise ClbenchError(f"{where}: x_{split} has {len(images)} images but y_{split} {len(labels)} labels")
        unknown = sorted(set(labels.tolist()) - set(values.tolist()))
        if unknown:
            raise ClbenchError(f"{where}: y_{split} has labels that y_train lacks: {unknown}")
        splits[split] = (images, np.searchsorted(values, labels).astype(np.int64))
    return tuple(str(value) for value in values.tolist()), splits


def _labels(array: np.ndarray, where: str) -> np.ndarray:
    if array.ndim != 1 or not np.issubdtype(array.dtype, np.integer):
        raise ClbenchError(f"{where}: labels must be a 1-D integer array, found {array.dtype} {array.shape}")
    return array.astype(np.int64)


def npz_images(array: np.ndarray, where: str) -> np.ndarray:
    """(N, H, W), (N, H, W, C) or (N, C, H, W) uint8 or [0, 1] floats -> (N, H, W, C) uint8, C in 1, 3, 4."""
    if array.ndim == 3:
        array = array[..., None]
    elif array.ndim == 4 and array.shape[-1] not in (1, 3, 4) and array.shape[1] in (1, 3, 4):
        array = array.transpose(0, 2, 3, 1)
    if array.ndim != 4 or array.shape[-1] not in (1, 3, 4):
        raise ClbenchError(f"{where}: shape {array.shape}; expected (N, H, W), (N, H, W, C) or (N, C, H, W) "
                           f"with C 1, 3 or 4")
    if np.issubdtype(array.dtype, np.floating):
        missing = np.isnan(array)
        if missing.any():
            first = int(np.argmax(missing.reshape(len(array), -1).any(axis=1)))
            raise ClbenchError(f"{where}: {int(missing.sum())} pixel value(s) are NaN (the first in image {first}); "
                               f"replace them with numbers in [0, 1] (or store uint8 0..255)")
        if array.size and (array.min() < 0 or array.max() > 1):
            raise ClbenchError(f"{where}: float images must lie in [0, 1] (or store uint8 0..255)")
        return np.rint(array * 255).astype(np.uint8)
    if array.dtype != np.uint8:
        raise ClbenchError(f"{where}: dtype {array.dtype}; store images as uint8 0..255 or floats in [0, 1]")
    return np.ascontiguousarray(array)
