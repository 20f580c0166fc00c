"""Time `clbench report` on a results folder of 1,000 fake runs (the target: under two seconds).

Writes, in a temporary folder, a mixture8-like results folder: 8 tasks, joint and random references and nine
baselines on seeds 0-9, and HAT over an smax x c grid (89 configs x 10 seeds) with its monitoring tables;
then times `load_results` + `build_report` (and the other tables) in this process, and the whole
`python -m clbench report` command in a fresh one. Wall and CPU seconds are printed: on a shared machine the
CPU time is the better estimate of what an idle one takes.

    python tools/bench_report.py [--runs 1000] [--repeat 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import itertools
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from clbench.results import COLUMNS, SCHEMA_VERSION

BENCHMARK = "mixture8"
TASKS = ("facescrub", "mnist", "cifar100", "notmnist", "svhn", "cifar10", "traffic-signs", "fashion-mnist")
BASELINES = ("sgd", "sgd-f", "ewc", "imm-mean", "imm-mode", "lwf", "lfl", "pathnet", "pnn")
SMAX = (25, 50, 100, 200, 400, 600, 800, 1000, 2000)
C = (0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0)
LAYERS = (("conv1", 64), ("conv2", 128), ("conv3", 256), ("fc1", 2048), ("fc2", 2048))


def plan(n_runs: int, seeds: int = 10) -> list[tuple[str, dict, int]]:
    """(method, hyper-parameters, seed) of every fake run: references, baselines, then the HAT grid."""
    runs = [(method, {}, seed) for method in ("joint", "random", *BASELINES) for seed in range(seeds)]
    for smax, c in itertools.product(SMAX, C):
        if len(runs) + seeds > n_runs:
            break
        runs += [("hat", {"smax": smax, "c": c, "clip_grad_norm": 10000.0}, seed) for seed in range(seeds)]
    return runs


def accuracy_matrix(method: str, generator: np.random.Generator) -> np.ndarray:
    """A plausible lower-triangular accuracy matrix: the method forgets a little with every later task."""
    size = len(TASKS)
    learned = generator.uniform(0.75, 0.98, size)
    drop = {"joint": 0.0, "random": 0.0, "hat": 0.005}.get(method, 0.04)
    matrix = np.full((size, size), np.nan)
    for t in range(size):
        for u in range(t + 1):
            matrix[t, u] = max(0.05, learned[u] - drop * (t - u) * generator.uniform(0.5, 1.5))
    if method == "random":
        matrix = np.where(np.isnan(matrix), np.nan, generator.uniform(0.02, 0.2, (size, size)))
    return matrix


def write_run(root: Path, method: str, hyperparameters: dict, seed: int, generator: np.random.Generator) -> None:
    config_hash = f"{abs(hash(json.dumps([method, hyperparameters], sort_keys=True))) % 10**12:012x}"
    run_id = f"{BENCHMARK}/{method}/{config_hash}/seed-{seed}"
    folder = root / run_id
    folder.mkdir(parents=True)
    matrix = accuracy_matrix(method, generator)
    order = [TASKS[i] for i in np.random.default_rng(seed).permutation(len(TASKS))]
    # results schema 2: every task at every stage (0: at initialisation), both evaluations
    rows = [(t, u + 1, evaluation) for evaluation in ("task-aware", "task-agnostic") for t in range(len(TASKS) + 1)
            for u in range(len(TASKS))]
    n = len(rows)
    constant = {"schema_version": SCHEMA_VERSION, "run_id": run_id, "benchmark": BENCHMARK, "variant": None,
                "method": method, "seed": seed, "config_hash": config_hash, "data_hash": "data0",
                "reference_hash": "reference0",
                "hyperparameters": json.dumps(hyperparameters, sort_keys=True), "overrides": "[]", "loss": 0.5,
                "approach_origin": json.dumps({"kind": "built-in", "module": f"clbench.approaches.{method}"}),
                "n_test": 1000, "stage_epochs": 40, "stage_best_epoch": 30, "stage_batches": 40 * 400,
                "stage_train_seconds": 900.0, "stage_eval_seconds": 3.0, "clbench_version": "0.1.0",
                "git_commit": "abc", "torch_version": "2.5", "cuda_version": "12.4", "device": "cuda:0",
                "hostname": "fake", "started_utc": "2025-01-01T00:00:00+00:00",
                "finished_utc": "2025-01-01T02:00:00+00:00", "scenario": "task", "memory_samples": 0,
                "memory_bytes": 0}
    columns = {name: [constant[name]] * n for name in COLUMNS if name in constant}
    columns.update({"stage": [t for t, _, _ in rows], "task": [u for _, u, _ in rows],
                    "task_name": [order[u - 1] for _, u, _ in rows], "evaluation": [e for _, _, e in rows],
                    "accuracy": [float(matrix[t - 1, u - 1]) if 1 <= u <= t else 0.1 for t, u, _ in rows]})
    pq.write_table(pa.table({name: columns[name] for name in COLUMNS}), folder / "accuracy.parquet")
    (folder / "run.json").write_text(json.dumps({"run_id": run_id, "status": "complete", "parameters": 7_100_000}))
    if method == "hat":
        write_hat_monitoring(folder, run_id, seed, generator)


def write_hat_monitoring(folder: Path, run_id: str, seed: int, generator: np.random.Generator) -> None:
    identity = {"run_id": run_id, "benchmark": BENCHMARK, "method": "hat", "seed": seed}
    capacity = []
    for stage in range(1, len(TASKS) + 1):
        for mask in ("cumulative", "task"):
            for layer, _ in (*LAYERS, ("total", 0)):
                fraction = min(1.0, (stage if mask == "cumulative" else 1) * generator.uniform(0.02, 0.1))
                capacity.append({**identity, "stage": stage, "mask": mask, "layer": layer, "used": 10,
                                 "weights": 100, "fraction": np.float32(fraction)})
    reuse = [{**identity, "stage": stage, "task": i, "later_task": j, "shared": 5, "used": 10,
              "fraction": np.float32(generator.uniform(0, 1))}
             for stage in range(2, len(TASKS) + 1) for i in range(1, stage + 1) for j in range(i + 1, stage + 1)]
    masks = [{**identity, "stage": t, "task": t, "layer": layer, "unit": unit, "attention": np.float32(value)}
             for t in range(1, len(TASKS) + 1) for layer, units in LAYERS[:3]
             for unit, value in enumerate(generator.uniform(0, 1, units))]
    for name, table in (("hat_capacity", capacity), ("hat_reuse", reuse), ("hat_masks", masks)):
        pq.write_table(pa.Table.from_pylist(table), folder / f"{name}.parquet")


def make_results(root: Path, n_runs: int) -> int:
    generator = np.random.default_rng(0)
    runs = plan(n_runs)
    for method, hyperparameters, seed in runs:
        write_run(root, method, hyperparameters, seed, generator)
    return len(runs)


def clock() -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process and its finished children): CPU time is what a busy machine
    does not inflate."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.perf_counter(), own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def time_library(root: Path, repeat: int) -> dict[str, tuple[float, float]]:
    """Best-of-`repeat` (wall, CPU) seconds of loading + each table, in this process (imports excluded)."""
    from clbench.approaches.hat.report import build_hat_report
    from clbench.report.loading import load_results
    from clbench.report.summary import build_summary
    from clbench.report.tables import build_report
    from clbench.report.timing import build_time_report

    best: dict[str, tuple[float, float]] = {}
    for _ in range(repeat):
        marks = [clock()]
        results = load_results(root, BENCHMARK)
        marks.append(clock())
        build_report(root, BENCHMARK, results=results)
        marks.append(clock())
        build_summary(results)
        marks.append(clock())
        build_time_report(results)
        marks.append(clock())
        build_hat_report(results)
        marks.append(clock())
        spans = {"load_results": (0, 1), "build_report (after loading)": (1, 2), "load + build_report": (0, 2),
                 "build_summary": (2, 3), "build_time_report": (3, 4), "build_hat_report": (4, 5)}
        for name, (begin, end) in spans.items():
            wall, cpu = (marks[end][i] - marks[begin][i] for i in (0, 1))
            best[name] = min(best.get(name, (float("inf"), 0.0)), (wall, cpu))
    return best


def time_command(root: Path, arguments: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of `python -m clbench report` in a new process, imports included."""
    begin = clock()
    subprocess.run([sys.executable, "-m", "clbench", "report", BENCHMARK, "--results", str(root), *arguments],
                   check=True, capture_output=True)
    end = clock()
    return end[0] - begin[0], end[1] - begin[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="write the fake results here and keep them")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="clbench-bench-report-"))
    try:
        start = time.perf_counter()
        count = make_results(root, args.runs)
        print(f"wrote {count} fake runs to {root} in {time.perf_counter() - start:.1f} s")
        print(f"{'':40s} {'wall':>8s} {'CPU':>8s}")
        for name, (wall, cpu) in time_library(root, args.repeat).items():
            print(f"{name:40s} {wall:7.3f}s {cpu:7.3f}s")
        for arguments in ([], ["--summary", "--time", "--hat"]):
            wall, cpu = time_command(root, arguments)
            print(f"{'command: report ' + ' '.join(arguments):40s} {wall:7.3f}s {cpu:7.3f}s (new process)")
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
