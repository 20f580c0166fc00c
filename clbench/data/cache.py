"""The prepared-data cache: `<data_dir>/<name>/` with `.npy` arrays per form and a `manifest.json`.

Layout of a prepared data set:

    <data_dir>/<name>/manifest.json                  provenance, shapes, dtypes, class counts, mean/std
    <data_dir>/<name>/<form>/{train,test}_{images,labels}.npy

A data set is written into a hidden sibling folder, manifest last, and the folder is then renamed into place:
a half-prepared data set is never taken as ready. `read_manifest` accepts a folder only if its manifest has
this cache format and every array it lists is present with the recorded size. Arrays are loaded with
`np.load(mmap_mode="r")`: nothing is read until it is used.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from clbench.errors import ClbenchError

CACHE_FORMAT = 1
MANIFEST_NAME = "manifest.json"


def dataset_folder(data_dir: Path, name: str) -> Path:
    """Where data set `name` is prepared."""
    return Path(data_dir) / name


def array_path(form: str, split: str, kind: str) -> str:
    """Relative path of one array, e.g. `image32/train_images.npy`."""
    return f"{form}/{split}_{kind}.npy"


def write_prepared(folder: Path, arrays: Mapping[str, Mapping[str, tuple[np.ndarray, np.ndarray]]],
                   manifest: Mapping[str, Any]) -> Path:
    """Write `arrays` (form -> split -> (images, labels)) and the manifest atomically into `folder`."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = folder.with_name(f".{folder.name}.staging-{uuid.uuid4().hex[:8]}")
    try:
        entries = _write_arrays(staging, arrays)
        full = {"cache_format": CACHE_FORMAT, **manifest, "arrays": entries}
        _write_json_atomic(staging / MANIFEST_NAME, full)
        _swap_into_place(staging, folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder


def _write_arrays(staging: Path, arrays: Mapping[str, Mapping[str, tuple[np.ndarray, np.ndarray]]]) -> dict:
    entries: dict[str, dict[str, Any]] = {}
    for form, splits in arrays.items():
        (staging / form).mkdir(parents=True, exist_ok=True)
        for split, (images, labels) in splits.items():
            for kind, array in (("images", images), ("labels", labels)):
                relative = array_path(form, split, kind)
                np.save(staging / relative, np.ascontiguousarray(array), allow_pickle=False)
                entries[relative] = {"shape": list(array.shape), "dtype": str(array.dtype),
                                     "bytes": (staging / relative).stat().st_size}
    return entries


def _write_json_atomic(path: Path, content: Mapping[str, Any]) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(content, indent=2, sort_keys=False) + "\n")
    os.replace(temporary, path)


def _swap_into_place(staging: Path, folder: Path) -> None:
    """Rename `staging` onto `folder`, moving an older version aside first and deleting it after."""
    retired = folder.with_name(f".{folder.name}.retired-{uuid.uuid4().hex[:8]}")
    if folder.exists():
        os.replace(folder, retired)
    os.replace(staging, folder)
    shutil.rmtree(retired, ignore_errors=True)


def read_manifest(folder: Path) -> dict[str, Any] | None:
    """The manifest of a complete prepared data set in `folder`, or None if absent, stale or incomplete."""
    try:
        manifest = json.loads((folder / MANIFEST_NAME).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or manifest.get("cache_format") != CACHE_FORMAT:
        return None
    arrays = manifest.get("arrays")
    if not isinstance(arrays, dict) or not arrays:
        return None
    for relative, entry in arrays.items():
        path = folder / relative
        if not path.is_file() or path.stat().st_size != entry.get("bytes"):
            return None
    return manifest


def load_form(folder: Path, manifest: Mapping[str, Any], form: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Memory-map the arrays of `form`: split -> (images, labels)."""
    splits: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for split in ("train", "test"):
        pair = []
        for kind in ("images", "labels"):
            relative = array_path(form, split, kind)
            if relative not in manifest["arrays"]:
                raise ClbenchError(f"{folder}: no {form} arrays prepared; run `clbench fetch {folder.name} --force`")
            array = np.load(folder / relative, mmap_mode="r", allow_pickle=False)
            if list(array.shape) != manifest["arrays"][relative]["shape"]:
                raise ClbenchError(f"{folder / relative}: shape {array.shape} differs from the manifest; "
                                   f"run `clbench fetch {folder.name} --force`")
            pair.append(array)
        splits[split] = (pair[0], pair[1])
    return splits


def folder_bytes(folder: Path) -> int:
    """Total size of the regular files under `folder` (0 if it does not exist)."""
    if not folder.is_dir():
        return 0
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())
