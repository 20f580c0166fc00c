"""A spec's own data sets (`datasets:`): conversion, manifest, content hash, errors, spec validation, tasks."""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
from filebuilders import constant_images, write_image_folder, write_npz
from PIL import Image

from clbench.data.custom import (
    CustomDataset,
    cache_folder,
    channel_statistics,
    content_hash,
    load_custom,
    npz_images,
    prepare_custom,
)
from clbench.errors import ClbenchError, DataNotFoundError, SpecError
from clbench.spec import load_benchmark


def npz_dataset(path: Path) -> CustomDataset:
    return CustomDataset("my-arrays", "npz", path, "my.yaml")


def folder_dataset(path: Path) -> CustomDataset:
    return CustomDataset("my-shapes", "imagefolder", path, "my.yaml")


def manifest_of(folder: Path) -> dict:
    return json.loads((folder / "manifest.json").read_text())


# ---------------------------------------------------------------- npz


def test_npz_manifest_has_class_counts_statistics_and_hash(tmp_path: Path) -> None:
    path = write_npz(tmp_path / "arrays.npz")
    folder = prepare_custom(npz_dataset(path), tmp_path / "cache")
    manifest = manifest_of(folder)
    assert manifest["class_names"] == ["3", "7"] and manifest["n_classes"] == 2
    assert manifest["class_counts"] == {"train": [2, 2], "test": [1, 1]}
    # pixels 10, 20, 30, 40 (each a whole image): mean 25, population std sqrt((15² + 5² + 5² + 15²) / 4)
    mean, std = 25 / 255, math.sqrt(125) / 255
    assert manifest["normalisation"]["mnist28"]["mean"] == pytest.approx([mean])
    assert manifest["normalisation"]["mnist28"]["std"] == pytest.approx([std])
    assert manifest["normalisation"]["image32"]["mean"] == pytest.approx([mean] * 3)  # gray replicated
    assert manifest["normalisation"]["image32"]["std"] == pytest.approx([std] * 3)
    expected_hash = hashlib.sha256(b"clbench-custom-1:npz\narrays.npz\0"
                                   + hashlib.sha256(path.read_bytes()).hexdigest().encode() + b"\n").hexdigest()
    assert manifest["content_hash"] == expected_hash
    assert folder == tmp_path / "cache" / "custom" / f"my-arrays-{expected_hash[:16]}"


def test_npz_arrays_in_both_forms(tmp_path: Path) -> None:
    dataset = npz_dataset(write_npz(tmp_path / "arrays.npz"))
    small = load_custom(dataset, tmp_path / "cache", "mnist28")
    assert small.train.images.shape == (4, 1, 28, 28) and small.n_classes == 2
    assert small.train.images[:, 0, 0, 0].tolist() == [10, 20, 30, 40]
    assert small.train.labels.tolist() == [1, 0, 1, 0]  # 7 -> 1, 3 -> 0
    assert small.test.labels.tolist() == [0, 1]
    large = load_custom(dataset, tmp_path / "cache", "image32")
    assert large.test.images.shape == (2, 3, 32, 32)
    assert np.all(large.test.images[1] == 60)  # a constant image stays constant when resized
    assert large.mean == pytest.approx((25 / 255,) * 3)


def test_npz_layouts_and_float_images() -> None:
    channels_first = np.arange(2 * 3 * 4 * 5, dtype=np.uint8).reshape(2, 3, 4, 5)  # (N, C, H, W)
    assert np.array_equal(npz_images(channels_first, "x"), channels_first.transpose(0, 2, 3, 1))
    channels_last = np.zeros((2, 4, 5, 3), np.uint8)
    assert npz_images(channels_last, "x").shape == (2, 4, 5, 3)
    floats = np.array([[[0.0, 0.5], [1.0, 0.2]]])  # (1, 2, 2)
    assert npz_images(floats, "x")[0, :, :, 0].tolist() == [[0, 128], [255, 51]]  # rint(0.5*255)=128
    with pytest.raises(ClbenchError, match=r"x: float images must lie in \[0, 1\]"):
        npz_images(floats * 2, "x")


