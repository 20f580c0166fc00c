"""clbench declares what it imports, and only that; its version is written once (`clbench.__version__`)."""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import os
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
"""Imported by tests that skip without it (`pytest.importorskip`): module -> the extra that installs it. CI installs
each of these extras, so there their tests run (the two tests below)."""
CI_SCRIPT = REPO / ".ci" / "run"


def installed_extras(script: str) -> set[str]:
    """The extras that a CI script's `pip install ... -e '.[a,b]'` lines install, e.g. {"dev", "avalanche"}."""
    extras: set[str] = set()
    for line in script.splitlines():
        if line.lstrip().startswith("#") or "pip install" not in line:
            continue
        for group in re.findall(r"-e\s+['\"]?\.\[([^\]]*)\]", line):
            extras.update(name.strip() for name in group.split(",") if name.strip())
    return extras


def test_installed_extras_reads_every_install_line() -> None:
    script = ("# pip install -e '.[commented]'\n.venv/bin/pip install --quiet -e '.[dev]'\n"
              "pip install -e \".[ray, avalanche]\" && echo\npython -m build .[wheel]\n")
    assert installed_extras(script) == {"dev", "ray", "avalanche"}


def test_ci_installs_the_extras_the_tests_skip_without() -> None:
    """CI's script installs every extra whose tests would otherwise skip (issue 59: the av-* tests run in CI)."""
    missing = set(SKIPPED_WITHOUT_EXTRA.values()) - installed_extras(CI_SCRIPT.read_text())
    assert not missing, f".ci/run does not install the extra(s) {sorted(missing)}: their tests would skip in CI"


@pytest.mark.skipif(os.environ.get("CI") != "true", reason="outside CI an extra may be absent (its tests skip)")
def test_under_ci_no_test_skips_for_want_of_an_extra() -> None:
    """In CI (CI=true, which .ci/run exports) every module the tests skip without is importable, so the skip cannot
    silently return: a CI that lost the extra fails here instead of passing with the av-* tests skipped."""
    absent = {module: extra for module, extra in SKIPPED_WITHOUT_EXTRA.items()
              if importlib.util.find_spec(module) is None}
    extras = ",".join(sorted(set(absent.values())))
    assert not absent, f"CI=true but not installed: {sorted(absent)}: pip install -e '.[{extras}]'"


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
