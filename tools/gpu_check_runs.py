"""Parts 4-6 of `tools/gpu_check.py`: real `clbench train` runs on MNIST under a time budget. A command stopped at its
budget is read where it stopped: each run folder's epochs (`--log csv`: logs/scalars.csv), finished tasks
(accuracy.parquet) and, for a finished run, its final accuracy."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpu_check_common import Check, Finished, PartResult, markdown_table, number, run_command

# The paper's permuted-MNIST accuracies A<=10, hat-icml2018.tex line 618 (HAT -- Small, 0.1M parameters) and line 624
# (HAT -- Large, 5.8M); also clbench/report/paper_results.yaml (tab:PMNIST).
PAPER_SMALL, PAPER_LARGE = 91.6, 98.6


@dataclass(frozen=True)
class RunProgress:
    """Where one run folder is: epochs trained, tasks finished of `n_tasks`, seconds per epoch of the finished
    tasks (training + validation, from their rows), the final mean task-aware test accuracy (%) if complete."""

    seed: int
    status: str
    n_tasks: int
    epochs: int
    tasks_done: int
    seconds_per_epoch: float | None
    accuracy: float | None


def run_progress(run_dir: Path) -> RunProgress:
    info = json.loads((run_dir / "run.json").read_text())
    n_tasks = int(info.get("config", {}).get("data", {}).get("n_tasks") or 0)
    epochs = 0
    scalars = run_dir / "logs" / "scalars.csv"
    if scalars.is_file():
        with scalars.open(newline="") as file:
            epochs = sum(1 for row in csv.DictReader(file) if row.get("tag") == "train/loss")
    tasks_done, per_epoch, accuracy = 0, None, None
    if (run_dir / "accuracy.parquet").is_file():
        import pandas as pd

        rows = pd.read_parquet(run_dir / "accuracy.parquet")
        stages = rows[rows["stage"] > 0].drop_duplicates("stage")
        tasks_done = int(stages["stage"].max()) if len(stages) else 0
        trained = stages["stage_epochs"].sum()
        if trained:
            per_epoch = float((stages["stage_train_seconds"] + stages["stage_eval_seconds"]).sum() / trained)
        if info.get("status") == "complete":
            final = rows[(rows["stage"] == rows["stage"].max()) & (rows["split"] == "test")
                         & (rows["evaluation"] == "task-aware")]
            accuracy = float(final["accuracy"].mean() * 100)
    return RunProgress(int(info.get("seed", -1)), str(info.get("status", "?")), n_tasks, epochs, tasks_done,
                       per_epoch, accuracy)


def progress_of(results: Path) -> list[RunProgress]:
    return sorted((run_progress(path.parent) for path in results.rglob("run.json")), key=lambda run: run.seed)


def rates(runs: list[RunProgress], seconds: float) -> dict[str, Any]:
    """Totals over the runs and per hour of wall time (start-up included)."""
    hours = max(seconds, 1e-9) / 3600
    complete = sum(run.status == "complete" for run in runs)
    tasks = sum(run.tasks_done for run in runs)
    n_tasks = max((run.n_tasks for run in runs), default=0)
    return {"seconds": seconds, "runs_started": len(runs), "runs_complete": complete, "tasks_done": tasks,
            "epochs": sum(run.epochs for run in runs), "runs_per_hour": complete / hours,
            "tasks_per_hour": tasks / hours, "epochs_per_hour": sum(run.epochs for run in runs) / hours,
            "estimated_runs_per_hour": tasks / hours / n_tasks if n_tasks else None,
            "accuracies": [run.accuracy for run in runs if run.accuracy is not None],
            "runs": [run.__dict__ for run in runs]}


def train_status(finished: list[Finished]) -> str:
    if any(not f.ok and not f.timed_out for f in finished):
        return "failed"
    return "partial" if any(f.timed_out for f in finished) else "ok"


def short(check: Check, *overrides: str) -> list[str]:
    """`--set` options: `overrides`, plus (dry) tiny sizes."""
    tiny = ("data.n_tasks=2", "data.max_train_samples=200", "data.max_test_samples=200", "training.max_epochs=1")
    return [part for text in (*overrides, *(tiny if check.dry else ())) for part in ("--set", text)]


def no_mnist(number_: int, check: Check) -> PartResult:
    return PartResult(number_, "", "skipped", f"no MNIST in {check.data_dir} (part 0 fetches it from {check.mirror})")


# ---------------------------------------------------------------------------------------------- part 4
JOB_SETTINGS = ((3, 0.6), (1, 1.0))  # (jobs on the one device, share of the part's time left when it starts)


def part_pmnist_jobs(check: Check, budget: float) -> PartResult:
    """`clbench train pmnist -m hat --seeds 0-2`, the full protocol, with --jobs 3 on one device, then --jobs 1."""
    check.fail_if_injected(4)
    if not check.mnist_ready:
        return no_mnist(4, check)
    spent, finished, measured = 0.0, [], {}
    for jobs, share in JOB_SETTINGS:
        results = check.scratch / f"pmnist-jobs{jobs}"
        # --devices places the workers (and refuses --device beside it): 0 is the first CUDA device
        placement = (["--jobs", str(jobs), "--devices", "0" if check.device == "cuda" else "cpu"] if jobs > 1
                     else ["--device", check.device])
        command = check.clbench("train", "pmnist", "-m", "hat", "--seeds", "0-2", *placement, "--log", "csv",
                                "--results", str(results), "--data-dir", str(check.data_dir), *short(check))
        done = run_command(check, command, (budget - spent) * share, f"part 4: --jobs {jobs}")
        spent += done.seconds
        finished.append(done)
        measured[jobs] = {**rates(progress_of(results), done.seconds), "command": " ".join(command),
                          "stopped": done.timed_out}
    rows = []
    for jobs, figures in measured.items():
        accuracies = figures["accuracies"]
        rows.append((jobs, number(figures["seconds"], 0), "stopped at budget" if figures["stopped"] else "finished",
                     f"{figures['runs_complete']}/3", figures["tasks_done"], figures["epochs"],
                     number(figures["runs_per_hour"], 1), number(figures["tasks_per_hour"], 0),
                     number(figures["estimated_runs_per_hour"], 2), number(figures["epochs_per_hour"], 0),
                     ", ".join(f"{a:.1f}" for a in accuracies) or "-"))
    table = markdown_table(("jobs on one device", "wall [s]", "", "runs complete", "tasks finished", "epochs",
                            "runs/hour", "tasks/hour", "runs/hour from tasks", "epochs/hour",
                            f"final accuracy [%] (paper {PAPER_SMALL}, tex 618)"), rows)
    per_epoch = [run["seconds_per_epoch"] for figures in measured.values() for run in figures["runs"]
                 if run["seconds_per_epoch"]]
    note = ", ".join(f"--jobs {jobs}: {figures['tasks_done']} tasks, {figures['epochs']} epochs in "
                     f"{figures['seconds']:.0f} s" for jobs, figures in measured.items())
    if measured[3]["epochs_per_hour"] and measured[1]["epochs_per_hour"]:
        speedup = measured[3]["epochs_per_hour"] / measured[1]["epochs_per_hour"]
        note += f"; epochs per hour, 3 jobs / 1 job: {speedup:.2f}x"
    return PartResult(4, "", train_status(finished), note, table,
                      {"settings": measured, "seconds_per_epoch_finished_tasks": per_epoch})


# ---------------------------------------------------------------------------------------------- part 5
SWITCHES = (("float32", (), 0.25), ("bf16 autocast", ("training.amp=bf16",), 0.33),
            ("torch.compile", ("training.compile=true",), 1.0))
SHORT_RUN = ("data.n_tasks=3", "data.max_train_samples=10000", "training.max_epochs=5")


def part_switches(check: Check, budget: float) -> PartResult:
    """One short pmnist HAT run each in float32, with bf16 autocast and with torch.compile; numbers side by side."""
    check.fail_if_injected(5)
    if not check.mnist_ready:
        return no_mnist(5, check)
    spent, finished, rows, figures = 0.0, [], [], {}
    reference = None
    for name, switch, share in SWITCHES:
        if check.dry and "compile" in name:
            figures[name] = {"status": "not run with --dry (inductor compiles for minutes on a small CPU)"}
            rows.append((name, "not run (--dry)", "-", "-", "-", "-"))
            continue
        results = check.scratch / f"switch-{len(figures)}"
        command = check.clbench("train", "pmnist", "-m", "hat", "--seeds", "0", "--device", check.device,
                                "--results", str(results), "--data-dir", str(check.data_dir),
                                *short(check, *(() if check.dry else SHORT_RUN), *switch))
        done = run_command(check, command, (budget - spent) * share, f"part 5: {name}")
        spent += done.seconds
        finished.append(done)
        runs = progress_of(results)
        accuracy = runs[0].accuracy if runs else None
        train_seconds = runs[0].seconds_per_epoch if runs else None
        reference = accuracy if name == "float32" else reference
        delta = accuracy - reference if accuracy is not None and reference is not None else None
        figures[name] = {"command": " ".join(command), "seconds": done.seconds, "ended": done.describe(),
                         "accuracy": accuracy, "seconds_per_epoch": train_seconds, "difference": delta}
        rows.append((name, done.describe(), number(done.seconds, 1), number(train_seconds, 3), number(accuracy),
                     number(delta)))
    table = markdown_table(("setting", "ended", "wall [s]", "s/epoch (train + valid)", "final accuracy [%]",
                            "minus float32 [points]"), rows)
    note = "; ".join(f"{name}: {row[1]}, accuracy {row[4]}" for (name, *_), row in zip(SWITCHES, rows))
    return PartResult(5, "", train_status(finished), note, table, figures)


# ---------------------------------------------------------------------------------------------- part 6
def part_large(check: Check, budget: float) -> PartResult:
    """pmnist HAT with the paper's large network (784-2000-2000), one seed, for the time left."""
    check.fail_if_injected(6)
    if not check.mnist_ready:
        return no_mnist(6, check)
    results = check.scratch / "pmnist-large"
    command = check.clbench("train", "pmnist", "-m", "hat", "--seeds", "0", "--device", check.device, "--log", "csv",
                            "--results", str(results), "--data-dir", str(check.data_dir),
                            *short(check, "variant=large"))
    done = run_command(check, command, budget, "part 6: large")
    runs = progress_of(results)
    run = runs[0] if runs else None
    figures = {"command": " ".join(command), "ended": done.describe(), **(run.__dict__ if run else {})}
    table = markdown_table(("run", "ended", "tasks finished", "epochs", "s/epoch (train + valid)",
                            f"final accuracy [%] (paper {PAPER_LARGE}, tex 624)"),
                           [("pmnist large, hat, seed 0", done.describe(), f"{run.tasks_done}/{run.n_tasks}",
                             run.epochs, number(run.seconds_per_epoch, 3), number(run.accuracy))] if run else [])
    note = (f"{run.tasks_done}/{run.n_tasks} tasks, {run.epochs} epochs ({done.describe()})" if run
            else f"no run folder ({done.describe()})")
    return PartResult(6, "", train_status([done]), note, table, figures)
