"""One process per run: an advisory, non-blocking `fcntl.flock` on `<run_dir>/.lock`.

The lock is held while a run executes, so two `clbench train` processes pointed at the same results folder
(on one machine, or on several sharing it over a file system with working flock, e.g. NFSv4) never run or
write the same run at the same time. The lock file stays in place (deleting it would race with a process
about to lock it); it holds the host and process id of the last holder, for messages. POSIX only.
"""

from __future__ import annotations

import fcntl
import os
import platform
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK_FILE = ".lock"


@contextmanager
def held_lock(run_dir: Path) -> Iterator[bool]:
    """Try to lock `run_dir` without waiting; yields True while held, False if another process holds it."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / LOCK_FILE, "a+") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            handle.seek(0)
            handle.truncate()
            handle.write(f"host {platform.node()} pid {os.getpid()}\n")
            handle.flush()
            yield True
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def lock_holder(run_dir: Path) -> str:
    """Who holds (or last held) the run's lock, e.g. `host n1 pid 4242`."""
    try:
        return (Path(run_dir) / LOCK_FILE).read_text().strip() or "unknown holder"
    except OSError:
        return "unknown holder"
