"""Shell completion of `--set` approach keys (issue 58, item 7): every built-in approach's hyper-parameters and its
own `training.` section complete, read from the source files without importing torch."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clbench.approaches import BUILTINS
from clbench.cli import completion

REPO = Path(__file__).resolve().parents[2]


class Context:
    """The part of a Click context a completion function reads."""

    def __init__(self, **params: object) -> None:
        self.params = params


@pytest.mark.parametrize("method", sorted(BUILTINS))
def test_completion_reads_each_approach_s_hyperparameters_as_its_class_declares_them(method: str) -> None:
    from clbench.approaches.registry import lookup

    declared = [field.name for field in dataclasses.fields(lookup(method).hyperparameters_class)]
    assert completion.approach_fields(method) == declared
    keys = completion.set_keys(Context(benchmark="mnist5"), f"{method}.")  # type: ignore[arg-type]
    assert {f"{method}.{name}=" for name in declared} <= set(keys)
    assert f"{method}.training.lr=" in keys and all(key.startswith(f"{method}.") for key in keys)


def test_the_keys_the_issue_found_missing_complete() -> None:
    def keys(text: str) -> list[str]:
        return completion.set_keys(Context(benchmark="mnist5"), text)  # type: ignore[arg-type]

    assert "bic.lamb=" in keys("bic.") and "hat.smax=" in keys("hat.") and keys("hat.sm") == ["hat.smax="]
    assert "wsn.c=" in keys("wsn.") and "wsn.training.momentum=" in keys("wsn.training.m")
    assert "wsn.training=" not in keys("wsn.")  # a section, not a value


COMPLETE = """
import atexit, sys
atexit.register(lambda: sys.stderr.write(repr(sorted(m for m in sys.modules if m.split(".")[0] in
                                                     ("torch", "numpy", "pandas")))))
from clbench.cli import app
app(prog_name="clbench")
"""


def test_approach_keys_complete_without_torch() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "_CLBENCH_COMPLETE": "complete_bash",
           "COMP_WORDS": "clbench train mnist5 --set hat.sm", "COMP_CWORD": "4"}
    done = subprocess.run([sys.executable, "-c", COMPLETE], capture_output=True, text=True, env=env, timeout=120)
    assert done.stdout.split() == ["hat.smax="] and done.stderr.endswith("[]"), done.stderr
