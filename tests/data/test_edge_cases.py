"""Edge cases of the real upstream files: int8 FaceScrub pickles, the traffic-signs zip name, mirror checksums."""

from __future__ import annotations

import dataclasses
import pickle
import zipfile
from pathlib import Path

import numpy as np
import pytest

from clbench.data import sources
from clbench.data.sources import fetch_dataset, load_dataset
from clbench.errors import ChecksumError, ClbenchError, DataNotFoundError


def _facescrub_zip_with_int8_pixels(folder: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """facescrub_100.zip whose pickles hold int8 features (N, 3, 32, 32), as in part of the upstream history."""
    expected = {}
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(folder / "facescrub_100.zip", "w") as archive:
        for split, count in (("train", 3), ("test", 2)):
            pixels = np.zeros((count, 3, 32, 32), np.uint8)
            pixels[0, 0, 0, :4] = [0, 1, 127, 128]  # int8: 0, 1, 127, -128
            pixels[0, 0, 1, :2] = [255, 200]  # int8: -1, -56
            pixels[-1, 2, 31, 31] = 129  # int8: -127
            stored = pixels.view(np.int8)
            assert stored[0, 0, 1, 0] == -1 and stored.min() < 0  # really negative values in the pickle
            labels = np.arange(count, dtype=np.int32) + 7
            record = {"features": stored, "labels": labels}
            archive.writestr(f"facescrub_{split}_100.pkl", pickle.dumps(record, protocol=2))
            expected[split] = (pixels, labels.astype(np.int64))
    return expected


def test_facescrub_int8_pixels_are_read_as_the_same_bytes_in_uint8(tmp_path: Path, synthetic_mirror) -> None:
    expected = _facescrub_zip_with_int8_pixels(tmp_path / "mirror" / "facescrub")
    synthetic_mirror.repin("facescrub")

    fetch_dataset("facescrub", tmp_path / "data", str(tmp_path / "mirror"))

    loaded = load_dataset("facescrub", tmp_path / "data")
    for split in ("train", "test"):
        got = getattr(loaded, split)
        assert got.images.dtype == np.uint8
        assert np.array_equal(got.images, expected[split][0])
        assert np.array_equal(got.labels, expected[split][1])
    assert loaded.train.images[0, 0, 1, 0] == 255 and loaded.train.images[0, 0, 0, 3] == 128


def test_facescrub_int32_pixels_outside_0_255_are_still_refused(tmp_path: Path, synthetic_mirror) -> None:
    folder = tmp_path / "mirror" / "facescrub"
    folder.mkdir(parents=True)
    with zipfile.ZipFile(folder / "facescrub_100.zip", "w") as archive:
        for split in ("train", "test"):
            features = np.zeros((2, 3, 32, 32), np.int32)
            features[0, 0, 0, 0] = -1
            record = {"features": features, "labels": np.zeros(2, np.int32)}
            archive.writestr(f"facescrub_{split}_100.pkl", pickle.dumps(record, protocol=2))
    synthetic_mirror.repin("facescrub")

    with pytest.raises(ClbenchError, match="outside 0..255"):
        fetch_dataset("facescrub", tmp_path / "data", str(tmp_path / "mirror"))


@pytest.mark.parametrize("served", ["folder", "http"])
def test_traffic_signs_mirror_may_hold_the_reissue_name(tmp_path: Path, synthetic_mirror, http_server,
                                                        served: str) -> None:
    expected = synthetic_mirror("traffic-signs")
    folder = tmp_path / "mirror" / "traffic-signs"
    (folder / "traffic-sign-data.zip").rename(folder / "traffic-signs-data.zip")
    assert [path.name for path in folder.iterdir()] == ["traffic-signs-data.zip"]
    mirror = http_server.serve_folder(tmp_path / "mirror") if served == "http" else str(tmp_path / "mirror")

    fetch_dataset("traffic-signs", tmp_path / "data", mirror)

    loaded = load_dataset("traffic-signs", tmp_path / "data")
    assert np.array_equal(loaded.train.images, expected.train[0]) and np.array_equal(loaded.test.labels,
                                                                                     expected.test[1])
    assert (tmp_path / "data" / "downloads" / "traffic-signs" / "traffic-sign-data.zip").is_file()


def test_traffic_signs_missing_under_both_names_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "mirror" / "traffic-signs").mkdir(parents=True)

    with pytest.raises(DataNotFoundError) as caught:
        fetch_dataset("traffic-signs", tmp_path / "data", str(tmp_path / "mirror"))

    message = str(caught.value)
    assert "traffic-sign-data.zip" in message and "traffic-signs-data.zip" in message
    assert "<mirror>/traffic-signs/<file name>" in message


