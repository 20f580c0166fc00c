"""Shared fixtures: the offline mirror of real MNIST (../shared/data) and a prepared data cache."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/synthetic.py importable as `synthetic`

def pytest_configure(config: pytest.Config) -> None:
    """Tiny test networks run faster on one thread (and do not fight each other on a 2-core CI machine)."""
    import torch

    torch.set_num_threads(1)


REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data"


def mirror_dir() -> Path:
    """The offline mirror: $CLBENCH_MIRROR if it is a folder, else ../shared/data beside the checkout."""
    import os

    explicit = os.environ.get("CLBENCH_MIRROR")
    if explicit and Path(explicit).is_dir():
        return Path(explicit)
    return SHARED_DATA


@pytest.fixture(scope="session")
def mnist_mirror() -> Path:
    path = mirror_dir()
    if not (path / "mnist" / "train-images-idx3-ubyte.gz").is_file():
        pytest.skip(f"no MNIST mirror at {path} (set CLBENCH_MIRROR)")
    return path


@pytest.fixture(scope="session")
def mnist_data_dir(tmp_path_factory: pytest.TempPathFactory, mnist_mirror: Path) -> Path:
    """A data cache with real MNIST fetched from the mirror (once per test session)."""
    from clbench.data.sources import fetch_dataset

    data_dir = tmp_path_factory.mktemp("data")
    fetch_dataset("mnist", data_dir, str(mnist_mirror))
    return data_dir
