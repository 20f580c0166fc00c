"""tools/gpu_check.py (issue 62): the GPU check runs end to end on the CPU with --dry, one failing part does not stop
the others, a command past its budget is stopped with its workers, and stopped runs are read where they stopped."""

from __future__ import annotations

import csv
import importlib
import json
import os
import sys
import time
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pandas as pd
import pytest
import torch
from realmirror import mirror_dir
from toolloader import load_tool

PARTS = range(7)


@pytest.fixture(scope="module")
def gpu_check() -> ModuleType:
    return load_tool("gpu_check")  # puts tools/ on the path for its siblings


def sibling(name: str) -> ModuleType:
    return importlib.import_module(name)


@pytest.fixture(scope="module")
def dry_run(gpu_check: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> tuple[int, Path, bool]:
    """The whole check at --dry sizes on the CPU, part 3 failing on purpose: (exit status, output folder, MNIST?)."""
    mirror = mirror_dir()
    has_mnist = (mirror / "mnist" / "train-images-idx3-ubyte.gz").is_file()
    out = tmp_path_factory.mktemp("gpu-check") / "out"
    scratch = tmp_path_factory.mktemp("gpu-check-scratch")
    code = gpu_check.main([str(out), "--dry", "--mirror", str(mirror), "--inject-failure", "3",
                           "--scratch", str(scratch)])
    return code, out, has_mnist


def parts_of(out: Path) -> dict[int, dict]:
    return {part["number"]: part for part in json.loads((out / "summary.json").read_text())["parts"]}


def test_the_dry_check_writes_a_few_files_and_a_status_for_every_part(dry_run: tuple[int, Path, bool]) -> None:
    _, out, _ = dry_run
    assert sorted(path.name for path in out.iterdir()) == ["bench.csv", "log.txt", "summary.json", "summary.md"]
    parts = parts_of(out)
    assert sorted(parts) == list(PARTS)
    assert all(part["status"] in ("ok", "partial", "failed", "skipped") for part in parts.values())
    text = (out / "summary.md").read_text()
    status_table = text[text.index("| part | title | status |"):].split("\n\n")[0].splitlines()[2:]
    cells = [line.split("|") for line in status_table]
    assert {int(row[1]): row[3].strip() for row in cells} == {n: part["status"] for n, part in parts.items()}


def test_an_injected_failure_fails_its_part_and_the_later_parts_still_run(dry_run: tuple[int, Path, bool]) -> None:
    code, out, has_mnist = dry_run
    parts = parts_of(out)
    assert code == 1  # a part failed
    assert parts[3]["status"] == "failed" and "--inject-failure 3" in parts[3]["note"]
    assert "InjectedFailure" in (out / "log.txt").read_text()  # its traceback
    assert {n: parts[n]["status"] for n in (0, 1, 2)} == {0: "ok", 1: "ok", 2: "ok"}
    later = "ok" if has_mnist else "skipped"
    assert {n: parts[n]["status"] for n in (4, 5, 6)} == {4: later, 5: later, 6: later}
    if has_mnist:  # each later part measured: three runs per --jobs setting, each of both tasks
        settings = parts[4]["figures"]["settings"]
        assert {jobs: (s["runs_complete"], s["tasks_done"]) for jobs, s in settings.items()} == \
            {"3": (3, 6), "1": (3, 6)}
        assert parts[6]["figures"]["tasks_done"] == 2 and parts[6]["figures"]["status"] == "complete"
        # its --set options: the large network, then --dry's tiny sizes (which the GPU run has not: see below)
        options = parts[6]["figures"]["command"].split("--set ")[1:]
        assert [option.split()[0] for option in options] == [
            "variant=large", "data.n_tasks=2", "data.max_train_samples=200", "data.max_test_samples=200",
            "training.max_epochs=1"]


def test_part_6_is_the_large_network_at_the_full_protocol(gpu_check: ModuleType) -> None:
    """On the GPU (no --dry) part 6 trains pmnist HAT 784-2000-2000 for one seed with no other `--set`: the paper's
    full protocol (all images, up to 200 epochs with early stopping)."""
    runs = sibling("gpu_check_runs")
    assert runs.short(SimpleNamespace(dry=False), "variant=large") == ["--set", "variant=large"]
    assert "data.max_train_samples=200" in runs.short(SimpleNamespace(dry=True), "variant=large")
    assert runs.PAPER_LARGE == 98.6  # hat-icml2018.tex line 624, HAT -- Large


def test_the_dry_check_measures_what_each_part_names(dry_run: tuple[int, Path, bool]) -> None:
    _, out, has_mnist = dry_run
    parts = parts_of(out)
    outcomes = parts[1]["figures"]["outcomes"]
    assert outcomes == {  # the CUDA test skips on the CPU; the contract run passes
        "tests/cuda/test_cuda.py::test_bench_on_cuda_measures_epochs_and_gpu_memory": "SKIPPED",
        "tests/approaches/test_contract.py::test_every_approach_fills_the_lower_triangle[sgd-mlp]": "PASSED"}
    with (out / "bench.csv").open() as file:
        rows = list(csv.DictReader(file))
    measured = {(row["source"], row["benchmark"], row["method"]) for row in rows if row["status"] == "ok"}
    assert measured == {("clbench bench CLI", "mixture8", "hat"), ("clbench bench CLI", "mixture8", "sgd"),
                        *(("every approach", "mixture8", m) for m in ("hat", "sgd", "er")),
                        *(("every approach", "cifar10-5", m) for m in ("sgd", "er", "derpp"))}
    timed = [row for row in rows if row["status"] == "ok"]
    # measured, not raced: on a loaded CPU a tiny batch's forward can time above its forward and backward
    assert all(float(row["forward_backward_ms"]) > 0 and float(row["forward_ms"]) > 0 for row in timed)
    assert parts[2]["figures"]["hat_target_ms"] == pytest.approx(11.7 / 8)
    if has_mnist:
        switches = parts[5]["figures"]
        assert 0 <= switches["float32"]["accuracy"] <= 100 and 0 <= switches["bf16 autocast"]["accuracy"] <= 100
        assert switches["torch.compile"]["status"].startswith("not run with --dry")


def test_a_command_past_its_budget_is_stopped_with_its_workers(gpu_check: ModuleType, tmp_path: Path) -> None:
    common = sibling("gpu_check_common")
    check = common.Check(tmp_path, tmp_path, "cpu", True, tmp_path)
    worker = tmp_path / "worker.pid"
    program = ("import subprocess, sys, time\n"
               "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
               f"open({str(worker)!r}, 'w').write(str(child.pid))\n"
               "print('measured so far', flush=True)\n"
               "time.sleep(120)\n")
    start = time.perf_counter()
    finished = common.run_command(check, [sys.executable, "-c", program], 3, "a test")
    assert finished.timed_out and finished.returncode is None and time.perf_counter() - start < 30
    assert "measured so far" in finished.output  # what it printed before the stop is kept
    assert "===== a test:" in (tmp_path / "log.txt").read_text()
    pid = int(worker.read_text())
    deadline = time.time() + 10
    while Path(f"/proc/{pid}").exists() and time.time() < deadline:  # the worker of the stopped command is gone
        if "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]:
            break  # a zombie: killed, waiting for its reaper
        time.sleep(0.1)
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]


