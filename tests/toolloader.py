"""Importing a script of `tools/` (not a package) in a test: `load_tool("speed")` is `tools/speed.py` as a module."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

TOOLS = Path(__file__).resolve().parents[1] / "tools"


def load_tool(name: str) -> ModuleType:
    """`tools/<name>.py` imported as the module `clbench_tool_<name>`, registered in `sys.modules` (its dataclasses
    look their module up there); `tools/` is on the import path, as it is for the script run by itself (a tool may
    import a sibling, e.g. `side_by_side_common`)."""
    if str(TOOLS) not in sys.path:
        sys.path.append(str(TOOLS))
    spec = importlib.util.spec_from_file_location(f"clbench_tool_{name}", TOOLS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
