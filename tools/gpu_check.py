"""One prepared check of clbench on a CUDA GPU, sized to a few minutes of lent GPU time (issue 62; docs/speed.md,
"GPU check": the device-tool call, the budgets and what they rest on).

    python tools/gpu_check.py --prepare                    # on the CPU machine: MNIST into .gpu-data/ (ignored)
    tools/gpu_check.sh OUT                                  # on the GPU machine: every part, about 7 minutes
    python tools/gpu_check.py OUT --dry                     # the same on the CPU at tiny sizes (well under a minute)

Parts, in order, each with its own time budget and status (ok, partial: stopped at its budget with what it measured,
failed, skipped: a precondition missing), none stopping the next:
0. the environment (GPU, driver, torch, CUDA, packages) and MNIST fetched from the mirror (`--mirror`);
1. `pytest -m cuda` (tests/cuda) and the contract tests (tests/approaches/test_contract.py): pass/fail per test;
2. `clbench bench mixture8 -m hat,sgd` against the paper's Titan X times, then every approach on mixture8's and
   cifar10-5's networks (synthetic images of the real shapes): forward, forward+backward, epoch, peak memory;
3. clbench's er and derpp step at batch 10 on seq-mnist's MLP against a raw PyTorch loop, kernel launches per step;
4. real MNIST: `clbench train pmnist -m hat --seeds 0-2`, full protocol, `--jobs 3 --devices 0`, then `--jobs 1`;
5. one short pmnist HAT run in float32, with bf16 autocast and with `--compile` (`training.compile`);
6. with the time left: pmnist HAT with the large network (784-2000-2000), one seed.

Everything goes into the output folder OUT, at most 8 files: summary.md (the tables), summary.json (every figure),
log.txt (every command and its output) and bench.csv (part 2's rows); the summary is rewritten after each part, so a
check stopped from outside keeps the parts it finished. Scratch data go to a temporary folder (`--scratch`). The exit
status is 1 when a part failed, else 0.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_check_common import REPO, Check, PartResult, append_log, markdown_table  # noqa: E402
from gpu_check_parts import COMMIT_FILE, git_commit, part_bench, part_environment, part_replay, part_tests  # noqa: E402
from gpu_check_runs import part_large, part_pmnist_jobs, part_switches  # noqa: E402

GPU_DATA = REPO / ".gpu-data"  # the checkout's ignored MNIST mirror, carried to the device machine
MNIST_FILES = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
               "t10k-labels-idx1-ubyte.gz")
TOTAL_SECONDS = 420  # about 7 minutes on the GPU
DRY_TOTAL_SECONDS = 1200


@dataclass(frozen=True)
class Part:
    """A part: its number, title, function, budget on the GPU and with --dry (seconds); `rest`: the time left."""

    number: int
    title: str
    function: Callable[[Check, float], PartResult]
    budget: float
    dry_budget: float
    rest: bool = False


# Budgets on the GPU: docs/speed.md, "GPU check" (what each rests on). With --dry they are only a safety net: the tiny
# sizes end each part long before (about 35 s of CPU time in all, measured on 2 shared cores).
PARTS = (
    Part(0, "environment and MNIST", part_environment, 30, 120),
    Part(1, "CUDA and contract tests", part_tests, 110, 120),
    Part(2, "clbench bench: mixture8, cifar10-5", part_bench, 100, 180),
    Part(3, "replay step against raw PyTorch", part_replay, 35, 90),
    Part(4, "pmnist HAT --jobs 3 / --jobs 1", part_pmnist_jobs, 100, 180),
    Part(5, "bf16 autocast and --compile", part_switches, 60, 120),
    Part(6, "pmnist HAT large network", part_large, 0, 0, rest=True),
)
MIN_REST = 20  # part 6 is skipped with less time left


def run_part(part: Part, check: Check, budget: float) -> PartResult:
    """The part's result, its title and time set; an exception is the part's failure, never the check's."""
    start = time.perf_counter()
    try:
        result = part.function(check, budget)
    except Exception as error:  # one part's failure must not stop the others
        append_log(check.log, f"part {part.number}: {type(error).__name__}", traceback.format_exc())
        result = PartResult(part.number, "", "failed", f"{type(error).__name__}: {error}")
    result.title, result.seconds, result.budget = part.title, time.perf_counter() - start, budget
    return result


