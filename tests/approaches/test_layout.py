"""The package layout's promises: the approaches table and the method folders' reporters are
torch-free; built-ins load through the table."""

from __future__ import annotations

import pytest
from importchecks import assert_imports_no_torch, loaded_modules

from clbench.approaches import BUILTINS
from clbench.approaches.registry import REGISTRY


def test_the_approaches_table_is_torch_free() -> None:
    assert_imports_no_torch("import clbench.approaches")
    assert "torch" in loaded_modules("from clbench.approaches.registry import REGISTRY", ["torch"])


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_every_builtin_is_registered_from_its_table_line(name: str) -> None:
    module, _, qualname = BUILTINS[name].partition(":")
    cls = REGISTRY[name]
    assert cls.name == name and cls.__qualname__ == qualname and cls.__module__ == module


def test_a_builtin_records_the_module_its_stored_runs_name() -> None:
    """run.json's `approach_origin` of a method folder names the folder (every stored run of it does), of a
    one-file method its module."""
    from clbench.approaches.registry import origin_of

    expected = {"hat": "clbench.approaches.hat", "packnet": "clbench.approaches.packnet",
                "pathnet": "clbench.approaches.pathnet", "pnn": "clbench.approaches.pnn",
                "er": "clbench.approaches.replay.er", "sgd": "clbench.approaches.sgd",
                "supsup": "clbench.approaches.supsup"}
    assert {name: origin_of(name) for name in expected} == {
        name: {"kind": "built-in", "module": module} for name, module in expected.items()}


def test_a_method_folder_and_its_reporter_are_torch_free() -> None:
    assert_imports_no_torch("import clbench.approaches.hat.report")
    assert "torch" in loaded_modules("from clbench.approaches.hat.approach import Hat", ["torch"])


def builtin_reporters() -> dict[str, str]:
    """Reporter module -> the built-in method names that declare a reporter in it."""
    modules: dict[str, str] = {}
    for name in sorted(BUILTINS):
        declared = REGISTRY[name].monitoring_reporter
        if declared:
            modules.setdefault(declared.partition(":")[0], name)
    return modules


def test_builtins_declare_reporters_in_their_folders() -> None:
    assert sorted(builtin_reporters()) == ["clbench.approaches.gpm.report", "clbench.approaches.hat.report",
                                           "clbench.approaches.importance.report",
                                           "clbench.approaches.packnet.report", "clbench.approaches.supsup.report",
                                           "clbench.approaches.wsn.report"]


@pytest.mark.parametrize("module", sorted(builtin_reporters()))
def test_a_builtin_reporter_is_torch_free_and_uses_only_the_api(module: str) -> None:
    """A built-in reporter is an example a plugin author can copy: every clbench name it imports is one that
    `clbench.api` exports (the same object), imported from the torch-free `clbench.report`."""
    import ast
    import importlib

    import clbench.api

    assert_imports_no_torch(f"import {module}")
    source = importlib.import_module(module)
    exported = {id(getattr(clbench.api, name)) for name in clbench.api.__all__}
    tree = ast.parse(open(source.__file__).read())
    imported = [(node.module, alias.name) for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                and (node.module or "").startswith("clbench") for alias in node.names]
    outside = [(where, name) for where, name in imported
               if where != "clbench.approaches.hat" and id(getattr(source, name, None)) not in exported]
    assert outside == []
    assert {where for where, _ in imported} <= {"clbench.report", "clbench.approaches.hat"}


def test_one_module_owns_registration() -> None:
    """The table of approaches, its origins and `register` are defined in `clbench.approaches.registry`: no other
    module under `clbench/approaches/` names them, except to read `REGISTRY` (plugins.py finds classes, the
    registry registers them; resolution.py reads the table)."""
    import ast
    from pathlib import Path

    import clbench.approaches.registry as registry

    owned = {"ORIGINS", "register", "register_plugin", "describe_origin", "DuplicateApproachError"}
    root = Path(registry.__file__).parent
    users = []
    for path in sorted(root.rglob("*.py")):
        if path.name == "registry.py" or path == root / "__init__.py":  # __init__: the lazy name -> module table
            continue
        nodes = list(ast.walk(ast.parse(path.read_text())))
        names = {node.id for node in nodes if isinstance(node, ast.Name)}
        names |= {node.name for node in nodes if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
        names |= {alias.name for node in nodes if isinstance(node, ast.ImportFrom) for alias in node.names}
        writes = [node for node in nodes if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store)
                  and isinstance(node.value, ast.Name) and node.value.id == "REGISTRY"]
        writes += [node for node in nodes if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                   and node.value.id == "REGISTRY" and node.attr in ("update", "setdefault", "pop", "clear")]
        if names & owned or writes:
            users.append((path.relative_to(root).as_posix(), sorted(names & owned), len(writes)))
    assert users == []
    assert all(hasattr(registry, name) for name in [*owned, "REGISTRY"])
