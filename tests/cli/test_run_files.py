"""The one rule for run files (`clbench.run_files`), walked as a matrix: every kind of file a run writes (from the
registry, `RUN_FILE_KINDS`) x {truncated, emptied} x every report mode, `evaluate`, and `train` again.

One results folder is trained once per module (the approaches that store monitoring tables, sgd and the references,
three seeds, with the continual evaluation's curve, and evaluated); each test copies it, damages every file of one
kind in the seed-2 run folders, and runs one command on the copy.
"""

from __future__ import annotations

import html
import json
import math
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from clihelpers import NPZ_SPEC_IN_ORDER, flat
from filebuilders import constant_images, write_npz
from typer.testing import CliRunner

from clbench.cli import app
from clbench.report.loading import load_results
from clbench.run_files import (
    MANIFEST_FILE,
    NOT_RUN_FILES,
    RUN_FILE_KINDS,
    read_run_json,
    run_file_kind,
    run_file_problem,
    write_run_file,
)

runner = CliRunner()
SPEC = NPZ_SPEC_IN_ORDER
METHODS = ("hat", "wsn", "gpm", "supsup", "packnet", "si", "sgd", "joint", "random")
SETS = ["--set", "training.max_epochs=1", "--set", "training.batch_size=4", "--set", "training.eval_every=2"]
DAMAGED_SEED = 2
DAMAGES: dict[str, Callable[[bytes], bytes]] = {"truncated": lambda data: data[: len(data) // 2],
                                                "emptied": lambda data: b""}
KINDS = [kind.name for kind in RUN_FILE_KINDS]
REPORT_MODES = {"table": ["--table"], "summary": ["--summary"], "continual": ["--continual"],
                "compare": ["--compare", "sgd,hat"], "html": ["--html"], "monitoring": ["--monitoring"],
                "min-accuracy": ["--metric", "min-accuracy"]}
NAMED_UNDER_MONITORING = ("run", "accuracy", "monitoring")  # the other kinds do not touch a monitoring table
TIME_COLUMNS = ("started_utc", "finished_utc", "stage_train_seconds", "stage_eval_seconds")


def command(project: Path, name: str, *options: str) -> tuple[int, str]:
    result = runner.invoke(app, [name, str(project / "my.yaml"), "--results", str(project / "results"), *options])
    return result.exit_code, flat(result.output)


def train(project: Path, seeds: str) -> tuple[int, str]:
    return command(project, "train", "-m", ",".join(METHODS), "--seeds", seeds, "--data-dir", str(project / "data"),
                   "--device", "cpu", *SETS)


def evaluate(project: Path, seeds: str) -> tuple[int, str]:
    return command(project, "evaluate", "-m", ",".join(METHODS), "--seeds", seeds, "--data-dir",
                   str(project / "data"), "--device", "cpu", *SETS)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The trained and evaluated project (spec, data, results), never changed by a test."""
    project = tmp_path_factory.mktemp("run-files")
    write_npz(project / "arrays.npz", x_train=constant_images([10, 20, 30, 40] * 4),
              y_train=np.array([0, 1, 2, 3] * 4), x_test=constant_images([15, 25, 35, 45] * 2),
              y_test=np.array([0, 1, 2, 3] * 2))
    (project / "my.yaml").write_text(SPEC)
    code, output = train(project, "0-2")
    assert code == 0, output
    code, output = evaluate(project, str(DAMAGED_SEED))
    assert code == 0, output
    return project


@pytest.fixture
def project(template: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "project"
    shutil.copytree(template, copy)
    return copy


def run_folders(project: Path, seed: int = DAMAGED_SEED) -> list[Path]:
    return sorted((project / "results" / "mine").glob(f"*/*/seed-{seed}"))


def files_of(folder: Path, kind: str) -> list[Path]:
    return sorted(path for path in folder.rglob("*") if path.is_file()
                  and (found := run_file_kind(path.relative_to(folder))) is not None and found.name == kind)


def damage(project: Path, kind: str, how: str) -> list[Path]:
    """Every file of `kind` in the seed-2 run folders, damaged `how`; the paths."""
    paths = [path for folder in run_folders(project) for path in files_of(folder, kind)]
    assert paths, f"the trained runs hold no {kind} file"
    for path in paths:
        path.write_bytes(DAMAGES[how](path.read_bytes()))
    return paths


def method_of(path: Path) -> str:
    folder = path.parent.parent if path.parent.name == "checkpoints" else path.parent
    return folder.parent.parent.name


# ---------------------------------------------------------------- the registry covers every file a run writes


def test_every_file_a_run_writes_is_a_registered_kind_and_every_kind_is_written(template: Path) -> None:
    """So a new file kind cannot escape the matrix below: every file in a trained, evaluated run folder belongs to
    one kind of the registry (or is the manifest, the lock), and every kind is among them."""
    seen = set()
    for folder in run_folders(template, 0) + run_folders(template):
        for path in (path for path in folder.rglob("*") if path.is_file()):
            relative = path.relative_to(folder).as_posix()
            kind = run_file_kind(relative)
            assert kind is not None or relative in NOT_RUN_FILES, relative
            if kind is not None:
                seen.add(kind.name)
                assert run_file_problem(path) is None  # recorded in the manifest as written
                assert relative in json.loads((folder / MANIFEST_FILE).read_text())["files"]
    assert seen == set(KINDS)


def test_a_file_that_is_not_a_run_file_is_refused_by_the_writer(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="is not a kind of run file"):
        write_run_file(tmp_path / "run" / "notes.txt", b"x")
    assert not (tmp_path / "run").exists()


# ---------------------------------------------------------------- report, every mode


@pytest.mark.parametrize("how", DAMAGES)
@pytest.mark.parametrize("kind", KINDS)
def test_loading_leaves_out_only_what_depends_on_the_damaged_file(kind: str, how: str, project: Path) -> None:
    damaged = damage(project, kind, how)
    results = load_results(project / "results", "mine")
    kept = {run["folder"] for run in results.info.values()}
    leaves_run_out = next(found for found in RUN_FILE_KINDS if found.name == kind).leaves_out == "the run"
    for path in damaged:
        folder = path.parent.parent if kind == "checkpoint" else path.parent
        assert (str(folder) in kept) != leaves_run_out, path
        if not leaves_run_out and kind != "checkpoint":  # the report does not read checkpoints
            run_id = next(run_id for run_id, run in results.info.items() if run["folder"] == str(folder))
            assert path.name not in results.files[run_id]
            assert results.damage_of(run_id, path.name) is not None
    assert len({run["seed"] for run in results.info.values()}) == (2 if leaves_run_out else 3)


def cases(*modes: str) -> list[object]:
    """Every kind x damage (x mode): in the fast suite the truncated files (and the HTML page of a truncated curve
    only: a page takes seconds); the emptied files and the other pages with `-m slow`. Through the manifest an
    emptied file is refused as a truncated one is (its size); `test_a_folder_without_manifest_*` checks both
    by their form."""
    found = []
    for kind in KINDS:
        for how in DAMAGES:
            for mode in modes or (None,):
                slow = how == "emptied" or (mode == "html" and kind != "curve")
                found.append(pytest.param(kind, how, *([mode] if mode else []), marks=[pytest.mark.slow] * slow,
                                          id="-".join([kind, how, *([mode] if mode else [])])))
    return found


@pytest.mark.parametrize(("kind", "how", "mode"), cases(*REPORT_MODES))
def test_report_names_the_damaged_file_and_the_command_that_remakes_it(kind: str, how: str, mode: str,
                                                                     project: Path) -> None:
    page = project / "page.html"
    options = [*REPORT_MODES[mode], *([str(page)] if mode == "html" else [])]
    before = command(project, "report", *options) if kind == "checkpoint" else None
    damaged = damage(project, kind, how)
    code, output = command(project, "report", *options)
    assert code == 0, output
    text = output + (flat(html.unescape(page.read_text())) if mode == "html" else "")
    if kind == "checkpoint":  # no report reads a checkpoint: nothing left out, nothing to say
        assert (code, output) == before
        return
    remade_by = next(found for found in RUN_FILE_KINDS if found.name == kind).remade_by
    assert "runs from before monitoring?" not in text  # a damaged table is not said to be missing
    for path in damaged:
        method = method_of(path)
        (run_file,) = (project / "results" / "mine" / method).glob("*/seed-0/run.json")
        reporter = json.loads(run_file.read_text())["monitoring_reporter"]
        if mode == "monitoring" and (kind not in NAMED_UNDER_MONITORING or not reporter):
            continue
        assert f"{path} is damaged" in text, (path, text)
        assert f"`clbench {remade_by} {project / 'my.yaml'} -m {method} --seeds {DAMAGED_SEED}" in text, (path, text)


# ---------------------------------------------------------------- evaluate and train again


@pytest.mark.parametrize(("kind", "how"), cases())
def test_evaluate_names_a_damaged_run_and_evaluates_the_others(kind: str, how: str, project: Path) -> None:
    damaged = damage(project, kind, how)
    code, output = evaluate(project, f"1,{DAMAGED_SEED}")
    assert code == 0, output
    for folder in run_folders(project, 1):
        assert run_file_problem(folder / "evaluation.parquet") is None  # the other seed: evaluated
    if kind in ("checkpoint", "run"):  # what evaluate reads: the run is named and left out
        for path in damaged:
            assert f"{path} is damaged" in output
            assert f"`clbench train {project / 'my.yaml'} -m {method_of(path)} --seeds {DAMAGED_SEED}" in output
    else:  # it does not read them: evaluated (and a damaged evaluation file remade)
        for folder in run_folders(project):
            assert run_file_problem(folder / "evaluation.parquet") is None


def stored(path: Path) -> object:
    """What a run file holds, without what depends on when it was written (times)."""
    if path.suffix == ".parquet":
        frame = pd.read_parquet(path)
        return frame.drop(columns=[column for column in TIME_COLUMNS if column in frame])
    if path.suffix == ".json":
        return {key: value for key, value in read_run_json(path).items() if key in ("config", "overrides", "status")}
    import torch

    checkpoint = torch.load(path, weights_only=True)
    rows = [{key: value for key, value in row.items() if key not in TIME_COLUMNS} for row in checkpoint["rows"]]
    return {**checkpoint, "rows": rows}


def same(found: object, expected: object) -> bool:
    """Equal, tensors and frames compared by value."""
    import torch

    if isinstance(expected, pd.DataFrame):
        pd.testing.assert_frame_equal(found, expected)  # type: ignore[arg-type]
        return True
    if isinstance(expected, torch.Tensor):
        return isinstance(found, torch.Tensor) and found.shape == expected.shape and \
            bool(torch.isclose(found, expected, rtol=0, atol=0, equal_nan=True).all())
    if isinstance(expected, dict):
        return isinstance(found, dict) and found.keys() == expected.keys() and \
            all(same(found[key], expected[key]) for key in expected)
    if isinstance(expected, (list, tuple)):
        return isinstance(found, type(expected)) and len(found) == len(expected) and \
            all(same(one, other) for one, other in zip(found, expected))
    if isinstance(expected, float) and math.isnan(expected):  # random's loss
        return isinstance(found, float) and math.isnan(found)
    return bool(found == expected)


@pytest.mark.parametrize(("kind", "how"), cases())
def test_train_again_remakes_the_damaged_files_from_the_last_good_checkpoint(kind: str, how: str,
                                                                            project: Path) -> None:
    originals = {path: stored(path) for folder in run_folders(project) for path in files_of(folder, kind)}
    damaged = damage(project, kind, how)
    code, output = train(project, str(DAMAGED_SEED))
    assert code == 0, output
    runs = len({path.parent.parent if kind == "checkpoint" else path.parent for path in damaged})
    if kind == "evaluation":  # `train` does not make it: the runs are finished; `evaluate` remakes it
        assert f"{len(METHODS)} skipped" in output
        assert all(f"{path} is damaged" in output for path in damaged) and "`clbench evaluate`" in output
        code, output = evaluate(project, str(DAMAGED_SEED))
        assert code == 0, output
    else:  # the runs without such a file (sgd and the references store no monitoring table) are finished
        assert f"{runs} done" in output and (runs == len(METHODS) or f"{len(METHODS) - runs} skipped" in output)
    for path in damaged:
        assert run_file_problem(path) is None, path
        assert same(stored(path), originals[path]), path  # remade as it was
        header = read_run_json(path.parent.parent / "run.json" if kind == "checkpoint" else path.parent / "run.json")
        if kind != "evaluation":  # every checkpoint damaged: from the start; else from the last checkpoint
            assert header["resumed_after_stage"] == (None if kind == "checkpoint" else 2)
            assert header["damaged_files"]


# ---------------------------------------------------------------- folders without a manifest, a damaged manifest


@pytest.mark.parametrize("how", DAMAGES)
@pytest.mark.parametrize("kind", KINDS)
def test_a_folder_without_manifest_is_checked_by_the_form_of_its_files(kind: str, how: str, project: Path) -> None:
    """Run folders written before the manifest: each file is checked by its form (a Parquet footer, a JSON object,
    a whole zip), so a truncated or emptied file is still named and left out, and the others load as before."""
    for folder in run_folders(project):
        (folder / MANIFEST_FILE).unlink()
    damaged = damage(project, kind, how)
    assert all(run_file_problem(path) for path in damaged)
    results = load_results(project / "results", "mine")
    leaves_run_out = next(found for found in RUN_FILE_KINDS if found.name == kind).leaves_out == "the run"
    assert len({run["seed"] for run in results.info.values()}) == (2 if leaves_run_out else 3)
    if kind not in ("checkpoint", "run", "accuracy"):
        assert {(damage.folder, damage.name) for damage in results.damaged_files} == \
            {(path.parent, path.name) for path in damaged}


def test_a_damaged_manifest_is_named_its_files_checked_by_their_form_and_train_makes_it_again(project: Path) -> None:
    (folder,) = (project / "results" / "mine" / "hat").glob(f"*/seed-{DAMAGED_SEED}")
    (folder / MANIFEST_FILE).write_text('{"files": ')
    code, output = command(project, "report", "--table")
    assert code == 0, output
    assert f"{folder / MANIFEST_FILE} is damaged" in output
    assert f"`clbench train {project / 'my.yaml'} -m hat --seeds {DAMAGED_SEED}" in output
    code, output = train(project, str(DAMAGED_SEED))
    assert code == 0 and "1 done" in output, output
    manifest = json.loads((folder / MANIFEST_FILE).read_text())["files"]
    assert {"accuracy.parquet", "curve.parquet", "run.json", "hat_capacity.parquet"} <= set(manifest)
    assert not any(run_file_problem(folder / name) for name in manifest)


def test_a_write_stopped_between_the_manifest_and_the_file_leaves_either_content_accepted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The manifest's entry is written first, with the previous content's: a process killed before the file's
    rename leaves the previous content, which is accepted; after it, the new one."""
    import clbench.run_files as rule

    path = tmp_path / "run" / "curve.parquet"
    old, new = pd.DataFrame({"step": [1]}), pd.DataFrame({"step": [1, 2]})
    rule.write_run_parquet(path, old)
    written = []
    real = rule.atomic_write_bytes

    def killed_at_the_file(target: Path, data: bytes) -> None:
        if target.name != MANIFEST_FILE:
            raise KeyboardInterrupt
        written.append(target)
        real(target, data)

    monkeypatch.setattr(rule, "atomic_write_bytes", killed_at_the_file)
    with pytest.raises(KeyboardInterrupt):
        rule.write_run_parquet(path, new)
    monkeypatch.setattr(rule, "atomic_write_bytes", real)
    assert written == [tmp_path / "run" / MANIFEST_FILE]  # the manifest holds the new content's entry
    assert run_file_problem(path) is None and rule.read_run_parquet(path).equals(old)
    rule.write_run_parquet(path, new)
    assert run_file_problem(path) is None and rule.read_run_parquet(path).equals(new)
    path.write_bytes(rule.parquet_bytes(old))  # the old content again, not through the writer: it differs
    assert run_file_problem(path) is not None  # from the one recorded, and from the one before it (new)


def test_a_damaged_earlier_checkpoint_is_remade_by_training_from_the_last_good_one_before_it(project: Path) -> None:
    """The last checkpoint is whole, an earlier one is not: resuming from the last would leave the earlier one
    damaged, so the run starts from the last good checkpoint before it (here: from the start) and remakes it."""
    (folder,) = (project / "results" / "mine" / "sgd").glob(f"*/seed-{DAMAGED_SEED}")
    first = folder / "checkpoints" / "stage-01.pt"
    before = stored(first)
    first.write_bytes(first.read_bytes()[:100])
    code, output = command(project, "train", "-m", "sgd", "--seeds", str(DAMAGED_SEED), "--data-dir",
                           str(project / "data"), "--device", "cpu", *SETS)
    assert code == 0 and "1 done" in output, output
    assert run_file_problem(first) is None and same(stored(first), before)
    header = read_run_json(folder / "run.json")
    assert header["resumed_after_stage"] is None and len(header["damaged_files"]) == 1
