"""A run's identity includes the code that made it: an edited plugin makes new runs and never resumes old ones.

Built-in approaches keep their config hashes (existing results stay where they are).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import torch
from clihelpers import TINY, kept_registry
from filebuilders import write_npz
from typer.testing import CliRunner

from clbench.approaches.plugins import package_sha256
from clbench.approaches.registry import ORIGINS, code_identity, load_entry_points, load_method
from clbench.cli import app
from clbench.errors import ClbenchError
from clbench.run.engine import execute
from clbench.run.plan import plan_runs
from clbench.run_files import write_run_json
from clbench.spec import load_benchmark

runner = CliRunner()
REPO = Path(__file__).resolve().parents[2]
SPEC = """\
name: mine
datasets:
  my-arrays: {format: npz, path: ./arrays.npz}
data: {kind: split, datasets: [my-arrays], classes_per_task: [2], form: mnist28}
network: {kind: mlp, hidden: [8]}
"""
PLUGIN = "import clbench.api as cl\n\n\nclass Mine(cl.Approach):\n    name = 'my-code'\n    # version {version}\n"
# config hashes of built-ins before the code identity existed (they must not move: results are stored under them)
BUILT_IN_HASHES = {("mnist2", "sgd"): "5ff51f1b4daa", ("mnist2", "hat"): "2be2cbf4e383",
                   ("pmnist", "ewc"): "ec34a5ebf5a4", ("mixture8", "hat"): "64a74e78a985",
                   ("cifar-incremental", "joint"): "17dfd5ca82f9"}


pytestmark = pytest.mark.usefixtures("restored_registry")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A spec with a tiny npz data set (one task) and a plugin file, version 1."""
    write_npz(tmp_path / "arrays.npz")
    (tmp_path / "my.yaml").write_text(SPEC)
    (tmp_path / "mine.py").write_text(PLUGIN.format(version=1))
    return tmp_path


def train(project: Path, *extra: str) -> tuple[int, str]:
    with kept_registry():
        result = runner.invoke(app, ["train", str(project / "my.yaml"), "-m", f"{project / 'mine.py'}:Mine", "--seeds",
                                     "0", "--results", str(project / "results"), "--data-dir", str(project / "data"),
                                     *TINY, *extra])
    return result.exit_code, " ".join(result.output.split())


def run_files(project: Path) -> list[Path]:
    return sorted((project / "results").glob("mine/my-code/*/seed-0/run.json"))


def test_built_in_config_hashes_are_unchanged() -> None:
    for (benchmark, method), expected in BUILT_IN_HASHES.items():
        (plan,) = plan_runs(load_benchmark(benchmark), [method], [0], Path("results"))
        assert plan.config_hash == expected and "code" not in plan.config


def test_an_edited_plugin_file_makes_new_runs(project: Path) -> None:
    assert train(project)[0] == 0
    (project / "mine.py").write_text(PLUGIN.format(version=2))
    code, output = train(project)
    assert code == 0, output
    runs = [json.loads(path.read_text()) for path in run_files(project)]
    assert len(runs) == 2 and all(run["status"] == "complete" for run in runs)
    assert len({run["config_hash"] for run in runs}) == 2
    assert {run["config"]["code"]["sha256"] for run in runs} == {run["approach_origin"]["sha256"] for run in runs}


def test_resuming_a_run_started_by_other_code_is_refused_naming_both_hashes(project: Path) -> None:
    assert train(project)[0] == 0
    (run_file,) = run_files(project)
    header = json.loads(run_file.read_text())
    now = header["config"]["code"]["sha256"]
    header["config"]["code"]["sha256"] = "ab" * 32  # as if another version of the file had started it
    write_run_json(run_file, {**header, "status": "interrupted"})  # by hand, it would be a damaged file
    (run_file.parent / "accuracy.parquet").unlink()
    code, output = train(project)
    assert code == 2, output
    assert f"started by other code (sha256 {'ab' * 6}) than now (sha256 {now[:12]})" in output
    assert "--force" in output
    assert train(project, "--force")[0] == 0
    assert json.loads(run_file.read_text())["config"]["code"]["sha256"] == now


def test_a_run_refuses_code_that_changed_since_its_command_started(project: Path) -> None:
    """A worker that imports an edited plugin file does not run it under the old identity."""
    name = load_method(f"{project / 'mine.py'}:Mine")
    (plan,) = plan_runs(load_benchmark(str(project / "my.yaml")), [name], [0], project / "results")
    ORIGINS[name] = {**ORIGINS[name], "sha256": "cd" * 32}
    planned = plan.config["code"]["sha256"][:12]
    with pytest.raises(ClbenchError, match=f"changed since this command started .sha256 {planned}, now sha256 cdcd"):
        execute(plan, device=torch.device("cpu"), loader=lambda name, form: None)  # type: ignore[arg-type,return-value]


def test_an_installed_package_is_identified_by_version_and_files(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "src"
    shutil.copytree(REPO / "examples" / "l2transfer" / "src" / "clbench_l2transfer", source / "clbench_l2transfer")
    dist_info = source / "clbench_l2transfer-0.1.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: clbench-l2transfer\nVersion: 0.1.0\n")
    (dist_info / "entry_points.txt").write_text("[clbench.approaches]\nl2transfer = clbench_l2transfer:L2Transfer\n")
    monkeypatch.syspath_prepend(str(source))
    monkeypatch.delitem(sys.modules, "clbench_l2transfer", raising=False)
    load_entry_points()
    identity = code_identity("l2transfer")
    assert identity is not None
    assert (identity["kind"], identity["distribution"], identity["version"]) == ("entry-point", "clbench-l2transfer",
                                                                                  "0.1.0")
    assert identity["sha256"] == package_sha256("clbench_l2transfer")
    spec = load_benchmark("mnist2")
    (before,) = plan_runs(spec, ["l2transfer"], [0], tmp_path / "results")
    with (source / "clbench_l2transfer" / "__init__.py").open("a") as stream:
        stream.write("\n# edited without a new version\n")
    (after,) = plan_runs(spec, ["l2transfer"], [0], tmp_path / "results")
    assert after.config_hash != before.config_hash
    monkeypatch.delitem(sys.modules, "clbench_l2transfer", raising=False)
