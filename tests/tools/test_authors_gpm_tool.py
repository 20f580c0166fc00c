"""tools/authors_gpm.py: the authors' pmnist protocol it sets on clbench, and its summary numbers by hand."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from toolloader import load_tool

from clbench.approaches.resolution import resolve
from clbench.spec import load_benchmark

TOOL = Path(__file__).resolve().parents[2] / "tools" / "authors_gpm.py"


@pytest.fixture(scope="module")
def tool():  # type: ignore[no-untyped-def]
    module = load_tool("authors_gpm")
    yield module
    del sys.modules[module.__name__]


def test_the_authors_protocol_resolves_on_pmnist(tool) -> None:
    spec = load_benchmark("pmnist", list(tool.AUTHORS_PROTOCOL))
    resolved = resolve(spec, "gpm")
    training = resolved.training
    assert (training.lr, training.batch_size, training.max_epochs, training.early_stopping) == (0.01, 10, 5, False)
    assert (spec.data.scenario, spec.data.validation_fraction, spec.network.hidden) == ("domain", 0.1, (100, 100))
    assert resolved.hyperparameters.thresholds == (0.95, 0.99, 0.99) and resolved.hyperparameters.samples == 300


def test_final_accuracy_and_bwt_as_the_authors_print_them(tool) -> None:
    matrix = np.array([[90.0, 0.0, 0.0], [88.0, 91.0, 0.0], [85.0, 89.0, 92.0]])
    # mean of the last row; mean over the first 2 tasks of (last row - diagonal): (-5 + -2) / 2
    assert tool.final_accuracy_and_bwt(matrix) == (pytest.approx(88.6666667), pytest.approx(-3.5))
