"""Safe reading of downloaded containers: tar and zip extraction, data pickles, MATLAB v5 files.

Archives and pickles come from the web. Extraction checks every member before writing anything: absolute
paths, paths that climb out of the target folder, links that point outside it and device files are refused
with UnsafeArchiveError. Pickles are loaded by an unpickler that admits numpy arrays, dtypes and numpy
scalars plus plain containers (dict, list, tuple, set, str, bytes, numbers); any other global is refused.
MATLAB v5 `.mat` files (SVHN) are read by a small numpy-only parser of numeric matrices, so that scipy is
not needed; MATLAB 7.3 files (HDF5) are not supported.
"""

from __future__ import annotations

import builtins
import codecs
import importlib
import pickle
import stat
import struct
import tarfile
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import IO, Any

import numpy as np

from clbench.errors import ClbenchError, UnsafeArchiveError

# (module, name) -> candidate modules to take `name` from (numpy 2 moved numpy.core to numpy._core).
_NUMPY_CORE = ("numpy._core.multiarray", "numpy.core.multiarray")
_NUMPY_NUMERIC = ("numpy._core.numeric", "numpy.core.numeric")
_ALLOWED_GLOBALS: dict[tuple[str, str], tuple[str, ...]] = {
    ("numpy", "ndarray"): ("numpy",),
    ("numpy", "dtype"): ("numpy",),
    **{(module, "_reconstruct"): _NUMPY_CORE for module in _NUMPY_CORE},
    **{(module, "scalar"): _NUMPY_CORE for module in _NUMPY_CORE},
    **{(module, "_frombuffer"): _NUMPY_NUMERIC for module in _NUMPY_NUMERIC},
}
_ALLOWED_BUILTINS = frozenset({"set", "frozenset", "bytearray", "complex"})


def extract_archive(archive: Path, target: Path) -> list[Path]:
    """Extract a tar (optionally compressed) or zip archive into `target` after checking every member.

    Returns:
        The extracted regular files.

    Raises:
        UnsafeArchiveError: a member is absolute, escapes `target`, is a link leading outside or a device.
    """
    target.mkdir(parents=True, exist_ok=True)
    root = target.resolve()
    if zipfile.is_zipfile(archive):
        return _extract_zip(archive, root)
    if tarfile.is_tarfile(archive):
        return _extract_tar(archive, root)
    raise UnsafeArchiveError(f"{archive.name}: neither a tar nor a zip archive")


def _extract_tar(archive: Path, root: Path) -> list[Path]:
    with tarfile.open(archive) as tar:
        members = tar.getmembers()
        for member in members:
            _check_tar_member(member, root, archive.name)
        if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4: the standard library checks too
            tar.extractall(root, filter="data")
        else:  # pragma: no cover - older Pythons; every member was checked above
            tar.extractall(root)  # noqa: S202
    return [root / member.name for member in members if member.isfile()]


def _check_tar_member(member: tarfile.TarInfo, root: Path, archive_name: str) -> None:
    _check_path(member.name, root, archive_name)
    if member.issym():
        _check_link(member.name, member.linkname, root, archive_name)
    elif member.islnk():  # hard links name another member, relative to the archive root
        _check_path(member.linkname, root, archive_name, what=f"hard link {member.name!r} -> ")
    elif not (member.isfile() or member.isdir()):
        raise UnsafeArchiveError(f"{archive_name}: refused member {member.name!r}: a device or special file")


def _extract_zip(archive: Path, root: Path) -> list[Path]:
    with zipfile.ZipFile(archive) as zip_file:
        infos = zip_file.infolist()
        for info in infos:
            _check_path(info.filename, root, archive.name)
            if stat.S_ISLNK(info.external_attr >> 16):
                link = zip_file.read(info).decode("utf-8", errors="replace")
                _check_link(info.filename, link, root, archive.name)
        zip_file.extractall(root)
    return [root / info.filename for info in infos if not info.is_dir()]


def _check_path(name: str, root: Path, archive_name: str, what: str = "") -> None:
    """Refuse absolute names and names that resolve outside `root`."""
    if PurePosixPath(name).is_absolute() or PureWindowsPath(name).is_absolute() or PureWindowsPath(name).drive:
        raise UnsafeArchiveError(f"{archive_name}: refused {what}member {name!r}: an absolute path")
    if not (root / name).resolve().is_relative_to(root):
        raise UnsafeArchiveError(f"{archive_name}: refused {what}member {name!r}: it escapes the target folder")


