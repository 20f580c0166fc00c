"""`--executor ray`: each run a Ray task on a local Ray instance, with the local executor's numbers."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
import torch
from synthetic import SyntheticLoader, synthetic_loader, tiny_spec
from typer.testing import CliRunner

from clbench.cli import app
from clbench.errors import ClbenchError
from clbench.run.engine import execute
from clbench.run.plan import plan_runs
from clbench.run.ray_executor import ray_device, task_resources
from clbench.run.scheduler import RunRequest

CPU = torch.device("cpu")
SPEC = tiny_spec("mlp")
TESTS = Path(__file__).resolve().parent.parent
QUICK = ["--set", "data.max_train_samples=300", "--set", "data.max_test_samples=200",
         "--set", "training.max_epochs=1"]


@dataclass(frozen=True)
class BrokenLoader:
    def __call__(self, name: str, form: str):  # type: ignore[no-untyped-def]
        raise RuntimeError("disk on fire")


class Recorder:
    """A ScheduleListener keeping (kind, run_id, payload) of the events it gets."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, object]] = []

    def __getattr__(self, kind: str):  # type: ignore[no-untyped-def]
        def record(first, *rest):  # type: ignore[no-untyped-def]
            plan = getattr(first, "plan", first)
            self.events.append((kind, plan.run_id, rest[0] if rest else getattr(first, "status", None)))

        return record

    def of(self, kind: str, run_id: str) -> list[object]:
        return [payload for k, r, payload in self.events if k == kind and r == run_id]


def test_ray_device_and_resources() -> None:
    assert ray_device("auto", 0) == "cpu" and ray_device("auto", 4) == "cuda" and ray_device("cuda:1", 1) == "cuda"
    assert ray_device("cpu", 4) == "cpu"
    with pytest.raises(ClbenchError):
        ray_device("cuda", 0)
    assert task_resources("cuda", 0.25) == {"num_cpus": 1, "num_gpus": 0.25}
    assert task_resources("cpu", 0.25) == {"num_cpus": 1}


def test_without_ray_the_ray_executor_is_a_usage_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    result = CliRunner().invoke(app, ["train", "mnist2", "-m", "sgd", "--executor", "ray",
                                      "--results", str(tmp_path / "r")])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit)
    assert not (tmp_path / "r").exists()


@pytest.fixture(scope="module")
def ray_instance():  # type: ignore[no-untyped-def]
    """A local Ray with 2 CPUs whose workers can import this module and tests/synthetic.py."""
    ray = pytest.importorskip("ray", reason="Ray is an optional extra (pip install 'clbench[ray]'); not installed")
    path = os.pathsep.join([str(TESTS), str(Path(__file__).resolve().parent), os.environ.get("PYTHONPATH", "")])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": path, "OMP_NUM_THREADS": "1"}})
    yield ray
    ray.shutdown()


@pytest.mark.slow
def test_a_sweep_on_ray_gives_the_local_numbers_and_reports_a_failure(ray_instance, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from clbench.run.ray_executor import run_on_ray

    plans = plan_runs(SPEC, ["sgd", "ewc"], [0, 1], tmp_path / "ray")
    broken = plan_runs(SPEC, ["sgd"], [2], tmp_path / "ray")[0]
    requests = [RunRequest(plan, "cpu", SyntheticLoader()) for plan in plans] + [
        RunRequest(broken, "cpu", BrokenLoader())]
    recorder = Recorder()
    outcomes = run_on_ray(requests, recorder, device="cpu")

    assert [outcome.status for outcome in outcomes] == ["done"] * 4 + ["failed"]
    assert "disk on fire" in outcomes[-1].error
    for outcome in outcomes[:4]:
        [local] = plan_runs(SPEC, [outcome.plan.method], [outcome.plan.seed], tmp_path / "local")
        reference = execute(local, device=CPU, loader=synthetic_loader())
        numbers = [(row["accuracy"], row["loss"]) for row in reference.rows]
        assert [(row["accuracy"], row["loss"]) for row in outcome.rows] == numbers
        stored = pd.read_parquet(outcome.plan.run_dir / "accuracy.parquet")  # written by the Ray worker
        assert stored["accuracy"].tolist() == [r["accuracy"] for r in reference.rows]
        assert recorder.of("task_finished", outcome.plan.run_id) == [0, 1, 2]  # events came back through Ray
        assert recorder.of("run_launched", outcome.plan.run_id) == ["cpu"]


@pytest.mark.slow
def test_train_with_the_ray_executor_matches_the_local_one(ray_instance, tmp_path: Path, mnist_data_dir: Path,  # type: ignore[no-untyped-def]
                                                            mnist_mirror: Path) -> None:
    common = ["train", "mnist2", "-m", "sgd,ewc", "--seeds", "0", *QUICK, "--data-dir", str(mnist_data_dir),
              "--mirror", str(mnist_mirror)]
    runner = CliRunner()
    result = runner.invoke(app, [*common, "--results", str(tmp_path / "ray"), "--executor", "ray"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, [*common, "--results", str(tmp_path / "local"), "--device", "cpu"])
    assert result.exit_code == 0, result.output

    def rows(results: Path) -> pd.DataFrame:
        frames = [pd.read_parquet(path) for path in sorted(results.glob("mnist2/*/*/seed-0/accuracy.parquet"))]
        return pd.concat(frames, ignore_index=True)

    ray_rows, local_rows = rows(tmp_path / "ray"), rows(tmp_path / "local")
    # 2 runs x stages 0-2 x 2 tasks x 2 evaluations x 2 splits (test, validation)
    assert len(ray_rows) == 48 and set(ray_rows["split"]) == {"test", "validation"}
    assert ray_rows["accuracy"].tolist() == local_rows["accuracy"].tolist()
    assert ray_rows["loss"].tolist() == local_rows["loss"].tolist()
