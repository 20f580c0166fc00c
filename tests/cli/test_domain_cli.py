"""`clbench train` refuses what the domain scenario cannot run, in one line, before any run or data."""

from __future__ import annotations

from pathlib import Path

import pytest
from clihelpers import invoke_fresh
from clihelpers import offline as offline_data

pytestmark = pytest.mark.usefixtures("restored_registry")


invoke = invoke_fresh


def offline(tmp_path: Path) -> list[str]:
    """No data, no mirror, results in `tmp_path`: a command that got past its checks would fail on the data."""
    return [*offline_data(tmp_path), "--results", str(tmp_path / "r")]


@pytest.mark.parametrize(("method", "expected"), [
    ("hat", "approach hat needs the task id (its prediction picks the task's masks, paths or columns), which "
            "data.scenario=domain does not give: run it with data.scenario=task"),
    ("pnn", "approach pnn needs the task id"),
    ("icarl", "approach icarl does not run with data.scenario=domain: iCaRL is a class-incremental method"),
])
def test_an_approach_that_cannot_run_without_the_task_id_is_refused_up_front(method: str, expected: str,
                                                                             tmp_path: Path) -> None:
    code, output = invoke("train", "pmnist", "-m", f"sgd,{method}", "--set", "data.scenario=domain",
                          *offline(tmp_path))
    assert code == 2, output
    assert output.startswith(f"error: --set data.scenario=domain: {expected}")
    assert not (tmp_path / "r").exists() and not (tmp_path / "data").exists()  # nothing ran, nothing fetched


def test_rot_mnist_names_its_spec_file_when_refusing(tmp_path: Path) -> None:
    code, output = invoke("train", "rot-mnist", "-m", "packnet", *offline(tmp_path))
    assert code == 2, output
    assert "rot-mnist.yaml: approach packnet needs the task id" in output


def test_tasks_with_different_class_counts_are_refused_up_front_with_the_counts(tmp_path: Path) -> None:
    code, output = invoke("train", "mixture8", "-m", "sgd", "--set", "data.scenario=domain", *offline(tmp_path))
    assert code == 2, output
    assert "data.scenario domain needs the same number of classes in every task" in output
    assert "facescrub 100, mnist 10, cifar100 100, notmnist 10, svhn 10, cifar10 10, traffic-signs 43, " \
           "fashion-mnist 10 classes" in output
    assert not (tmp_path / "r").exists()
