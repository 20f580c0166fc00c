"""Where a results folder's time went, from its stored rows: training per method and evaluation, in seconds.

    time clbench train pmnist -m sgd,hat,joint,random --seeds 0-2 ... --results R   # the command's wall time
    python tools/time_split.py R

Every run's `accuracy.parquet` stores, per stage, `stage_train_seconds` (the task's training epochs with their
validation passes) and `stage_eval_seconds` (the stage's evaluation of every task, both evaluations from one forward
pass), repeated on each row of the stage; each (run, stage) is counted once and summed over runs and stages. The wall
time of the command minus these sums is everything else (start-up, data, writing results).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import pandas as pd


def time_split(rows: pd.DataFrame) -> tuple[dict[str, float], float]:
    """(training seconds per method, slowest first; evaluation seconds of every run) from stored accuracy rows."""
    stages = rows.drop_duplicates(["run_id", "stage"])
    training = stages.groupby("method")["stage_train_seconds"].sum().sort_values(ascending=False, kind="stable")
    return {str(method): float(seconds) for method, seconds in training.items()}, float(
        stages["stage_eval_seconds"].sum())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="a results folder (`--results` of `clbench train`)")
    args = parser.parse_args(argv)
    paths = sorted(args.results.rglob("accuracy.parquet"))
    if not paths:
        raise SystemExit(f"no accuracy.parquet under {args.results}")
    columns = ["run_id", "method", "stage", "stage_train_seconds", "stage_eval_seconds"]
    training, evaluation = time_split(pd.concat(pd.read_parquet(path, columns=columns) for path in paths))
    print(f"training {sum(training.values()):.1f} s (" + ", ".join(f"{method} {seconds:.1f} s"
                                                                 for method, seconds in training.items()) + ")")
    print(f"evaluation {evaluation:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
