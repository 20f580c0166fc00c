"""tools/speed.py compares like with like: its raw loops compute what clbench computes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from synthetic import make_approach, synthetic_loader, tiny_spec
from toolloader import load_tool

from clbench.data.tasks import build_tasks
from clbench.run.rows import evaluate_stage

SPEED = Path(__file__).resolve().parents[2] / "tools" / "speed.py"


@pytest.fixture(scope="module")
def speed():  # type: ignore[no-untyped-def]
    module = load_tool("speed")
    yield module
    del sys.modules[module.__name__]


@pytest.mark.parametrize("scenario", ["task", "class"])
def test_the_raw_evaluation_counts_the_right_answers_clbench_stores(speed, scenario: str) -> None:  # type: ignore[no-untyped-def]
    spec = tiny_spec("mlp", kind="permuted", scenario=scenario)
    tasks = build_tasks(spec.data, 0, synthetic_loader(n_train=200, n_test=90))
    approach = make_approach("sgd", spec, tasks)
    stage = len(tasks) - 1
    stored = evaluate_stage(approach, tasks, stage)
    right = sum(round(result.accuracy * result.n) for _, _, result, _ in stored)
    inputs = [speed.normalised(task.test, t) for t, task in enumerate(tasks.tasks)]
    labels = [task.test.labels for task in tasks.tasks]
    raw = speed.raw_evaluation(approach.multihead, inputs, labels, approach.context.class_offsets,
                               tasks.head_sizes, 37, approach.predicts_without_task_id())
    assert {name for _, name, _, _ in stored} == {"task-aware", "task-agnostic"}  # both, as the raw loop counts
    assert raw() == right


def test_the_raw_reservoir_keeps_capacity_samples_of_the_stream(speed) -> None:  # type: ignore[no-untyped-def]
    memory = speed.RawReservoir(20, (3,), torch.Generator().manual_seed(0))
    stream = torch.arange(300, dtype=torch.float32)
    for start in range(0, 300, 10):
        chunk = stream[start:start + 10]
        memory.add(chunk[:, None].expand(10, 3), chunk.long(), task=start // 100)
    assert memory.size == 20 and memory.seen == 300
    kept = memory.labels.tolist()
    assert len(set(kept)) == 20 and all(0 <= k < 300 for k in kept)  # 20 distinct samples of the stream
    assert torch.equal(memory.inputs[:, 0].long(), memory.labels)  # each slot's input is its own sample's
    assert torch.equal(memory.tasks, memory.labels // 100)
    assert max(kept) >= 20  # reservoir sampling replaced some of the first 20
    replayed, replayed_labels, _ = memory.sample(5)
    assert replayed.shape == (5, 3) and set(replayed_labels.tolist()) <= set(kept)


def test_an_unknown_section_is_refused_with_the_choices(speed, capsys) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SystemExit) as exited:
        speed.main(["--section", "evaluation"])
    assert exited.value.code == 2
    assert "unknown section(s) evaluation; choose from eval, step, startup, command, scaling or all" in \
        capsys.readouterr().err


def test_the_mirror_and_data_folder_are_resolved_against_the_folder_it_starts_in(
        speed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """The timed commands run in other folders (the baseline's worktree): a relative --mirror must not move."""
    monkeypatch.chdir(tmp_path)
    args, sections = speed.parse_arguments(["--section", "command", "--mirror", "../shared/data", "--data-dir", "d"])
    assert args.mirror == (tmp_path / ".." / "shared" / "data").resolve() and args.mirror.is_absolute()
    assert args.data_dir == tmp_path.resolve() / "d" and sections == ("command",)


TABLE = "| approach | rho<=1 |\n|---|---|\n| sgd | 0.00 (0.00) |\n"


def test_the_command_lines_take_medians_and_count_a_speed_up_only_with_the_same_table(speed) -> None:  # type: ignore[no-untyped-def]
    measured = speed.Measured
    new = [measured(10.0, 1100 * 1024, 30.0, TABLE), measured(30.0, 1300 * 1024, 20.0, TABLE),
           measured(20.0, 1000 * 1024, 25.0, "noise\n" + TABLE)]
    old = [measured(50.0, 1000 * 1024, 60.0, TABLE), measured(40.0, 900 * 1024, 80.0, TABLE),
           measured(45.0, 950 * 1024, 70.0, TABLE)]
    wall, peak, cpu = speed.command_lines(new, old, "b3ef878")
    # medians by hand: wall 20 vs 45 s, peak 1100 vs 950 MiB, CPU 25 vs 70 s
    assert (wall.clbench, wall.reference, wall.ratio, wall.ok) == (20.0, 45.0, 2.25, True)
    assert (peak.clbench, peak.reference, peak.ok) == (1100.0, 950.0, True) and abs(peak.ratio - 1100 / 950) < 1e-12
    assert (cpu.clbench, cpu.reference, cpu.ratio) == (25.0, 70.0, 2.8) and "| - |" in cpu.show()
    assert "same table: yes" in wall.note and "| met |" in wall.show()
    other = [measured(m.seconds, m.peak_kib, m.cpu_seconds, TABLE.replace("0.00 (0.00)", "0.01 (0.00)")) for m in new]
    slower, _, _ = speed.command_lines(other, old, "b3ef878")
    assert not slower.ok and "same table: NO" in slower.note  # 2.25x, but another table: not a speed-up
    assert not speed.command_lines(new[:1] * 3, [measured(19.0, 1000 * 1024, 1.0, TABLE)] * 3, "x")[0].ok  # 1.9x
    heavy = [measured(m.seconds, 1200 * 1024, m.cpu_seconds, TABLE) for m in new]
    assert not speed.command_lines(heavy, old, "b3ef878")[1].ok  # 1200 / 950 = 1.26x the memory
    assert speed.Measured(1.0, 5, 2.0, "a").plus(speed.Measured(3.0, 4, 1.0, "b")) == speed.Measured(4.0, 5, 3.0, "b")


def test_a_figure_that_could_not_be_taken_reads_not_measured_and_fails_the_exit_status(
        speed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("CLBENCH_DATA", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty-cache"))  # no MNIST anywhere
    assert speed.main(["--section", "startup"]) == 1
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("| startup"))
    assert row == "| startup: needs MNIST fetched (--data-dir or --mirror) | - | - | - | <= +1.5 s | not measured | |"


def test_mnist_is_found_in_clbench_s_own_cache_when_no_folder_or_mirror_is_given(
        speed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("CLBENCH_DATA", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    args, sections = speed.parse_arguments(["--section", "startup"])
    assert speed._data_dir(args, tmp_path / "scratch", sections) is None  # nothing fetched yet
    (tmp_path / "clbench" / "mnist").mkdir(parents=True)  # where `clbench fetch` puts it
    assert speed._data_dir(args, tmp_path / "scratch", sections) == tmp_path / "clbench"
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "mnist").mkdir(parents=True)
    monkeypatch.setenv("CLBENCH_DATA", str(elsewhere))  # an explicit folder wins
    assert speed._data_dir(args, tmp_path / "scratch", sections) == elsewhere
