"""Parts 0-3 of `tools/gpu_check.py`: the environment (and MNIST from the mirror), the CUDA and contract tests,
`clbench bench` on mixture8 and cifar10-5, and the replay step against raw PyTorch. Each takes the check and its
budget in seconds and returns a `PartResult`; what it ran is in log.txt."""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from gpu_check_common import REPO, Check, PartResult, markdown_table, number, read_jsonl, run_command

# The paper's appendix table "Training Time" (a Pascal Titan X, batches of 64, mixture-8): epoch [s], batch-F [ms],
# batch-FB [ms]; /work/shared/paper/hat-icml2018.tex lines 525-535 (rows PNN ... SGD-F).
PAPER_TIMES = {"pnn": (4.1, 10.2, 27.5), "pathnet": (3.6, 10.6, 23.9), "ewc": (3.1, 7.9, 19.7),
               "joint": (94.8, 3.1, 15.7), "imm-mean": (2.6, 6.9, 17.1), "imm-mode": (2.5, 6.7, 16.0),
               "lwf": (2.2, 5.7, 14.2), "hat": (1.6, 4.0, 11.7), "sgd": (0.9, 2.5, 6.6), "lfl": (0.9, 4.4, 9.2),
               "sgd-f": (0.9, 2.5, 6.8)}
SPEED_UP = 8.0  # docs/reproductions.md#hat-mixture8-training-time: at least 8x faster per forward+backward batch
HAT_TARGET_MS = PAPER_TIMES["hat"][2] / SPEED_UP  # 1.46 ms
BENCH_COLUMNS = ("benchmark", "method", "status", "source", "data", "batch_size", "forward_ms", "forward_backward_ms",
                 "epoch_seconds", "epoch_mode", "peak_memory_mb", "seconds", "reason")
TEST_STATUS = re.compile(r"(?:(?P<id1>tests/\S+::\S+)\s+(?P<s1>PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b)|"
                         r"(?:\b(?P<s2>PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\s+(?P<id2>tests/\S+::\S+))")
MNIST_FILE = "mnist/train-images-idx3-ubyte.gz"
COMMIT_FILE = "commit.txt"  # the checkout's commit, written by --prepare (the device machine may get no .git)


def installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


# ---------------------------------------------------------------------------------------------- part 0
PROBE = """import importlib.util, json, os, platform, sys
import torch
import clbench
info = {"python": sys.version.split()[0], "torch": torch.__version__, "cuda": torch.version.cuda,
        "cuda_available": torch.cuda.is_available(), "platform": platform.platform(), "cpus": os.cpu_count(),
        "clbench": clbench.__version__, "clbench_path": clbench.__file__}
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    info.update(gpu=p.name, gpu_memory_gib=round(p.total_memory / 2**30, 1), capability=f"{p.major}.{p.minor}",
                multiprocessors=p.multi_processor_count, cudnn=torch.backends.cudnn.version())
info["packages"] = {m: importlib.util.find_spec(m) is not None
                    for m in ("pytest", "xdist", "pytest_timeout", "hypothesis", "pandas", "pyarrow", "typer")}
print("PROBE " + json.dumps(info))
"""


