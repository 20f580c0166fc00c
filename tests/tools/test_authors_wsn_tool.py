"""tools/authors_wsn.py: the spec it writes for clbench is valid and the authors' protocol; their metrics."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from toolloader import load_tool

from clbench.approaches.resolution import resolve
from clbench.spec import load_benchmark

TOOL = Path(__file__).resolve().parents[2] / "tools" / "authors_wsn.py"


@pytest.fixture(scope="module")
def tool():  # type: ignore[no-untyped-def]
    return load_tool("authors_wsn")


def test_the_written_spec_is_the_authors_pmnist_protocol(tool, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "pmnist-wsn.yaml"
    path.write_text(tool.clbench_spec(5, 0.1, 6000, 5))
    spec = load_benchmark(str(path))
    resolved = resolve(spec, "wsn")
    training = resolved.training
    assert (training.optimizer, training.lr, training.batch_size, training.max_epochs) == ("adam", 0.001, 10, 5)
    assert (training.lr_min, training.lr_factor, training.patience) == (1e-6, 2, 6)
    assert (spec.network.hidden, spec.network.bias) == ((100, 100), False)
    assert (spec.data.n_tasks, spec.data.validation_fraction, spec.data.max_train_samples) == (5, 0.1, 5400)
    assert resolved.hyperparameters.c == 0.1


def test_final_accuracy_and_bwt_by_hand(tool) -> None:  # type: ignore[no-untyped-def]
    matrix = np.array([[0.9, 0.0, 0.0], [0.8, 0.95, 0.0], [0.7, 0.9, 0.99]])
    accuracy, bwt = tool.final_accuracy_and_bwt(matrix)
    assert accuracy == pytest.approx((0.7 + 0.9 + 0.99) / 3)
    assert bwt == pytest.approx(((0.7 - 0.9) + (0.9 - 0.95)) / 2)
