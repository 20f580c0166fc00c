"""tools/authors_supsup.py runs clbench on the notebook's protocol: its settings resolve to the notebook's values, and
its reader of the upstream idx files reads what the format says."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
from toolloader import load_tool

from clbench.approaches.resolution import resolve
from clbench.spec import load_benchmark

TOOL = Path(__file__).resolve().parents[2] / "tools" / "authors_supsup.py"


@pytest.fixture(scope="module")
def tool():  # type: ignore[no-untyped-def]
    return load_tool("authors_supsup")


def test_the_clbench_settings_are_the_notebooks(tool) -> None:  # type: ignore[no-untyped-def]
    spec = load_benchmark("pmnist", list(tool.CLBENCH_SETTINGS))
    resolved = resolve(spec, "supsup")
    assert (spec.data.n_tasks, spec.network.hidden, spec.data.validation_fraction) == (5, (300, 300), 0.0)
    training = resolved.training
    assert (training.lr, training.batch_size, training.max_epochs, training.early_stopping) == (1e-4, 128, 1, False)
    assert training.optimizer == "rmsprop"
    hyper = resolved.hyperparameters
    assert (hyper.mask, hyper.output_size) == ("threshold", 100)


def test_read_idx_reads_the_header_and_the_bytes(tool, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "x-images-idx3-ubyte.gz"
    header = bytes([0, 0, 8, 3]) + (2).to_bytes(4, "big") + (2).to_bytes(4, "big") + (3).to_bytes(4, "big")
    path.write_bytes(gzip.compress(header + bytes(range(12))))
    assert np.array_equal(tool.read_idx(path), np.arange(12, dtype=np.uint8).reshape(2, 2, 3))