def run_check(check: Check, numbers: Sequence[int], total: float, scale: float) -> list[PartResult]:
    deadline = time.perf_counter() + total
    results: list[PartResult] = []
    for part in PARTS:
        if part.number not in numbers:
            continue
        left = deadline - time.perf_counter()
        budget = left if part.rest else min(left, (part.dry_budget if check.dry else part.budget) * scale)
        if budget < (MIN_REST if part.rest else 5):
            result = PartResult(part.number, part.title, "skipped", f"no time left ({left:.0f} s of {total:.0f} s)")
        else:
            print(f"part {part.number}: {part.title} (budget {budget:.0f} s) ...", flush=True)
            result = run_part(part, check, budget)
        results.append(result)
        print(f"part {part.number}: {result.status} in {result.seconds:.0f} s: {result.note}", flush=True)
        write_summary(check, results)
    return results


def write_summary(check: Check, results: Sequence[PartResult]) -> None:
    """summary.json (every figure) and summary.md (the status table, then each part's tables)."""
    environment = next((r.figures for r in results if r.number == 0), {})
    heading = {"command": " ".join(sys.argv), "device": check.device, "dry": check.dry,
               "gpu": environment.get("gpu"), "torch": environment.get("torch"), "cuda": environment.get("cuda"),
               "commit": environment.get("commit")}
    (check.out / "summary.json").write_text(json.dumps(
        {**heading, "parts": [asdict(result) for result in results]}, indent=1, default=str))
    lines = ["# GPU check", "", *(f"- {key}: {value}" for key, value in heading.items()), "",
             *status_table(results)]
    for result in results:
        lines += ["", f"## Part {result.number}: {result.title} ({result.status})", "", result.note, ""]
        lines += result.table
    (check.out / "summary.md").write_text("\n".join(lines) + "\n")


def status_table(results: Sequence[PartResult]) -> list[str]:
    return markdown_table(("part", "title", "status", "seconds", "budget", "note"),
                          [(r.number, r.title, r.status, f"{r.seconds:.0f}", f"{r.budget:.0f}", r.note[:240])
                           for r in results])


# ---------------------------------------------------------------------------------------------- prepare
def prepare(source: Path, target: Path) -> int:
    """Copy MNIST's four files from the offline mirror `source` into `target`/mnist, checked against the mirror's
    MD5SUMS when it has one."""
    sums = {}
    if (source / "MD5SUMS").is_file():
        for line in (source / "MD5SUMS").read_text().splitlines():
            digest, _, name = line.partition("  ")
            sums[name.strip()] = digest
    (target / "mnist").mkdir(parents=True, exist_ok=True)
    for name in MNIST_FILES:
        origin = source / "mnist" / name
        if not origin.is_file():
            print(f"--from {source}: no mnist/{name}; give the offline mirror holding mnist/", file=sys.stderr)
            return 2
        copy = target / "mnist" / name
        shutil.copyfile(origin, copy)
        expected = sums.get(f"mnist/{name}")
        if expected and hashlib.md5(copy.read_bytes()).hexdigest() != expected:
            print(f"{copy}: md5 differs from {source / 'MD5SUMS'}; copy the mirror again", file=sys.stderr)
            return 2
    (target / COMMIT_FILE).write_text(git_commit() + "\n")
    print(f"MNIST ({len(MNIST_FILES)} files) in {target / 'mnist'}; the checkout's commit in {target / COMMIT_FILE}")
    return 0


