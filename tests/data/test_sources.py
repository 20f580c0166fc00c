"""The data-set registry, conversion of each upstream format, the prepared cache, and real MNIST/Fashion-MNIST."""

from __future__ import annotations

import dataclasses
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from clbench.data import cache, converters, sources
from clbench.data.download import RetryPolicy
from clbench.data.sources import dataset_status, fetch_dataset, load_dataset
from clbench.errors import ChecksumError, ClbenchError, DataNotFoundError, UnsafeArchiveError
from clbench.spec.catalogue import CATALOGUE, DATASET_NAMES

PAPER_CLASSES = {"mnist": 10, "fashion-mnist": 10, "cifar10": 10, "cifar100": 100, "svhn": 10,
                 "traffic-signs": 43, "facescrub": 100, "notmnist": 10}


# ---------------------------------------------------------------- registry


def test_the_eight_data_sets_of_the_paper_are_registered() -> None:
    assert sorted(DATASET_NAMES) == sorted(PAPER_CLASSES)
    for name, n_classes in PAPER_CLASSES.items():
        source = sources.get_source(name)
        assert source.n_classes == n_classes
        assert all(upstream.urls and all(u.startswith(("http://", "https://")) for u in upstream.urls)
                   for upstream in source.files)
        normalisation = source.normalisation("image32")
        assert len(normalisation.mean) == len(normalisation.std) == 3
        assert all(0 < value < 1 for value in normalisation.mean + normalisation.std)


def test_every_catalogued_data_set_has_a_source_with_the_catalogue_facts() -> None:
    for name, entry in CATALOGUE.items():
        source = sources.get_source(name)

        assert (source.name, source.n_classes, source.paper_sizes) == (name, entry.n_classes, entry.paper_sizes)
        assert tuple(form for form, _ in source.forms) == entry.forms


def test_unknown_data_set_is_an_error_listing_the_valid_ones() -> None:
    with pytest.raises(ClbenchError) as caught:
        sources.get_source("imagenet")

    assert "imagenet" in str(caught.value) and all(name in str(caught.value) for name in DATASET_NAMES)


def test_mnist28_form_only_for_mnist_and_fashion() -> None:
    with_form = {name for name in DATASET_NAMES if "mnist28" in dict(sources.get_source(name).forms)}

    assert with_form == {"mnist", "fashion-mnist"}
    assert sources.get_source("mnist").normalisation("mnist28").mean == (0.1307,)
    assert sources.get_source("fashion-mnist").normalisation("mnist28").std == (0.3530,)


def test_sources_without_a_published_md5_say_so_in_their_docstring() -> None:
    for name in DATASET_NAMES:
        source = sources.get_source(name)
        if any(upstream.checksum is None or upstream.checksum.algorithm != "md5" for upstream in source.files):
            assert "No md5" in source.notes or "No checksum" in source.notes, name


def test_mnist_and_fashion_md5s_are_those_of_the_mirror(shared_mirror: Path) -> None:
    listed = dict(reversed(line.split()) for line in (shared_mirror / "MD5SUMS").read_text().splitlines() if line)
    pinned = {f"{name}/{upstream.name}": upstream.checksum.digest
              for name in ("mnist", "fashion-mnist") for upstream in sources.get_source(name).files}

    assert pinned == listed


# ---------------------------------------------------------------- formats


def test_read_idx_checks_magic_and_length(tmp_path: Path, formats) -> None:
    good = formats.idx_bytes(np.arange(12, dtype=np.uint8).reshape(3, 2, 2))
    (tmp_path / "ok").write_bytes(good)
    (tmp_path / "magic").write_bytes(b"\x01" + good[1:])
    (tmp_path / "short").write_bytes(good[:-1])

    assert np.array_equal(converters.read_idx(tmp_path / "ok"), np.arange(12).reshape(3, 2, 2))
    with pytest.raises(ClbenchError, match="magic"):
        converters.read_idx(tmp_path / "magic")
    with pytest.raises(ClbenchError, match="idx header"):
        converters.read_idx(tmp_path / "short")


