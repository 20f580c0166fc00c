"""Results folders built by hand for the report tests: a run's accuracy.parquet from a matrix, its run.json,
HAT's monitoring tables, bench timings; the golden fixture folder (`golden_results`, the numbers behind
tests/golden/), a HAT sensitivity grid, and mnist2 runs with a stored config for the paper comparison."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from clbench.results import COLUMNS, SCHEMA_VERSION, accuracy_frame, run_directory, write_json, write_parquet

NAN = np.nan


def write_run(results: Path, method: str, seed: int, matrix: list[list[float]], config_hash: str = "c0",
              hyperparameters: dict | None = None, data_hash: str = "d0", *, benchmark: str = "b",
              overrides: list[str] | None = None, variant: str | None = None,
              timing: tuple[float, int, int] | None = None, device: str = "cpu",
              reference_hash: str | None = None, initial: list[float] | None = None,
              agnostic: list[list[float]] | None = None, schema_version: int = SCHEMA_VERSION,
              scenario: str | None = None, memory: tuple[int, int] | None = None,
              n_test: int | None = None, class_loss: str | None = None,
              flops: list[float] | None = None) -> Path:
    """An accuracy.parquet from a lower-triangular matrix (a row may go on above the diagonal: tasks not learned
    yet); `timing` = (seconds, epochs, batches) per stage; `initial`: the stage-0 accuracies (at
    initialisation); `agnostic`: the task-agnostic matrix (absent: task-aware rows only, as an approach that
    needs the task id stores). Schema 1 files have no `evaluation` and `scenario` values. `n_test`: the test
    samples of every task (absent: not stored, as before results kept it). `class_loss`: the run's
    `training.class_loss` (absent: no value, read as `seen`). `flops`: each stage's training FLOPs (stages 1..T;
    absent: not stored, as before clbench counted them).

    `reference_hash` (what a joint reference must share) defaults to one per data hash."""
    identity = {"schema_version": schema_version, "run_id": f"{benchmark}/{method}/{config_hash}/seed-{seed}",
                "benchmark": benchmark, "variant": variant, "method": method, "seed": seed,
                "config_hash": config_hash, "data_hash": data_hash,
                "reference_hash": f"r-{data_hash}" if reference_hash is None else reference_hash,
                "hyperparameters": json.dumps(hyperparameters or {}, sort_keys=True),
                "overrides": json.dumps(["data.max_train_samples=9"] if overrides is None else overrides),
                "device": device, "scenario": (scenario or "task") if schema_version >= 2 else None,
                "class_loss": class_loss}
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
                "evaluation": evaluation if schema_version >= 2 else None, "n_test": n_test,
                "stage_train_flops": flops[stage - 1] if flops and stage else None}
                for u, accuracy in enumerate(row)]
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


def mnist2_config(method: str, max_epochs: int = 200, max_train_samples: int | None = None,
                  hyperparameters: dict | None = None) -> dict:
    return {"benchmark": "mnist2", "variant": None,
            "data": {"kind": "split", "max_train_samples": max_train_samples, "max_test_samples": None},
            "network": {"kind": "mlp", "hidden": [800, 800, 800], "input_dropout": 0.0, "dropout": 0.0},
            "method": method, "hyperparameters": hyperparameters or {},
            "training": {"lr": 0.05, "lr_factor": 3.0, "lr_min": 0.0001, "patience": 5, "max_epochs": max_epochs,
                         "batch_size": 64, "eval_batch_size": 4096, "compile": False}}


def pmnist_config(method: str, hidden: list[int], input_dropout: float, dropout: float,
                  variant: str = "large") -> dict:
    """A pmnist run's resolved config at the paper's protocol (all images, up to 200 epochs) with `hidden`."""
    return {"benchmark": "pmnist", "variant": variant,
            "data": {"max_train_samples": None, "max_test_samples": None},
            "network": {"kind": "mlp", "hidden": hidden, "input_dropout": input_dropout, "dropout": dropout},
            "method": method, "hyperparameters": {"c": 0.5} if method == "hat" else {},
            "training": {"lr": 0.05, "lr_factor": 3, "lr_min": 1e-4, "patience": 5, "max_epochs": 200,
                         "batch_size": 64}}


def write_mnist2(results: Path, method: str, seeds: range, second_row, config: dict,
                 overrides: list[str] | None = None) -> None:
    for seed in seeds:
        row = second_row(seed) if callable(second_row) else second_row
        run_dir = write_run(results, method, seed, [[0.99], row], benchmark="mnist2", overrides=overrides or [])
        write_run_json(run_dir, config=config)


# ---------------------------------------------------------------------- the golden fixture folder
GOLDEN = Path(__file__).resolve().parent / "golden"
HAT = {"c": 0.75, "smax": 400}
PARAMETERS = 1_917_610


def golden_results(root: Path) -> Path:
    """The golden fixture folder behind tests/golden/ (numbers chosen to be checked by hand): 3 tasks; joint and
    random references on seeds 0-2; sgd on seeds 0-1 with seed 2 failed (run.json only); hat on seeds 0-2 with
    monitoring tables and a parameter count; ewc with a partial matrix on seed 2; bench timings in `_bench`."""
    for seed in range(3):
        write_run_json(write_run(root, "joint", seed, [[0.9], [0.9, 0.9], [0.9, 0.9, 0.9]], timing=(30.0, 3, 30)))
        write_run_json(write_run(root, "random", seed, [[0.5], [0.5, 0.5], [0.5, 0.5, 0.5]], timing=(0.5, 1, 10)))
    write_run_json(write_run(root, "sgd", 0, [[0.9], [0.7, 0.9], [0.6, 0.7, 0.9]], timing=(10.0, 5, 50)))
    write_run_json(write_run(root, "sgd", 1, [[0.9], [0.5, 0.9], [0.5, 0.6, 0.9]], timing=(12.0, 5, 50)))
    failed = root / "b" / "sgd" / "c0" / "seed-2"
    write_run_json(failed, status="failed", error="RuntimeError: out of memory")
    hat_matrices = ([[0.9], [0.9, 0.8], [0.9, 0.8, 0.9]], [[0.9], [0.9, 0.9], [0.85, 0.9, 0.9]],
                    [[0.9], [0.88, 0.9], [0.88, 0.88, 0.86]])
    for seed, matrix in enumerate(hat_matrices):
        run_dir = write_run(root, "hat", seed, matrix, config_hash="h1", hyperparameters=HAT, timing=(20.0, 4, 40))
        write_run_json(run_dir, parameters=PARAMETERS)
        write_hat_tables(run_dir, hat_capacity(seed), {(1, 2): 0.5 + 0.1 * seed, (1, 3): 0.25, (2, 3): 0.75})
    ewc = {"lamb": 5000}
    for seed, matrix in enumerate(([[0.9], [0.8, 0.9], [0.7, 0.8, 0.9]], [[0.9], [0.8, 0.85], [0.8, 0.8, 0.9]],
                                   [[0.9], [NAN, 0.9], [0.8, 0.8, 0.9]])):
        write_run_json(write_run(root, "ewc", seed, matrix, config_hash="e1", hyperparameters=ewc,
                                 timing=(15.0, 5, 50)), parameters=PARAMETERS)
    write_bench(root, [{"method": "hat", "forward_ms": 4.0, "forward_backward_ms": 11.7},
                       {"method": "hat", "forward_ms": 9.9, "forward_backward_ms": 99.9,
                        "measured_utc": "2024-01-01T00:00:00+00:00"},  # older: not shown
                       {"method": "sgd", "forward_ms": 2.5, "forward_backward_ms": 6.6},
                       {"benchmark": "other", "method": "ewc", "forward_ms": 1.0, "forward_backward_ms": 2.0}])
    return root


def hat_capacity(seed: int) -> dict[tuple[str, int, str], float]:
    """Cumulative use grows by 0.1 per task in fc1 and 0.2 in fc2; each task alone uses 0.1 / 0.2 (+0.01 seed)."""
    capacity = {}
    for stage in (1, 2, 3):
        for layer, step in (("fc1", 0.1), ("fc2", 0.2)):
            capacity[("cumulative", stage, layer)] = step * stage + 0.01 * seed
            capacity[("task", stage, layer)] = step + 0.01 * seed
        capacity[("cumulative", stage, "total")] = 0.15 * stage + 0.01 * seed
        capacity[("task", stage, "total")] = 0.15 + 0.01 * seed
    return capacity


def portable(text: str, results: Path) -> str:
    """Report text with the results folder written as `<results>` (as the golden files have it)."""
    return text.replace(str(results), "<results>")


# ---------------------------------------------------------------------- a HAT sensitivity grid
ALL_09 = [[0.9], [0.9, 0.9], [0.9, 0.9, 0.9]]
ALL_05 = [[0.5], [0.5, 0.5], [0.5, 0.5, 0.5]]


def sensitivity_results(root: Path) -> Path:
    """hat on seed 0 over smax {25, 400} x c {0.1, 0.75}, without the (400, 0.75) point; references of seed 0."""
    write_run(root, "joint", 0, ALL_09)
    write_run(root, "random", 0, ALL_05)
    finals = {(25, 0.1): 0.5, (25, 0.75): 0.7, (400, 0.1): 0.9}  # task-1 accuracy after the last task
    for index, ((smax, c), final) in enumerate(finals.items()):
        matrix = [[0.9], [0.9, 0.9], [final, 0.9, 0.9]]
        write_run(root, "hat", 0, matrix, config_hash=f"g{index}", hyperparameters={"smax": smax, "c": c})
    write_run(root, "hat", 1, ALL_09, config_hash="g0", hyperparameters={"smax": 25, "c": 0.1})  # no references
    return root


# A continual-evaluation curve (`clbench.curve_metrics`, `tests/metrics/test_curve_metrics.py` works its metrics
# out by hand). Three tasks; task 1 steps 1-4, task 2 steps 5-12, task 3 steps 13-20; a point every 2 steps and an
# `end` point at each task's last step. (stage, task) -> accuracies at the `step` points, then at the `end` point.
CURVE_STEPS = {1: [2, 4], 2: [6, 8, 10, 12], 3: [14, 16, 18, 20]}
CURVE_ENDS = {1: 4, 2: 12, 3: 20}
CURVE_ACCURACY = {
    (1, 1): [0.5, 0.8, 0.9],
    (2, 1): [0.6, 0.7, 0.9, 0.95, 0.92], (2, 2): [0.3, 0.6, 0.8, 0.85, 0.9],
    (3, 1): [0.85, 0.5, 0.88, 0.93, 0.9], (3, 2): [0.4, 0.7, 0.75, 0.8, 0.82], (3, 3): [0.5, 0.7, 0.8, 0.9, 0.95],
}


def hand_curve() -> pd.DataFrame:
    rows = []
    for (stage, task), values in CURVE_ACCURACY.items():
        points = [(step, "step") for step in CURVE_STEPS[stage]] + [(CURVE_ENDS[stage], "end")]
        rows += [{"step": step, "stage": stage, "task": task, "at": at, "accuracy": value}
                 for (step, at), value in zip(points, values, strict=True)]
    return pd.DataFrame(rows).sample(frac=1.0, random_state=0)  # the functions must not rely on the rows' order


def write_curve_file(run_dir: Path, curve: pd.DataFrame, evaluation: str = "task-aware") -> None:
    """`curve.parquet` in a run folder, as the engine writes it (`clbench.run.curve`), in one evaluation."""
    curve.assign(evaluation=evaluation, loss=0.0).to_parquet(run_dir / "curve.parquet")
