"""What tools/side_by_side_mammoth.py, side_by_side_facil.py and side_by_side_gdumb.py share: MNIST gunzipped for
the other tool, one clbench run and its final accuracies, the runs of both tools in turns, and the table and verdict
of the issue's target.

Not a script: imported by those three (from this folder, as a script's siblings are).
"""

from __future__ import annotations

import gzip
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

REPO = Path(__file__).resolve().parents[1]
Found = tuple[float, float, float]  # one run: class-IL %, task-IL %, wall seconds


def timed(command: Sequence[str], env: dict[str, str], cwd: Path, log: Path) -> float:
    """Wall seconds of `command`, its output in `log`; a failure stops the comparison, naming the log."""
    start = time.perf_counter()
    with open(log, "w") as out:
        done = subprocess.run(command, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        raise SystemExit(f"{command[:6]} ... failed with exit code {done.returncode}; see {log}")
    return time.perf_counter() - start


def run_clbench(results: Path, spec: str, name: str, seed: int, values: Sequence[str], mirror: Path) -> Found:
    """`clbench train SPEC -m NAME --seeds SEED --set VALUE...` on one CPU thread into a fresh `results` folder; its
    last stage's task-agnostic (class-IL) and task-aware (task-IL) test accuracies, % , and its wall seconds."""
    import pandas as pd

    shutil.rmtree(results, ignore_errors=True)
    results.mkdir(parents=True)
    sets = [word for value in values for word in ("--set", value)]
    command = [sys.executable, "-m", "clbench", "train", spec, "-m", name, "--seeds", str(seed), *sets,
               "--results", str(results), "--device", "cpu"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CLBENCH_MIRROR": str(mirror), "PYTHONPATH": str(REPO)}
    seconds = timed(command, env, REPO, results / "log.txt")
    [path] = list(results.glob(f"{spec}/{name}/*/seed-{seed}/accuracy.parquet"))
    return (*clbench_final(pd.read_parquet(path), path), seconds)


def clbench_final(rows: pd.DataFrame, path: Path) -> tuple[float, float]:
    """A clbench run's last-stage task-agnostic and task-aware mean test accuracies, %, from its rows; `Diverged`
    when its network diverged (`clbench.metrics.diverged_stage`: the test loss not finite from some stage on), as
    `clbench report` names such a run."""
    from clbench.metrics import diverged_stage

    rows = rows[rows["split"] == "test"]
    stage = diverged_stage(rows["stage"].to_numpy(), rows["loss"].to_numpy())
    if stage is not None:
        raise Diverged(f"clbench's network diverged while learning task {stage}: its test loss is not finite from "
                       f"there on; see {path}")
    rows = rows[rows["stage"] == rows["stage"].max()]
    final = {evaluation: 100 * float(group["accuracy"].mean()) for evaluation, group in rows.groupby("evaluation")}
    return final["task-agnostic"], final["task-aware"]


class Diverged(Exception):
    """A run its own code stopped because its training diverged (a NaN loss); the message says where and why."""


@dataclass
class Turns:
    """The runs of every tool: `found` per tool over the `kept` seeds only (in order), so that the tools stay paired
    seed by seed; `left_out` maps a seed to why it is not compared (a tool's run diverged on it)."""
    found: dict[str, list[Found]]
    kept: list[int] = field(default_factory=list)
    left_out: dict[int, str] = field(default_factory=dict)


def in_turns(name: str, seeds: Sequence[int], runners: dict[str, Callable[[int], Found]],
             only: str | None) -> Turns:
    """Each seed run by every tool in turn (so that background load hits them alike), each run's line printed;
    `only` (a tool's name in lower case) runs that tool alone. A seed on which a tool's run diverged is left out of
    every tool's numbers (printed, and named in `left_out`); the other seeds go on."""
    turns = Turns({tool: [] for tool in runners})
    for seed in seeds:
        this_seed: dict[str, Found] = {}
        for tool, run in runners.items():
            if only not in (None, tool.lower()):
                continue
            try:
                one = run(seed)
            except Diverged as stopped:
                turns.left_out[seed] = f"{tool} diverged: {stopped}"
                print(f"{name} {tool} seed {seed}: diverged ({stopped})", flush=True)
                continue
            this_seed[tool] = one
            print(f"{name} {tool} seed {seed}: class-IL {one[0]:.2f}, task-IL {one[1]:.2f}, {one[2]:.1f} s", flush=True)
        if seed not in turns.left_out:
            turns.kept.append(seed)
            for tool, one in this_seed.items():
                turns.found[tool].append(one)
    return turns


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def verdict(ours: Sequence[float], theirs: Sequence[float]) -> str:
    """Within the target: |clbench mean - peer mean| <= max(2 x the peer's std, 1 point)."""
    (mine, _), (peer, spread) = mean_std(ours), mean_std(theirs)
    tolerance = max(2 * spread, 1.0)
    word = "within" if abs(mine - peer) <= tolerance else "NOT within"
    return f"{word} (|diff| {abs(mine - peer):.1f} vs {tolerance:.1f})"


def table_row(tool: str, name: str, found: list[Found]) -> str:
    """A markdown row: class-IL and task-IL mean (std), median seconds per run."""
    class_il, task_il, seconds = zip(*found, strict=True)
    (c_mean, c_std), (t_mean, t_std) = mean_std(class_il), mean_std(task_il)
    return (f"| {name} | {tool} | {c_mean:.1f} ({c_std:.1f}) | {t_mean:.1f} ({t_std:.1f}) | "
            f"{statistics.median(seconds):.1f} |")


def current_commit() -> str:
    """The repository's short HEAD, for the `at` column of a results file; "unknown" outside a git checkout."""
    done = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def write_atomically(path: Path, text: str) -> None:
    """`text` into `path` through a sibling `.partial` file renamed over it: a reader never sees half a file."""
    partial = path.with_suffix(".partial")
    partial.write_text(text)
    partial.replace(path)


def unknown_methods(requested: str, known: Sequence[str]) -> str | None:
    """The error for a comma-separated `--methods` naming a method the tool does not know; None when all are known."""
    unknown = [name for name in requested.split(",") if name not in known]
    return f"unknown method(s) {', '.join(unknown)}: choose among {', '.join(known)}" if unknown else None


def gunzip_mnist(mirror: Path, raw: Path) -> None:
    """MNIST's four idx files, `mirror`/mnist/*-ubyte.gz, gunzipped into the folder `raw` (torchvision's layout);
    a file already there is kept. Refuses (SystemExit) a mirror without exactly four."""
    raw.mkdir(parents=True, exist_ok=True)
    archives = sorted((mirror / "mnist").glob("*-ubyte.gz"))
    if len(archives) != 4:
        raise SystemExit(f"{mirror / 'mnist'}: expected MNIST's four *-ubyte.gz files, found {len(archives)}")
    for archive in archives:
        target = raw / archive.name[:-3]
        if not target.exists():
            partial = target.with_suffix(".partial")
            with gzip.open(archive) as source, open(partial, "wb") as out:
                shutil.copyfileobj(source, out)
            partial.replace(target)