def git_commit() -> str:
    """`git rev-parse --short HEAD` of the checkout, and whether tracked files differ from it."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "unknown (no git)"
    if head.returncode != 0:
        return "unknown (not a git checkout)"
    return head.stdout.strip() + (" with uncommitted changes" if dirty.stdout.strip() else "")


def commit_of(check: Check) -> str:
    """The checkout's commit (git), else the one --prepare wrote beside the mirror's MNIST."""
    commit = git_commit()
    written = check.mirror / COMMIT_FILE
    if commit.startswith("unknown") and written.is_file():
        return f"{written.read_text().strip()} (when --prepare ran)"
    return commit


def nvidia_smi() -> str:
    if shutil.which("nvidia-smi") is None:
        return "no nvidia-smi"
    query = "name,driver_version,memory.total,clocks.sm,clocks.max.sm,temperature.gpu,utilization.gpu"
    try:
        done = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv"], capture_output=True, text=True,
                              timeout=20)
    except (OSError, subprocess.SubprocessError) as error:
        return f"nvidia-smi failed: {error}"
    return done.stdout.strip() or done.stderr.strip()


def part_environment(check: Check, budget: float) -> PartResult:
    check.fail_if_injected(0)
    probe = run_command(check, [check.python, "-c", PROBE], budget / 2, "part 0: probe")
    lines = [line[6:] for line in probe.output.splitlines() if line.startswith("PROBE ")]
    info: dict[str, Any] = json.loads(lines[-1]) if lines else {}
    info.update(commit=commit_of(check), nvidia_smi=nvidia_smi(), device=check.device, dry=check.dry)
    problems = []
    if not info:
        problems.append(f"python/torch/clbench probe failed ({probe.describe()}; log.txt)")
    elif check.device == "cuda" and not info.get("cuda_available"):
        problems.append("torch sees no CUDA device")
    mnist = mnist_from_mirror(check, budget - probe.seconds)
    info["mnist"] = mnist
    if mnist.startswith("fetch failed"):
        problems.append(mnist)
    rows = [(key, info.get(key, "-")) for key in ("commit", "device", "gpu", "capability", "gpu_memory_gib",
                                                   "multiprocessors", "python", "torch", "cuda", "cudnn", "cpus",
                                                   "platform", "clbench_path", "mnist")]
    rows += [(f"package {name}", "yes" if there else "no") for name, there in info.get("packages", {}).items()]
    table = markdown_table(("what", "value"), rows) + ["", "nvidia-smi:", "", "```", info["nvidia_smi"], "```"]
    return PartResult(0, "", "failed" if problems else "ok", "; ".join(problems) or
                      f"{info.get('gpu', 'no GPU')}, torch {info.get('torch')}, CUDA {info.get('cuda')}; {mnist}",
                      table, info)


def mnist_from_mirror(check: Check, budget: float) -> str:
    """MNIST into the check's data cache with `clbench fetch pmnist --mirror` (md5-checked), or why not."""
    if not (check.mirror / MNIST_FILE).is_file():
        return (f"no MNIST at {check.mirror / 'mnist'}: the real-MNIST parts are skipped (fill it on the CPU machine: "
                "`python tools/gpu_check.py --prepare`)")
    fetched = run_command(check, check.clbench("fetch", "pmnist", "--mirror", str(check.mirror), "--data-dir",
                                               str(check.data_dir)), budget, "part 0: MNIST")
    if not fetched.ok or not check.mnist_ready:
        return f"fetch failed ({fetched.describe()}; log.txt)"
    return f"MNIST fetched from {check.mirror} in {fetched.seconds:.1f} s"


# ---------------------------------------------------------------------------------------------- part 1
DRY_TESTS = ("tests/cuda/test_cuda.py::test_bench_on_cuda_measures_epochs_and_gpu_memory",
             "tests/approaches/test_contract.py::test_every_approach_fills_the_lower_triangle[sgd-mlp]")
GPU_TESTS = ("tests/cuda", "tests/approaches/test_contract.py")