def test_a_constant_channel_gets_std_1() -> None:
    # channel 0 all 0 (std exactly 0); channel 1 half 100 and half 101 (std 0.5 / 255: small but real, kept)
    images = np.zeros((3, 2, 28, 28), np.uint8)
    images[:, 1, :14], images[:, 1, 14:] = 100, 101
    statistics = channel_statistics(images)
    assert statistics["mean"] == pytest.approx([0.0, 100.5 / 255])
    assert statistics["std"][0] == 1.0
    assert statistics["std"][1] == pytest.approx(0.5 / 255)


def test_a_channel_constant_up_to_float_rounding_gets_std_1() -> None:
    # 3 images of 28x28 all 51 (0.2 each on the [0, 1] scale): numpy's std is 2.8e-17, not 0, from rounding
    images = np.full((3, 1, 28, 28), 51, np.uint8)
    assert channel_statistics(images) == {"mean": [pytest.approx(0.2)], "std": [1.0]}


def test_a_constant_npz_is_normalised_by_std_1(tmp_path: Path) -> None:
    dataset = npz_dataset(write_npz(tmp_path / "arrays.npz", x_train=constant_images([51, 51, 51]),
                                    y_train=np.array([3, 7, 3])))
    prepared = load_custom(dataset, tmp_path / "cache", "mnist28")
    assert prepared.mean == pytest.approx((0.2,)) and prepared.std == (1.0,)


def test_prepared_once_and_again_after_a_change(tmp_path: Path) -> None:
    path = write_npz(tmp_path / "arrays.npz")
    dataset = npz_dataset(path)
    first = prepare_custom(dataset, tmp_path / "cache")
    stamp = (first / "manifest.json").stat().st_mtime_ns
    assert prepare_custom(dataset, tmp_path / "cache") == first
    assert (first / "manifest.json").stat().st_mtime_ns == stamp  # not converted again
    write_npz(path, x_test=constant_images([70, 80]))
    second = prepare_custom(dataset, tmp_path / "cache")
    assert second != first and manifest_of(second)["content_hash"] != manifest_of(first)["content_hash"]
    assert np.all(load_custom(dataset, tmp_path / "cache", "mnist28").test.images[0] == 70)
    assert np.all(np.load(first / "mnist28" / "test_images.npy")[0] == 50)  # the old entry is left as it was


def test_same_content_elsewhere_has_the_same_hash(tmp_path: Path) -> None:
    path = write_npz(tmp_path / "arrays.npz")
    (tmp_path / "copy").mkdir()
    copy = tmp_path / "copy" / "arrays.npz"
    copy.write_bytes(path.read_bytes())
    assert content_hash(npz_dataset(path)) == content_hash(npz_dataset(copy))


# ---------------------------------------------------------------- image folders


def test_imagefolder_classes_labels_pixels_and_statistics(tmp_path: Path) -> None:
    dataset = folder_dataset(write_image_folder(tmp_path / "shapes"))
    manifest = manifest_of(prepare_custom(dataset, tmp_path / "cache"))
    assert manifest["class_names"] == ["a_circle", "b_square"]
    assert manifest["class_counts"] == {"train": [3, 2], "test": [1, 1]}
    large = load_custom(dataset, tmp_path / "cache", "image32")
    assert large.train.labels.tolist() == [0, 0, 0, 1, 1]
    assert large.train.images.shape == (5, 3, 32, 32)
    assert large.train.images[3, :, 5, 7].tolist() == [200, 100, 50]  # resized 8 -> 32, colour kept
    red = [10, 40, 100, 200, 0]  # the training images' channel values, class by class
    green, blue = [20, 40, 0, 100, 50], [30, 40, 0, 50, 250]
    for channel, values in enumerate((red, green, blue)):
        assert large.mean[channel] == pytest.approx(np.mean(values) / 255)
        assert large.std[channel] == pytest.approx(np.std(values) / 255)
    small = load_custom(dataset, tmp_path / "cache", "mnist28")
    assert small.train.images.shape == (5, 1, 28, 28)
    assert small.train.images[3, 0, 0, 0] == 124  # luma 0.299*200 + 0.587*100 + 0.114*50 = 124.2


