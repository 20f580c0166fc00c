"""Report tables from hand-made results: exact text, missing references and failed runs named.

The result builders here (`write_run`, `write_run_json`, `write_hat_tables`, `write_bench`) are shared by the
other report test files (`from test_report import ...`).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from clbench.report import build_report, render
from clbench.results import COLUMNS, SCHEMA_VERSION, accuracy_frame, run_directory, write_json, write_parquet

NAN = np.nan


def write_run(results: Path, method: str, seed: int, matrix: list[list[float]], config_hash: str = "c0",
              hyperparameters: dict | None = None, data_hash: str = "d0", *, benchmark: str = "b",
              overrides: list[str] | None = None, variant: str | None = None,
              timing: tuple[float, int, int] | None = None, device: str = "cpu",
              reference_hash: str | None = None, initial: list[float] | None = None,
              agnostic: list[list[float]] | None = None, schema_version: int = SCHEMA_VERSION,
              scenario: str | None = None, memory: tuple[int, int] | None = None) -> Path:
    """An accuracy.parquet from a lower-triangular matrix (a row may go on above the diagonal: tasks not learned
    yet); `timing` = (seconds, epochs, batches) per stage; `initial`: the stage-0 accuracies (at
    initialisation); `agnostic`: the task-agnostic matrix (absent: task-aware rows only, as an approach that
    needs the task id stores). Schema 1 files have no `evaluation` and `scenario` values.

    `reference_hash` (what a joint reference must share) defaults to one per data hash."""
    identity = {"schema_version": schema_version, "run_id": f"{benchmark}/{method}/{config_hash}/seed-{seed}",
                "benchmark": benchmark, "variant": variant, "method": method, "seed": seed,
                "config_hash": config_hash, "data_hash": data_hash,
                "reference_hash": f"r-{data_hash}" if reference_hash is None else reference_hash,
                "hyperparameters": json.dumps(hyperparameters or {}, sort_keys=True),
                "overrides": json.dumps(["data.max_train_samples=9"] if overrides is None else overrides),
                "device": device, "scenario": (scenario or "task") if schema_version >= 2 else None}
    seconds, epochs, batches = timing if timing is not None else (None, None, None)
    rows = []
    for evaluation, values in (("task-aware", matrix), ("task-agnostic", agnostic)):
        stages = [*([(0, initial)] if initial is not None else []), *enumerate(values or [], start=1)]
        for stage, row in stages:
            rows += [{column: None for column in COLUMNS} | identity | {
                "stage": stage, "task": u + 1, "task_name": f"t{u + 1}", "accuracy": accuracy, "loss": 0.0,
                "stage_epochs": epochs if stage else None, "stage_batches": batches if stage else None,
                "stage_train_seconds": seconds if stage else None,
                "memory_samples": (memory[0] if stage else 0) if memory else None,
                "memory_bytes": (memory[1] if stage else 0) if memory else None,
                "evaluation": evaluation if schema_version >= 2 else None} for u, accuracy in enumerate(row)]
    run_dir = run_directory(results, benchmark, method, config_hash, seed)
    write_parquet(run_dir / "accuracy.parquet", accuracy_frame(rows))
    return run_dir


def write_run_json(run_dir: Path, status: str = "complete", **extra: object) -> None:
    """The run.json of a run folder `<results>/<benchmark>/<method>/<config>/seed-<seed>`."""
    benchmark, method, config_hash, seed_folder = run_dir.parts[-4:]
    write_json(run_dir / "run.json", {"run_id": f"{benchmark}/{method}/{config_hash}/{seed_folder}",
                                      "status": status, "method": method,
                                      "seed": int(seed_folder.removeprefix("seed-")), **extra})


def write_hat_tables(run_dir: Path, capacity: dict[tuple[str, int, str], float],
                     reuse: dict[tuple[int, int], float] | None = None,
                     attention: dict[tuple[int, str], list[float]] | None = None) -> None:
    """HAT monitoring tables as the engine stores them (`hat_capacity`: (mask, stage, layer) -> fraction;
    `hat_reuse`: (task, later task) -> fraction, repeated at every stage >= later task; `hat_masks`:
    (task, layer) -> attention per unit)."""
    benchmark, method, config_hash, seed_folder = run_dir.parts[-4:]
    identity = {"run_id": f"{benchmark}/{method}/{config_hash}/{seed_folder}", "benchmark": benchmark,
                "method": method, "seed": int(seed_folder.removeprefix("seed-"))}
    rows = [{**identity, "stage": stage, "mask": mask, "layer": layer, "used": round(fraction * 100),
             "weights": 100, "fraction": np.float32(fraction)} for (mask, stage, layer), fraction in capacity.items()]
    write_parquet(run_dir / "hat_capacity.parquet", pd.DataFrame(rows))
    if reuse:
        last = max(later for _, later in reuse)
        rows = [{**identity, "stage": stage, "task": task, "later_task": later, "shared": round(fraction * 100),
                 "used": 100,
                 "fraction": np.float32(fraction)}
                for stage in range(2, last + 1) for (task, later), fraction in reuse.items() if later <= stage]
        write_parquet(run_dir / "hat_reuse.parquet", pd.DataFrame(rows))
    if attention:
        rows = [{**identity, "stage": task, "task": task, "layer": layer, "unit": unit, "attention": np.float32(a)}
                for (task, layer), values in attention.items() for unit, a in enumerate(values)]
        write_parquet(run_dir / "hat_masks.parquet", pd.DataFrame(rows))


def write_bench(results: Path, rows: list[dict], name: str = "bench.parquet") -> None:
    """A bench results file `<results>/_bench/<name>` (columns as the bench command writes them)."""
    defaults = {"benchmark": "b", "device": "cuda:0", "batch_size": 64, "epoch_seconds": 1.0,
                "peak_memory_mb": 100.0, "clbench_version": "0.1.0", "torch_version": "2.5.0",
                "measured_utc": "2025-01-01T00:00:00+00:00"}
    write_parquet(results / "_bench" / name, pd.DataFrame([defaults | row for row in rows]))


def make_results(tmp_path: Path) -> Path:
    for seed in (0, 1):
        write_run(tmp_path, "joint", seed, [[0.9], [0.9, 0.9]])
        write_run(tmp_path, "random", seed, [[0.5], [0.5, 0.5]])
    write_run(tmp_path, "sgd", 0, [[0.9], [0.7, 0.9]])  # rho2 = (-0.5 + 0) / 2 = -0.25
    write_run(tmp_path, "sgd", 1, [[0.9], [0.5, 0.9]])  # rho2 = (-1 + 0) / 2 = -0.5
    write_run(tmp_path, "hat", 0, [[0.9], [0.9, 0.8]])  # rho2 = (0 - 0.25) / 2 = -0.125
    write_run(tmp_path, "hat", 1, [[0.9], [0.9, 0.9]])  # rho2 = 0
    return tmp_path


def test_forgetting_ratio_table_golden(tmp_path: Path) -> None:
    report = build_report(make_results(tmp_path), "b")
    expected = (
        "| approach | rho<=1      | rho<=2       | seeds |\n"
        "|----------|-------------|--------------|-------|\n"
        "| sgd      | 0.00 (0.00) | -0.38 (0.18) | 2     |\n"
        "| hat      | 0.00 (0.00) | -0.06 (0.09) | 2     |\n"
    )
    assert render(report, "markdown") == expected


def test_accuracy_table_golden(tmp_path: Path) -> None:
    report = build_report(make_results(tmp_path), "b", metric="accuracy")
    text = render(report, "markdown")
    assert text.splitlines()[2] == "| random   | 50.0 (0.0) | 50.0 (0.0) | 2     |"
    assert text.splitlines()[3] == "| sgd      | 90.0 (0.0) | 75.0 (7.1) | 2     |"
    assert [label for label, _ in report.rows] == ["random", "sgd", "hat", "joint"]


def test_latex_and_csv(tmp_path: Path) -> None:
    report = build_report(make_results(tmp_path), "b")
    latex = render(report, "latex")
    assert "\\begin{tabular}{lccc}" in latex and "$\\rho^{\\leq 2}$" in latex
    assert "hat & 0.00 (0.00) & -0.06 (0.09) & 2 \\\\" in latex
    csv_lines = render(report, "csv").splitlines()
    assert csv_lines[0] == "benchmark,approach,metric,stage,mean,std,seeds"
    assert csv_lines[2].startswith("b,sgd,forgetting-ratio,2,-0.375,0.17677")


def test_missing_reference_is_named_with_the_command(tmp_path: Path) -> None:
    make_results(tmp_path)
    write_run(tmp_path, "sgd", 2, [[0.9], [0.7, 0.9]])
    report = build_report(tmp_path, "b")
    [note] = report.notes
    assert "b/sgd/c0/seed-2" in note and "no joint and no random reference for seed 2" in note
    assert "clbench train b -m joint,random --seeds 2 --set data.max_train_samples=9" in note
    assert dict(report.rows)["sgd"][1].n == 2  # seed 2 not averaged


def test_failed_and_partial_runs_are_left_out_and_named(tmp_path: Path) -> None:
    make_results(tmp_path)
    write_run(tmp_path, "sgd", 3, [[0.9], [NAN, 0.9]])
    failed_dir = run_directory(tmp_path, "b", "sgd", "c0", 4)
    write_json(failed_dir / "run.json", {"run_id": "b/sgd/c0/seed-4", "status": "failed", "error": "OOM",
                                         "method": "sgd", "seed": 4})
    report = build_report(tmp_path, "b")
    assert any("b/sgd/c0/seed-4: failed (OOM)" in note for note in report.notes)
    assert any("b/sgd/c0/seed-3: its accuracy matrix is incomplete" in note for note in report.notes)
    assert dict(report.rows)["sgd"][1].n == 2


def test_configs_of_one_method_are_kept_apart(tmp_path: Path) -> None:
    make_results(tmp_path)
    write_run(tmp_path, "lwf", 0, [[0.9], [0.6, 0.8]], config_hash="c1", hyperparameters={"lamb": 1, "temperature": 1})
    write_run(tmp_path, "lwf", 0, [[0.9], [0.9, 0.8]], config_hash="c2", hyperparameters={"lamb": 2, "temperature": 1})
    rows = dict(build_report(tmp_path, "b").rows)
    assert rows["lwf (lamb=1)"][1].mean == pytest.approx(-0.5)  # (-0.75 - 0.25) / 2
    assert rows["lwf (lamb=2)"][1].mean == pytest.approx(-0.125)


def test_report_never_mixes_references_of_other_data(tmp_path: Path) -> None:
    make_results(tmp_path)
    write_run(tmp_path, "ewc", 0, [[0.9], [0.9, 0.9]], data_hash="other")
    report = build_report(tmp_path, "b")
    assert "ewc" not in dict(report.rows)
    assert any("ewc" in note and "data other" in note for note in report.notes)