def part_tests(check: Check, budget: float) -> PartResult:
    """`pytest -m cuda` (every test of tests/cuda is marked cuda) and the contract tests, in one pytest run."""
    check.fail_if_injected(1)
    if not installed("pytest"):
        return PartResult(1, "", "skipped", "pytest is not installed for this Python")
    command = [check.python, "-m", "pytest", *(DRY_TESTS if check.dry else GPU_TESTS), "-v", "-p", "no:cacheprovider",
               "-o", "addopts=", "-m", "not slow", "-rfEs", "--color=no", "--basetemp", str(check.scratch / "pytest")]
    workers = min(12, max(1, (os.cpu_count() or 2) - 2))
    if installed("xdist") and not check.dry and workers > 1:
        command += ["-n", str(workers)]
    if installed("pytest_timeout"):
        command += ["--timeout", "150"]
    finished = run_command(check, command, budget, "part 1: pytest")
    outcomes = test_outcomes(finished.output)
    counts = {status: sum(1 for s in outcomes.values() if s == status) for status in sorted(set(outcomes.values()))}
    bad = sorted(test for test, status in outcomes.items() if status in ("FAILED", "ERROR"))
    reasons = failure_reasons(finished.output)
    if bad or (not finished.timed_out and not finished.ok):
        status = "failed"
    else:
        status = "partial" if finished.timed_out else "ok"
    skipped_cuda = [t for t, s in outcomes.items() if s == "SKIPPED" and t.startswith("tests/cuda")]
    note = f"{', '.join(f'{n} {s.lower()}' for s, n in counts.items()) or 'no test outcome read'} " \
           f"({finished.describe()})"
    if skipped_cuda and check.device == "cuda":
        note += f"; {len(skipped_cuda)} CUDA tests skipped on a CUDA run"
    table = markdown_table(("outcome", "tests"), sorted(counts.items()))
    if bad:
        table += ["", *markdown_table(("failed test", "reason"), [(t, reasons.get(t, "-")) for t in bad[:40]])]
    golden = golden_lines(finished.output)
    if golden:
        table += ["", "golden runs (tests/golden_runs.py): " + " ".join(golden)]
    return PartResult(1, "", status, note, table, {"command": " ".join(command), "counts": counts, "failed": bad,
                                                   "reasons": reasons, "golden": golden, "seconds": finished.seconds,
                                                   "outcomes": outcomes})


def test_outcomes(output: str) -> dict[str, str]:
    """Test id -> PASSED/FAILED/ERROR/SKIPPED/XFAIL/XPASS from pytest -v output (with or without xdist); a test's
    FAILED or ERROR line wins over an earlier PASSED (an error at teardown)."""
    outcomes: dict[str, str] = {}
    for match in TEST_STATUS.finditer(output):
        test = match.group("id1") or match.group("id2")
        status = match.group("s1") or match.group("s2")
        if outcomes.get(test) not in ("FAILED", "ERROR"):
            outcomes[test] = status
    return outcomes


def failure_reasons(output: str) -> dict[str, str]:
    """Test id -> the one-line reason of pytest's short summary (`FAILED id - reason`)."""
    found = re.finditer(r"^(?:FAILED|ERROR) (tests/\S+::\S+) - (.*)$", output, flags=re.MULTILINE)
    return {match.group(1): match.group(2)[:300] for match in found}


def golden_lines(output: str) -> list[str]:
    """The lines of the pytest summary's 'golden runs' section (how the golden runs compared)."""
    lines = output.splitlines()
    starts = [i for i, line in enumerate(lines) if re.match(r"^=+ golden runs =+$", line)]
    if not starts:
        return []
    section = []
    for line in lines[starts[-1] + 1:]:
        if line.startswith("====="):
            break
        section.append(line.strip())
    return section


# ---------------------------------------------------------------------------------------------- part 2
DRY_BENCH = {"mixture8": ["data.max_train_samples=256", "data.max_test_samples=64", "network.conv_channels=[4,4,4]",
                          "network.fc_units=[16,16]"],
             "cifar10-5": ["data.max_train_samples=256", "data.max_test_samples=64", "network.nf=2"]}
DRY_METHODS = {"mixture8": "hat,sgd,er", "cifar10-5": "sgd,er,derpp"}
WORKER_SHARES = {"mixture8": 0.6, "cifar10-5": 1.0}  # of the part's time left when each starts