def _check_link(name: str, link: str, root: Path, archive_name: str) -> None:
    """Refuse a symbolic link whose target is absolute or outside `root`."""
    destination = (root / name).parent / link
    if PurePosixPath(link).is_absolute() or not destination.resolve().is_relative_to(root):
        raise UnsafeArchiveError(
            f"{archive_name}: refused link {name!r} -> {link!r}: it points outside the target folder"
        )


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler for data files: numpy arrays, dtypes, scalars and plain containers only."""

    def __init__(self, stream: IO[bytes], *, source: str, encoding: str = "latin1") -> None:
        super().__init__(stream, encoding=encoding)
        self.source = source

    def find_class(self, module: str, name: str) -> Callable[..., Any]:
        """Resolve an allowed global; refuse every other one with UnsafeArchiveError."""
        if module in ("builtins", "__builtin__") and name in _ALLOWED_BUILTINS:
            return getattr(builtins, name)
        if (module, name) == ("_codecs", "encode"):  # how protocol-2 pickles from Python 3 carry bytes
            return codecs.encode
        candidates = _ALLOWED_GLOBALS.get((module, name))
        if candidates is None:
            raise UnsafeArchiveError(
                f"{self.source}: refused to unpickle the global {module}.{name}: "
                "only numpy arrays and plain containers are allowed in data files"
            )
        return _import_first(candidates, name)


def _import_first(modules: tuple[str, ...], name: str) -> Callable[..., Any]:
    for module in modules:
        try:
            return getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
    raise UnsafeArchiveError(f"cannot resolve {name} in any of {', '.join(modules)}")


def restricted_load(stream: IO[bytes], *, source: str) -> Any:
    """Unpickle a data file with RestrictedUnpickler (Python 2 pickles are read as latin-1)."""
    try:
        return RestrictedUnpickler(stream, source=source).load()
    except UnsafeArchiveError:
        raise
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError) as error:
        raise ClbenchError(f"{source}: not a readable data pickle ({error}); delete it and fetch again") from None


def load_pickle(path: Path) -> Any:
    """Unpickle the file at `path` with the restricted unpickler."""
    with path.open("rb") as stream:
        return restricted_load(stream, source=path.name)


# MATLAB level-5 MAT-file: data types of elements and classes of matrices (MathWorks "MAT-File Format").
_MI_MATRIX, _MI_COMPRESSED = 14, 15
_MI_TYPES = {1: "i1", 2: "u1", 3: "i2", 4: "u2", 5: "i4", 6: "u4", 7: "f4", 9: "f8", 12: "i8", 13: "u8"}
_MX_NUMERIC_CLASSES = {6: "f8", 7: "f4", 8: "i1", 9: "u1", 10: "i2", 11: "u2", 12: "i4", 13: "u4", 14: "i8", 15: "u8"}


def read_mat(path: Path, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Read the real numeric matrices `names` from a MATLAB v5 .mat file (compressed or not).

    Returns:
        name -> array with MATLAB's shape, in Fortran (column-major) order as MATLAB stores it.
    """
    data = memoryview(path.read_bytes())
    order = _mat_byte_order(data, path.name)
    found: dict[str, np.ndarray] = {}
    position = 128
    while position + 8 <= len(data) and len(found) < len(names):
        kind, body, position = _mat_element(data, position, order)
        if kind == _MI_COMPRESSED:
            kind, body, _ = _mat_element(memoryview(zlib.decompress(body)), 0, order)
        if kind == _MI_MATRIX:
            name, array = _mat_matrix(body, order)
            if name in names and array is not None:
                found[name] = array
    missing = [name for name in names if name not in found]
    if missing:
        raise ClbenchError(f"{path.name}: no numeric variable {', '.join(missing)} in this .mat file")
    return found


def _mat_byte_order(data: memoryview, file_name: str) -> str:
    header = bytes(data[:128])
    if header.startswith(b"MATLAB 7.3") or header[:8] == b"\x89HDF\r\n\x1a\n":
        raise ClbenchError(f"{file_name}: a MATLAB 7.3 (HDF5) file; only MATLAB v5 .mat files are supported")
    if len(header) < 128 or not header.startswith(b"MATLAB 5.0") or header[126:128] not in (b"IM", b"MI"):
        raise ClbenchError(f"{file_name}: not a MATLAB v5 .mat file")
    return "<" if header[126:128] == b"IM" else ">"


def _mat_element(data: memoryview, position: int, order: str) -> tuple[int, memoryview, int]:
    """Parse the data element at `position`: (data type, body, position of the next element)."""
    (first,) = struct.unpack_from(order + "I", data, position)
    if first >> 16:  # small data element: type and size packed in 4 bytes, body in the next 4
        size = first >> 16
        return first & 0xFFFF, data[position + 4 : position + 4 + size], position + 8
    (size,) = struct.unpack_from(order + "I", data, position + 4)
    start = position + 8
    if start + size > len(data):
        raise ClbenchError("truncated .mat file: delete it and fetch again")
    padded = size if first == _MI_COMPRESSED else (size + 7) // 8 * 8
    return first, data[start : start + size], start + padded


def _mat_matrix(body: memoryview, order: str) -> tuple[str, np.ndarray | None]:
    """Parse a miMATRIX body: (name, array), array None for non-numeric or complex matrices."""
    _, flags, position = _mat_element(body, 0, order)
    _, dims, position = _mat_element(body, position, order)
    _, name, position = _mat_element(body, position, order)
    flag_word = struct.unpack_from(order + "I", flags, 0)[0]
    matrix_class, is_complex = flag_word & 0xFF, bool(flag_word & 0x800)
    shape = tuple(int(d) for d in np.frombuffer(dims, order + "i4"))
    if matrix_class not in _MX_NUMERIC_CLASSES or is_complex:
        return bytes(name).decode("ascii", "replace"), None
    kind, real, _ = _mat_element(body, position, order)
    if kind not in _MI_TYPES:
        raise ClbenchError(f"unsupported .mat data type {kind} in variable {bytes(name).decode('ascii', 'replace')}")
    values = np.frombuffer(real, order + _MI_TYPES[kind])
    values = values.astype(_MX_NUMERIC_CLASSES[matrix_class], copy=False)
    return bytes(name).decode("ascii", "replace"), values.reshape(shape, order="F")