def test_imagefolder_hash_changes_with_an_image(tmp_path: Path) -> None:
    root = write_image_folder(tmp_path / "shapes")
    before = content_hash(folder_dataset(root))
    Image.new("RGB", (8, 8), (0, 0, 1)).save(root / "train" / "a_circle" / "0.png")
    assert content_hash(folder_dataset(root)) != before



def test_imagefolder_hash_covers_both_splits_by_hand(tmp_path: Path) -> None:
    root = write_image_folder(tmp_path / "shapes")
    relative = ["test/a_circle/0.png", "test/b_square/0.png", "train/a_circle/0.png", "train/a_circle/1.png",
                "train/a_circle/2.png", "train/b_square/0.png", "train/b_square/1.png"]  # sorted
    expected = hashlib.sha256(b"clbench-custom-1:imagefolder\n")
    for name in relative:
        expected.update(f"{name}\0{hashlib.sha256((root / name).read_bytes()).hexdigest()}\n".encode())
    assert content_hash(folder_dataset(root)) == expected.hexdigest()
    Image.new("RGB", (8, 8), (0, 0, 1)).save(root / "test" / "b_square" / "0.png")  # a test image edited
    assert content_hash(folder_dataset(root)) != expected.hexdigest()


def test_hidden_files_are_ignored(tmp_path: Path) -> None:
    root = write_image_folder(tmp_path / "shapes")
    before = content_hash(folder_dataset(root))
    # what macOS leaves beside copied files: AppleDouble `._<name>` files (not images) and .DS_Store
    for folder in (root / "train" / "a_circle", root / "test" / "b_square"):
        (folder / "._0.png").write_bytes(b"\x00\x05\x16\x07 AppleDouble, not a png")
    (root / "train" / ".DS_Store").write_bytes(b"Bud1")
    assert content_hash(folder_dataset(root)) == before
    manifest = manifest_of(prepare_custom(folder_dataset(root), tmp_path / "cache"))
    assert manifest["class_counts"] == {"train": [3, 2], "test": [1, 1]}


# ---------------------------------------------------------------- bad input


def _bad_folder(root: Path, problem: str) -> Path:
    write_image_folder(root)
    if problem == "empty class":
        (root / "train" / "c_empty").mkdir()
    elif problem == "unknown test class":
        (root / "test" / "z_new").mkdir()
        Image.new("RGB", (8, 8)).save(root / "test" / "z_new" / "0.png")
    elif problem == "unreadable":
        (root / "train" / "a_circle" / "broken.png").write_bytes(b"not a png")
    return root


@pytest.mark.parametrize(("problem", "message"), [
    ("empty class", r"class folder .*train/c_empty has no images"),
    ("unknown test class", r"test split has classes the training split lacks: z_new"),
    ("unreadable", r"cannot read the image .*a_circle/broken\.png"),
])
def test_bad_image_folders(tmp_path: Path, problem: str, message: str) -> None:
    dataset = folder_dataset(_bad_folder(tmp_path / "shapes", problem))
    with pytest.raises(ClbenchError, match=message):
        prepare_custom(dataset, tmp_path / "cache")
    assert not list((tmp_path / "cache").glob("custom/my-shapes-*"))


@pytest.mark.parametrize(("arrays", "message"), [
    ({"y_train": np.array([7, 3, 7])}, r"x_train has 4 images but y_train 3 labels"),
    ({"y_test": np.array([3, 5])}, r"y_test has labels that y_train lacks: \[5\]"),
    ({"x_test": np.zeros((2, 28, 28), np.int32)}, r"x_test: dtype int32"),
    ({"y_train": np.array([0.5, 1, 2, 3])}, r"y_train: labels must be a 1-D integer array"),
])
def test_bad_npz_arrays(tmp_path: Path, arrays: dict, message: str) -> None:
    dataset = npz_dataset(write_npz(tmp_path / "arrays.npz", **arrays))
    with pytest.raises(ClbenchError, match=message):
        prepare_custom(dataset, tmp_path / "cache")


