"""What code leaves imported when it runs in a fresh interpreter: the promise that the CLI's help, fetch and report
never import torch (seconds of start-up), checked where nothing this test process already imported can hide it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

TESTS = Path(__file__).resolve().parent
TORCH = ("torch", "torchvision")


def loaded_modules(code: str, packages: Iterable[str], *, tests_on_path: bool = False,
                   timeout: float = 300) -> list[str]:
    """Run `code` in a fresh interpreter (it must exit 0) and return, sorted, the modules it left in sys.modules
    that are one of `packages` or inside one; `tests_on_path`: the code may import the tests' helpers."""
    names = sorted(packages)
    probe = (f"{code}\nimport json as _json, sys as _sys\n"
             f"print(_json.dumps(sorted(m for m in _sys.modules if any(m == p or m.startswith(p + '.') "
             f"for p in {names!r}))))\n")
    environment = dict(os.environ)
    if tests_on_path:  # keeps a caller's PYTHONPATH (the clbench under test) after the tests folder
        environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=timeout,
                            env=environment)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def assert_imports_no_torch(code: str, *, also: Iterable[str] = ()) -> None:
    """`code`, run in a fresh interpreter, succeeds and leaves neither torch nor torchvision (nor any of `also`,
    e.g. numpy) imported."""
    assert loaded_modules(code, (*TORCH, *also)) == []


def cli_code(*commands: Sequence[str]) -> str:
    """Code that runs each `clbench` command (its arguments) through Typer's runner and checks that it exits 0."""
    return ("from typer.testing import CliRunner\nfrom clbench.cli import app\n"
            f"for _arguments in {[list(command) for command in commands]!r}:\n"
            "    _result = CliRunner().invoke(app, _arguments)\n"
            "    assert _result.exit_code == 0, (_arguments, _result.output)\n")
