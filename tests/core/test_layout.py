"""The package layout's promises (issue 19): the approaches table and the method folders' reporters are
torch-free; built-ins load through the table."""

from __future__ import annotations

import subprocess
import sys

import pytest

from clbench.approaches import BUILTINS, REGISTRY


def imports_torch(code: str) -> bool:
    """Whether running `code` in a fresh interpreter leaves torch in sys.modules."""
    probe = f"import sys\n{code}\nprint('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return result.stdout.strip() == "True"


def test_the_approaches_table_is_torch_free() -> None:
    assert not imports_torch("import clbench.approaches")
    assert imports_torch("from clbench.approaches import REGISTRY")


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_every_builtin_is_registered_from_its_table_line(name: str) -> None:
    module, _, qualname = BUILTINS[name].partition(":")
    cls = REGISTRY[name]
    assert cls.name == name and cls.__qualname__ == qualname and cls.__module__ == module


def test_a_method_folder_and_its_reporter_are_torch_free() -> None:
    assert not imports_torch("import clbench.approaches.hat.report")
    assert imports_torch("from clbench.approaches.hat import Hat")
