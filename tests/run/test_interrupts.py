"""A Ctrl-C as a run finishes: before its rows land the run is `interrupted` and resumes; while they land, the rows
and `complete` land together and the interrupt takes effect after them (never a run left `running`)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
import torch
from synthetic import synthetic_loader, tiny_spec

import clbench.run.engine as engine
from clbench.results import read_run_file
from clbench.run.engine import execute
from clbench.run.interrupts import interrupts_held
from clbench.run.plan import plan_runs
from clbench.run_files import is_complete

CPU = torch.device("cpu")


@pytest.fixture(autouse=True)
def ctrl_c_raises() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt here, as in a terminal (a test started by a background job inherits it
    ignored)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_a_signal_inside_the_block_is_raised_after_it_and_the_handlers_are_restored() -> None:
    before = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    steps = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts_held():
            steps.append("first write")
            signal.raise_signal(signal.SIGINT)
            steps.append("second write")
    assert steps == ["first write", "second write"]
    assert {number: signal.getsignal(number) for number in before} == before


def test_without_a_signal_the_block_just_runs() -> None:
    with interrupts_held():
        value = 1
    assert value == 1 and signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_sigterm_goes_to_its_own_handler_after_the_block() -> None:
    received = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: received.append(signum))
    try:
        with interrupts_held():
            signal.raise_signal(signal.SIGTERM)
            assert received == []
        assert received == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.mark.parametrize("first, second", [(signal.SIGTERM, signal.SIGINT), (signal.SIGINT, signal.SIGTERM)],
                         ids=["SIGTERM-then-SIGINT", "SIGINT-then-SIGTERM"])
def test_of_two_signals_held_in_one_block_the_first_is_raised_after_it(first: int, second: int) -> None:
    received = []
    previous = {number: signal.signal(number, lambda signum, frame: received.append(signum))
                for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        with interrupts_held():
            signal.raise_signal(first)
            signal.raise_signal(second)
            assert received == []  # both held back
        assert received == [first]  # one raised again after the block: the one that came first
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def test_outside_the_main_thread_the_block_runs_unprotected() -> None:
    done = []
    worker = threading.Thread(target=lambda: done.append(_held_block()))
    worker.start()
    worker.join()
    assert done == ["ran"]


def _held_block() -> str:
    with interrupts_held():  # signal.signal would raise ValueError in this thread
        return "ran"


def test_ctrl_c_while_the_rows_are_encoded_leaves_an_interrupted_run_that_resumes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    [plan] = plan_runs(tiny_spec("mlp"), ["sgd"], [0], tmp_path / "results")
    reference = execute(plan_runs(tiny_spec("mlp"), ["sgd"], [0], tmp_path / "reference")[0], device=CPU,
                        loader=synthetic_loader())
    encoded_rows = engine.encoded_rows

    def ctrl_c(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise KeyboardInterrupt  # as when Ctrl-C comes while pyarrow is imported and the rows are encoded

    monkeypatch.setattr(engine, "encoded_rows", ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        execute(plan, device=CPU, loader=synthetic_loader())
    assert read_run_file(plan.run_dir)["status"] == "interrupted"
    assert not (plan.run_dir / "accuracy.parquet").exists() and not is_complete(plan.run_dir)

    monkeypatch.setattr(engine, "encoded_rows", encoded_rows)
    resumed = execute(plan, device=CPU, loader=synthetic_loader())
    assert resumed.status == "done" and resumed.resumed_after_stage == 3
    assert read_run_file(plan.run_dir)["status"] == "complete"
    stored = pd.read_parquet(plan.run_dir / "accuracy.parquet")
    assert list(stored["loss"]) == [row["loss"] for row in reference.rows]


def test_ctrl_c_while_the_rows_land_takes_effect_after_the_run_is_complete(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    [plan] = plan_runs(tiny_spec("mlp"), ["sgd"], [0], tmp_path)
    write_run_file = engine.write_run_file

    def write_then_ctrl_c(path: Path, data: bytes) -> None:
        write_run_file(path, data)
        if path.name == "accuracy.parquet":  # (checkpoints are written the same way)
            signal.raise_signal(signal.SIGINT)  # arrives between the rows and run.json's `complete`

    monkeypatch.setattr(engine, "write_run_file", write_then_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        execute(plan, device=CPU, loader=synthetic_loader())
    assert read_run_file(plan.run_dir)["status"] == "complete" and is_complete(plan.run_dir)
    assert len(pd.read_parquet(plan.run_dir / "accuracy.parquet")) == 4 * 3 * 2 * 2  # x test and validation
