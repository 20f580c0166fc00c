"""Shared fixtures: the offline mirror of real MNIST ($CLBENCH_MIRROR, else ../shared/data) and a prepared cache."""

from __future__ import annotations

from pathlib import Path

import pytest


def pytest_configure(config: pytest.Config) -> None:
    """Tiny test networks run faster on one thread (and do not fight each other on a 2-core CI machine); a
    relative $CLBENCH_MIRROR / $CLBENCH_DATA is resolved once, against the folder pytest started in."""
    import os

    import torch
    from realmirror import absolute_environment

    torch.set_num_threads(1)
    absolute_environment(os.environ)


@pytest.fixture(scope="session")
def mnist_mirror() -> Path:
    """The offline mirror ($CLBENCH_MIRROR, else ../shared/data) holding MNIST; skips otherwise."""
    from realmirror import require_mirror

    return require_mirror("mnist/train-images-idx3-ubyte.gz")


@pytest.fixture(scope="session")
def shared_mirror() -> Path:
    """The offline mirror ($CLBENCH_MIRROR, else ../shared/data) with its MD5SUMS; skips otherwise."""
    from realmirror import require_mirror

    return require_mirror("MD5SUMS")


@pytest.fixture(scope="session")
def mnist_data_dir(tmp_path_factory: pytest.TempPathFactory, mnist_mirror: Path) -> Path:
    """A data cache with real MNIST fetched from the mirror (once per test session)."""
    from clbench.data.sources import fetch_dataset

    data_dir = tmp_path_factory.mktemp("data")
    fetch_dataset("mnist", data_dir, str(mnist_mirror))
    return data_dir


@pytest.fixture
def restored_registry():  # type: ignore[no-untyped-def]
    """Plugins a test loaded are forgotten after it (`pytestmark = pytest.mark.usefixtures("restored_registry")`)."""
    from clihelpers import kept_registry

    with kept_registry():
        yield


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:  # type: ignore[no-untyped-def]
    """Say how the golden runs were compared (`tests/golden_runs.py`): exactly, or within tolerance and why."""
    from golden_runs import GOLDEN_COMPARISONS, summary_lines

    lines = summary_lines(config.stash.get(GOLDEN_COMPARISONS, []))
    if lines:
        terminalreporter.section("golden runs")
        for line in lines:
            terminalreporter.write_line(line)
