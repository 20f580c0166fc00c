"""What the parts of `tools/gpu_check.py` share: the check's settings, a part's result, and commands run under a time
budget (a command past its budget is stopped, with its process group, and what it printed is kept)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
STATUSES = ("ok", "partial", "failed", "skipped")
LOG_HEAD, LOG_TAIL = 20_000, 200_000  # characters of each command's output kept in log.txt (head and tail)
STOP_GRACE = 5.0  # seconds between SIGTERM and SIGKILL for a command past its budget


class InjectedFailure(RuntimeError):
    """Raised by a part named in `--inject-failure`: shows that one failing part does not stop the others."""


@dataclass(frozen=True)
class Check:
    """One check's settings: where it writes, on which device, at which sizes, where MNIST is."""

    out: Path  # the output folder (at most 8 files: summary.md, summary.json, log.txt, bench.csv)
    scratch: Path  # everything else: results, data caches, command outputs (never copied to `out`)
    device: str  # "cuda" or "cpu"
    dry: bool  # tiny sizes, so that the whole check runs in well under a minute on a CPU
    mirror: Path  # the offline mirror holding mnist/ (the checkout's .gpu-data on the device machine)
    inject: frozenset[int] = frozenset()  # parts that fail on purpose (`--inject-failure`)
    extra_methods: str = ""  # part 2: methods benched after the built-ins (`--extra-methods`, e.g. plugins)
    python: str = sys.executable

    @property
    def log(self) -> Path:
        return self.out / "log.txt"

    @property
    def data_dir(self) -> Path:
        """clbench's data cache for the real-MNIST parts (filled from the mirror by part 0)."""
        return self.scratch / "data"

    @property
    def mnist_ready(self) -> bool:
        return (self.data_dir / "mnist").is_dir()

    def env(self) -> dict[str, str]:
        """The environment of every command: clbench from this checkout, unbuffered output, no terminal styling."""
        path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
        return {**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1", "CLBENCH_MIRROR": str(self.mirror),
                "TERM": "dumb", "COLUMNS": "160", "NO_COLOR": "1"}

    def clbench(self, *arguments: str) -> list[str]:
        return [self.python, "-m", "clbench", *arguments]

    def tool(self, script: str, *arguments: str) -> list[str]:
        return [self.python, str(REPO / "tools" / script), *arguments]

    def fail_if_injected(self, number: int) -> None:
        if number in self.inject:
            raise InjectedFailure(f"part {number} failed on purpose (--inject-failure {number})")


@dataclass
class PartResult:
    """What a part reports: its status (one of `STATUSES`), a one-line note, markdown lines and figures."""

    number: int
    title: str
    status: str
    note: str = ""
    table: list[str] = field(default_factory=list)  # markdown, for summary.md
    figures: dict[str, Any] = field(default_factory=dict)  # for summary.json
    seconds: float = 0.0
    budget: float = 0.0

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status {self.status!r}: use one of {', '.join(STATUSES)}")


@dataclass(frozen=True)
class Finished:
    """A command as it ended: its exit status (None when stopped at its budget), seconds and output."""

    command: tuple[str, ...]
    returncode: int | None
    seconds: float
    timed_out: bool
    output: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def describe(self) -> str:
        if self.timed_out:
            return f"stopped at its budget after {self.seconds:.0f} s"
        return f"exit {self.returncode} after {self.seconds:.1f} s"


def run_command(check: Check, command: Sequence[str], budget: float, title: str) -> Finished:
    """Run `command` in the checkout for at most `budget` seconds (then SIGTERM, SIGKILL: its whole process group);
    its output goes to log.txt under `title` and is returned."""
    capture = check.scratch / f"command-{time.monotonic_ns()}.txt"
    start = time.perf_counter()
    timed_out = False
    with capture.open("w") as sink:
        process = subprocess.Popen(list(command), stdout=sink, stderr=subprocess.STDOUT, cwd=REPO, env=check.env(),
                                   start_new_session=True)
        try:
            returncode: int | None = process.wait(timeout=max(1.0, budget))
        except subprocess.TimeoutExpired:
            stop_group(process)
            returncode, timed_out = None, True
    finished = Finished(tuple(command), returncode, time.perf_counter() - start, timed_out,
                        capture.read_text(errors="replace"))
    append_log(check.log, f"{title}: {' '.join(command)} ({finished.describe()})", finished.output)
    return finished


def stop_group(process: subprocess.Popen) -> None:
    """SIGTERM the process group, then SIGKILL what is left after `STOP_GRACE` seconds."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=STOP_GRACE)
            if sig == signal.SIGTERM:
                os.killpg(process.pid, signal.SIGKILL)  # workers that outlived their parent
            return
        except subprocess.TimeoutExpired:
            continue
        except ProcessLookupError:
            return


def append_log(log: Path, title: str, text: str) -> None:
    """Append a titled block to log.txt; a long text keeps its first and last characters."""
    if len(text) > LOG_HEAD + LOG_TAIL:
        text = f"{text[:LOG_HEAD]}\n[... {len(text) - LOG_HEAD - LOG_TAIL:,} characters left out ...]\n" \
               f"{text[-LOG_TAIL:]}"
    with log.open("a") as file:
        file.write(f"\n===== {title}\n{text}")
        if not text.endswith("\n"):
            file.write("\n")


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """The records a worker appended (one JSON object a line); a line cut short by a stopped worker is left out."""
    if not path.is_file():
        return
    for line in path.read_text().splitlines():
        try:
            yield json.loads(line)
        except json.JSONDecodeError:
            continue


def append_jsonl(path: Path, record: dict[str, Any]) -> None:
    """One record, flushed at once (a worker stopped at its budget keeps what it measured)."""
    with path.open("a") as file:
        file.write(json.dumps(record) + "\n")


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]


def number(value: Any, digits: int = 2) -> str:
    """A figure for a table: `-` when missing or not a number."""
    if isinstance(value, (int, float)) and value == value:
        return f"{value:,.{digits}f}"
    return "-"