def test_npz_missing_keys(tmp_path: Path) -> None:
    path = tmp_path / "arrays.npz"
    np.savez(path, x_train=constant_images([1]), y_train=np.array([0]))
    with pytest.raises(ClbenchError, match=r"arrays.npz\): missing arrays x_test, y_test"):
        prepare_custom(npz_dataset(path), tmp_path / "cache")


@pytest.mark.parametrize("dataset", [npz_dataset(Path("/nonexistent/arrays.npz")),
                                     folder_dataset(Path("/nonexistent/shapes"))])
def test_missing_path(tmp_path: Path, dataset: CustomDataset) -> None:
    with pytest.raises(DataNotFoundError, match=rf"`datasets.{dataset.name}.path` in my.yaml.*{dataset.path}"):
        prepare_custom(dataset, tmp_path / "cache")


def test_missing_split_folder(tmp_path: Path) -> None:
    root = write_image_folder(tmp_path / "shapes", test={})
    with pytest.raises(DataNotFoundError, match=r"no folder .*shapes/test"):
        prepare_custom(folder_dataset(root), tmp_path / "cache")


# ---------------------------------------------------------------- the spec's `datasets:` section


def write_spec(folder: Path, datasets: str, data: str = "{kind: mixture, datasets: [my-arrays]}") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "my.yaml"
    path.write_text(f"name: mine\ndatasets: {datasets}\ndata: {data}\nnetwork: {{kind: mlp, hidden: [8]}}\n")
    return path


def test_relative_paths_resolve_against_the_spec_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec_file = write_spec(tmp_path / "specs", "{my-arrays: {format: npz, path: ./data/arrays.npz}}")
    monkeypatch.chdir(tmp_path)
    spec = load_benchmark(os.path.relpath(spec_file))
    assert Path(spec.datasets["my-arrays"].path) == tmp_path / "specs" / "data" / "arrays.npz"
    assert spec.datasets["my-arrays"].format == "npz"


