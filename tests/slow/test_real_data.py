"""Real MNIST and Fashion-MNIST from the offline mirror: training end to end (slow)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from clbench.metrics import accuracy_matrix, forgetting_ratio, random_reference
from clbench.run.engine import execute
from clbench.run.loaders import fetching_loader
from clbench.run.plan import plan_runs
from clbench.spec import load_benchmark

pytestmark = pytest.mark.slow
CPU = torch.device("cpu")
QUICK = ["data.max_train_samples=3000", "data.max_test_samples=2000", "training.max_epochs=4",
         "hat.training.max_epochs=4"]


def matrices(spec_name: str, methods: list[str], overrides: list[str], data_dir: Path, mirror: Path,
             results: Path) -> dict[str, np.ndarray]:
    spec = load_benchmark(spec_name, overrides)
    loader = fetching_loader(data_dir, str(mirror))
    found = {}
    for plan in plan_runs(spec, methods, [0], results, overrides):
        outcome = execute(plan, device=CPU, loader=loader)
        rows = pd.DataFrame(outcome.rows)
        found[plan.method] = accuracy_matrix(rows[(rows["evaluation"] == "task-aware") & (rows["split"] == "test")])
    return found


def test_split_mnist_learns_and_sgd_forgets(mnist_data_dir: Path, mnist_mirror: Path, tmp_path: Path) -> None:
    found = matrices("mnist2", ["sgd", "sgd-f", "hat", "joint", "random"], QUICK, mnist_data_dir, mnist_mirror,
                     tmp_path)
    for method in ("sgd", "sgd-f", "hat", "joint"):
        assert found[method][0, 0] > 0.95, method  # digits 0-4 are learnt
    assert found["sgd"][1, 1] > 0.9 and found["hat"][1, 1] > 0.9
    assert found["random"][1].tolist() == pytest.approx([0.2, 0.2], abs=0.05)
    assert found["sgd"][1, 0] < found["sgd"][0, 0] - 0.01  # plain SGD forgets the first task (multi-head: mildly)
    assert found["sgd-f"][1, 0] == found["sgd-f"][0, 0]  # a frozen body and its own head: nothing forgotten
    assert found["hat"][1, 0] >= found["hat"][0, 0] - 0.002  # HAT protects task 1
    rho = forgetting_ratio(found["hat"], found["joint"], random_reference(found["random"]))
    assert rho[-1] > forgetting_ratio(found["sgd"], found["joint"], random_reference(found["random"]))[-1]


def test_mini_mixture_of_mnist_and_fashion_mnist(tmp_path: Path, mnist_mirror: Path) -> None:
    if not (mnist_mirror / "fashion-mnist" / "train-images-idx3-ubyte.gz").is_file():
        pytest.skip("no Fashion-MNIST in the mirror")
    spec_file = tmp_path / "mini-mixture.yaml"
    spec_file.write_text(Path(load_benchmark("mixture8").source).read_text()
                         .replace("name: mixture8", "name: mini-mixture")
                         .replace("[facescrub, mnist, cifar100, notmnist, svhn, cifar10, traffic-signs, fashion-mnist]",
                                  "[mnist, fashion-mnist]"))
    overrides = ["data.max_train_samples=4000", "data.max_test_samples=1000", "training.max_epochs=3"]
    found = matrices(str(spec_file), ["sgd"], overrides, tmp_path / "data", mnist_mirror, tmp_path / "r")
    for method, matrix in found.items():
        assert matrix.shape == (2, 2) and np.isfinite(matrix[np.tril_indices(2)]).all(), method
        assert matrix[0, 0] > 0.6 and matrix[1, 1] > 0.6, (method, matrix)  # both data sets learnt by the conv net
