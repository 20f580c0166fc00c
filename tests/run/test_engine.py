"""The engine end to end on synthetic data: results schema, seeding contract, skipping, checkpoints."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
import torch
from runhelpers import run
from synthetic import synthetic_loader, tiny_spec

from clbench.errors import ResultsError
from clbench.report.loading import load_results
from clbench.results import COLUMNS, SCHEMA_VERSION, RunStatus, read_run_file, write_json
from clbench.run.checkpoints import load_checkpoint
from clbench.run.engine import execute
from clbench.run.evaluate import reevaluate
from clbench.run.plan import plan_runs
from clbench.run_files import write_run_parquet

CPU = torch.device("cpu")


def test_run_statuses_are_stored_as_their_plain_strings(tmp_path: Path) -> None:
    """run.json and the outcomes hold these strings (older results folders too, and `report`'s notes name them):
    a status is written, formatted and compared as its value."""
    assert {status.name: status.value for status in RunStatus} == {
        "RUNNING": "running", "COMPLETE": "complete", "DONE": "done", "SKIPPED": "skipped", "LOCKED": "locked",
        "FAILED": "failed", "INTERRUPTED": "interrupted"}
    write_json(tmp_path / "run.json", {"status": RunStatus.INTERRUPTED})
    assert (tmp_path / "run.json").read_text() == '{\n  "status": "interrupted"\n}\n'
    assert f"{RunStatus.LOCKED}: {RunStatus.DONE!s}" == "locked: done" and RunStatus.FAILED == "failed"


def test_accuracy_parquet_schema_and_provenance(tmp_path: Path) -> None:
    outcome = run(tmp_path)
    frame = pd.read_parquet(outcome.plan.run_dir / "accuracy.parquet")
    assert list(frame.columns) == COLUMNS
    # every task at every stage (0: at initialisation), in both evaluations, on the test and validation splits
    whole = [(stage, task, evaluation, split) for stage in range(4) for task in (1, 2, 3)
             for evaluation in ("task-agnostic", "task-aware") for split in ("test", "validation")]
    assert sorted(zip(frame["stage"], frame["task"], frame["evaluation"], frame["split"])) == whole
    assert (frame["scenario"] == "task").all()
    assert frame["accuracy"].between(0, 1).all() and frame["loss"].notna().all()
    assert (frame["schema_version"] == SCHEMA_VERSION).all() and (frame["method"] == "sgd").all()
    assert frame["torch_version"].iloc[0] == torch.__version__ and frame["device"].iloc[0] == "cpu"
    assert frame["started_utc"].notna().all() and frame["finished_utc"].notna().all()
    trained, initial = frame[frame["stage"] >= 1], frame[frame["stage"] == 0]
    assert (trained["stage_epochs"] >= 1).all() and (trained["stage_train_seconds"] > 0).all()
    assert initial["stage_epochs"].isna().all() and initial["stage_train_seconds"].isna().all()
    info = read_run_file(outcome.plan.run_dir)
    assert info["status"] == "complete" and info["config_hash"] == frame["config_hash"].iloc[0]
    assert info["config"]["training"]["lr"] == 0.05
    assert not list(outcome.plan.run_dir.rglob("*.tmp"))


def test_seeding_contract_same_seed_same_numbers(tmp_path: Path) -> None:
    first = run(tmp_path / "a", seed=3)
    second = run(tmp_path / "b", seed=3)
    other = run(tmp_path / "c", seed=4)
    accuracies = [[row["accuracy"] for row in outcome.rows] for outcome in (first, second, other)]
    losses = [[row["loss"] for row in outcome.rows] for outcome in (first, second, other)]
    assert accuracies[0] == accuracies[1] and losses[0] == losses[1]
    assert losses[0] != losses[2]


def test_seeding_contract_holds_for_the_conv_net(tmp_path: Path) -> None:
    first = run(tmp_path / "a", network="alexnet", method="sgd")
    second = run(tmp_path / "b", network="alexnet", method="sgd")
    assert [r["loss"] for r in first.rows] == [r["loss"] for r in second.rows]


def test_finished_runs_are_skipped_unless_forced(tmp_path: Path) -> None:
    first = run(tmp_path)
    stamp = (first.plan.run_dir / "accuracy.parquet").stat().st_mtime_ns
    assert run(tmp_path).status == "skipped"
    assert (first.plan.run_dir / "accuracy.parquet").stat().st_mtime_ns == stamp
    assert run(tmp_path, force=True).status == "done"


def test_failed_run_is_recorded_and_left_out(tmp_path: Path) -> None:
    spec = tiny_spec("mlp")
    [plan] = plan_runs(spec, ["sgd"], [0], tmp_path)

    def broken_loader(name: str, form: str):  # type: ignore[no-untyped-def]
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError):
        execute(plan, device=CPU, loader=broken_loader)
    info = read_run_file(plan.run_dir)
    assert info["status"] == "failed" and "disk on fire" in info["error"]
    assert not (plan.run_dir / "accuracy.parquet").exists()


def test_checkpoints_reproduce_the_accuracies(tmp_path: Path) -> None:
    outcome = run(tmp_path, method="sgd-f")
    checkpoint = load_checkpoint(outcome.plan.run_dir, 1)
    assert checkpoint["stage"] == 1 and len(checkpoint["rows"]) == 3 * 3 * 2 * 2  # stages 0-2 x 3 tasks x 2 evaluations
    # x 2 splits
    rows = reevaluate(outcome.plan, device=CPU, loader=synthetic_loader())
    assert [r["accuracy"] for r in rows] == [r["accuracy"] for r in outcome.rows]
    assert (outcome.plan.run_dir / "evaluation.parquet").is_file()


def test_config_hash_separates_hyperparameters(tmp_path: Path) -> None:
    spec = tiny_spec("mlp")
    plans = plan_runs(spec, ["sgd", "sgd-f"], [0, 1], tmp_path)
    assert len({p.run_dir for p in plans}) == 4
    assert len({p.data_hash for p in plans}) == 1


def test_an_approach_revision_changes_its_config_hash_and_revision_0_leaves_the_config_as_it_was(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from clbench.approaches.registry import REGISTRY

    spec = tiny_spec("mlp")
    [sgd] = plan_runs(spec, ["sgd"], [0], tmp_path)
    assert "revision" not in sgd.config  # revision 0: the config (and stored results' hashes) as before
    [si] = plan_runs(spec, ["si"], [0], tmp_path)
    assert si.config["revision"] == 1  # SI's algorithm changed (clip at zero, omega at the best epoch)
    monkeypatch.setattr(REGISTRY["si"], "revision", 0)
    [older] = plan_runs(spec, ["si"], [0], tmp_path)
    assert older.config_hash != si.config_hash and "revision" not in older.config


def test_an_added_hyperparameter_at_its_default_is_not_in_the_config_and_otherwise_is(tmp_path: Path) -> None:
    """`gdumb.batch_norm` came after gdumb's runs were stored (`added=True`): at false the run's config, and its
    hash, are what they were before the field existed; true is part of both."""
    spec = tiny_spec("mlp")
    [plain] = plan_runs(spec, ["gdumb"], [0], tmp_path)
    assert "batch_norm" not in plain.config["hyperparameters"] and "crop" not in plain.config["hyperparameters"]
    assert "buffer_size" in plain.config["hyperparameters"]  # a field of the first version stays
    changed = replace(spec, approaches={"gdumb": {"batch_norm": True}})
    [normed] = plan_runs(changed, ["gdumb"], [0], tmp_path)
    assert normed.config["hyperparameters"]["batch_norm"] is True and normed.config_hash != plain.config_hash


def test_loader_refuses_unknown_schema(tmp_path: Path) -> None:
    outcome = run(tmp_path)
    path = outcome.plan.run_dir / "accuracy.parquet"
    frame = pd.read_parquet(path)
    frame["schema_version"] = 99
    write_run_parquet(path, frame)  # as a newer clbench writes it (by hand, it would be a damaged file)
    with pytest.raises(ResultsError, match="schema version"):
        load_results(tmp_path, "tiny")


def test_resolve_device_names_the_bad_device_and_what_to_use(monkeypatch: pytest.MonkeyPatch) -> None:
    from clbench.errors import ClbenchError
    from clbench.run.engine import resolve_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == CPU and resolve_device("cpu") == CPU
    with pytest.raises(ClbenchError, match="'gpu0' is not a device: use auto, cpu, cuda or cuda:N"):
        resolve_device("gpu0")
    with pytest.raises(ClbenchError, match="--device cuda: CUDA is not available.*--device cpu or auto"):
        resolve_device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert resolve_device("auto") == torch.device("cuda") and resolve_device("cuda:1") == torch.device("cuda", 1)
    with pytest.raises(ClbenchError, match=r"--device cuda:2: this machine has 2 CUDA device\(s\), numbered from 0"):
        resolve_device("cuda:2")
