"""Upstream formats -> uint8 image arrays: one converter per built-in data set, and the readers they share.

A converter takes the folder of a data set's upstream files and a scratch folder (for extracted archives) and
returns `Arrays`: form -> split -> (images, labels). `clbench.data.sources` names each data set's converter and
checks what it returns.
"""

from __future__ import annotations

import gzip
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from clbench.data.archives import extract_archive, load_pickle, read_mat
from clbench.errors import ClbenchError

SPLITS = ("train", "test")

Arrays = dict[str, dict[str, tuple[np.ndarray, np.ndarray]]]
"""form -> split -> (images (N, C, H, W) uint8, labels (N,) int64)"""


IDX_DTYPES = {0x08: "u1", 0x09: "i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(path: Path) -> np.ndarray:
    """Read an idx file (LeCun's MNIST format, optionally gzipped) into an array of its declared shape."""
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    if len(raw) < 4 or raw[:2] != b"\0\0" or raw[2] not in IDX_DTYPES:
        raise ClbenchError(f"{path.name}: not an idx file (magic number {raw[:4].hex()})")
    dtype, ndim = np.dtype(IDX_DTYPES[raw[2]]), raw[3]
    shape = tuple(int(d) for d in np.frombuffer(raw, ">u4", ndim, offset=4))
    offset = 4 + 4 * ndim
    if len(raw) != offset + int(np.prod(shape)) * dtype.itemsize:
        raise ClbenchError(f"{path.name}: idx header says {shape} but the file has {len(raw) - offset} data bytes")
    return np.frombuffer(raw, dtype, offset=offset).reshape(shape)


def pad_to_image32(images: np.ndarray) -> np.ndarray:
    """(N, 28, 28) -> (N, 3, 32, 32): zero-padded by 2 pixels on each side, 3 identical channels."""
    count, height, width = images.shape
    top, left = (32 - height) // 2, (32 - width) // 2
    out = np.zeros((count, 3, 32, 32), np.uint8)
    out[:, :, top : top + height, left : left + width] = images[:, None]  # broadcast over channels
    return out


def _idx_split(folder: Path, prefix: str) -> tuple[np.ndarray, np.ndarray]:
    images = read_idx(folder / f"{prefix}-images-idx3-ubyte.gz")  # (N, 28, 28)
    labels = read_idx(folder / f"{prefix}-labels-idx1-ubyte.gz")  # (N,)
    if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
        raise ClbenchError(f"{prefix} idx files: images {images.shape} and labels {labels.shape} do not match")
    return images.astype(np.uint8, copy=False), labels.astype(np.int64)


def convert_mnist_like(folder: Path, scratch: Path) -> Arrays:
    splits = {"train": _idx_split(folder, "train"), "test": _idx_split(folder, "t10k")}
    return {
        "mnist28": {split: (images[:, None], labels) for split, (images, labels) in splits.items()},
        "image32": {split: (pad_to_image32(images), labels) for split, (images, labels) in splits.items()},
    }


def _field(record: Mapping[Any, Any], key: str, source: str) -> Any:
    """`record[key]` for pickles whose keys are str or (Python 3 reading Python 2 data) bytes."""
    for candidate in (key, key.encode()):
        if candidate in record:
            return record[candidate]
    raise ClbenchError(f"{source}: no {key!r} entry (keys: {', '.join(map(str, record))})")


def _load_record(path: Path) -> Mapping[Any, Any]:
    record = load_pickle(path)
    if not isinstance(record, Mapping):
        raise ClbenchError(f"{path.name}: expected a dict, found {type(record).__name__}")
    return record


def _cifar_split(folder: Path, members: tuple[str, ...], label_key: str) -> tuple[np.ndarray, np.ndarray]:
    records = [_load_record(folder / member) for member in members]
    data = np.concatenate([np.asarray(_field(r, "data", folder.name)) for r in records])  # (N, 3072)
    labels = np.concatenate([np.asarray(_field(r, label_key, folder.name)) for r in records])
    return data.reshape(-1, 3, 32, 32).astype(np.uint8, copy=False), labels.astype(np.int64)


def convert_cifar10(folder: Path, scratch: Path) -> Arrays:
    extract_archive(folder / "cifar-10-python.tar.gz", scratch)
    base = scratch / "cifar-10-batches-py"
    train_members = tuple(f"data_batch_{index}" for index in range(1, 6))
    return {"image32": {"train": _cifar_split(base, train_members, "labels"),
                        "test": _cifar_split(base, ("test_batch",), "labels")}}


def convert_cifar100(folder: Path, scratch: Path) -> Arrays:
    extract_archive(folder / "cifar-100-python.tar.gz", scratch)
    base = scratch / "cifar-100-python"
    return {"image32": {"train": _cifar_split(base, ("train",), "fine_labels"),
                        "test": _cifar_split(base, ("test",), "fine_labels")}}


def _svhn_split(path: Path) -> tuple[np.ndarray, np.ndarray]:
    variables = read_mat(path, ("X", "y"))
    images = variables["X"]  # (32, 32, 3, N): rows, columns, channels, samples
    labels = variables["y"].reshape(-1).astype(np.int64)  # 1..10, where 10 is the digit 0
    labels[labels == 10] = 0
    return np.ascontiguousarray(images.transpose(3, 2, 0, 1)).astype(np.uint8, copy=False), labels


def convert_svhn(folder: Path, scratch: Path) -> Arrays:
    return {"image32": {"train": _svhn_split(folder / "train_32x32.mat"),
                        "test": _svhn_split(folder / "test_32x32.mat")}}


def _find_optional_member(scratch: Path, file_name: str, archive: str) -> Path | None:
    """The extracted file called `file_name`, wherever the archive put it, or None."""
    matches = sorted(path for path in scratch.rglob(file_name) if path.is_file())
    if len(matches) > 1:
        raise ClbenchError(f"{archive}: several members named {file_name}: {', '.join(map(str, matches))}")
    return matches[0] if matches else None


def _find_member(scratch: Path, file_name: str, archive: str) -> Path:
    """The extracted file called `file_name`, wherever the archive put it; ClbenchError if absent."""
    path = _find_optional_member(scratch, file_name, archive)
    if path is None:
        raise ClbenchError(f"{archive}: no member named {file_name}")
    return path


def _features_split(path: Path, layout: str) -> tuple[np.ndarray, np.ndarray]:
    """`features`/`labels` pickles; `layout` "NHWC" or "NCHW" for the stored image axes."""
    record = _load_record(path)
    images = np.asarray(_field(record, "features", path.name))
    labels = np.asarray(_field(record, "labels", path.name)).reshape(-1).astype(np.int64)
    if images.ndim != 4 or len(images) != len(labels):
        raise ClbenchError(f"{path.name}: features {images.shape} and labels {labels.shape} do not match")
    if images.dtype == np.int8:  # some upstream FaceScrub pickles; the reference reads them with .astype(np.uint8)
        images = images.view(np.uint8)
    if images.size and (images.min() < 0 or images.max() > 255):
        raise ClbenchError(f"{path.name}: pixel values outside 0..255")
    if layout == "NHWC":
        images = images.transpose(0, 3, 1, 2)
    return np.ascontiguousarray(images, dtype=np.uint8), labels


def _to_three_channels(images: np.ndarray) -> np.ndarray:
    """(N, 1, H, W) -> (N, 3, H, W) with identical channels."""
    return np.repeat(images, 3, axis=1)


def convert_traffic_signs(folder: Path, scratch: Path) -> Arrays:
    archive = "traffic-sign-data.zip"
    extract_archive(folder / archive, scratch)
    train = _features_split(_find_member(scratch, "train.p", archive), "NHWC")
    valid_path = _find_optional_member(scratch, "valid.p", archive)
    if valid_path is not None:  # the 2017 re-issue split 4,410 validation images off the 39,209 training ones
        valid = _features_split(valid_path, "NHWC")
        train = (np.concatenate([train[0], valid[0]]), np.concatenate([train[1], valid[1]]))
    return {"image32": {"train": train, "test": _features_split(_find_member(scratch, "test.p", archive), "NHWC")}}


def convert_facescrub(folder: Path, scratch: Path) -> Arrays:
    archive = "facescrub_100.zip"
    extract_archive(folder / archive, scratch)
    return {"image32": {split: _features_split(_find_member(scratch, f"facescrub_{split}_100.pkl", archive), "NCHW")
                        for split in SPLITS}}


def convert_notmnist(folder: Path, scratch: Path) -> Arrays:
    archive = "notmnist.zip"
    extract_archive(folder / archive, scratch)
    splits = {split: _features_split(_find_member(scratch, f"notmnist_{split}.pkl", archive), "NCHW")
              for split in SPLITS}
    return {"image32": {split: (_to_three_channels(images), labels) for split, (images, labels) in splits.items()}}