def _corrupt(path: Path) -> None:
    content = bytearray(path.read_bytes())
    content[-1] ^= 0xFF
    path.write_bytes(bytes(content))


@pytest.mark.parametrize("served", ["folder", "http"])
def test_checksum_error_from_a_mirror_does_not_suggest_a_mirror(tmp_path: Path, synthetic_mirror, http_server,
                                                                served: str) -> None:
    synthetic_mirror("cifar10")
    _corrupt(tmp_path / "mirror" / "cifar10" / "cifar-10-python.tar.gz")
    mirror = http_server.serve_folder(tmp_path / "mirror") if served == "http" else str(tmp_path / "mirror")

    with pytest.raises(ChecksumError) as caught:
        fetch_dataset("cifar10", tmp_path / "data", mirror)

    message = str(caught.value)
    assert "use a mirror" not in message and "mismatch" in message
    assert "cifar10/cifar-10-python.tar.gz" in message  # the mirror's file to replace
    assert "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz" in message  # where the right one is
    assert "replace" in message


def test_checksum_error_from_upstream_still_suggests_a_mirror(tmp_path: Path, http_server, monkeypatch) -> None:
    url = http_server.serve("/cifar-10-python.tar.gz", b"not the published archive")
    real = sources.get_source("cifar10")
    upstream = dataclasses.replace(real.files[0], urls=(url,))
    monkeypatch.setattr(sources, "get_source", lambda name: dataclasses.replace(real, files=(upstream,)))

    with pytest.raises(ChecksumError) as caught:
        fetch_dataset("cifar10", tmp_path / "data")

    assert "use a mirror" in str(caught.value)


# ---------------------------------------------------------------- how the tests find the real mirror


def test_tests_take_the_mirror_from_clbench_mirror_when_set(tmp_path: Path) -> None:
    from realmirror import SHARED_DATA, mirror_dir, require_mirror

    (tmp_path / "MD5SUMS").write_text("")
    assert mirror_dir({"CLBENCH_MIRROR": str(tmp_path)}) == tmp_path
    assert require_mirror(environ={"CLBENCH_MIRROR": str(tmp_path)}) == tmp_path
    assert mirror_dir({}) == SHARED_DATA and SHARED_DATA.parts[-2:] == ("shared", "data")


def test_a_clbench_mirror_without_the_files_skips_instead_of_falling_back(tmp_path: Path) -> None:
    from realmirror import mirror_dir, require_mirror

    missing = tmp_path / "nowhere"
    assert mirror_dir({"CLBENCH_MIRROR": str(missing)}) == missing
    with pytest.raises(pytest.skip.Exception, match="CLBENCH_MIRROR") as caught:
        require_mirror("MD5SUMS", environ={"CLBENCH_MIRROR": str(missing)})
    assert str(missing / "MD5SUMS") in str(caught.value)


def test_a_relative_mirror_and_data_folder_are_resolved_once_against_the_start_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from realmirror import absolute_environment

    from clbench.cli.common import absolute_location, default_data_dir

    monkeypatch.chdir(tmp_path)
    environ = {"CLBENCH_MIRROR": "../shared/data", "CLBENCH_DATA": "cache", "OTHER": "x"}
    absolute_environment(environ)
    assert environ == {"CLBENCH_MIRROR": str(tmp_path / ".." / "shared" / "data"),
                       "CLBENCH_DATA": str(tmp_path / "cache"), "OTHER": "x"}
    urls = {"CLBENCH_MIRROR": "http://127.0.0.1:8000/m"}
    absolute_environment(urls)
    assert urls == {"CLBENCH_MIRROR": "http://127.0.0.1:8000/m"}
    assert absolute_location("mirror") == str(tmp_path / "mirror")
    assert absolute_location("file:///srv/mirror") == "file:///srv/mirror" and absolute_location(None) is None
    monkeypatch.setenv("CLBENCH_DATA", "data")
    assert default_data_dir() == tmp_path / "data"