def part_bench(check: Check, budget: float) -> PartResult:
    """`clbench bench mixture8 -m hat,sgd` (the paper's comparison, epochs measured on CUDA), then every approach on
    mixture8's AlexNet-like net and cifar10-5's ResNet-18, synthetic images of the real shapes."""
    check.fail_if_injected(2)
    cli_rows, problems, stopped, spent = bench_cli(check, budget * 0.3)
    rows = list(cli_rows)
    for benchmark, share in WORKER_SHARES.items():
        jsonl = check.scratch / f"bench-{benchmark}.jsonl"
        command = check.tool("gpu_check_workers.py", "bench", "--benchmark", benchmark, "--device", check.device,
                             "--jsonl", str(jsonl), "--batches", "2" if check.dry else "20")
        for override in DRY_BENCH[benchmark] if check.dry else []:
            command += ["--set", override]
        if check.dry:
            command += ["--methods", DRY_METHODS[benchmark]]
        if check.extra_methods:
            command += ["--extra", check.extra_methods]
        finished = run_command(check, command, (budget - spent) * share, f"part 2: bench {benchmark}")
        spent += finished.seconds
        records = [r for r in read_jsonl(jsonl) if "method" in r]
        rows += [{**r, "source": "every approach"} for r in records]
        problems += [f"{benchmark} {r['method']}: {r.get('reason')}" for r in records if r["status"] == "error"]
        if finished.timed_out:
            stopped.append(f"{benchmark} stopped at its budget after {len(records)} approaches")
        elif not finished.ok:
            problems.append(f"bench worker {benchmark}: {finished.describe()}")
    write_bench_csv(check.out / "bench.csv", rows)
    hat = next((r for r in cli_rows if r["method"] == "hat" and r["status"] == "ok"), None)
    figures: dict[str, Any] = {"rows": rows, "problems": problems, "stopped": stopped, "hat_target_ms": HAT_TARGET_MS}
    if hat:
        figures.update(hat_forward_backward_ms=hat["forward_backward_ms"],
                       hat_target_met=hat["forward_backward_ms"] <= HAT_TARGET_MS)
    status = "failed" if problems else "partial" if stopped else "ok"
    note = "; ".join(problems[:3] + stopped) or f"{sum(r['status'] == 'ok' for r in rows)} measurements"
    if hat:
        note = (f"HAT mixture8 fwd+bwd {hat['forward_backward_ms']:.2f} ms (paper 11.7 ms on a Titan X; target "
                f"<= {HAT_TARGET_MS:.2f} ms: {'met' if figures['hat_target_met'] else 'MISSED'}); {note}")
    return PartResult(2, "", status, note, bench_tables(cli_rows, rows), figures)


def bench_cli(check: Check, budget: float) -> tuple[list[dict], list[str], list[str], float]:
    """`clbench bench mixture8 -m hat,sgd` into a scratch results folder: (rows, problems, stopped, seconds)."""
    results = check.scratch / "bench-cli"
    command = check.clbench("bench", "mixture8", "-m", "hat,sgd", "--device", check.device, "--results", str(results),
                            "--data-dir", str(check.scratch / "no-data"))
    if check.dry:
        command += ["--batches", "2", "--epoch", "extrapolate"]
        command += [part for override in DRY_BENCH["mixture8"] for part in ("--set", override)]
    else:
        command += ["--batches", "50", "--epoch", "measure"]
    finished = run_command(check, command, budget, "part 2: clbench bench")
    rows = []
    for path in sorted((results / "_bench").glob("*.parquet")):
        import pandas as pd

        records = json.loads(pd.read_parquet(path).to_json(orient="records"))  # plain Python numbers
        rows += [{**row, "status": "ok", "source": "clbench bench CLI",
                  "epoch_mode": "measured" if not check.dry else "extrapolated"} for row in records]
    problems = [] if finished.ok or finished.timed_out else [f"clbench bench: {finished.describe()}"]
    stopped = ["clbench bench stopped at its budget"] if finished.timed_out else []
    if finished.ok and not rows:
        problems.append("clbench bench stored no rows")
    return rows, problems, stopped, finished.seconds


