"""clbench's seq-MNIST runs (Mammoth's protocol, `benchmarks/seq-mnist.yaml`) against raw PyTorch loops of the same
steps and against Mammoth's measured seconds per run (issue 36's target: at least 3x faster than Mammoth).

    python tools/speed_seq_mnist.py --data-dir ~/.cache/clbench        # MNIST fetched there (`clbench fetch mnist`)
    python tools/speed_seq_mnist.py --mirror ../shared/data            # fetched from an offline mirror first

Per method (sgd, er, derpp by default), in turns, `--repeats` times each, one CPU thread (`--threads`):
- clbench: `python -m clbench train seq-mnist -m METHOD --seeds 0` as a subprocess (its wall time: start-up, data,
  the 6,000 steps of batch 10 over 5 tasks, the evaluation after every task), and its rows' training seconds;
- raw: this script as a subprocess in `--raw METHOD` mode, which imports torch, reads the same prepared MNIST,
  normalises it once, and runs the same protocol in plain PyTorch: a 784-100-100-10 MLP (one classifier over the
  10 classes), `torch.optim.SGD` at the spec's lr, one shuffled pass over each task in batches of 10, no clipping;
  ER (Mammoth `models/er.py`: the batch and a replayed batch concatenated), DER++ (Mammoth `models/derpp.py`: the
  cross-entropy, alpha x MSE of stored logits, beta x cross-entropy of a second replayed batch); a reservoir memory
  of normalised inputs filled after each step; after each task every task's test set evaluated (argmax over the
  classes seen so far, and over the task's own two classes).
- Mammoth, with `--mammoth DIR` (a checkout of aimagelab/mammoth, e.g. at e75a491, whose dependencies the
  interpreter `--mammoth-python` has, and whose MNIST is in DIR/data/MNIST): `main.py --dataset seq-mnist` with the
  method's arguments of `utils/best_args.py` (buffer 500), as a subprocess in turns with the two above, on one CPU
  thread, twice: as shipped (its data loaders start min(8, CPUs) worker processes) and with `--num_workers 0` (the
  data loaded in the training process, its fastest setting on a 2-core machine). Mammoth's main.py calls
  `torch.set_num_threads(2)` itself, so this script launches it through its own `--launch-mammoth` mode, which sets
  torch's threads to `--threads` and ignores main.py's call. Without `--mammoth`: the seconds per run measured in
  issue 36 (Mammoth at e75a491, seeds 0-2, one CPU thread, on this project's 2-core machine): sgd 20.0, er 20.0,
  derpp 28.7, and the table says they were not measured here.
Each figure is the median over the repeats. Not a test: numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MAMMOTH_SECONDS = {"sgd": 20.0, "er": 20.0, "derpp": 28.7}  # issue 36's table: Mammoth e75a491, seconds per run
TARGET_SPEEDUP = 3.0
# Mammoth's arguments per method: aimagelab/mammoth@e75a491 utils/best_args.py, 'seq-mnist', buffer 500 (sgd: lr
# 0.03; er: lr 0.1, minibatch_size 10; derpp: lr 0.03, minibatch_size 10, alpha 1.0, beta 0.5; batch_size 10 and
# n_epochs 1 for each), the values benchmarks/seq-mnist.yaml states.
MAMMOTH_COMMON = ["--dataset", "seq-mnist", "--n_epochs", "1", "--batch_size", "10", "--seed", "0",
                  "--non_verbose", "1"]
MAMMOTH_SETTINGS = {"as shipped": [], "--num_workers 0": ["--num_workers", "0"]}
MAMMOTH_ARGUMENTS = {
    "sgd": ["--model", "sgd", "--lr", "0.03"],
    "er": ["--model", "er", "--buffer_size", "500", "--minibatch_size", "10", "--lr", "0.1"],
    "derpp": ["--model", "derpp", "--buffer_size", "500", "--minibatch_size", "10", "--lr", "0.03", "--alpha", "1.0",
              "--beta", "0.5"],
}


# ------------------------------------------------------------------------------------------------- raw PyTorch
def raw_run(method: str, data_dir: Path) -> dict[str, float]:
    """The seq-MNIST protocol of `method` in plain PyTorch; returns its training and evaluation seconds."""
    import torch
    from torch import nn
    from torch.nn import functional

    sys.path.insert(0, str(REPO))
    from clbench.approaches.resolution import resolve
    from clbench.data.sources import load_dataset
    from clbench.spec import load_benchmark

    spec = load_benchmark("seq-mnist")
    resolved = resolve(spec, method)
    hparams = resolved.hyperparameters
    lr, batch_size = resolved.training.lr, resolved.training.batch_size
    mnist = load_dataset("mnist", data_dir, "mnist28")
    mean, std = mnist.mean[0], mnist.std[0]

    def prepared(images: object) -> torch.Tensor:
        return ((torch.from_numpy(images).float() / 255 - mean) / std).flatten(1)  # type: ignore[arg-type]

    train_x, train_y = prepared(mnist.train.images), torch.from_numpy(mnist.train.labels)
    test_x, test_y = prepared(mnist.test.images), torch.from_numpy(mnist.test.labels)
    torch.manual_seed(0)
    network = nn.Sequential(nn.Linear(784, 100), nn.ReLU(), nn.Linear(100, 100), nn.ReLU(), nn.Linear(100, 10))
    optimizer = torch.optim.SGD(network.parameters(), lr=lr)
    generator = torch.Generator().manual_seed(0)
    capacity = getattr(hparams, "buffer_size", 1)
    memory_x, memory_y = torch.zeros(capacity, 784), torch.zeros(capacity, dtype=torch.long)
    memory_logits = torch.zeros(capacity, 10)
    seen = 0
    train_seconds = eval_seconds = 0.0
    for task in range(5):
        classes = (2 * task, 2 * task + 1)
        mine = (train_y == classes[0]) | (train_y == classes[1])
        x, y = train_x[mine], train_y[mine]
        start = time.perf_counter()
        network.train()
        for indices in torch.randperm(len(y), generator=generator).split(batch_size):
            inputs, labels = x.index_select(0, indices), y.index_select(0, indices)
            optimizer.zero_grad(set_to_none=True)
            size = min(seen, capacity)
            if method == "er" and size:
                chosen = torch.randperm(size, generator=generator)[:hparams.replay_batch_size]
                outputs = network(torch.cat([inputs, memory_x[chosen]]))
                loss = functional.cross_entropy(outputs, torch.cat([labels, memory_y[chosen]]))
                outputs = outputs[:len(labels)]
            else:
                outputs = network(inputs)
                loss = functional.cross_entropy(outputs, labels)
            if method == "derpp" and size:
                first = torch.randperm(size, generator=generator)[:hparams.replay_batch_size]
                loss = loss + hparams.alpha * functional.mse_loss(network(memory_x[first]), memory_logits[first])
                second = torch.randperm(size, generator=generator)[:hparams.replay_batch_size]
                loss = loss + hparams.beta * functional.cross_entropy(network(memory_x[second]), memory_y[second])
            loss.backward()
            optimizer.step()
            if method in ("er", "derpp"):  # reservoir sampling of the step's batch, after the step
                positions = torch.arange(seen, seen + len(labels))
                draws = (torch.rand(len(labels), generator=generator, dtype=torch.float64) * (positions + 1)).long()
                slots = torch.where(positions < capacity, positions, draws)
                kept = slots < capacity
                memory_x[slots[kept]], memory_y[slots[kept]] = inputs[kept], labels[kept]
                memory_logits[slots[kept]] = outputs.detach()[kept]
                seen += len(labels)
        train_seconds += time.perf_counter() - start
        start = time.perf_counter()
        network.eval()
        with torch.inference_mode():
            for task_u in range(5):
                own = (test_y == 2 * task_u) | (test_y == 2 * task_u + 1)
                logits = network(test_x[own])
                seen_classes = 2 * max(task, task_u) + 2
                float((logits[:, :seen_classes].argmax(1) == test_y[own]).float().mean())
                float((logits[:, 2 * task_u:2 * task_u + 2].argmax(1) + 2 * task_u == test_y[own]).float().mean())
        eval_seconds += time.perf_counter() - start
    return {"train_seconds": train_seconds, "eval_seconds": eval_seconds}


# ------------------------------------------------------------------------------------------------- measuring
def timed(command: Sequence[str], env: dict[str, str]) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO)
    if done.returncode:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return time.perf_counter() - start, done.stdout


def clbench_run(method: str, env: dict[str, str], results: Path) -> tuple[float, float]:
    """(wall seconds, training seconds from the rows) of one `clbench train seq-mnist` run."""
    import pandas as pd

    wall, _ = timed([sys.executable, "-m", "clbench", "train", "seq-mnist", "-m", method, "--seeds", "0",
                     "--results", str(results)], env)
    frame = pd.concat(pd.read_parquet(path) for path in results.rglob("accuracy.parquet"))
    stages = frame[frame["stage"] > 0].drop_duplicates("stage")
    return wall, float(stages["stage_train_seconds"].sum())


def raw_subprocess(method: str, env: dict[str, str], data_dir: Path) -> tuple[float, float]:
    """(wall seconds, training seconds) of one raw run in a fresh interpreter."""
    wall, out = timed([sys.executable, __file__, "--raw", method, "--data-dir", str(data_dir)], env)
    return wall, json.loads(out.strip().splitlines()[-1])["train_seconds"]


def mammoth_subprocess(method: str, setting: str, env: dict[str, str], mammoth: Path, python: str, threads: int,
                       results: Path) -> float:
    """Wall seconds of one Mammoth seq-mnist run of `method` (launched by this script's `--launch-mammoth`)."""
    command = [python, __file__, "--launch-mammoth", str(mammoth), "--threads", str(threads), "--",
               *MAMMOTH_COMMON, *MAMMOTH_ARGUMENTS[method], *MAMMOTH_SETTINGS[setting],
               "--results_path", f"{results}/"]
    mammoth_env = {**env, "CUDA_VISIBLE_DEVICES": ""}
    mammoth_env.pop("PYTHONPATH", None)
    return timed(command, mammoth_env)[0]


def launch_mammoth(mammoth: Path, threads: int, arguments: Sequence[str]) -> None:
    """Run Mammoth's main.py as __main__ with torch on `threads` CPU threads (its own set_num_threads(2) ignored)."""
    import runpy

    import torch

    torch.set_num_threads(threads)
    torch.set_num_interop_threads(threads)
    torch.set_num_threads = lambda *_: None  # type: ignore[assignment]  # main.py's hard-coded call
    main_file = mammoth / "main.py"
    sys.argv = [str(main_file), *arguments]
    runpy.run_path(str(main_file), run_name="__main__")


def measure(methods: Sequence[str], repeats: int, threads: int, data_dir: Path, mammoth: Path | None,
            mammoth_python: str) -> list[str]:
    env = {**os.environ, "CLBENCH_DATA": str(data_dir), "OMP_NUM_THREADS": str(threads),
           "MKL_NUM_THREADS": str(threads), "PYTHONPATH": str(REPO)}
    settings = list(MAMMOTH_SETTINGS) if mammoth else ["issue 36's seconds, not measured here"]
    lines = ["| method | clbench per run [s] | raw per run [s] | clbench / raw | clbench training [s] | "
             "raw training [s] | " + " | ".join(f"Mammoth {setting} [s] | Mammoth / clbench" for setting in settings)
             + " |", "|---|---|---|---|---|---|" + "---|---|" * len(settings)]
    with tempfile.TemporaryDirectory() as scratch:
        for method in methods:
            ours, theirs = [], []
            mammoths: dict[str, list[float]] = {setting: [] for setting in settings}
            for repeat in range(repeats):
                ours.append(clbench_run(method, env, Path(scratch) / f"{method}-{repeat}"))
                theirs.append(raw_subprocess(method, env, data_dir))
                for setting in settings if mammoth is not None and method in MAMMOTH_ARGUMENTS else []:
                    mammoths[setting].append(mammoth_subprocess(method, setting, env, mammoth, mammoth_python,
                                                                threads, Path(scratch) / f"mammoth-{repeat}"))
            wall, train = (statistics.median(values) for values in zip(*ours))
            raw_wall, raw_train = (statistics.median(values) for values in zip(*theirs))
            cells = []
            for setting in settings:
                seconds = statistics.median(mammoths[setting]) if mammoths[setting] else MAMMOTH_SECONDS.get(method)
                cells.append(f"{seconds:.2f} | {seconds / wall:.2f}x "
                             f"({'>=' if seconds / wall >= TARGET_SPEEDUP else '<'} {TARGET_SPEEDUP:g}x)"
                             if seconds else "- | -")
            lines.append(f"| {method} | {wall:.2f} | {raw_wall:.2f} | {wall / raw_wall:.2f}x | {train:.2f} | "
                         f"{raw_train:.2f} | {' | '.join(cells)} |")
            print(lines[-1], flush=True)
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", default="sgd,er,derpp", help="comma-separated (default sgd,er,derpp)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each, in turns (default 3)")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads of both (default 1, as Mammoth's)")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="clbench's data folder with MNIST prepared (default: $CLBENCH_DATA or ~/.cache/clbench)")
    parser.add_argument("--mirror", type=Path, default=None, help="fetch MNIST from this offline mirror first")
    parser.add_argument("--mammoth", type=Path, default=None,
                        help="a Mammoth checkout to time in turns (its MNIST in DIR/data/MNIST); default: issue 36's "
                             "seconds")
    parser.add_argument("--mammoth-python", default=sys.executable,
                        help="the interpreter with Mammoth's dependencies (default: this one)")
    parser.add_argument("--raw", default=None, help=argparse.SUPPRESS)  # one raw run (the subprocess)
    parser.add_argument("--launch-mammoth", type=Path, default=None, help=argparse.SUPPRESS)  # one Mammoth run
    parser.add_argument("rest", nargs="*", help=argparse.SUPPRESS)  # Mammoth's arguments, after --
    args = parser.parse_args(argv)
    if args.launch_mammoth:
        launch_mammoth(args.launch_mammoth, args.threads, args.rest)
        return 0
    data_dir = args.data_dir or Path(os.environ.get("CLBENCH_DATA") or Path.home() / ".cache" / "clbench")
    if args.raw:
        print(json.dumps(raw_run(args.raw, data_dir)))
        return 0
    if args.mirror is not None:
        subprocess.run([sys.executable, "-m", "clbench", "fetch", "mnist", "--mirror", str(args.mirror)], check=True,
                       capture_output=True, env={**os.environ, "CLBENCH_DATA": str(data_dir)}, cwd=REPO)
    print("\n".join(measure(args.methods.split(","), args.repeats, args.threads, data_dir, args.mammoth,
                            args.mammoth_python)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