@pytest.mark.parametrize(("datasets", "message"), [
    ("{my-arrays: {format: npz, path: a.npz, colour: red}}", r"my.yaml: unknown key `datasets.my-arrays.colour`"),
    ("{my-arrays: {format: hdf5, path: a.h5}}", r"my.yaml: `datasets.my-arrays.format` is 'hdf5'; expected one of"),
    ("{my-arrays: {format: npz}}", r"my.yaml: missing required key `datasets.my-arrays.path`"),
    ("{mnist: {format: npz, path: a.npz}}", r"my.yaml: `datasets.mnist` would hide the built-in data set mnist"),
    ("[my-arrays]", r"my.yaml: `datasets` must map data set names"),
])
def test_bad_datasets_sections(tmp_path: Path, datasets: str, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        load_benchmark(str(write_spec(tmp_path, datasets)))


def test_unknown_data_set_lists_built_ins_and_own(tmp_path: Path) -> None:
    spec_file = write_spec(tmp_path, "{my-arrays: {format: npz, path: a.npz}}",
                           data="{kind: mixture, datasets: [my-arays], form: mnist28}")
    with pytest.raises(SpecError) as error:
        load_benchmark(str(spec_file))
    assert "unknown data set my-arays; known: mnist, fashion-mnist, cifar10, cifar100, svhn, traffic-signs, " \
           "facescrub, notmnist, my-arrays" in str(error.value)


def test_own_data_sets_may_use_the_mnist28_form(tmp_path: Path) -> None:
    spec = load_benchmark(str(write_spec(tmp_path, "{my-arrays: {format: npz, path: a.npz}}",
                                         data="{kind: mixture, datasets: [my-arrays, mnist], form: mnist28}")))
    assert spec.data.form == "mnist28" and set(spec.datasets) == {"my-arrays"}


# ---------------------------------------------------------------- tasks and run identity


def test_split_tasks_from_an_own_data_set(tmp_path: Path) -> None:
    from clbench.data.tasks import build_tasks
    from clbench.run.loaders import fetching_loader, loader_for

    labels = np.array([0, 1, 2, 3] * 3)
    write_npz(tmp_path / "arrays.npz", x_train=constant_images(list(range(12))), y_train=labels,
              x_test=constant_images([1, 2, 3, 4]), y_test=np.array([0, 1, 2, 3]))
    spec = load_benchmark(str(write_spec(tmp_path, "{my-arrays: {format: npz, path: arrays.npz}}", data=(
        "{kind: split, datasets: [my-arrays], classes_per_task: [2], form: mnist28, shuffle_tasks: false, "
        "validation_fraction: 0.25}"))))
    tasks = build_tasks(spec.data, 0, loader_for(fetching_loader(tmp_path / "cache", None), spec))
    assert tasks.names == ("my-arrays:0-1", "my-arrays:2-3") and tasks.input_shape == (784,)
    assert len(tasks[0].train) + len(tasks[0].valid) == 6 and len(tasks[1].test) == 2
    pixels = np.arange(12) / 255
    assert tasks[0].train.transform.mean[0].tolist() == pytest.approx([pixels.mean()])
    assert tasks[0].train.transform.std[0].tolist() == pytest.approx([pixels.std()])


def test_run_identity_follows_the_content(tmp_path: Path) -> None:
    from clbench.run.plan import data_identity, plan_runs
    from clbench.spec.fields import identity_dict, stable_hash

    path = write_npz(tmp_path / "arrays.npz")
    spec_file = write_spec(tmp_path, "{my-arrays: {format: npz, path: arrays.npz}}")
    before = plan_runs(load_benchmark(str(spec_file)), ["sgd"], [0], tmp_path / "results")[0]
    write_npz(path, x_test=constant_images([70, 80]))
    after = plan_runs(load_benchmark(str(spec_file)), ["sgd"], [0], tmp_path / "results")[0]
    assert before.data_hash != after.data_hash and before.config_hash != after.config_hash
    assert after.config["datasets"]["my-arrays"] == {"format": "npz", "content_hash": content_hash(npz_dataset(path))}
    builtin = load_benchmark("mnist2")  # unchanged for built-in benchmarks
    assert data_identity(builtin) == stable_hash({"benchmark": "mnist2", "data": identity_dict(builtin.data)})


def test_reference_hash_follows_the_content_of_an_own_data_set(tmp_path: Path) -> None:
    from clbench.run.plan import plan_runs

    path = write_npz(tmp_path / "arrays.npz")
    spec_file = write_spec(tmp_path, "{my-arrays: {format: npz, path: arrays.npz}}")

    def reference_hashes() -> set[str]:
        plans = plan_runs(load_benchmark(str(spec_file)), ["sgd", "joint"], [0], tmp_path / "results")
        return {plan.reference_hash for plan in plans}

    before = reference_hashes()
    assert len(before) == 1  # a run and its joint share it
    assert reference_hashes() == before  # the same content, the same hash
    write_npz(path, x_test=constant_images([70, 80]))  # only the test split changes
    after = reference_hashes()
    assert len(after) == 1 and after != before


def test_cache_folder_is_keyed_by_the_hash(tmp_path: Path) -> None:
    assert cache_folder(tmp_path, "x", "ab" * 32) == tmp_path / "custom" / f"x-{'ab' * 8}"


def test_class_counts_without_converting(tmp_path: Path) -> None:
    from clbench.data.custom import class_count, n_classes_lookup

    assert class_count(folder_dataset(write_image_folder(tmp_path / "shapes"))) == 2
    write_npz(tmp_path / "arrays.npz", y_train=np.array([5, 1, 9, 1]))
    assert class_count(npz_dataset(tmp_path / "arrays.npz")) == 3
    spec = load_benchmark(str(write_spec(tmp_path, "{my-arrays: {format: npz, path: arrays.npz}}",
                                         data="{kind: mixture, datasets: [my-arrays, cifar100]}")))
    lookup = n_classes_lookup(spec)
    assert (lookup("my-arrays"), lookup("cifar100")) == (3, 100)
    assert not (tmp_path / "cache").exists()
