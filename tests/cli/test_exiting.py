"""`clbench` ends its process without the interpreter's finalisation (`clbench.cli.exiting`): the same output and
exit status, atexit handlers run, and a normal exit wherever finalisation matters (profilers, live threads)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def python(*arguments: str, cwd: Path, normal: bool = False) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("CLBENCH_NORMAL_EXIT", None)
    env.pop("PYTHONUNBUFFERED", None)  # standard output buffered, as in a pipe by default
    if normal:
        env["CLBENCH_NORMAL_EXIT"] = "1"
    return subprocess.run([sys.executable, *arguments], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=120)


SCRIPT = """
import atexit, sys
from pathlib import Path
from clbench.cli.exiting import exit_now

class Finalised:
    def __del__(self):
        Path("finalised").write_text("yes")

kept = Finalised()  # a module global: released by the interpreter's finalisation only
atexit.register(lambda: Path("atexit").write_text("yes"))
sys.stdout.write("no newline, still buffered")
exit_now(3)
"""


def test_exit_now_runs_the_atexit_handlers_flushes_and_skips_finalisation(tmp_path: Path) -> None:
    done = python("-c", SCRIPT, cwd=tmp_path)
    assert done.returncode == 3 and done.stdout == "no newline, still buffered"
    assert (tmp_path / "atexit").exists()
    assert not (tmp_path / "finalised").exists()  # the interpreter's teardown did not run


def test_with_clbench_normal_exit_the_interpreter_exits_as_usual(tmp_path: Path) -> None:
    done = python("-c", SCRIPT, cwd=tmp_path, normal=True)
    assert done.returncode == 3 and done.stdout == "no newline, still buffered"
    assert (tmp_path / "atexit").exists() and (tmp_path / "finalised").exists()


def test_a_running_thread_is_waited_for(tmp_path: Path) -> None:
    script = """
import threading, time
from pathlib import Path
from clbench.cli.exiting import exit_now

def late():
    time.sleep(0.3)
    Path("late").write_text("yes")

threading.Thread(target=late).start()
exit_now(0)
"""
    done = python("-c", script, cwd=tmp_path)
    assert done.returncode == 0 and (tmp_path / "late").exists()


@pytest.mark.parametrize("arguments", [["list", "--no-parameters"], ["spec", "no-such-benchmark"]])
def test_a_command_prints_and_exits_as_with_a_normal_exit(arguments: list[str], tmp_path: Path) -> None:
    quick = python("-m", "clbench", *arguments, cwd=tmp_path)
    normal = python("-m", "clbench", *arguments, cwd=tmp_path, normal=True)
    assert (quick.returncode, quick.stdout, quick.stderr) == (normal.returncode, normal.stdout, normal.stderr)
    assert quick.stdout or quick.stderr


def test_under_a_profiler_the_profile_is_written(tmp_path: Path) -> None:
    done = python("-m", "cProfile", "-o", "run.prof", "-m", "clbench", "list", "--no-parameters", cwd=tmp_path)
    assert done.returncode == 0 and (tmp_path / "run.prof").stat().st_size > 0
