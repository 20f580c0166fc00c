"""Where specs are and what a name may be: the shipped specs' folder, finding a spec by name or path, reading its
YAML, and the rule for names that become folders (benchmarks, approaches, a spec's own data sets)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from clbench.errors import SpecError
from clbench.spec.sections import TOP_LEVEL_KEYS

if TYPE_CHECKING:
    from clbench.spec.sections import BenchmarkSpec

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
"""The rule every name that becomes a folder follows (benchmarks, approaches, a spec's own data sets): letters,
digits, `.`, `_`, `-`, starting with a letter or digit, so never `.`, `..` or a path with `/`."""
NAME_RULE = "a name uses letters, digits, '.', '_', '-' and starts with a letter or digit (not '.', '..' or a path)"


def is_valid_name(name: object) -> bool:
    """True if `name` is a string that follows `NAME_PATTERN` (safe as one folder name)."""
    return isinstance(name, str) and NAME_PATTERN.fullmatch(name) is not None


def check_name(name: object, where: str) -> str:
    """`name` if it follows the name rule, else SpecError `{where} is {name!r}: a name uses ...`."""
    if not is_valid_name(name):
        raise SpecError(f"{where} is {name!r}: {NAME_RULE}")
    return str(name)


def benchmarks_dir() -> Path:
    """The folder of shipped specs: `clbench/benchmarks/` in an installed wheel, else `benchmarks/` of the checkout.

    The repository keeps the specs at its top level; the wheel ships them as the package data `clbench.benchmarks`
    (see setup.py). A source checkout or an editable install reads them where they are.
    """
    package = Path(__file__).resolve().parents[1]  # clbench/ (this file is clbench/spec/files.py)
    installed = package / "benchmarks"
    return installed if installed.is_dir() else package.parent / "benchmarks"


def is_spec_path(name_or_path: str) -> bool:
    """True if a benchmark argument names a YAML file (by suffix, or because it exists), not a shipped spec.

    A folder that happens to share a shipped benchmark's name (`mnist2/` in the current folder) does not hide it.
    """
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.is_file():
        return True
    return path.exists() and name_or_path not in benchmark_names()


def command_argument(spec: BenchmarkSpec) -> str:
    """How a printed command names this benchmark: its name if it is a shipped spec, else its spec file (quoted)."""
    shipped = benchmarks_dir() / f"{spec.name}.yaml"
    source = Path(spec.source)
    if source.is_file() and shipped.is_file() and source.resolve() == shipped.resolve():
        return spec.name
    return shlex.quote(spec.source)


def benchmark_names() -> list[str]:
    """Names of the shipped benchmark specs."""
    return sorted(path.stem for path in benchmarks_dir().glob("*.yaml"))


def find_spec_file(name_or_path: str) -> Path:
    """A benchmark name from `benchmarks/` or a path to a YAML spec."""
    path = Path(name_or_path)
    if is_spec_path(name_or_path):
        if path.is_dir():
            raise SpecError(f"spec path {name_or_path} is a folder, not a YAML file; give the spec file in it "
                            f"(e.g. {path / 'my.yaml'})")
        if not path.is_file():
            raise SpecError(f"spec file {name_or_path} does not exist")
        return path
    candidate = benchmarks_dir() / f"{name_or_path}.yaml"
    if not candidate.is_file():
        names = ", ".join(benchmark_names())
        raise SpecError(f"unknown benchmark {name_or_path!r}; valid benchmarks: {names} (or a path to a YAML spec)")
    return candidate


def read_yaml(path: Path) -> dict[str, Any]:
    """Read a YAML mapping; syntax errors name the file and line."""
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise SpecError(f"{path}:{line} YAML syntax error: {problem}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{path}: a spec must be a YAML mapping with keys {', '.join(TOP_LEVEL_KEYS)}")
    return data