def test_a_stopped_run_is_read_where_it_stopped(gpu_check: ModuleType, tmp_path: Path) -> None:
    """Epochs from logs/scalars.csv, finished tasks and seconds per epoch from the rows, accuracy only if complete."""
    runs = sibling("gpu_check_runs")
    run = tmp_path / "pmnist" / "hat" / "abc" / "seed-1"
    (run / "logs").mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"seed": 1, "status": "running", "config": {"data": {"n_tasks": 10}}}))
    lines = ["step,stage,epoch,tag,value", "0,0,,accuracy/task-aware/task1,0.1"]
    lines += [f"{s},{1 + (s > 3)},{s},{tag},0.5" for s in range(1, 6) for tag in ("train/loss", "train/lr")]
    (run / "logs" / "scalars.csv").write_text("\n".join(lines) + "\n")  # 5 epochs: 3 of task 1, 2 of task 2
    rows = [{"stage": 0, "task": 1, "split": "test", "evaluation": "task-aware", "accuracy": 0.1,
             "stage_epochs": None, "stage_train_seconds": None, "stage_eval_seconds": None}]
    rows += [{"stage": 1, "task": 1, "split": split, "evaluation": "task-aware", "accuracy": 0.9, "stage_epochs": 3,
              "stage_train_seconds": 5.0, "stage_eval_seconds": 1.0} for split in ("test", "validation")]
    pd.DataFrame(rows).to_parquet(run / "accuracy.parquet")
    [progress] = runs.progress_of(tmp_path)
    assert progress == runs.RunProgress(seed=1, status="running", n_tasks=10, epochs=5, tasks_done=1,
                                        seconds_per_epoch=2.0, accuracy=None)  # (5 + 1) s / 3 epochs
    figures = runs.rates([progress], 1800.0)
    assert (figures["tasks_per_hour"], figures["epochs_per_hour"], figures["runs_per_hour"]) == (2.0, 10.0, 0.0)
    assert figures["estimated_runs_per_hour"] == pytest.approx(0.2)  # 2 tasks an hour, 10 tasks a run
    finished = sibling("gpu_check_common").Finished
    done, stopped, broken = (finished(("clbench",), code, 1.0, code is None, "") for code in (0, None, 1))
    assert [runs.train_status(ends) for ends in ([done], [done, stopped], [stopped, broken])] == \
        ["ok", "partial", "failed"]  # stopped at its budget: partial; an exit status other than 0: failed