def test_padding_is_centred_zeros_with_three_identical_channels() -> None:
    images = np.full((2, 28, 28), 200, np.uint8)

    padded = converters.pad_to_image32(images)  # (2, 3, 32, 32)

    assert padded.shape == (2, 3, 32, 32) and padded.dtype == np.uint8
    assert (padded[:, :, 2:30, 2:30] == 200).all()
    border = np.ones((32, 32), bool)
    border[2:30, 2:30] = False
    assert padded[:, :, border].sum() == 0
    assert (padded[:, 0] == padded[:, 1]).all() and (padded[:, 1] == padded[:, 2]).all()


# ---------------------------------------------------------------- fetch and load, every format


@pytest.mark.parametrize("name", sorted(PAPER_CLASSES))
def test_each_upstream_format_is_converted(tmp_path: Path, synthetic_mirror, name: str) -> None:
    expected = synthetic_mirror(name)

    folder = fetch_dataset(name, tmp_path / "data", str(tmp_path / "mirror"))
    loaded = load_dataset(name, tmp_path / "data")

    assert folder == tmp_path / "data" / name
    for split, (images, labels) in (("train", expected.train), ("test", expected.test)):
        got = getattr(loaded, split)
        assert got.images.shape == images.shape and got.images.dtype == np.uint8
        assert got.labels.dtype == np.int64 and np.array_equal(got.labels, labels)
        assert np.array_equal(got.images, images)
        assert isinstance(got.images, np.memmap)
    assert loaded.n_classes == PAPER_CLASSES[name] and len(loaded.mean) == 3


@pytest.mark.parametrize("name", ["mnist", "fashion-mnist"])
def test_mnist28_form_holds_the_originals(tmp_path: Path, synthetic_mirror, name: str) -> None:
    expected = synthetic_mirror(name)
    fetch_dataset(name, tmp_path / "data", str(tmp_path / "mirror"))

    loaded = load_dataset(name, tmp_path / "data", form="mnist28")

    assert loaded.train.images.shape == (30, 1, 28, 28)
    assert np.array_equal(loaded.train.images, expected.mnist28["train"][0])
    assert np.array_equal(loaded.test.labels, expected.mnist28["test"][1])
    assert len(loaded.mean) == 1


def test_mnist28_form_is_refused_for_other_data_sets(tmp_path: Path, synthetic_mirror) -> None:
    synthetic_mirror("cifar10")
    fetch_dataset("cifar10", tmp_path / "data", str(tmp_path / "mirror"))

    with pytest.raises(ClbenchError, match="mnist28"):
        load_dataset("cifar10", tmp_path / "data", form="mnist28")
    with pytest.raises(ClbenchError, match="form"):
        load_dataset("cifar10", tmp_path / "data", form="image64")


def test_traffic_signs_2017_reissue_gets_its_validation_split_back(tmp_path: Path, synthetic_mirror) -> None:
    expected = synthetic_mirror("traffic-signs", with_valid=True)

    fetch_dataset("traffic-signs", tmp_path / "data", str(tmp_path / "mirror"))

    loaded = load_dataset("traffic-signs", tmp_path / "data")
    assert len(loaded.train.labels) == 11 and np.array_equal(loaded.train.images, expected.train[0])


def test_fetch_over_http_mirror_reports_progress_per_file(tmp_path: Path, synthetic_mirror, http_server) -> None:
    synthetic_mirror("mnist")
    base = http_server.serve_folder(tmp_path / "mirror")
    events: list[tuple[str, int, int | None]] = []

    fetch_dataset("mnist", tmp_path / "data", base, progress=lambda *event: events.append(event))

    finished = {name for name, done, total in events if done == total}
    assert finished == {upstream.name for upstream in sources.get_source("mnist").files}
    assert len(load_dataset("mnist", tmp_path / "data").train.labels) == 30


def test_manifest_records_provenance_shapes_counts_and_normalisation(tmp_path: Path, synthetic_mirror) -> None:
    expected = synthetic_mirror("mnist")
    fetch_dataset("mnist", tmp_path / "data", str(tmp_path / "mirror"))

    manifest = json.loads((tmp_path / "data" / "mnist" / "manifest.json").read_text())

    assert manifest["cache_format"] == cache.CACHE_FORMAT and manifest["clbench_version"]
    assert {record["file"] for record in manifest["sources"]} == {f.name for f in sources.get_source("mnist").files}
    assert all(record["pinned"] == f"md5:{record['md5']}" and len(record["sha256"]) == 64
               for record in manifest["sources"])
    assert manifest["arrays"]["image32/train_images.npy"]["shape"] == [30, 3, 32, 32]
    assert manifest["arrays"]["mnist28/test_images.npy"]["dtype"] == "uint8"
    assert manifest["class_counts"]["train"] == np.bincount(expected.train[1], minlength=10).tolist()
    assert manifest["normalisation"]["image32"]["mean"] == [0.1, 0.1, 0.1]


