"""Plugins: the public API, `--method file.py:Class` / `package.module:Class`, entry points, provenance, errors,
worker processes. The example package examples/l2transfer is run through the CLI as an installed plugin."""

from __future__ import annotations

import hashlib
import json
import pickle
import sys
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

import clbench.api
from clbench.approaches.registry import ORIGINS, REGISTRY, approach_names
from clbench.approaches.resolution import resolve
from clbench.cli import app
from clbench.spec import load_benchmark

runner = CliRunner()
REPO = Path(__file__).resolve().parents[2]
PLUGIN_FILE = "tests/plugins/my_plugin.py"
EXAMPLE_SRC = REPO / "examples" / "l2transfer" / "src"
TINY = ["--set", "data.max_train_samples=200", "--set", "data.max_test_samples=100", "--set",
        "training.max_epochs=1", "--set", "network.hidden=[16]", "--device", "cpu"]


@pytest.fixture(autouse=True)
def restored_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts from the built-in registry and runs in the repository root (relative plugin paths)."""
    monkeypatch.chdir(REPO)
    registry, origins = dict(REGISTRY), dict(ORIGINS)
    yield
    REGISTRY.clear()
    REGISTRY.update(registry)
    ORIGINS.clear()
    ORIGINS.update(origins)


@pytest.fixture
def installed_l2transfer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """examples/l2transfer as if pip-installed: its src on sys.path and a dist-info with its entry point."""
    site = tmp_path / "site"
    dist_info = site / "clbench_l2transfer-0.1.0.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: clbench-l2transfer\nVersion: 0.1.0\n")
    entry_points = (REPO / "examples/l2transfer/pyproject.toml").read_text().split(
        '[project.entry-points."clbench.approaches"]\n')[1].split("\n\n")[0]
    (dist_info / "entry_points.txt").write_text(f"[clbench.approaches]\n{entry_points.replace(chr(34), '')}\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.syspath_prepend(str(EXAMPLE_SRC))
    return site


def data_options(data_dir: Path, mirror: Path, results: Path) -> list[str]:
    return ["--data-dir", str(data_dir), "--mirror", str(mirror), "--results", str(results)]


def run_json(results: Path, method: str) -> dict:
    (path,) = results.glob(f"mnist2/{method}/*/seed-0/run.json")
    return json.loads(path.read_text())


def test_every_public_name_exists_and_a_plugin_needs_only_the_api() -> None:
    missing = [name for name in clbench.api.__all__ if not hasattr(clbench.api, name)]
    assert not missing
    assert len(set(clbench.api.__all__)) == len(clbench.api.__all__)
    source = (REPO / PLUGIN_FILE).read_text()
    clbench_imports = [line for line in source.splitlines() if "clbench" in line and "import" in line]
    assert clbench_imports == ["import clbench.api as cl"]


def test_api_toy_tasks_are_learnable_and_body_parameters_exclude_heads() -> None:
    tasks = clbench.api.toy_tasks(n_tasks=2, n_classes=2, n_samples=32)
    assert tasks.head_sizes == (2, 2) and tasks.input_shape == (16,)
    batch = tasks[1].train.batch(slice(0, 32))
    assert batch.inputs.shape == (32, 16) and batch.task == 1
    context = clbench.api.toy_context(tasks)
    approach = clbench.api.Approach(context, clbench.api.Hyperparameters())
    names = [name for name, _ in clbench.api.named_body_parameters(approach.multihead)]
    assert names == ["layers.0.weight", "layers.0.bias"]


def test_file_plugin_trains_with_validated_hyperparameters_and_records_its_origin(
        tmp_path: Path, mnist_data_dir: Path, mnist_mirror: Path) -> None:
    results = tmp_path / "results"
    result = runner.invoke(app, ["train", "mnist2", "-m", f"{PLUGIN_FILE}:MyApproach", "--set",
                                 "my-plugin.strength=0.01", *TINY, *data_options(mnist_data_dir, mnist_mirror,
                                                                                  results)])
    assert result.exit_code == 0, result.output
    header = run_json(results, "my-plugin")
    sha256 = hashlib.sha256((REPO / PLUGIN_FILE).read_bytes()).hexdigest()
    assert header["method"] == "my-plugin"
    assert header["config"]["hyperparameters"]["strength"] == 0.01
    assert header["approach_origin"]["kind"] == "file"
    assert header["approach_origin"]["path"] == str(REPO / PLUGIN_FILE)
    assert header["approach_origin"]["sha256"] == sha256
    (parquet,) = results.glob("mnist2/my-plugin/*/seed-0/accuracy.parquet")
    rows = pd.read_parquet(parquet)
    # stages 0-2 x 2 tasks x 2 evaluations x test and validation
    assert len(rows) == 3 * 2 * 2 * 2 and set(rows["method"]) == {"my-plugin"}
    assert {json.loads(origin)["sha256"] for origin in rows["approach_origin"]} == {sha256}

    again = runner.invoke(app, ["evaluate", "mnist2", "-m", f"{PLUGIN_FILE}:MyApproach", "--set",
                                "my-plugin.strength=0.01", *TINY, *data_options(mnist_data_dir, mnist_mirror,
                                                                                 results)])
    assert again.exit_code == 0, again.output
    (evaluation,) = results.glob("mnist2/my-plugin/*/seed-0/evaluation.parquet")
    assert list(pd.read_parquet(evaluation)["accuracy"]) == list(rows["accuracy"])


def test_plugin_hyperparameters_are_checked_against_its_dataclass(tmp_path: Path) -> None:
    result = runner.invoke(app, ["train", "mnist2", "-m", f"{PLUGIN_FILE}:MyApproach", "--set",
                                 "my-plugin.strength=-1", "--results", str(tmp_path)])
    assert result.exit_code == 2
    assert "strength" in result.output


def test_module_form_and_builtin_provenance() -> None:
    sys.path.insert(0, str(REPO / "tests" / "plugins"))
    try:
        result = runner.invoke(app, ["list", "-b", "mnist2", "--no-parameters", "-m", "my_plugin:MyApproach"])
    finally:
        sys.path.remove(str(REPO / "tests" / "plugins"))
    assert result.exit_code == 0, result.output
    assert "my-plugin" in approach_names()
    assert ORIGINS["my-plugin"]["kind"] == "module" and ORIGINS["my-plugin"]["module"] == "my_plugin"
    from clbench.approaches.registry import origin_of

    assert origin_of("hat") == {"kind": "built-in", "module": "clbench.approaches.hat"}


@pytest.mark.parametrize(("method", "expected"), [
    ("tests/plugins/missing.py:MyApproach", "missing.py does not exist"),
    (f"{PLUGIN_FILE}:Missing", "has no class 'Missing'"),
    (f"{PLUGIN_FILE}:NotAnApproach", "is not a subclass of clbench.api.Approach"),
    ("no_such_module_xyz:Thing", "module 'no_such_module_xyz' is not importable"),
    (f"{PLUGIN_FILE}:", "use path/to/file.py:ClassName"),
])
def test_a_bad_method_spec_is_a_clear_error(method: str, expected: str, tmp_path: Path) -> None:
    result = runner.invoke(app, ["train", "mnist2", "-m", method, "--results", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert expected in " ".join(result.output.split())


def test_a_name_clash_names_both_origins(tmp_path: Path) -> None:
    result = runner.invoke(app, ["train", "mnist2", "-m", f"{PLUGIN_FILE}:ClashingSGD", "--results", str(tmp_path)])
    assert result.exit_code == 2
    message = " ".join(result.output.split())
    assert "'sgd' is taken twice" in message and "clbench.approaches.sgd" in message and "my_plugin.py" in message

    other = tmp_path / "other_plugin.py"
    other.write_text("import clbench.api as cl\n\n\nclass Other(cl.Approach):\n    name = 'my-plugin'\n")
    result = runner.invoke(app, ["list", "-b", "mnist2", "--no-parameters", "-m",
                                 f"{PLUGIN_FILE}:MyApproach,{other}:Other"])
    assert result.exit_code == 2
    message = " ".join(result.output.replace("\n", "").split())
    assert "'my-plugin' is taken twice" in message and "my_plugin.py" in message and "other_plugin.py" in message


def test_entry_point_plugin_is_listed_and_trains(installed_l2transfer: Path, tmp_path: Path, mnist_data_dir: Path,
                                                 mnist_mirror: Path) -> None:
    listed = runner.invoke(app, ["list", "-b", "mnist2", "--no-parameters"], env={"COLUMNS": "200"})
    assert listed.exit_code == 0, listed.output
    assert "l2transfer" in listed.output and "clbench-l2transfer 0.1.0" in listed.output
    assert "l2transfer" in approach_names()
    results = tmp_path / "results"
    result = runner.invoke(app, ["train", "mnist2", "-m", "l2transfer", "--set", "l2transfer.lamb=0.5", *TINY,
                                 *data_options(mnist_data_dir, mnist_mirror, results)])
    assert result.exit_code == 0, result.output
    header = run_json(results, "l2transfer")
    assert header["config"]["hyperparameters"]["lamb"] == 0.5
    assert header["approach_origin"]["kind"] == "entry-point"
    assert (header["approach_origin"]["distribution"], header["approach_origin"]["version"]) == (
        "clbench-l2transfer", "0.1.0")
    rows = pd.read_parquet(next(results.glob("mnist2/l2transfer/*/seed-0/accuracy.parquet")))
    # stages 0-2 x 2 tasks x 2 evaluations x test and validation
    assert rows["accuracy"].notna().all() and len(rows) == 3 * 2 * 2 * 2


def test_entry_point_plugin_section_in_a_spec_is_validated(installed_l2transfer: Path) -> None:
    spec = load_benchmark("mnist2", ["l2transfer.lamb=0.25"])
    assert resolve(spec, "l2transfer").hyperparameters.lamb == 0.25  # type: ignore[attr-defined]


def test_a_resolved_plugin_unpickles_in_a_process_that_never_loaded_it() -> None:
    from clbench.approaches.registry import load_method

    name = load_method(f"{PLUGIN_FILE}:MyApproach")
    resolved = resolve(load_benchmark("mnist2", ["my-plugin.strength=0.5"]), name)
    data = pickle.dumps(resolved)
    del REGISTRY[name], ORIGINS[name]
    for module in [module for module in sys.modules if module.startswith("clbench_plugin_file_my_plugin")]:
        del sys.modules[module]
    restored = pickle.loads(data)
    assert restored.name == "my-plugin" and restored.hyperparameters.strength == 0.5
    assert REGISTRY["my-plugin"] is restored.cls and ORIGINS["my-plugin"]["kind"] == "file"



def plugin_modules(stem: str) -> list[str]:
    """The modules a plugin file `<stem>.py` left in sys.modules."""
    return [module for module in sys.modules if module.startswith(f"clbench_plugin_file_{stem}_")]


def test_a_plugin_file_edited_and_loaded_again_gives_the_new_class(tmp_path: Path) -> None:
    from clbench.approaches.registry import load_method

    path = tmp_path / "edited_plugin.py"
    source = "import clbench.api as cl\n\n\nclass Edited(cl.Approach):\n    name = 'edited'\n    summary = '{}'\n"
    try:
        path.write_text(source.format("first version"))
        assert load_method(f"{path}:Edited") == "edited" and REGISTRY["edited"].summary == "first version"
        del REGISTRY["edited"], ORIGINS["edited"]
        path.write_text(source.format("second version"))
        assert load_method(f"{path}:Edited") == "edited"
        assert REGISTRY["edited"].summary == "second version"
        assert ORIGINS["edited"]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
        assert len(plugin_modules("edited_plugin")) == 2  # one module per content
    finally:
        for module in plugin_modules("edited_plugin"):
            del sys.modules[module]


@pytest.mark.parametrize(("body", "error"), [
    ("class Broken(cl.Approach):\n    name = 'broken'\n\n\nraise RuntimeError('boom')\n",
     "importing {path} failed (RuntimeError: boom)"),
    ("@cl.register\nclass Broken(cl.Approach):\n    name = 'sgd'\n", "approach name 'sgd' is taken twice"),
], ids=["exception", "spec-error"])
def test_a_plugin_whose_import_raises_raises_again_and_leaves_no_module(tmp_path: Path, body: str,
                                                                          error: str) -> None:
    from clbench.approaches.registry import load_method
    from clbench.errors import SpecError

    path = tmp_path / "broken_plugin.py"
    path.write_text(f"import clbench.api as cl\n\n\n{body}")
    for _ in range(2):  # the second load imports the file again: it fails the same way, not half-imported
        with pytest.raises(SpecError) as raised:
            load_method(f"{path}:Broken")
        assert error.format(path=path) in str(raised.value)
        assert plugin_modules("broken_plugin") == []
    assert "broken" not in REGISTRY

@pytest.mark.slow  # ~25 s on 2 cores: two spawned workers import torch and re-import the plugins
def test_plugins_run_in_spawned_worker_processes(installed_l2transfer: Path, tmp_path: Path, mnist_data_dir: Path,
                                                 mnist_mirror: Path) -> None:
    results = tmp_path / "results"
    result = runner.invoke(app, ["train", "mnist2", "-m", f"{PLUGIN_FILE}:MyApproach,l2transfer", "--jobs", "2",
                                 *TINY, *data_options(mnist_data_dir, mnist_mirror, results)])
    assert result.exit_code == 0, result.output
    assert run_json(results, "my-plugin")["approach_origin"]["kind"] == "file"
    assert run_json(results, "l2transfer")["approach_origin"]["kind"] == "entry-point"


def test_bench_measures_a_plugin(tmp_path: Path) -> None:
    result = runner.invoke(app, ["bench", "mnist2", "-m", f"{PLUGIN_FILE}:MyApproach", "--batches", "1", "--epoch",
                                 "extrapolate", "--device", "cpu", "--set", "network.hidden=[16]",
                                 "--data-dir", str(tmp_path / "data"), "--results", str(tmp_path)])
    assert result.exit_code == 0, result.output
    (stored,) = (tmp_path / "_bench").glob("*.parquet")
    assert set(pd.read_parquet(stored)["method"]) == {"my-plugin"}


@pytest.mark.slow  # runs pip (offline: --no-deps --no-build-isolation)
def test_pip_installed_example_registers_through_its_entry_point(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target",
                    str(target), str(REPO / "examples" / "l2transfer")], check=True, cwd=tmp_path)
    monkeypatch.syspath_prepend(str(target))
    assert "l2transfer" in approach_names()
    assert ORIGINS["l2transfer"]["distribution"] == "clbench-l2transfer"
    assert ORIGINS["l2transfer"]["module"] == "clbench_l2transfer"


def test_the_documented_plugin_loads_and_validates_its_hyperparameters(tmp_path: Path) -> None:
    readme = (REPO / "docs" / "plugins.md").read_text().split("## Benchmark your own method")[1]
    source = readme.split("```python\n")[1].split("```")[0]
    (tmp_path / "my_method.py").write_text(source)
    listed = runner.invoke(app, ["list", "-b", "mnist2", "--no-parameters", "-m",
                                 f"{tmp_path / 'my_method.py'}:MyMethod"])
    assert listed.exit_code == 0, listed.output
    assert REGISTRY["my-method"].hyperparameters_class().lamb == 0.001  # type: ignore[attr-defined]
    spec = load_benchmark("mnist2", ["my-method.lamb=0.5"])
    assert resolve(spec, "my-method").hyperparameters.lamb == 0.5  # type: ignore[attr-defined]
    bad = runner.invoke(app, ["train", "mnist2", "-m", f"{tmp_path / 'my_method.py'}:MyMethod", "--set",
                              "my-method.lamb=-1", "--results", str(tmp_path)])
    assert bad.exit_code == 2 and "lamb" in bad.output


def test_the_example_packages_own_tests_pass() -> None:
    """examples/l2transfer ships its own tests (penalty by hand, a tiny run); they run here against this clbench."""
    import os
    import subprocess
    import sys

    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(EXAMPLE_SRC), str(REPO)]),
                   "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             str(REPO / "examples" / "l2transfer" / "tests")],
                            capture_output=True, text=True, env=environment, cwd=REPO, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert " passed" in result.stdout and "failed" not in result.stdout


def test_experience_replay_written_against_the_public_api_alone_runs_in_the_class_scenario(
        tmp_path: Path, mnist_data_dir: Path, mnist_mirror: Path) -> None:
    source = (REPO / "examples" / "my_replay.py").read_text()
    imports = {line.split()[1] for line in source.splitlines() if line.startswith(("import ", "from "))}
    assert {name for name in imports if name.startswith("clbench")} == {"clbench.api"}
    results = tmp_path / "results"
    result = runner.invoke(app, ["train", "mnist5", "-m", "examples/my_replay.py:MyReplay", "--set",
                                 "my-replay.buffer_size=30", "--set", "data.scenario=class", *TINY,
                                 *data_options(mnist_data_dir, mnist_mirror, results)])
    assert result.exit_code == 0, result.output
    rows = pd.read_parquet(next(results.glob("mnist5/my-replay/*/seed-0/accuracy.parquet")))
    assert set(rows["evaluation"]) == {"task-aware", "task-agnostic"} and set(rows["scenario"]) == {"class"}
    assert set(rows.loc[rows["stage"] >= 1, "memory_samples"]) == {30}
    assert set(rows.loc[rows["stage"] >= 1, "memory_bytes"]) == {30 * (28 * 28 + 8 + 8)}