def write_bench_csv(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="") as file:
        writer = csv.DictWriter(file, BENCH_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def bench_tables(cli_rows: list[dict], rows: list[dict]) -> list[str]:
    """The paper's comparison (the CLI's rows), then every approach per benchmark."""
    paper = []
    for row in cli_rows:
        epoch, forward, both = PAPER_TIMES.get(row["method"], (None, None, None))
        paper.append((row["method"], number(row["forward_ms"]), number(forward, 1),
                      number(row["forward_backward_ms"]), number(both, 1),
                      f"{both / row['forward_backward_ms']:.1f}x" if both else "-",
                      number(row["epoch_seconds"]), number(epoch, 1), number(row["peak_memory_mb"], 0)))
    table = ["mixture8, `clbench bench mixture8 -m hat,sgd` (batch 64; paper: Pascal Titan X, hat-icml2018.tex "
             f"525-535; target for HAT's fwd+bwd: <= {HAT_TARGET_MS:.2f} ms, 8x the paper's):", ""]
    table += markdown_table(("approach", "forward [ms]", "paper", "fwd+bwd [ms]", "paper", "paper / ours",
                             "epoch [s]", "paper", "peak [MiB]"), paper)
    for benchmark in WORKER_SHARES:
        mine = [r for r in rows if r.get("benchmark") == benchmark and r.get("source") == "every approach"]
        table += ["", f"{benchmark}, every approach (synthetic images of the real shapes; epochs extrapolated):", ""]
        table += markdown_table(("approach", "status", "batch", "forward [ms]", "fwd+bwd [ms]", "epoch [s]",
                                 "peak [MiB]", "note"),
                                [(r["method"], r["status"], r.get("batch_size", "-"), number(r.get("forward_ms")),
                                  number(r.get("forward_backward_ms")), number(r.get("epoch_seconds")),
                                  number(r.get("peak_memory_mb"), 0), (r.get("reason") or "")[:120]) for r in mine])
    return table


# ---------------------------------------------------------------------------------------------- part 3
REPLAY_TARGET = 1.5


def part_replay(check: Check, budget: float) -> PartResult:
    """clbench's er and derpp step at batch 10 on seq-mnist's MLP against a raw PyTorch loop, with launches."""
    check.fail_if_injected(3)
    jsonl = check.scratch / "replay.jsonl"
    command = check.tool("gpu_check_workers.py", "replay", "--device", check.device, "--jsonl", str(jsonl),
                         *(["--dry", "--repeats", "2"] if check.dry else []))
    finished = run_command(check, command, budget, "part 3: replay")
    records = list(read_jsonl(jsonl))
    errors = [f"{r['method']}: {r.get('reason')}" for r in records if r["status"] != "ok"]
    if not finished.ok and not finished.timed_out:
        errors.append(f"replay worker: {finished.describe()}")
    done = [r for r in records if r["status"] == "ok"]
    status = "failed" if errors else "partial" if finished.timed_out or len(done) < 2 else "ok"
    counts = "device_kernels" if check.device == "cuda" else "aten_ops"
    rows = [(r["method"], number(r["clbench_ms"], 3), number(r["raw_ms"], 3), f"{r['ratio']:.2f}x",
             f"<= {REPLAY_TARGET}x", "met" if r["ratio"] <= REPLAY_TARGET else "MISSED",
             *(number(r[side].get(key), digits) for key, digits in ((counts, 1), ("launch_calls", 1),
                                                                    ("host_syncs", 2))
               for side in ("clbench_counts", "raw_counts"))) for r in done]
    label = "kernels" if check.device == "cuda" else "aten ops"
    table = markdown_table(("method (batch 10, buffer 500)", "clbench [ms/step]", "raw [ms/step]", "ratio", "target",
                            "verdict", f"{label}/step clbench", "raw", "launch calls/step clbench", "raw",
                            "host syncs/step clbench", "raw"), rows)
    note = "; ".join(errors) or ", ".join(f"{r['method']} {r['ratio']:.2f}x raw ({r['clbench_ms']:.3f} ms/step)"
                                           for r in done) or finished.describe()
    return PartResult(3, "", status, note, table, {"records": records})
