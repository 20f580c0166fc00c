"""The wheel ships the specs: an installed clbench (not the checkout) lists and loads every shipped benchmark."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
IGNORED = shutil.ignore_patterns(".git", ".venv", "results", "build", "dist", "*.egg-info", "__pycache__",
                                 ".pytest_cache", ".ruff_cache", ".ci-cache", ".whl")


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the checkout (plus a probe data file) built into a wheel and installed into a bare folder."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "source"
    shutil.copytree(REPO, source, ignore=IGNORED)
    (source / "clbench" / "probe-data.json").write_text('{"probe": 1}')
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
                    "-w", str(root / "dist"), str(source)], check=True, cwd=root, capture_output=True)
    [wheel] = (root / "dist").glob("clbench-*.whl")
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--target",
                    str(root / "target"), str(wheel)], check=True, cwd=root, capture_output=True)
    return root / "target"


def run_installed(target: Path, *arguments: str) -> str:
    """Run python with only the installed target on the path, from a folder that holds no benchmarks."""
    env = {**os.environ, "PYTHONPATH": str(target), "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, *arguments], cwd=target.parent, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_installed_wheel_holds_the_shipped_specs_and_package_data(installed: Path) -> None:
    shipped = sorted(path.name for path in (REPO / "benchmarks").glob("*.yaml"))
    assert sorted(path.name for path in (installed / "clbench" / "benchmarks").glob("*.yaml")) == shipped
    assert json.loads((installed / "clbench" / "probe-data.json").read_text()) == {"probe": 1}
    [wheel] = (installed.parent / "dist").glob("*.whl")
    assert not [name for name in zipfile.ZipFile(wheel).namelist() if name.startswith("benchmarks/")]


def test_installed_clbench_loads_every_shipped_spec(installed: Path) -> None:
    code = ("import json, clbench.spec as s; "
            "print(json.dumps([s.__file__, str(s.benchmarks_dir()), "
            "{n: s.load_benchmark(n).name for n in s.benchmark_names()}]))")
    module, folder, loaded = json.loads(run_installed(installed, "-c", code))
    assert Path(module).is_relative_to(installed) and Path(folder) == installed / "clbench" / "benchmarks"
    shipped = sorted(path.stem for path in (REPO / "benchmarks").glob("*.yaml"))
    assert sorted(loaded) == shipped and all(name == loaded[name] for name in loaded)


def test_installed_clbench_list_shows_the_shipped_benchmarks(installed: Path) -> None:
    output = run_installed(installed, "-m", "clbench", "list", "--no-parameters")
    for name in sorted(path.stem for path in (REPO / "benchmarks").glob("*.yaml")):
        assert f"│ {name} " in output, output


def test_installed_metadata_has_the_package_s_version_and_declares_pillow(installed: Path) -> None:
    code = ("import json, importlib.metadata as m, clbench; "
            "print(json.dumps([clbench.__file__, m.version('clbench'), clbench.__version__, m.requires('clbench')]))")
    module, version, package_version, requires = json.loads(run_installed(installed, "-c", code))
    assert Path(module).is_relative_to(installed)
    assert version == package_version == _version_in_source()
    names = {requirement.split(";")[0].split(">")[0].split("=")[0].strip().lower() for requirement in requires}
    assert "pillow" in names and "torchvision" not in names  # PIL is imported (data.custom); torchvision is not


def _version_in_source() -> str:
    """`__version__` as written in the checkout's clbench/__init__.py."""
    [line] = [line for line in (REPO / "clbench" / "__init__.py").read_text().splitlines()
              if line.startswith("__version__ = ")]
    return line.split("=", 1)[1].strip().strip("\"'")