def test_pytest_outcomes_are_read_with_and_without_xdist(gpu_check: ModuleType) -> None:
    parts = sibling("gpu_check_parts")
    output = "\n".join([
        "tests/cuda/test_cuda.py::test_a[hat] PASSED                     [ 10%]",
        "[gw3] [ 20%] FAILED tests/cuda/test_cuda.py::test_b",
        "[gw1] [ 30%] PASSED tests/approaches/test_contract.py::test_c[sgd-mlp]",
        "tests/approaches/test_contract.py::test_c[sgd-mlp] ERROR        [ 30%]",  # an error at its teardown
        "[gw0] [ 40%] SKIPPED tests/cuda/test_cuda.py::test_d",
        "=========================== short test summary info ============================",
        "FAILED tests/cuda/test_cuda.py::test_b - AssertionError: 0.5 != 0.6",
        "ERROR tests/approaches/test_contract.py::test_c[sgd-mlp] - RuntimeError: CUDA error",
        "=================================== golden runs ===================================",
        "golden runs: 2 compared within tolerance",
        "=========== 1 failed, 1 passed, 1 skipped, 1 error in 9.00s ===========",
    ])
    assert parts.test_outcomes(output) == {"tests/cuda/test_cuda.py::test_a[hat]": "PASSED",
                                           "tests/cuda/test_cuda.py::test_b": "FAILED",
                                           "tests/approaches/test_contract.py::test_c[sgd-mlp]": "ERROR",
                                           "tests/cuda/test_cuda.py::test_d": "SKIPPED"}
    assert parts.failure_reasons(output) == {
        "tests/cuda/test_cuda.py::test_b": "AssertionError: 0.5 != 0.6",
        "tests/approaches/test_contract.py::test_c[sgd-mlp]": "RuntimeError: CUDA error"}
    assert parts.golden_lines(output) == ["golden runs: 2 compared within tolerance"]


def test_the_raw_replay_memory_is_a_reservoir_with_a_spare_row(gpu_check: ModuleType) -> None:
    workers = sibling("gpu_check_workers")
    from clbench.spec import load_benchmark

    raw = workers.RawReplay("er", load_benchmark("seq-mnist", ["er.buffer_size=4"]), torch.device("cpu"))
    samples = torch.arange(10, dtype=torch.float32)[:, None].expand(10, 784)  # sample i: every input i
    raw.store(samples[:3], torch.arange(3), torch.zeros(3, 10))
    raw.store(samples[3:4], torch.arange(3, 4), torch.zeros(1, 10))
    assert raw.memory_y[:4].tolist() == [0, 1, 2, 3] and raw.seen == 4  # the first samples fill the slots in order
    raw.store(samples[4:10], torch.arange(4, 10), torch.zeros(6, 10))
    kept = raw.memory_y[:4].tolist()
    assert raw.seen == 10 and len(set(kept)) == 4 and all(0 <= k < 10 for k in kept)  # 4 samples of the stream
    assert torch.equal(raw.memory_x[:4, 0].long(), raw.memory_y[:4])  # each slot's input is its own sample's


def test_prepare_copies_mnist_and_refuses_a_copy_unlike_md5sums(gpu_check: ModuleType, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "mirror"
    (source / "mnist").mkdir(parents=True)
    for name in gpu_check.MNIST_FILES:
        (source / "mnist" / name).write_bytes(b"abc")
    md5_abc = "900150983cd24fb0d6963f7d28e17f72"  # md5 of b"abc"
    sums = [f"{md5_abc}  mnist/{name}" for name in gpu_check.MNIST_FILES]
    (source / "MD5SUMS").write_text("\n".join(sums) + "\n")
    target = tmp_path / ".gpu-data"
    assert gpu_check.main(["--prepare", "--from", str(source), "--mirror", str(target)]) == 0
    assert sorted(path.name for path in (target / "mnist").iterdir()) == sorted(gpu_check.MNIST_FILES)
    assert (target / "commit.txt").read_text().strip()
    (source / "MD5SUMS").write_text("\n".join(sums).replace(md5_abc, "0" * 32, 1) + "\n")
    assert gpu_check.main(["--prepare", "--from", str(source), "--mirror", str(tmp_path / "other")]) == 2
    assert "md5 differs" in capsys.readouterr().err


@pytest.mark.parametrize(("options", "message"), [
    (["--parts", "2,9"], "--parts '2,9': no part 9 (parts: 0,1,2,3,4,5,6)"),
    (["--inject-failure", "x"], "--inject-failure 'x': give part numbers separated by commas"),
])
def test_bad_options_exit_2_naming_the_option_and_write_nothing(gpu_check: ModuleType, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str],
                                                                options: list[str], message: str) -> None:
    with pytest.raises(SystemExit) as exited:
        gpu_check.main([str(tmp_path / "out"), "--dry", *options])
    assert exited.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_used_output_folder_is_refused(gpu_check: ModuleType, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "old.txt").write_text("kept")
    with pytest.raises(SystemExit) as exited:
        gpu_check.main([str(tmp_path), "--dry"])
    assert exited.value.code == 2 and "must be new or empty" in capsys.readouterr().err
    assert os.listdir(tmp_path) == ["old.txt"]
