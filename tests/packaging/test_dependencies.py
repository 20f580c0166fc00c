"""clbench declares what it imports, and only that; its version is written once (`clbench.__version__`)."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
from pathlib import Path

import pytest

import clbench

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

REPO = Path(__file__).resolve().parents[2]
# Import names whose distribution is named otherwise; any other import name is its distribution's name.
DISTRIBUTION_OF = {"PIL": "pillow", "yaml": "pyyaml", "avalanche": "avalanche-lib"}


def normalized(name: str) -> str:
    """A distribution name as pip compares them (PEP 503): `PyYAML` -> `pyyaml`, `import_linter` -> `import-linter`."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    """`torch>=2.4` -> `torch`; `pillow>=9.1; extra == 'x'` -> `pillow`."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    assert match, requirement
    return normalized(match.group(1))


def imported_modules(package: Path) -> dict[str, set[str]]:
    """Top-level third-party modules imported anywhere in `package` (inside functions too) -> the files."""
    modules: dict[str, set[str]] = {}
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top != package.name:
                    modules.setdefault(top, set()).add(str(path.relative_to(package.parent)))
    return modules


@pytest.fixture(scope="module")
def project() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def test_every_imported_module_is_declared(project: dict) -> None:
    declared = {requirement_name(text) for text in project["dependencies"]}
    optional = {requirement_name(text) for extra in project["optional-dependencies"].values() for text in extra}
    undeclared = {module: sorted(files) for module, files in imported_modules(REPO / "clbench").items()
                  if normalized(DISTRIBUTION_OF.get(module, module)) not in declared | optional}
    assert not undeclared, f"imported but not declared in pyproject.toml: {undeclared}"


def test_every_dependency_is_imported(project: dict) -> None:
    imported = {normalized(DISTRIBUTION_OF.get(module, module)) for module in imported_modules(REPO / "clbench")}
    unused = sorted({requirement_name(text) for text in project["dependencies"]} - imported)
    assert not unused, f"declared in pyproject.toml but imported nowhere in clbench/: {unused}"


def test_the_version_is_written_once(project: dict) -> None:
    assert "version" not in project and "version" in project["dynamic"]
    dynamic = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["dynamic"]
    assert dynamic["version"] == {"attr": "clbench.__version__"}


def test_the_installed_metadata_carries_clbench_s_version() -> None:
    installed = importlib.metadata.version("clbench")
    assert installed == clbench.__version__, (f"the installed metadata says {installed}, the package "
                                              f"{clbench.__version__}: install again (pip install -e .)")


SKIPPED_WITHOUT_EXTRA = {"avalanche": "avalanche"}
"""Imported by tests that skip without it (`pytest.importorskip`): module -> the extra that installs it (issue 59:
CI does not install the avalanche extra yet)."""


def test_every_module_the_tests_import_is_declared_for_development(project: dict) -> None:
    """`pip install -e '.[dev]'` installs what the test suite imports (hypothesis for the property-based tests)."""
    tests = REPO / "tests"
    local = {path.stem for path in tests.rglob("*.py")} | {"clbench", "tests"}  # the suite's own helper modules
    declared = {requirement_name(text) for text in [*project["dependencies"], *project["optional-dependencies"]["dev"]]}
    # modules whose tests skip without them (pytest.importorskip), each declared in its own extra instead
    skipped_without = {module: extra for module, extra in SKIPPED_WITHOUT_EXTRA.items()
                       if normalized(DISTRIBUTION_OF.get(module, module)) in
                       {requirement_name(text) for text in project["optional-dependencies"][extra]}}
    assert skipped_without == SKIPPED_WITHOUT_EXTRA, "a module the tests may skip without is not in its extra"
    undeclared = {module: sorted(files) for module, files in imported_modules(tests).items()
                  if module not in local and module not in skipped_without
                  and normalized(DISTRIBUTION_OF.get(module, module)) not in declared}
    assert not undeclared, f"imported by the tests but not in the dependencies or the dev extra: {undeclared}"