def test_fetch_is_idempotent_and_force_prepares_again(tmp_path: Path, synthetic_mirror, http_server) -> None:
    synthetic_mirror("mnist")
    base = http_server.serve_folder(tmp_path / "mirror")
    data_dir = tmp_path / "data"
    fetch_dataset("mnist", data_dir, base)
    requests = len(http_server.state.requests)
    manifest = data_dir / "mnist" / "manifest.json"
    first = manifest.stat().st_mtime_ns

    fetch_dataset("mnist", data_dir, base)
    assert manifest.stat().st_mtime_ns == first and len(http_server.state.requests) == requests

    fetch_dataset("mnist", data_dir, base, force=True)
    assert manifest.stat().st_mtime_ns != first
    assert len(http_server.state.requests) == requests  # verified downloads are reused


def test_incomplete_cache_is_not_taken_as_ready(tmp_path: Path, synthetic_mirror) -> None:
    synthetic_mirror("notmnist")
    data_dir = tmp_path / "data"
    fetch_dataset("notmnist", data_dir, str(tmp_path / "mirror"))
    (data_dir / "notmnist" / "image32" / "test_labels.npy").unlink()

    with pytest.raises(DataNotFoundError):
        load_dataset("notmnist", data_dir)
    fetch_dataset("notmnist", data_dir, str(tmp_path / "mirror"))
    assert len(load_dataset("notmnist", data_dir).test.labels) == 4


def test_no_staging_or_scratch_folders_are_left_behind(tmp_path: Path, synthetic_mirror) -> None:
    synthetic_mirror("cifar100")
    fetch_dataset("cifar100", tmp_path / "data", str(tmp_path / "mirror"))

    assert sorted(path.name for path in (tmp_path / "data").iterdir()) == ["cifar100", "downloads"]


def test_load_before_fetch_says_what_to_run(tmp_path: Path) -> None:
    with pytest.raises(DataNotFoundError) as caught:
        load_dataset("svhn", tmp_path / "nowhere")

    message = str(caught.value)
    assert "svhn" in message and str(tmp_path / "nowhere") in message and "clbench fetch svhn" in message


def test_missing_mirror_file_lists_files_urls_and_layout(tmp_path: Path, synthetic_mirror) -> None:
    synthetic_mirror("mnist")
    (tmp_path / "mirror" / "mnist" / "t10k-labels-idx1-ubyte.gz").unlink()

    with pytest.raises(DataNotFoundError) as caught:
        fetch_dataset("mnist", tmp_path / "data", str(tmp_path / "mirror"))

    message = str(caught.value)
    assert all(upstream.name in message for upstream in sources.get_source("mnist").files)
    assert "mirror/mnist/t10k-labels-idx1-ubyte.gz" in message and "CLBENCH_MIRROR" in message
    assert cache.read_manifest(tmp_path / "data" / "mnist") is None