# ---------------------------------------------------------------------------------------------- command line
def usage_error(message: str) -> SystemExit:
    """A one-line error on stderr and exit status 2 (nothing written)."""
    print(f"error: {message}", file=sys.stderr)
    return SystemExit(2)


def parse_parts(text: str, option: str = "--parts") -> list[int]:
    known = ",".join(str(part.number) for part in PARTS)
    try:
        numbers = sorted({int(item) for item in text.split(",") if item.strip()})
    except ValueError:
        raise usage_error(f"{option} {text!r}: give part numbers separated by commas, e.g. 2,3 (parts: {known})") \
            from None
    unknown = [n for n in numbers if str(n) not in known.split(",")]
    if unknown or not numbers:
        raise usage_error(f"{option} {text!r}: {f'no part {unknown[0]}' if unknown else 'no part named'} "
                          f"(parts: {known})")
    return numbers


def with_environment(numbers: Sequence[int]) -> list[int]:
    """Part 0 always runs: it records the machine and fetches the MNIST that parts 4-6 train on."""
    return sorted({0, *numbers})


def arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("out", nargs="?", type=Path, help="the output folder (at most 8 files are written there)")
    parser.add_argument("--dry", action="store_true", help="tiny sizes (the device defaults to cpu)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default=None, help="default: cuda (cpu with --dry)")
    parser.add_argument("--mirror", type=Path, default=GPU_DATA, help=f"MNIST mirror (default {GPU_DATA})")
    parser.add_argument("--parts", default=",".join(str(part.number) for part in PARTS),
                        help="e.g. 2,3 (part 0 always runs)")
    parser.add_argument("--total", type=float, default=None,
                        help=f"seconds for the whole check (default {TOTAL_SECONDS}; --dry {DRY_TOTAL_SECONDS})")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every part's budget (e.g. 0.5)")
    parser.add_argument("--scratch", type=Path, default=None, help="scratch folder (default: a temporary one)")
    parser.add_argument("--inject-failure", default="", help="make these parts fail on purpose (e.g. 3)")
    parser.add_argument("--extra-methods", default="",
                        help="part 2: bench these too after the built-ins (names or module:Class specs of plugins)")
    parser.add_argument("--prepare", action="store_true", help="copy MNIST from --from into --mirror, then stop")
    parser.add_argument("--from", dest="source", type=Path,
                        default=Path(os.environ.get("CLBENCH_MIRROR") or REPO.parent / "shared" / "data"),
                        help="--prepare: the offline mirror to copy from (default $CLBENCH_MIRROR, else "
                             "../shared/data beside the checkout)")
    args = parser.parse_args(argv)
    if not args.prepare and args.out is None:
        parser.error("give the output folder OUT (or --prepare)")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = arguments(argv)
    if args.prepare:
        return prepare(args.source.absolute(), args.mirror.absolute())
    numbers = with_environment(parse_parts(args.parts))
    inject = frozenset(parse_parts(args.inject_failure, "--inject-failure")) if args.inject_failure else frozenset()
    out = args.out.absolute()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise usage_error(f"{out}: the output folder must be new or empty (the check writes its 4 files there)")
    out.mkdir(parents=True, exist_ok=True)
    scratch = args.scratch.absolute() if args.scratch else Path(tempfile.mkdtemp(prefix="gpu-check-"))
    scratch.mkdir(parents=True, exist_ok=True)
    check = Check(out, scratch, args.device or ("cpu" if args.dry else "cuda"), args.dry, args.mirror.absolute(),
                  inject, args.extra_methods)
    results = run_check(check, numbers, args.total or (DRY_TOTAL_SECONDS if args.dry else TOTAL_SECONDS), args.scale)
    print("\n".join(["", *status_table(results), "", f"files in {out}: "
                     + ", ".join(sorted(path.name for path in out.iterdir()))]))
    if args.scratch is None:
        shutil.rmtree(scratch, ignore_errors=True)
    return 1 if any(result.status == "failed" for result in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())
