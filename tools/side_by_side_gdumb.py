"""GDumb side by side: the authors' code (drimpossible/GDumb@4f412d7) and clbench's `gdumb` on the authors' MNIST.

The authors' code is not shipped. Export it outside this repository into a folder of its own (this tool patches that
copy): `git -C MIRROR archive 4f412d7 | tar -x -C DIR` (or clone github.com/drimpossible/GDumb and check out 4f412d7),
and give --gdumb-python an interpreter with torch and torchvision (their requirements.txt; read here with torch 2.14
and torchvision 0.29). `--prepare-gdumb` (idempotent) makes DIR runnable on a CPU, touching no method:
- data: their `src/dataloader.py` line 39 opens `torchvision.datasets.MNIST(root=--data_dir, download=True)`, i.e.
  the four idx files, gunzipped, in DATA/MNIST/raw/ (torchvision skips the download when they are there); they are
  gunzipped into DIR/data/MNIST/raw/ from --mirror (MNIST's `*-ubyte.gz` under MIRROR/mnist/);
- patch 1, `src/main.py` line 12: `model.half().cuda()` -> `model.half()` (the network stays float16, on the CPU);
- patch 2, `src/main.py` line 53 (test) and patch 3, line 78 (train): the batch's `.cuda(non_blocking=True)` calls
  dropped (`inputs.half()`, the labels as loaded);
- patch 4, `src/dataloader.py` line 71: the task mask's `.cuda()` dropped.
`nn.CrossEntropyLoss().cuda()` (`src/main.py` line 13) is left alone: a module without tensors moves nothing. Their
`--workers 2` (`src/opts.py`) is set to 0 on the command line (one process; the same transforms, in the main one).

The protocol. The authors' (`scripts/replicate.sh` lines 4-5: `main.py --dataset MNIST --num_classes_per_task 2
--num_tasks 5 --memory_size 500|300 --num_passes 128 --regularization none --model MLP --width 100`), read in their
code:
- memory: offline, before any training, `memory_size // 10` samples of each class (`src/dataloader.py` lines 74-77,
  "class-balanced greedy sampling (Selects the first n samples)"); "first" in the order of `classwise_split`
  (lines 131-145), which walks `targets.argsort()`, numpy's default unstable sort: not the data set's order but a
  fixed, machine-dependent permutation within each class, the same memory for every seed. The seed (`src/utils.py`
  `seed_everything`) shuffles which digits form which task (`src/dataloader.py` line 59) and draws the weights, the
  batch order and the crops;
- network (`src/models/mnist/mlp.py`, `src/models/layers.py` lines 34-73): 784-W-W-10, each linear layer without
  bias followed by BatchNorm1d (affine, eps 1e-6, `src/opts.py` `--bn_eps`), ReLU after the two hidden ones, the
  head a linear layer and a BatchNorm1d too (`FinalBlock`, no activation); PyTorch's default initialisation; the
  whole network in float16 (`src/main.py` line 12; no float32 master weights);
- inputs: normalised with MNIST's mean 0.1307 and std 0.3081 (`src/dataloader.py` lines 153, 167), the memory's
  images randomly cropped to 28x28 from a 4-pixel zero padding at every pass (`get_augment_transforms`, line 119;
  no flip on MNIST, line 125), the test images not;
- the fit: one fit on the final memory, all 10 classes at once, `--num_passes 128` passes in shuffled batches of 16
  (`src/opts.py --batch_size 16`), SGD momentum 0.9, weight decay 1e-6 (`src/main.py` line 14, `src/opts.py`), lr
  0.005 for pass 0, 0.05 for pass 1, then CosineAnnealingWarmRestarts(T_0 1, T_mult 2, eta_min 0.0005) stepped
  once per pass (`src/main.py` lines 15-28), gradient norm clipped at 10 (line 88), cross-entropy over 10 outputs;
- accuracy: after every pass, over the whole test set of the 10 digits (`src/main.py` `test`, lines 45-68):
  `Acc`, the argmax over all 10 outputs (class-incremental), and `Task Acc`, the argmax within the true label's
  task (`src/utils.py` `get_accuracy`, task-incremental), each averaged over test images (not over tasks); the
  number the code reports is the best `Acc` over the passes (`src/main.py` lines 33-41, "Training completed!
  Acc"). This tool reads both from the per-pass `==> Test:` lines of their log: the last pass's (the verdict's,
  like for like with clbench) and the best pass's (what they report).

clbench's (`clbench train mnist5 -m gdumb` with CLBENCH_SETS): the mnist5 spec's gdumb values already are the
authors' MNIST fit (128 passes, batch 16, maxlr 0.05, minlr 0.0005, momentum 0.9, weight decay 1e-6, clip 10, no
CutMix, the same lr schedule: `gdumb_lr`); the class scenario; MNIST digits in order, 5 tasks of 2 (0-1, 2-3, ...);
the 784-100-100 MLP with biases, Xavier-uniform weights and zero biases, float32; inputs normalised as theirs, not
augmented (clbench's `data.augment` is for image32 only); `data.validation_fraction 0` (all training images, as the
authors: the memory only needs a few per class, so this changes which images the stream offers, little else); the
memory filled online by the greedy class-balanced sampler while each task's stream passes once in shuffled order
(seeded), the network re-initialised and fitted on the memory after each task; the number is the last stage's
task-agnostic (class-IL) and task-aware (task-IL) test accuracy after the fit's last pass, the mean over the 5
tasks of each task's accuracy.

Every difference, then: (1) the memory: the authors' fixed first-n per class (the same for every seed) against
clbench's online greedy sampler (a seeded draw; 50 per class at 500 either way, 30 at 300); (2) the network:
BatchNorm after every layer including the head, no biases, PyTorch's init, float16 (theirs) against a plain
biased MLP, Xavier init, float32 (clbench has no batch-norm MLP); (3) augmentation: their random 4-pixel crops of
the memory at every pass against none; (4) the task split: their seeded shuffle of the digits into tasks (no effect
on class-IL, which is over all 10 digits after one fit on all of them; it changes which pairs task-IL masks) against
digits in order; (5) averaging: over all test images (theirs) against the mean of the 5 tasks' accuracies (tasks of
1874 to 2115 test images); (6) clbench also fits after tasks 1-4 (not read here: each fit depends only on the memory
and the seed). Their option `--bn` (a store_false flag, `src/opts.py`: passing it turns batch norm off) measures (2)
without patching: `--authors-args=--bn`; `--clbench-set KEY=VALUE` adds a clbench value (e.g. `gdumb.maxlr=0.01`).
Such ablation rows are named by their arguments in the results file (ids `m500-authors-bn`, `m500-clbench-maxlr0.01`).

For each seed, in turns (so that background load hits both alike), on one CPU thread (OMP_NUM_THREADS=1):
- the authors: `python main.py AUTHORS_ARGS --memory_size M --seed S --workers 0 --data_dir DIR/data --log_dir
  LOGS/ --exp_name ...` from DIR/src (CUDA hidden); the accuracies are read from the run's `checkpoint.log`;
- clbench: `clbench train mnist5 -m gdumb --seeds S` with CLBENCH_SETS and `gdumb.buffer_size=M`.
Then per tool class-IL and task-IL, mean (std over seeds, ddof 1), the median seconds per run (wall time of the
process, start-up included), and the verdict: clbench's class-IL mean within max(2 x the authors' std, 1 point) of
the authors' last-pass class-IL mean.

    OMP_NUM_THREADS=1 python tools/side_by_side_gdumb.py --gdumb /work/authors/gdumb --prepare-gdumb \\
        --gdumb-python /work/authors/venv-mammoth/bin/python --memory 500 --seeds 0,1,2 \\
        --results-file docs/results/mnist-gdumb-authors.yaml
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from side_by_side_common import (
    REPO,
    Found,
    current_commit,
    gunzip_mnist,
    in_turns,
    mean_std,
    run_clbench,
    table_row,
    timed,
    verdict,
    write_atomically,
)

SPEC = "mnist5"  # clbench's base spec: split MNIST in 5 tasks of 2 digits, in order
WIDTH = 100  # the authors' --width for memories 300 and 500 (scripts/replicate.sh lines 5-6)
AUTHORS_ARGS = ["--dataset", "MNIST", "--num_classes_per_task", "2", "--num_tasks", "5", "--num_passes", "128",
                "--regularization", "none", "--model", "MLP", "--width", str(WIDTH)]  # scripts/replicate.sh


def clbench_sets(memory: int) -> list[str]:
    """clbench's --set values: the class scenario, the authors' MLP width and depth, their memory, all training
    images (no validation split, so no early stopping either; gdumb's fit has none anyway)."""
    return ["data.scenario=class", f"network.hidden=[{WIDTH},{WIDTH}]", f"gdumb.buffer_size={memory}",
            "data.validation_fraction=0", "training.early_stopping=false"]


# ------------------------------------------------------------------------------------------------ the authors' copy
@dataclass(frozen=True)
class Patch:
    """Replace `old` by `new` in DIR/`file`, where `old` occurs exactly `count` times."""

    file: str
    old: str
    new: str
    count: int = 1


PATCHES = [  # the four patches of the module docstring, in its order
    Patch("src/main.py", "model = model.half().cuda()", "model = model.half()"),
    Patch("src/main.py", "inputs, labels = inputs.half().cuda(non_blocking=True), labels.cuda(non_blocking=True)",
          "inputs, labels = inputs.half(), labels"),
    Patch("src/main.py", "inputs, labels = inputs.half().cuda(non_blocking=True), (labels).cuda(non_blocking=True)",
          "inputs, labels = inputs.half(), (labels)"),
    Patch("src/dataloader.py",
          "np.ones((self.opt.num_classes_per_task,self.opt.num_classes_per_task)))).cuda()",
          "np.ones((self.opt.num_classes_per_task,self.opt.num_classes_per_task))))"),
]


def apply_patch(root: Path, patch: Patch) -> bool:
    """Apply `patch` under `root`; False when it is there already. Refuses (SystemExit) a file where the text to
    replace is not found `count` times and the replacement is absent (not the authors' 4f412d7)."""
    path = root / patch.file
    text = path.read_text()
    found = text.count(patch.old)
    if found == 0 and patch.new in text:
        return False
    if found != patch.count:
        raise SystemExit(f"{path}: cannot patch, {patch.old!r} found {found} times, not {patch.count} "
                         f"(is it drimpossible/GDumb at 4f412d7?)")
    path.write_text(text.replace(patch.old, patch.new))
    return True


def prepare_gdumb(root: Path, mirror: Path) -> None:
    """MNIST's idx files gunzipped into DIR/data/MNIST/raw (torchvision's layout), and the patches applied."""
    gunzip_mnist(mirror, root / "data" / "MNIST" / "raw")
    for patch in PATCHES:
        apply_patch(root, patch)


# ------------------------------------------------------------------------------------------------ their log
TEST_LINE = re.compile(r"==> Test: \[(\d+)\]\s+Time:\S+\s+Loss:\S+\s+Acc:([0-9.]+)\s+Task Acc:([0-9.]+)")
DONE_LINE = re.compile(r"==> Training completed! Acc: \[([0-9.]+)\]")


@dataclass(frozen=True)
class AuthorsRun:
    """One run of the authors' main.py, from its log: per pass (in order) the test class-IL and task-IL, %."""

    class_il: list[float]
    task_il: list[float]
    reported: float  # their final "Training completed! Acc", %: the best class-IL over the passes (3 decimals)

    @property
    def last(self) -> tuple[float, float]:
        return self.class_il[-1], self.task_il[-1]

    @property
    def best(self) -> float:
        return max(self.class_il)


def parse_authors_log(text: str, passes: int | None = None) -> AuthorsRun:
    """The per-pass `==> Test: [P] ... Acc:A Task Acc:T` lines (fractions) and the final `Training completed! Acc:
    [B]` of the authors' log, as %; refuses a log that did not finish, or with passes missing or out of order."""
    tests = [(int(p), 100 * float(a), 100 * float(t)) for p, a, t in TEST_LINE.findall(text)]
    done = DONE_LINE.findall(text)
    if not tests or not done:
        raise ValueError("not a finished run of the authors' main.py: no '==> Test:' or no 'Training completed' line")
    if [p for p, _, _ in tests] != list(range(len(tests))) or (passes is not None and len(tests) != passes):
        raise ValueError(f"the log's test passes are {[p for p, _, _ in tests][:5]}..., {len(tests)} of them; "
                         f"expected 0, 1, ... {'' if passes is None else passes - 1}")
    run = AuthorsRun([a for _, a, _ in tests], [t for _, _, t in tests], 100 * float(done[-1]))
    if abs(run.reported - run.best) > 0.06:  # theirs rounds the fraction to 3 decimals: 0.05 points
        raise ValueError(f"the reported best {run.reported:.2f} is not the best pass {run.best:.2f}")
    return run


def run_authors(args: argparse.Namespace, seed: int, runs: dict[int, AuthorsRun]) -> Found:
    """(last-pass class-IL %, last-pass task-IL %, wall seconds) of one run of the authors' main.py; the whole run
    (every pass) is kept in `runs`."""
    name = f"gdumb-m{args.memory}-s{seed}"
    logs = args.log_dir / "authors"
    shutil.rmtree(logs / name, ignore_errors=True)
    logs.mkdir(parents=True, exist_ok=True)
    command = [args.gdumb_python, "-u", "main.py", *AUTHORS_ARGS, *args.authors_args, "--memory_size",
               str(args.memory), "--seed", str(seed), "--workers", "0", "--data_dir", str(args.gdumb / "data"),
               "--log_dir", f"{logs}/", "--exp_name", name]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    env.pop("PYTHONPATH", None)
    seconds = timed(command, env, args.gdumb / "src", logs / f"{name}.txt")
    run = parse_authors_log((logs / name / "checkpoint.log").read_text(), passes=128)
    runs[seed] = run
    print(f"gdumb authors seed {seed}: best pass {run.best:.2f} (pass {run.class_il.index(run.best)}), reported "
          f"{run.reported:.2f}", flush=True)
    return (*run.last, seconds)


# ------------------------------------------------------------------------------------------------ results file
RESULTS_HEADER = """\
# GDumb side by side with the authors' code (drimpossible/GDumb@4f412d7, a copy patched only to run on a CPU; see
# tools/side_by_side_gdumb.py) on their MNIST protocol (scripts/replicate.sh: 5 tasks of 2 digits, a 784-100-100
# MLP, 128 passes over the final memory), one CPU thread: class-IL (all 10 digits, task-agnostic) and task-IL
# (task-aware) test accuracy, %, mean (sample std) over the seeds, each seed's class-IL, and the median seconds per
# run (wall time of the process, start-up included, on a 2-core machine shared with other jobs). The authors' rows
# are their last pass (like clbench's) and, separately, the best pass (what their code reports). Written by
# tools/side_by_side_gdumb.py --results-file (rows replaced by id when re-run); shown by docs/class-incremental.md.
"""


def row_record(memory: int, tool: str, run: str, values: list[tuple[float, float]], seconds: list[float],
               seeds: str, commit: str, suffix: str = "") -> dict[str, str]:
    """One results-file row: a tool's (class-IL, task-IL) per seed at a memory size."""
    class_il, task_il = zip(*values, strict=True)
    (c_mean, c_std), (t_mean, t_std) = mean_std(class_il), mean_std(task_il)
    return {"id": f"m{memory}-{tool.lower()}{suffix}", "memory": str(memory), "tool": tool, "run": run,
            "class_il": f"{c_mean:.1f} ({c_std:.1f})", "task_il": f"{t_mean:.1f} ({t_std:.1f})",
            "per_seed": ", ".join(f"{value:.2f}" for value in class_il), "seeds": seeds,
            "seconds": f"{statistics.median(seconds):.1f}", "commit": commit}


def write_results(path: Path, records: list[dict[str, str]], command: str | None) -> None:
    """Insert or replace `records` (by id) in the results file at `path`, rows ordered by memory (larger first),
    then the authors' before clbench's; one table of all rows; the commands kept once each."""
    import yaml

    data = yaml.safe_load(path.read_text()) if path.exists() else {}
    rows = {row["id"]: row for row in data.get("rows", [])}
    rows.update({record["id"]: record for record in records})
    ordered = sorted(rows.values(), key=lambda row: (-int(row["memory"]), row["tool"] != "authors", row["id"]))
    commands = list(dict.fromkeys([*data.get("measured", {}).get("commands", []), *([command] if command else [])]))
    columns = {"memory": "{memory}", "run": "{run}", "class-IL %": "{class_il}", "task-IL %": "{task_il}",
               "class-IL per seed": "{per_seed}", "seconds per run": "{seconds}", "at": "{commit}"}
    body = {"measured": {"commit": "per row (`at`)", "commands": commands}, "rows": ordered,
            "tables": {"all": {"columns": columns, "rows": [row["id"] for row in ordered]}}}
    text = RESULTS_HEADER + yaml.safe_dump(body, sort_keys=False, width=120, allow_unicode=True)
    write_atomically(path, text)


def records_of(memory: int, found: dict[str, list[Found]], runs: list[AuthorsRun], seeds: str, commit: str,
               authors_args: Sequence[str] = (), clbench_set: Sequence[str] = ()) -> list[dict[str, str]]:
    """The results-file rows of one comparison: the authors' last pass, their best pass (when run), clbench; an
    ablation's extra arguments named in the row's text and its id."""
    records = []
    theirs = " ".join(["authors' main.py", *authors_args])
    mine = " ".join(["clbench `gdumb`", *(f"`{value}`" for value in clbench_set)]) if clbench_set else \
        "clbench `gdumb` (the mnist5 spec as shipped at the row's commit)"
    theirs_id = "".join(f"-{arg.strip('-')}" for arg in authors_args)
    mine_id = "".join(f"-{value.split('=')[0].split('.')[-1]}{value.split('=', 1)[1]}" for value in clbench_set)
    if found["authors"]:
        seconds = [one[2] for one in found["authors"]]
        records.append(row_record(memory, "authors", f"{theirs}, last pass", [one[:2] for one in found["authors"]],
                                  seconds, seeds, commit, suffix=theirs_id))
        best = [(run.best, run.task_il[run.class_il.index(run.best)]) for run in runs]
        records.append(row_record(memory, "authors", f"{theirs}, best pass (what it reports)", best, seconds, seeds,
                                  commit, suffix=f"{theirs_id}-best"))
    if found["clbench"]:
        records.append(row_record(memory, "clbench", mine, [one[:2] for one in found["clbench"]],
                                  [one[2] for one in found["clbench"]], seeds, commit, suffix=mine_id))
    return records


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gdumb", type=Path, required=True, help="a copy of drimpossible/GDumb at 4f412d7 (patched)")
    parser.add_argument("--gdumb-python", required=True, help="interpreter with torch and torchvision")
    parser.add_argument("--mirror", type=Path, default=REPO.parent / "shared" / "data", help="folder with mnist/*.gz")
    parser.add_argument("--memory", type=int, choices=[300, 500], default=500, help="the memory, in samples")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--log-dir", type=Path, default=Path("side-by-side-gdumb"))
    parser.add_argument("--only", choices=["authors", "clbench"], default=None)
    parser.add_argument("--prepare-gdumb", action="store_true", help="gunzip MNIST into DIR and apply the patches")
    parser.add_argument("--authors-args", default="", help="extra arguments of their main.py, for ablations (e.g. "
                                                           "--authors-args=--bn: no batch norm)")
    parser.add_argument("--clbench-set", action="append", default=[], help="an extra clbench --set value, for "
                                                                           "ablations (e.g. gdumb.maxlr=0.01)")
    parser.add_argument("--results-file", type=Path, default=None,
                        help="write the rows into this docs results file (docs/results/mnist-gdumb-authors.yaml)")
    args = parser.parse_args(argv)
    args.gdumb, args.log_dir = args.gdumb.resolve(), args.log_dir.resolve()
    args.authors_args = args.authors_args.split()
    if args.prepare_gdumb:
        prepare_gdumb(args.gdumb, args.mirror)
    seeds = [int(s) for s in args.seeds.split(",")]
    runs: dict[int, AuthorsRun] = {}
    turns = in_turns(f"gdumb-m{args.memory}", seeds, {
        "authors": lambda seed: run_authors(args, seed, runs),
        "clbench": lambda seed: run_clbench(args.log_dir / "clbench" / f"gdumb-m{args.memory}-s{seed}", SPEC,
                                            "gdumb", seed, [*clbench_sets(args.memory), *args.clbench_set],
                                            args.mirror)}, args.only)
    found = turns.found
    lines = ["| memory | tool | class-IL % | task-IL % | seconds per run |", "|---|---|---|---|---|"]
    lines += [table_row(tool, str(args.memory), values) for tool, values in found.items() if values]
    authors_runs = [runs[seed] for seed in turns.kept if seed in runs]
    if authors_runs:
        best = [run.best for run in authors_runs]
        lines.append(f"(the authors' best pass, what their code reports: {statistics.fmean(best):.1f} "
                     f"({mean_std(best)[1]:.1f}))")
    if all(found.values()):
        lines += ["", f"memory {args.memory}: clbench's class-IL mean against the authors' last pass: "
                      f"{verdict([v[0] for v in found['clbench']], [v[0] for v in found['authors']])}",
                  f"memory {args.memory}: against the authors' best pass: "
                  f"{verdict([v[0] for v in found['clbench']], [run.best for run in authors_runs])}"]
    print("\n".join(lines))
    if args.results_file is not None:
        extra = "".join([*(f" --authors-args={arg}" for arg in args.authors_args),
                         *(f" --clbench-set {value}" for value in args.clbench_set),
                         *([f" --only {args.only}"] if args.only else [])])
        command = (f"OMP_NUM_THREADS=1 python tools/side_by_side_gdumb.py --gdumb PATH/gdumb-copy --prepare-gdumb "
                   f"--gdumb-python PYTHON --memory {args.memory} --seeds {args.seeds}{extra} --results-file "
                   f"{args.results_file}")
        seeds_text = ",".join(str(seed) for seed in turns.kept)
        write_results(args.results_file, records_of(args.memory, found, authors_runs, seeds_text, current_commit(),
                                                     args.authors_args, args.clbench_set), command)


if __name__ == "__main__":
    main()