def test_unreachable_upstream_lists_files_urls_tried_and_the_mirror_layout(tmp_path: Path, http_server,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    gone = http_server.url + "/gone/notmnist.zip"
    refused = "http://127.0.0.1:9/notmnist.zip"  # the discard port: nothing listens there
    real = sources.get_source("notmnist")
    offline = dataclasses.replace(real, files=(dataclasses.replace(real.files[0], urls=(gone, refused)),))
    monkeypatch.setattr(sources, "get_source", lambda name: offline)

    with pytest.raises(DataNotFoundError) as caught:
        fetch_dataset("notmnist", tmp_path / "data", retry=RetryPolicy(max_attempts=1))

    message = str(caught.value)
    assert "notmnist.zip" in message and gone in message and refused in message and "404" in message
    assert "<mirror>/notmnist/<file name>" in message and "CLBENCH_MIRROR" in message


def test_corrupted_mirror_file_fails_its_checksum_and_prepares_nothing(tmp_path: Path, synthetic_mirror) -> None:
    synthetic_mirror("cifar10")
    archive = tmp_path / "mirror" / "cifar10" / "cifar-10-python.tar.gz"
    content = bytearray(archive.read_bytes())
    content[-1] ^= 0xFF
    archive.write_bytes(bytes(content))

    with pytest.raises(ChecksumError, match="cifar-10-python.tar.gz"):
        fetch_dataset("cifar10", tmp_path / "data", str(tmp_path / "mirror"))

    assert not (tmp_path / "data" / "cifar10").exists()
    assert not (tmp_path / "data" / "downloads" / "cifar10" / "cifar-10-python.tar.gz").exists()


def test_a_malicious_pickle_in_a_data_archive_is_refused(tmp_path: Path, synthetic_mirror) -> None:
    synthetic_mirror("notmnist")
    with zipfile.ZipFile(tmp_path / "mirror" / "notmnist" / "notmnist.zip", "w") as archive:
        archive.writestr("notmnist_train.pkl", b"cos\nsystem\n(S'echo pwned'\ntR.")
        archive.writestr("notmnist_test.pkl", b"cos\nsystem\n(S'echo pwned'\ntR.")
    synthetic_mirror.repin("notmnist")

    with pytest.raises(UnsafeArchiveError, match="os.system"):
        fetch_dataset("notmnist", tmp_path / "data", str(tmp_path / "mirror"))
    assert cache.read_manifest(tmp_path / "data" / "notmnist") is None


def test_an_archive_escaping_its_folder_is_refused(tmp_path: Path, synthetic_mirror) -> None:
    synthetic_mirror("facescrub")
    with zipfile.ZipFile(tmp_path / "mirror" / "facescrub" / "facescrub_100.zip", "a") as archive:
        archive.writestr("../../escaped.pkl", b"x")
    synthetic_mirror.repin("facescrub")

    with pytest.raises(UnsafeArchiveError, match="escaped.pkl"):
        fetch_dataset("facescrub", tmp_path / "data", str(tmp_path / "mirror"))
    assert not (tmp_path / "escaped.pkl").exists() and not (tmp_path / "data" / "escaped.pkl").exists()


def test_dataset_status_before_and_after(tmp_path: Path, synthetic_mirror) -> None:
    synthetic_mirror("svhn")
    before = dataset_status("svhn", tmp_path / "data")
    fetch_dataset("svhn", tmp_path / "data", str(tmp_path / "mirror"))
    after = dataset_status("svhn", tmp_path / "data")

    assert not before["cached"] and before["n_train"] is None and before["paper_n_train"] == 73257
    assert after["cached"] and (after["n_train"], after["n_test"]) == (7, 5) and after["bytes"] > 7 * 3072
    assert after["path"] == str(tmp_path / "data" / "svhn")


# ---------------------------------------------------------------- the real mirror (slow)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "mean32", "std32"), [("mnist", 0.1, 0.2752), ("fashion-mnist", 0.2190, 0.3318)])
def test_real_mnist_and_fashion_from_the_mirror(tmp_path: Path, shared_mirror: Path, name: str, mean32: float,
                                                std32: float) -> None:
    listed = dict(reversed(line.split()) for line in (shared_mirror / "MD5SUMS").read_text().splitlines() if line)

    fetch_dataset(name, tmp_path, str(shared_mirror.resolve()))
    image32 = load_dataset(name, tmp_path)
    mnist28 = load_dataset(name, tmp_path, form="mnist28")

    assert (len(image32.train.labels), len(image32.test.labels)) == (60000, 10000)
    assert image32.train.images.shape == (60000, 3, 32, 32) and mnist28.test.images.shape == (10000, 1, 28, 28)
    counts = np.bincount(image32.train.labels, minlength=10)
    assert counts.min() > 5000 and counts.max() < 7000 and counts.sum() == 60000
    manifest = cache.read_manifest(tmp_path / name)
    assert {f"{name}/{record['file']}": record["md5"] for record in manifest["sources"]} == {
        key: value for key, value in listed.items() if key.startswith(f"{name}/")}
    pixels = image32.train.images[:10000].astype(np.float32) / 255  # the reference's mean/std include the padding
    assert abs(pixels.mean() - mean32) < 0.005 and abs(pixels.std() - std32) < 0.005
    assert np.array_equal(image32.train.images[:100, 1, 2:30, 2:30], mnist28.train.images[:100, 0])
