"""Safe extraction (tar, zip), the restricted unpickler and the MATLAB v5 reader."""

from __future__ import annotations

import io
import os
import pickle
import stat
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest

from clbench.data.archives import extract_archive, load_pickle, read_mat, restricted_load
from clbench.errors import ClbenchError, UnsafeArchiveError


def _tar(path: Path, *members: tarfile.TarInfo, data: bytes = b"payload") -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for member in members:
            if member.isfile():
                member.size = len(data)
                tar.addfile(member, io.BytesIO(data))
            else:
                tar.addfile(member)
    return path


def _info(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return info


def test_safe_tar_is_extracted(tmp_path: Path) -> None:
    archive = _tar(tmp_path / "ok.tar.gz", _info("folder", tarfile.DIRTYPE), _info("folder/a.bin"),
                   _info("folder/link", tarfile.SYMTYPE, "a.bin"))

    files = extract_archive(archive, tmp_path / "out")

    assert files == [(tmp_path / "out" / "folder" / "a.bin").resolve()]
    assert (tmp_path / "out" / "folder" / "a.bin").read_bytes() == b"payload"


@pytest.mark.parametrize(
    ("member", "reason"),
    [
        (_info("../escape.bin"), "escapes"),
        (_info("folder/../../escape.bin"), "escapes"),
        (_info("/tmp/absolute.bin"), "absolute"),
        (_info("evil", tarfile.SYMTYPE, "/etc/passwd"), "outside"),
        (_info("evil", tarfile.SYMTYPE, "../../escape.bin"), "outside"),
        (_info("evil", tarfile.LNKTYPE, "../escape.bin"), "escapes"),
        (_info("device", tarfile.CHRTYPE), "device"),
        (_info("fifo", tarfile.FIFOTYPE), "device"),
    ],
)
def test_unsafe_tar_members_are_refused_before_anything_is_written(tmp_path: Path, member, reason: str) -> None:
    archive = _tar(tmp_path / "bad.tar.gz", _info("first.bin"), member)

    with pytest.raises(UnsafeArchiveError, match=reason):
        extract_archive(archive, tmp_path / "out" / "deep")

    assert not (tmp_path / "out" / "deep" / "first.bin").exists()
    assert not (tmp_path / "escape.bin").exists() and not (tmp_path / "out" / "escape.bin").exists()


def _zip(path: Path, name: str, data: bytes = b"payload", symlink: bool = False) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("first.bin", b"ok")
        info = zipfile.ZipInfo(name)
        if symlink:
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
        archive.writestr(info, data)
    return path


def test_safe_zip_is_extracted(tmp_path: Path) -> None:
    archive = _zip(tmp_path / "ok.zip", "inner/a.bin")

    files = extract_archive(archive, tmp_path / "out")

    assert sorted(path.name for path in files) == ["a.bin", "first.bin"]
    assert (tmp_path / "out" / "inner" / "a.bin").read_bytes() == b"payload"


@pytest.mark.parametrize(
    ("name", "data", "symlink", "reason"),
    [
        ("../escape.bin", b"x", False, "escapes"),
        ("/absolute.bin", b"x", False, "absolute"),
        ("C:/windows.bin", b"x", False, "absolute"),
        ("link", b"../../escape.bin", True, "outside"),
        ("link", b"/etc/passwd", True, "outside"),
    ],
)
def test_unsafe_zip_members_are_refused(tmp_path: Path, name: str, data: bytes, symlink: bool, reason: str) -> None:
    archive = _zip(tmp_path / "bad.zip", name, data, symlink)

    with pytest.raises(UnsafeArchiveError, match=reason):
        extract_archive(archive, tmp_path / "out" / "deep")

    assert not (tmp_path / "out" / "deep" / "first.bin").exists()


def test_a_file_that_is_no_archive_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "plain.tar.gz"
    path.write_bytes(b"not an archive at all" * 50)

    with pytest.raises(UnsafeArchiveError):
        extract_archive(path, tmp_path / "out")


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_numpy_arrays_and_plain_containers_are_unpickled(protocol: int) -> None:
    record = {"features": np.arange(24, dtype=np.uint8).reshape(2, 3, 2, 2), "labels": [1, 2], "meta": (b"x", 1.5),
              "names": {"a", "b"}, "scalar": np.int64(7), "bytes": bytearray(b"ab")}

    loaded = restricted_load(io.BytesIO(pickle.dumps(record, protocol=protocol)), source="ok.pkl")

    assert np.array_equal(loaded["features"], record["features"]) and loaded["features"].dtype == np.uint8
    assert loaded["labels"] == [1, 2] and loaded["meta"] == (b"x", 1.5) and loaded["names"] == {"a", "b"}
    assert loaded["scalar"] == 7 and loaded["bytes"] == bytearray(b"ab")


# A Python 2 cPickle (protocol 2) of {'data': uint8 [[1, 2]], 'labels': [3]}, written as CIFAR's batches were:
# numpy.core globals, array bytes and keys as Python 2 str (SHORT_BINSTRING).
PYTHON2_PICKLE = (
    b"\x80\x02}q\x00(U\x04dataq\x01cnumpy.core.multiarray\n_reconstruct\nq\x02cnumpy\nndarray\nq\x03K\x00\x85U\x01b"
    b"\x87Rq\x04(K\x01K\x01K\x02\x86cnumpy\ndtype\nq\x05U\x02u1K\x00K\x01\x87Rq\x06(K\x03U\x01|NNNJ\xff\xff\xff\xff"
    b"J\xff\xff\xff\xffK\x00tb\x89U\x02\x01\x02tbU\x06labelsq\x07]q\x08K\x03au."
)


def test_python2_numpy_pickles_are_read() -> None:
    loaded = restricted_load(io.BytesIO(PYTHON2_PICKLE), source="data_batch_1")

    assert loaded["labels"] == [3]
    assert loaded["data"].dtype == np.uint8 and loaded["data"].tolist() == [[1, 2]]


class _CallsSystem:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_pickle_that_would_call_os_system_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pkl"
    path.write_bytes(pickle.dumps({"features": _CallsSystem(marker)}))

    with pytest.raises(UnsafeArchiveError, match=r"(posix|os)\.system") as caught:
        load_pickle(path)

    assert "evil.pkl" in str(caught.value)
    assert not marker.exists()


@pytest.mark.parametrize(
    ("payload", "refused"),
    [
        (b"cos\nsystem\n(S'echo pwned'\ntR.", "os.system"),
        (b"cbuiltins\neval\n(S'1+1'\ntR.", "builtins.eval"),
        (b"c__builtin__\ngetattr\n(S'x'\nS'y'\ntR.", "__builtin__.getattr"),
        (b"ccopyreg\n_reconstructor\n(tR.", "copyreg._reconstructor"),
        (b"cnumpy\nload\n(S'x'\ntR.", "numpy.load"),
    ],
)
def test_globals_outside_the_allow_list_are_refused_by_name(payload: bytes, refused: str) -> None:
    with pytest.raises(UnsafeArchiveError, match=refused.replace(".", r"\.")):
        restricted_load(io.BytesIO(payload), source="handmade.pkl")


def test_a_corrupt_pickle_is_a_clear_error() -> None:
    with pytest.raises(ClbenchError, match="broken.pkl"):
        restricted_load(io.BytesIO(b"\x80\x04garbage"), source="broken.pkl")


@pytest.mark.parametrize("compress", [True, False])
def test_mat_v5_numeric_variables_are_read(tmp_path: Path, formats, compress: bool) -> None:
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, size=(4, 5, 3, 2), dtype=np.uint8)
    y = np.array([[10.0], [3.0]])
    path = tmp_path / "v.mat"
    path.write_bytes(formats.mat_bytes(formats.mat_variable("y", y, "f8", "u1", compress),
                                       formats.mat_variable("X", x, "u1", "u1", compress)))

    found = read_mat(path, ("X", "y"))

    assert found["X"].shape == x.shape and np.array_equal(found["X"], x) and found["X"].dtype == np.uint8
    assert found["y"].dtype == np.float64 and np.array_equal(found["y"], y)


