"""Bad input that failed inside every run (or with a traceback) is one line and exit 2 when the command starts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from clihelpers import NPZ_SPEC, TINY, invoke_fresh, offline
from filebuilders import constant_images, write_npz

PLUGIN = "import clbench.api as cl\n\n\nclass Mine(cl.Approach):\n    name = 'my-code'\n"


pytestmark = pytest.mark.usefixtures("restored_registry")


invoke = invoke_fresh


def test_alexnet_with_mnist28_is_refused(tmp_path: Path) -> None:
    code, output = invoke("train", "mnist2", "-m", "sgd", "--set", "network.kind=alexnet", "--results",
                          str(tmp_path / "r"), *offline(tmp_path))
    assert code == 2, output
    assert "`network.kind` alexnet needs `data.form` image32 (3x32x32 images), not mnist28" in output


@pytest.mark.parametrize("method", ["hat", "packnet", "pathnet", "pnn"])
def test_an_approach_that_cannot_run_on_resnet18_is_refused_with_its_reason(method: str, tmp_path: Path) -> None:
    from clbench.approaches.registry import REGISTRY

    code, output = invoke("train", "cifar10-5", "-m", f"sgd,{method}", "--results", str(tmp_path / "r"),
                          *offline(tmp_path))
    assert code == 2, output
    reason = " ".join(REGISTRY[method].unsupported_networks["resnet18"].split())
    assert f"cifar10-5.yaml: approach {method} does not run on `network.kind` resnet18: {reason}" in output
    assert not (tmp_path / "r").exists() or not list((tmp_path / "r").rglob("run.json"))


def test_augment_with_flattened_mnist_is_refused(tmp_path: Path) -> None:
    code, output = invoke("train", "mnist2", "-m", "sgd", "--set", "data.augment=true", "--results",
                          str(tmp_path / "r"), *offline(tmp_path))
    assert code == 2, output
    assert ("--set data.augment=true: `data.augment` is the random crop and flip of 3x32x32 images (data.form "
            "image32); it is not defined for data.form mnist28") in output


@pytest.mark.parametrize("command", ["train", "fetch"])
def test_a_block_size_that_does_not_divide_a_custom_data_set_is_refused(command: str, tmp_path: Path) -> None:
    write_npz(tmp_path / "arrays.npz", x_train=constant_images([10, 20, 30] * 2), y_train=np.array([0, 1, 2] * 2),
              x_test=constant_images([15, 25, 35]), y_test=np.array([0, 1, 2]))
    (tmp_path / "my.yaml").write_text(NPZ_SPEC)
    options = ["-m", "sgd", "--results", str(tmp_path / "r"), *TINY] if command == "train" else []
    code, output = invoke(command, str(tmp_path / "my.yaml"), *options, "--data-dir", str(tmp_path / "data"))
    assert code == 2, output
    assert "`data.classes_per_task` is 2 for my-arrays, which has 3 classes" in output
    assert not list(tmp_path.rglob("run.json"))


@pytest.mark.parametrize("command", [["train", "mnist2", "-m", "sgd"], ["evaluate", "mnist2", "-m", "sgd"],
                                     ["bench", "mnist2", "-m", "sgd", "--device", "cpu"]])
def test_a_results_path_that_is_a_file_is_refused(command: list[str], tmp_path: Path) -> None:
    (tmp_path / "results.txt").write_text("")
    code, output = invoke(*command, "--results", str(tmp_path / "results.txt"), "--data-dir", str(tmp_path / "d"))
    assert code == 2, output
    assert f"--results {tmp_path / 'results.txt'} is a file, not a folder" in output
    code, output = invoke(*command, "--results", str(tmp_path / "results.txt" / "sub"), "--data-dir",
                          str(tmp_path / "d"))
    assert code == 2, output
    assert f"cannot be created: {tmp_path / 'results.txt'} is a file" in output


def test_a_results_folder_that_is_not_writable_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import clbench.results

    locked = tmp_path / "locked"
    locked.mkdir()
    real_access = clbench.results.os.access
    monkeypatch.setattr(clbench.results.os, "access", lambda path, mode: Path(path) != locked and
                        real_access(path, mode))  # root may write anywhere: the permission is simulated
    code, output = invoke("train", "mnist2", "-m", "sgd", "--results", str(locked / "results"), *offline(tmp_path))
    assert code == 2, output
    assert f"--results {locked / 'results'} is not writable: no permission to write in {locked}" in output


def test_report_says_a_results_path_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "results.txt").write_text("")
    for arguments in (["report"], ["report", "mnist2"]):
        code, output = invoke(*arguments, "--results", str(tmp_path / "results.txt"))
        assert code == 2, output
        assert f"--results {tmp_path / 'results.txt'} is a file, not a results folder" in output


UNWRITABLE = Path("/proc/clbench-output")  # a folder no process can create, root included (which os.access lets by)
needs_proc = pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")


@needs_proc
@pytest.mark.parametrize("option", ["--html", "--output", "--plot"])
def test_report_refuses_an_output_path_it_cannot_write_before_reading_anything(option: str, tmp_path: Path) -> None:
    (tmp_path / "a-folder").mkdir()
    (tmp_path / "a-file").write_text("")
    cases = [(UNWRITABLE / "out", f"{option} {UNWRITABLE / 'out'} is not writable: cannot create a file in /proc"),
             (tmp_path / "a-file" / "out", f"{option} {tmp_path / 'a-file' / 'out'} cannot be created: "
                                           f"{tmp_path / 'a-file'} is a file, not a folder")]
    if option == "--plot":
        cases.append((tmp_path / "a-file", f"--plot {tmp_path / 'a-file'} is a file, not a folder"))
    else:
        cases.append((tmp_path / "a-folder", f"{option} {tmp_path / 'a-folder'} is a folder, not a file"))
    for path, expected in cases:  # no results folder: had the output been checked after reading, that would fail
        code, output = invoke("report", "b", "--results", str(tmp_path / "no-results"), option, str(path))
        assert code == 2, output
        assert f"error: {expected}" in output
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a-file", "a-folder"]


def test_report_output_creates_its_folder(tmp_path: Path) -> None:
    from resultbuilders import write_run

    write_run(tmp_path / "results", "sgd", 0, [[0.9], [0.8, 0.9]])
    code, output = invoke("report", "b", "--results", str(tmp_path / "results"), "--metric", "accuracy", "-o",
                          str(tmp_path / "new" / "report.md"))
    assert code == 0, output
    assert "| sgd      | 90.0 (–) | 85.0 (–) | 1     |" in (tmp_path / "new" / "report.md").read_text()


@needs_proc
@pytest.mark.parametrize("command", [["train", "mnist2", "-m", "sgd"], ["tune", "mnist2", "-m", "ewc"],
                                     ["evaluate", "mnist2", "-m", "sgd"], ["bench", "mnist2", "-m", "sgd"]])
def test_a_results_folder_that_cannot_be_created_is_refused_for_root_too(command: list[str], tmp_path: Path) -> None:
    code, output = invoke(*command, "--results", str(UNWRITABLE), "--data-dir", str(tmp_path / "data"))
    assert code == 2, output
    assert f"error: --results {UNWRITABLE} is not writable: cannot create a file in /proc" in output


@needs_proc
def test_fetch_refuses_a_data_folder_it_cannot_write(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    for data_dir, expected in ((UNWRITABLE, "is not writable: cannot create a file in /proc"),
                               (tmp_path / "a-file", "is a file, not a folder")):
        code, output = invoke("fetch", "mnist", "--data-dir", str(data_dir), "--mirror", str(tmp_path / "none"))
        assert code == 2, output
        assert f"error: --data-dir {data_dir} {expected}" in output


def test_an_immutable_folder_is_refused_although_root_may_write_there(tmp_path: Path) -> None:
    import shutil
    import subprocess

    locked = tmp_path / "locked"
    locked.mkdir()
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(locked)], capture_output=True,
                                                        check=False).returncode != 0:
        pytest.skip("chattr +i is not available here")
    try:
        for command in (["report", "b", "--html", str(locked / "page.html")],
                        ["train", "mnist2", "-m", "sgd", "--results", str(locked / "results"), *offline(tmp_path)]):
            code, output = invoke(*command)
            assert code == 2, output
            assert "is not writable" in output and str(locked) in output
    finally:
        subprocess.run(["chattr", "-i", str(locked)], check=True)
    assert list(locked.iterdir()) == []


@pytest.mark.parametrize(("attribute", "expected"), [
    ("name = 3", "Bad.name is 3 (int); set it to a string"),
    ("name = None", "Bad has no `name`"),
    ("name = 'bad'\n    hyperparameters_class = dict", "Bad.hyperparameters_class is dict, not a dataclass"),
    ("name = 'bad'\n    hyperparameters_class = 'Mine'", "Bad.hyperparameters_class is 'Mine', not a dataclass"),
])
def test_a_plugin_with_a_bad_class_attribute_is_one_line(attribute: str, expected: str, tmp_path: Path) -> None:
    plugin = tmp_path / "bad.py"
    plugin.write_text(f"import clbench.api as cl\n\n\nclass Bad(cl.Approach):\n    {attribute}\n")
    code, output = invoke("train", "mnist2", "-m", f"{plugin}:Bad", "--results", str(tmp_path / "r"))
    assert code == 2, output
    assert expected in output and "Traceback" not in output


def test_a_plugin_file_without_its_class_suggests_the_file_class_form(tmp_path: Path) -> None:
    plugin = tmp_path / "mine.py"
    plugin.write_text(PLUGIN)
    code, output = invoke("train", "mnist2", "-m", str(plugin), "--results", str(tmp_path / "r"))
    assert code == 2, output
    assert (f"--method '{plugin}' names a file: add the approach class after a colon, {plugin}:ClassName "
            f"(Approach subclasses in it: Mine)") in output


def test_evaluate_of_a_plugin_by_name_says_to_pass_its_file(tmp_path: Path) -> None:
    write_npz(tmp_path / "arrays.npz")
    (tmp_path / "my.yaml").write_text(NPZ_SPEC)
    (tmp_path / "mine.py").write_text(PLUGIN)
    common = ["--seeds", "0", "--results", str(tmp_path / "r"), "--data-dir", str(tmp_path / "data"), *TINY]
    assert invoke("train", str(tmp_path / "my.yaml"), "-m", f"{tmp_path / 'mine.py'}:Mine", *common)[0] == 0
    code, output = invoke("evaluate", str(tmp_path / "my.yaml"), "-m", "my-code", *common)
    assert code == 2, output
    assert (f"unknown method 'my-code': its runs in {tmp_path / 'r'} were made by the plugin file "
            f"{tmp_path / 'mine.py'}; pass the file: -m {tmp_path / 'mine.py'}:Mine") in output
    assert invoke("evaluate", str(tmp_path / "my.yaml"), "-m", f"{tmp_path / 'mine.py'}:Mine", *common)[0] == 0


def test_a_spec_path_that_is_a_folder_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "specs").mkdir()
    code, output = invoke("train", str(tmp_path / "specs"), "-m", "sgd", "--results", str(tmp_path / "r"))
    assert code == 2, output
    assert f"spec path {tmp_path / 'specs'} is a folder, not a YAML file" in output
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mnist2").mkdir()  # a folder named like a shipped benchmark does not hide it
    assert invoke("spec", "mnist2")[0] == 0


def test_nan_pixels_in_an_npz_are_named_as_nan(tmp_path: Path) -> None:
    images = np.full((4, 28, 28), 0.5)
    images[2, 3, 4] = np.nan
    write_npz(tmp_path / "arrays.npz", x_train=images)
    (tmp_path / "my.yaml").write_text(NPZ_SPEC)
    code, output = invoke("fetch", str(tmp_path / "my.yaml"), "--data-dir", str(tmp_path / "data"))
    assert code == 2, output
    assert "x_train: 1 pixel value(s) are NaN (the first in image 2)" in output


def test_the_command_evaluate_suggests_keeps_results(tmp_path: Path) -> None:
    results = tmp_path / "my results"
    code, output = invoke("evaluate", "mnist2", "-m", "sgd", "--seeds", "3", "--results", str(results),
                          *offline(tmp_path))
    assert code == 2, output
    assert f"train it first with `clbench train mnist2 -m sgd --seeds 3 --results '{results}'`" in output


def test_an_unknown_method_names_the_plugin_forms(tmp_path: Path) -> None:
    code, output = invoke("train", "mnist2", "-m", "my-method", "--results", str(tmp_path / "r"), *offline(tmp_path))
    assert code == 2, output
    assert "unknown method 'my-method'" in output
    assert "a plugin is named by its file or module: -m path/to/file.py:ClassName" in output


def test_a_protocol_an_approach_cannot_run_refuses_that_approach_only(tmp_path: Path) -> None:
    """validation_fraction 0: early stopping (the default) refused naming both keys, before any run; random (trains
    nothing) runs; sgd runs with early_stopping false, the spec's pathnet section notwithstanding; pathnet refused
    without a validation split and without early stopping."""
    write_npz(tmp_path / "arrays.npz")
    online = NPZ_SPEC.replace("form: mnist28}", "form: mnist28, validation_fraction: 0}")
    online += "approaches:\n  pathnet: {}\n"
    (tmp_path / "my.yaml").write_text(online)
    common = ["--results", str(tmp_path / "r"), "--data-dir", str(tmp_path / "data"), *TINY]
    code, output = invoke("train", str(tmp_path / "my.yaml"), "-m", "sgd", *common)
    assert code == 2, output
    assert (f"{tmp_path / 'my.yaml'}: approach sgd: training.early_stopping is true but data.validation_fraction is "
            f"0: early stopping needs a validation split") in output
    assert not list(tmp_path.rglob("run.json"))
    for options in (["-m", "random"], ["-m", "sgd", "--set", "training.early_stopping=false"]):
        code, output = invoke("train", str(tmp_path / "my.yaml"), *options, *common)
        assert code == 0, output
    assert sorted(path.parts[-4] for path in (tmp_path / "r").rglob("run.json")) == ["random", "sgd"]
    for options in ([], ["--set", "training.early_stopping=false"],
                    ["--set", "data.validation_fraction=0.25", "--set", "training.early_stopping=false"]):
        code, output = invoke("train", str(tmp_path / "my.yaml"), "-m", "pathnet", *options, *common)
        assert code == 2, output
        assert ("approach pathnet: its tournament scores the paths by their validation loss" in output and
                "it needs data.validation_fraction above 0 and training.early_stopping true" in output)

