"""Ending the `clbench` process without the interpreter's finalisation.

Once a command has returned, every result is on disk (results are written atomically, run loggers are closed, worker
processes joined), yet a normal interpreter exit still tears down every module and object, which with torch loaded
takes 0.4-0.7 s on a 2-core machine: a tenth of a short run. `exit_now` runs what a normal exit runs for the
program's sake, the `atexit` handlers (multiprocessing's, logging's, W&B's) and the flush of standard output and
error, then ends the process with `os._exit`. It exits normally instead where that finalisation may matter: under a
profiler or tracer (cProfile and coverage write their files at the end), while a non-daemon thread still runs (a
normal exit waits for it), for an exit status that is not a number, or when `CLBENCH_NORMAL_EXIT` is set.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn


def normal_exit_needed() -> bool:
    """True where the interpreter's own exit must run (see the module docstring)."""
    if os.environ.get("CLBENCH_NORMAL_EXIT") or sys.getprofile() is not None or sys.gettrace() is not None:
        return True
    main = threading.main_thread()
    return any(thread is not main and not thread.daemon and thread.is_alive() for thread in threading.enumerate())


def exit_now(code: object) -> NoReturn:
    """End the process with status `code` (a `SystemExit` code: None is 0), skipping the interpreter's
    finalisation when that is safe."""
    if code is not None and not isinstance(code, int) or normal_exit_needed():
        raise SystemExit(code)
    atexit._run_exitfuncs()  # what a normal exit runs first: logging.shutdown, multiprocessing's cleanup, ...
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken pipe: nothing more can reach it
            pass
    os._exit(code or 0)