def test_mat_reader_refuses_hdf5_and_missing_variables(tmp_path: Path, formats) -> None:
    hdf5 = tmp_path / "new.mat"
    hdf5.write_bytes(b"MATLAB 7.3 MAT-file".ljust(128, b" "))
    plain = tmp_path / "plain.mat"
    plain.write_bytes(formats.mat_bytes(formats.mat_variable("X", np.zeros((2, 2), np.uint8), "u1", "u1", True)))

    with pytest.raises(ClbenchError, match="7.3"):
        read_mat(hdf5, ("X",))
    with pytest.raises(ClbenchError, match="y"):
        read_mat(plain, ("X", "y"))


def test_mat_reader_agrees_with_scipy(tmp_path: Path) -> None:
    scipy_io = pytest.importorskip("scipy.io")
    x = np.random.default_rng(1).integers(0, 256, size=(32, 32, 3, 5), dtype=np.uint8)
    y = np.arange(1, 6, dtype=np.float64).reshape(-1, 1)
    scipy_io.savemat(tmp_path / "s.mat", {"X": x, "y": y, "note": "text"}, do_compression=True)

    found = read_mat(tmp_path / "s.mat", ("X", "y"))

    assert np.array_equal(found["X"], x) and np.array_equal(found["y"], y)


def test_the_dev_extra_installs_scipy_so_the_mat_cross_check_runs() -> None:
    tomllib = pytest.importorskip("tomllib")
    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    dev = pyproject["project"]["optional-dependencies"]["dev"]
    assert any(requirement.split(">")[0].split("=")[0].strip() == "scipy" for requirement in dev), dev
