"""`clbench tune` through Typer's runner on a tiny two-task npz benchmark: the validation winner chosen and written,
completed grid runs reused, the references of the forgetting-ratio rule trained, bad grids refused up front."""

from __future__ import annotations

import hashlib
import io
import json
import shlex
from pathlib import Path

import pandas as pd
import pytest
import yaml
from clihelpers import TINY, flat, pasted_commands
from filebuilders import write_block_arrays
from typer.testing import CliRunner

from clbench.cli import app
from clbench.run.plan import plan_runs
from clbench.run_files import write_run_parquet
from clbench.spec import load_benchmark
from clbench.tuning.tuned_file import read_tuned, read_tuned_file, tuned_path, tuned_sha256

runner = CliRunner()
SPEC = """\
name: tiny-tune
datasets:
  my-arrays: {format: npz, path: ./arrays.npz}
data: {kind: split, datasets: [my-arrays], classes_per_task: [2], form: mnist28, validation_fraction: 0.25}
network: {kind: mlp, hidden: [8]}
"""
# lr 0.0001 barely moves the network in one epoch; 0.05 learns the bright blocks: the second point should win, and
# the test checks the stored validation rows say so rather than assuming it.
GRID = ["--grid", "training.lr=0.0001,0.05"]
LEARNING_GRID = ["--grid", "training.lr=0.05,0.1"]


def write_arrays(path: Path, seed: int = 0, n_train: int = 24) -> None:
    """4 classes (2 tasks of 2), `n_train` training and 8 test images each; a class is a bright block plus noise."""
    write_block_arrays(path, seed, n_train)


@pytest.fixture
def spec_file(tmp_path: Path) -> Path:
    write_arrays(tmp_path / "arrays.npz")
    (tmp_path / "tiny.yaml").write_text(SPEC)
    return tmp_path / "tiny.yaml"


def tune(spec: Path, tmp_path: Path, *extra: str) -> tuple[int, str]:
    result = runner.invoke(app, ["tune", str(spec), "--results", str(tmp_path / "results"), "--data-dir",
                                 str(tmp_path / "data"), *TINY, *extra])
    return result.exit_code, flat(result.output)


def base_hash(spec: Path, method: str, tmp_path: Path) -> str:
    """The config hash of `clbench train SPEC -m METHOD` with TINY's --set options and no grid."""
    overrides = TINY[1:4:2]
    spec_object = load_benchmark(str(spec), overrides)
    return plan_runs(spec_object, [method], [0], tmp_path / "results", overrides)[0].config_hash


def final_validation_accuracy(results: Path, method: str) -> dict[str, float]:
    """By hand from the stored rows: lr value -> mean task-aware validation accuracy over both tasks after task 2."""
    scores = {}
    for path in results.glob(f"tiny-tune/{method}/*/seed-0/accuracy.parquet"):
        rows = pd.read_parquet(path)
        last = rows[(rows["split"] == "validation") & (rows["evaluation"] == "task-aware") & (rows["stage"] == 2)]
        assert sorted(last["task"]) == [1, 2]
        lr = next(text.split("=")[1] for text in json.loads(rows["overrides"].iloc[0])
                  if text.startswith("training.lr="))
        scores[lr] = float(last["accuracy"].mean())
    return scores


def run_files(results: Path) -> dict[Path, int]:
    return {path: path.stat().st_mtime_ns for path in results.rglob("*") if path.is_file()
            and "_tuned" not in path.parts}


def test_tune_chooses_the_validation_winner_writes_the_file_and_reuses_the_runs(spec_file: Path,
                                                                                  tmp_path: Path) -> None:
    code, output = tune(spec_file, tmp_path, "-m", "sgd", *GRID)
    assert code == 0, output
    results = tmp_path / "results"
    scores = final_validation_accuracy(results, "sgd")
    assert set(scores) == {"0.0001", "0.05"}
    assert scores["0.05"] != scores["0.0001"]
    winner = max(scores, key=lambda lr: scores[lr])
    config_hash = base_hash(spec_file, "sgd", tmp_path)
    path = tuned_path(results, "tiny-tune", "sgd", config_hash)
    choice = read_tuned(path, "tiny-tune", config_hash, "sgd")
    assert choice.chosen == (("training.lr", winner),)
    assert choice.tuning_seed == 0 and choice.rule == "accuracy"
    assert [point.score for point in choice.points] == pytest.approx([scores["0.0001"], scores["0.05"]])
    assert str(path) in output
    assert not list(results.glob("tiny-tune/joint")) and not list(results.glob("tiny-tune/random"))

    before, file_before = run_files(results), path.read_bytes()
    code, output = tune(spec_file, tmp_path, "-m", "sgd", *GRID)
    assert code == 0, output
    assert run_files(results) == before  # no run trained again, nothing rewritten
    assert path.read_bytes() == file_before
    assert "unchanged" in output


def test_forgetting_ratio_trains_the_references_and_refuses_to_replace_another_choice(spec_file: Path,
                                                                                          tmp_path: Path) -> None:
    # 200 training images a class, so 100 validation images a task: enough for the joint reference to beat chance
    # by more than 3 standard errors (with 12 a task no ratio is defined); both learning rates learn
    write_arrays(tmp_path / "arrays.npz", n_train=200)
    code, output = tune(spec_file, tmp_path, "-m", "sgd", *LEARNING_GRID, "--select", "forgetting-ratio")
    assert code == 0, output
    results = tmp_path / "results"
    for reference in ("joint", "random"):
        assert list(results.glob(f"tiny-tune/{reference}/*/seed-0/accuracy.parquet")), reference
    config_hash = base_hash(spec_file, "sgd", tmp_path)
    path = tuned_path(results, "tiny-tune", "sgd", config_hash)
    choice = read_tuned(path, "tiny-tune", config_hash, "sgd")
    assert choice.rule == "forgetting-ratio"
    assert all(point.scored for point in choice.points)

    written = path.read_bytes()
    code, output = tune(spec_file, tmp_path, "-m", "sgd", *LEARNING_GRID)  # the accuracy rule: another choice
    assert code == 2, output
    assert "holds another choice" in output and "--force" in output
    assert path.read_bytes() == written
    code, output = tune(spec_file, tmp_path, "-m", "sgd", *LEARNING_GRID, "--force")
    assert code == 0, output
    assert read_tuned(path, "tiny-tune", config_hash, "sgd").rule == "accuracy"


def test_no_grid_names_the_method_and_the_option(spec_file: Path, tmp_path: Path) -> None:
    code, output = tune(spec_file, tmp_path, "-m", "sgd")
    assert code == 2, output
    assert "error: sgd has no grid to tune" in output and "--grid KEY=V1,V2" in output
    assert not (tmp_path / "results").exists() or not list((tmp_path / "results").rglob("run.json"))


def test_a_grid_key_that_is_not_a_hyperparameter_is_train_s_error(spec_file: Path, tmp_path: Path) -> None:
    code, output = tune(spec_file, tmp_path, "-m", "sgd", "--grid", "sgd.nope=1,2")
    assert code == 2, output
    train = runner.invoke(app, ["train", str(spec_file), "-m", "sgd", "--grid", "sgd.nope=1,2", "--results",
                                str(tmp_path / "results"), "--data-dir", str(tmp_path / "data"), *TINY])
    assert train.exit_code == 2
    assert output == flat(train.output)
    assert "nope" in output
    assert not list((tmp_path / "results").rglob("run.json"))


def test_tuning_without_a_validation_split_is_refused_naming_the_key(spec_file: Path, tmp_path: Path) -> None:
    code, output = tune(spec_file, tmp_path, "-m", "sgd", *GRID, "--set", "data.validation_fraction=0",
                        "--set", "training.early_stopping=false")
    assert code == 2, output
    assert f"error: {spec_file}: data.validation_fraction is 0: tuning chooses on each task's validation split" \
        in output
    assert not (tmp_path / "results").exists() or not list((tmp_path / "results").rglob("run.json"))
    train = runner.invoke(app, ["train", str(spec_file), "-m", "sgd", "--set", "data.validation_fraction=0",
                                "--set", "training.early_stopping=false", "--results", str(tmp_path / "results"),
                                "--data-dir", str(tmp_path / "data"), *TINY])
    assert train.exit_code == 0, train.output  # the same protocol trains


def test_a_grid_of_another_method_is_refused(spec_file: Path, tmp_path: Path) -> None:
    code, output = tune(spec_file, tmp_path, "-m", "sgd", "--grid", "ewc.lamb=1,2")
    assert code == 2, output
    assert "ewc is not a method being tuned" in output


def test_a_tuned_file_path_that_cannot_be_written_is_refused_before_training(spec_file: Path,
                                                                            tmp_path: Path) -> None:
    path = tuned_path(tmp_path / "results", "tiny-tune", "sgd", base_hash(spec_file, "sgd", tmp_path))
    path.mkdir(parents=True)
    code, output = tune(spec_file, tmp_path, "-m", "sgd", *GRID)
    assert code == 2, output
    assert f"error: tuned file {path} is a folder, not a file" in output
    assert not list((tmp_path / "results").rglob("run.json"))


@pytest.fixture
def tuned_sgd(spec_file: Path, tmp_path: Path) -> Path:
    """The tuned file of sgd over GRID (its runs at seed 0 in tmp_path/results)."""
    code, output = tune(spec_file, tmp_path, "-m", "sgd", *GRID)
    assert code == 0, output
    return tuned_path(tmp_path / "results", "tiny-tune", "sgd", base_hash(spec_file, "sgd", tmp_path))


def train_tuned(spec: Path, tmp_path: Path, method: str, tuned: Path, *extra: str) -> tuple[int, str]:
    result = runner.invoke(app, ["train", str(spec), "-m", method, "--results", str(tmp_path / "results"),
                                 "--data-dir", str(tmp_path / "data"), *TINY, "--tuned", str(tuned), *extra])
    return result.exit_code, flat(result.output)


def test_train_tuned_applies_the_choice_and_records_the_file_in_every_row(spec_file: Path, tmp_path: Path,
                                                                           tuned_sgd: Path) -> None:
    results = tmp_path / "results"
    scores = final_validation_accuracy(results, "sgd")
    winner = max(scores, key=lambda lr: scores[lr])
    tuning_runs = run_files(results)
    code, output = train_tuned(spec_file, tmp_path, "sgd", tuned_sgd, "--seeds", "0-1")
    assert code == 0, output
    by_hand = [*TINY[1:4:2], f"training.lr={winner}"]
    plan = plan_runs(load_benchmark(str(spec_file), by_hand), ["sgd"], [1], results.absolute(), by_hand)[0]
    rows = pd.read_parquet(plan.run_dir / "accuracy.parquet")  # the hand-set values' run folder: the same config
    assert len(rows) > 0
    fields = {key: value for key, value in yaml.safe_load(tuned_sgd.read_text()).items() if key != "digest"}
    identity = hashlib.sha256(json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert rows["tuned_sha256"].tolist() == [identity] * len(rows)  # the sha256 of its fields, not of its bytes
    assert rows["tuned_seed"].tolist() == [0] * len(rows)
    assert (rows["overrides"] == json.dumps(by_hand)).all()
    assert run_files(results).items() >= tuning_runs.items()  # seed 0 (the grid point) reused, not rewritten
    assert "seed-0: finished before with the same config" in output, output


def run_pasted(arguments: list[str]) -> tuple[int, str]:
    result = runner.invoke(app, arguments)
    return result.exit_code, flat(result.output)


def test_the_commands_tune_and_train_tuned_print_work_when_pasted(spec_file: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """`apply it with`, the tuned file's header and train --tuned's refusal of another method's file: each command
    runs as pasted, from another folder (the data cache from the environment), writing into the same --results."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setenv("CLBENCH_DATA", str(tmp_path / "data"))
    results = tmp_path / "results"
    code, output = tune(spec_file, tmp_path, "-m", "sgd", *GRID)
    assert code == 0, output
    [apply] = pasted_commands(output, "clbench train")
    apply[apply.index("--seeds") + 1] = "1"  # one of the seeds it names: enough to show it runs
    code, pasted = run_pasted(apply)
    assert code == 0, pasted
    assert len(list(results.glob("tiny-tune/sgd/*/seed-1/accuracy.parquet"))) == 1

    tuned = tuned_path(results, "tiny-tune", "sgd", base_hash(spec_file, "sgd", tmp_path))
    header = tuned.read_text().splitlines()[2]
    assert header.startswith("# clbench tune ")
    code, pasted = run_pasted(shlex.split(header.removeprefix("# "))[1:])
    assert code == 0, pasted
    assert "tuned file unchanged" in pasted

    code, refusal = train_tuned(spec_file, tmp_path, "ewc", tuned, "--seeds", "1")
    assert code == 2, refusal
    [remake] = pasted_commands(refusal, "clbench tune")
    code, pasted = run_pasted(remake)
    assert code == 0, pasted
    ewc_hash = base_hash(spec_file, "ewc", tmp_path)
    assert read_tuned(tuned_path(results, "tiny-tune", "ewc", ewc_hash), "tiny-tune", ewc_hash, "ewc").grid == \
        (GRID[1],)
    assert not (elsewhere / "results").exists()


def test_another_method_s_tuned_file_suggests_its_own_grid_or_none(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The tuned file of si (grid si.c) given for ewc: the suggested command leaves out si's key, which `tune -m ewc`
    refuses, and searches the spec's default grid of ewc; for sgd, which has none, no command is suggested."""
    write_arrays(tmp_path / "arrays.npz")
    spec = tmp_path / "grids.yaml"
    spec.write_text(SPEC + "grids:\n  ewc: {lamb: [1, 10]}\n")
    monkeypatch.setenv("CLBENCH_DATA", str(tmp_path / "data"))
    code, output = tune(spec, tmp_path, "-m", "si", "--grid", "si.c=0.1,1")
    assert code == 0, output
    results = tmp_path / "results"
    tuned_si = tuned_path(results, "tiny-tune", "si", base_hash(spec, "si", tmp_path))
    code, refusal = train_tuned(spec, tmp_path, "ewc", tuned_si)
    assert code == 2, refusal
    [remake] = pasted_commands(refusal, "clbench tune")
    assert "--grid" not in remake
    code, pasted = run_pasted(remake)
    assert code == 0, pasted
    ewc_hash = base_hash(spec, "ewc", tmp_path)
    assert read_tuned(tuned_path(results, "tiny-tune", "ewc", ewc_hash), "tiny-tune", ewc_hash, "ewc").grid == \
        ("ewc.lamb=1,10",)
    code, refusal = train_tuned(spec, tmp_path, "sgd", tuned_si)
    assert code == 2, refusal
    assert pasted_commands(refusal) == [] and "train sgd without --tuned" in refusal


def test_train_without_tuned_records_no_tuning(spec_file: Path, tmp_path: Path) -> None:
    result = runner.invoke(app, ["train", str(spec_file), "-m", "sgd", "--results", str(tmp_path / "results"),
                                 "--data-dir", str(tmp_path / "data"), *TINY])
    assert result.exit_code == 0, result.output
    rows = pd.concat(pd.read_parquet(path) for path in (tmp_path / "results").rglob("accuracy.parquet"))
    assert rows["tuned_sha256"].isna().all() and rows["tuned_seed"].isna().all()


@pytest.mark.parametrize(("method", "extra", "difference"), [
    ("ewc", [], "is a tuned file for method sgd, not ewc"),
    ("sgd", ["--set", "training.batch_size=8"], "is a tuned file for config hash"),
])
def test_a_tuned_file_made_for_another_run_is_refused(spec_file: Path, tmp_path: Path, tuned_sgd: Path,
                                                      method: str, extra: list[str], difference: str) -> None:
    before = run_files(tmp_path / "results")
    code, output = train_tuned(spec_file, tmp_path, method, tuned_sgd, "--seeds", "1", *extra)
    assert code == 2, output
    assert difference in output and f"clbench tune {spec_file} -m {method}" in output
    assert run_files(tmp_path / "results") == before


@pytest.mark.parametrize(("field", "replacement", "refusal"), [
    ("run_id: ", "tiny-tune/sgd/000000000000/seed-0", "was changed after `clbench tune` wrote it"),
    ("validation_score: ", "0.999", "is damaged or edited"),  # the first point's score: now the best
])
def test_an_edited_tuned_file_is_refused(spec_file: Path, tmp_path: Path, tuned_sgd: Path, field: str,
                                         replacement: str, refusal: str) -> None:
    text = tuned_sgd.read_text()
    assert text.count(field) == 2
    first = text.index(field) + len(field)
    end = text.index("\n", first)
    assert text[first:end] != replacement
    tuned_sgd.write_text(text[:first] + replacement + text[end:])
    before = run_files(tmp_path / "results")
    code, output = train_tuned(spec_file, tmp_path, "sgd", tuned_sgd, "--seeds", "1")
    assert code == 2, output
    assert refusal in output
    assert run_files(tmp_path / "results") == before


def final_test_accuracy(results: Path) -> dict[str, float]:
    """By hand from the stored rows: lr value -> mean task-aware test accuracy after task 2 of sgd at seed 0."""
    scores = {}
    for path in results.glob("tiny-tune/sgd/*/seed-0/accuracy.parquet"):
        rows = pd.read_parquet(path)
        last = rows[(rows["split"] == "test") & (rows["evaluation"] == "task-aware") & (rows["stage"] == 2)]
        lr = next(text.split("=")[1] for text in json.loads(rows["overrides"].iloc[0])
                  if text.startswith("training.lr="))
        scores[lr] = float(last["accuracy"].mean())
    return scores


def report_tuning(tmp_path: Path, *extra: str) -> tuple[int, str]:
    result = runner.invoke(app, ["report", "tiny-tune", "--results", str(tmp_path / "results"), "--tuning", *extra])
    return result.exit_code, result.output


def test_report_tuning_lists_each_point_the_choice_and_the_tuned_seeds(spec_file: Path, tmp_path: Path,
                                                                         tuned_sgd: Path) -> None:
    code, output = train_tuned(spec_file, tmp_path, "sgd", tuned_sgd, "--seeds", "1-2")
    assert code == 0, output
    results = tmp_path / "results"
    validation, test = final_validation_accuracy(results, "sgd"), final_test_accuracy(results)
    code, output = report_tuning(tmp_path, "--format", "csv")
    assert code == 0, output
    table = pd.read_csv(io.StringIO(output), dtype={"point": str, "tuned_seeds": str})
    assert table["point"].tolist() == ["training.lr=0.0001", "training.lr=0.05"]
    assert table["validation_score"].tolist() == pytest.approx([validation["0.0001"], validation["0.05"]])
    assert table["test_score"].tolist() == pytest.approx([test["0.0001"], test["0.05"]])
    winner = max(validation, key=lambda lr: validation[lr])
    assert table["chosen"].tolist() == [lr == winner for lr in ("0.0001", "0.05")]
    test_winner = max(test, key=lambda lr: (test[lr], lr == "0.0001"))  # ties: the first in the grid's order
    assert table["test_choice"].tolist() == [lr == test_winner for lr in ("0.0001", "0.05")]
    assert set(table["tuned_seeds"]) == {"1,2"}  # seed 0 is the grid point, reused: not trained with --tuned
    assert set(table["file"]) == {tuned_sgd.name}


def test_report_tuning_warns_when_test_would_choose_another_point(spec_file: Path, tmp_path: Path,
                                                                   tuned_sgd: Path) -> None:
    results = tmp_path / "results"
    validation = final_validation_accuracy(results, "sgd")
    loser = min(validation, key=lambda lr: validation[lr])
    for path in results.glob("tiny-tune/sgd/*/seed-0/accuracy.parquet"):  # the loser's test rows made perfect
        rows = pd.read_parquet(path)
        if f"training.lr={loser}" in json.loads(rows["overrides"].iloc[0]):
            rows.loc[rows["split"] == "test", "accuracy"] = 1.0
            write_run_parquet(path, rows)  # through the run-file rule: by hand, it would be a damaged file
    code, output = report_tuning(tmp_path)
    assert code == 0, output
    assert f"the test split would have chosen training.lr={loser}" in flat(output)
    code, output = report_tuning(tmp_path, "--format", "csv")
    table = pd.read_csv(io.StringIO(output), dtype={"point": str})
    assert table.loc[table["test_choice"], "point"].tolist() == [f"training.lr={loser}"]
    assert table.loc[table["chosen"], "point"].tolist() != [f"training.lr={loser}"]


def test_report_tuning_without_tuned_files_says_how_to_make_them(spec_file: Path, tmp_path: Path) -> None:
    result = runner.invoke(app, ["train", str(spec_file), "-m", "sgd", "--results", str(tmp_path / "results"),
                                 "--data-dir", str(tmp_path / "data"), *TINY])
    assert result.exit_code == 0, result.output
    code, output = report_tuning(tmp_path)
    assert code == 2, output
    assert "no tuned files" in flat(output)
    assert f"clbench tune tiny-tune -m METHOD --grid KEY=V1,V2,... --results {tmp_path / 'results'}" in flat(output)


@pytest.mark.parametrize(("scenario", "evaluation"), [("task", "task-aware"), ("class", "task-agnostic"),
                                                      ("domain", "task-aware")])
def test_tune_chooses_by_the_scenario_s_evaluation(spec_file: Path, tmp_path: Path, scenario: str,
                                                   evaluation: str) -> None:
    """The default evaluation follows the scenario; the table and the tuned file name it, and a chosen value at an
    end of its grid (here every value of a two-value grid is one) is noted."""
    code, output = tune(spec_file, tmp_path, "-m", "sgd", *GRID, "--set", f"data.scenario={scenario}")
    assert code == 0, output
    [path] = (tmp_path / "results" / "tiny-tune" / "_tuned").glob("sgd-*.yaml")
    choice = read_tuned_file(path)
    assert choice.evaluation == evaluation
    assert f"validation accuracy ({evaluation}, seed 0)" in output
    assert f"--evaluation {evaluation}" in path.read_text()
    side = "lowest" if choice.chosen == (("training.lr", "0.0001"),) else "highest"
    assert f"note: sgd: training.lr={choice.chosen[0][1]} is the {side} value of its grid (0.0001, 0.05)" in output
    report = runner.invoke(app, ["report", "tiny-tune", "--tuning", "--results", str(tmp_path / "results")])
    assert report.exit_code == 0, report.output
    assert f"{evaluation}" in flat(report.output) and f"is the {side} value of its grid" in flat(report.output)


def test_tune_in_the_class_scenario_takes_an_asked_evaluation_with_a_note(spec_file: Path, tmp_path: Path) -> None:
    code, output = tune(spec_file, tmp_path, "-m", "sgd", *GRID, "--set", "data.scenario=class", "--evaluation",
                        "task-aware")
    assert code == 0, output
    [path] = (tmp_path / "results" / "tiny-tune" / "_tuned").glob("sgd-*.yaml")
    assert read_tuned_file(path).evaluation == "task-aware"
    assert "note: sgd: chosen by task-aware (--evaluation); the class scenario's comparison reports task-agnostic" \
        in output


def test_a_special_value_of_a_grid_is_no_end_of_it(spec_file: Path, tmp_path: Path) -> None:
    """`bic.lamb` -1 is lambda = old / seen classes, not a number below 1: whichever point wins, no edge note."""
    code, output = tune(spec_file, tmp_path, "-m", "bic", "--grid", "bic.lamb=-1,1", "--set", "bic.bias_epochs=2")
    assert code == 0, output
    [path] = (tmp_path / "results" / "tiny-tune" / "_tuned").glob("bic-*.yaml")
    assert read_tuned_file(path).chosen[0][0] == "bic.lamb"
    assert "value of its grid" not in output


def test_options_that_change_no_number_do_not_enter_what_a_tuned_file_must_match(spec_file: Path, tmp_path: Path,
                                                                                  tuned_sgd: Path) -> None:
    import dataclasses

    from clbench.spec import TrainingSpec

    # every protocol field declared to change no number (the continual evaluation), at a value other than its default
    inert = {spec_field.name: spec_field.default + 2 for spec_field in dataclasses.fields(TrainingSpec)
             if not spec_field.metadata["changes_results"]}
    assert set(inert) == {"eval_every", "eval_subset"}
    options = [text for key, value in inert.items() for text in ("--set", f"training.{key}={value}")]
    code, output = train_tuned(spec_file, tmp_path, "sgd", tuned_sgd, "--seeds", "1", *options)
    assert code == 0, output
    [run] = [path.parent for path in (tmp_path / "results").glob("tiny-tune/sgd/*/seed-1/accuracy.parquet")]
    assert (run / "curve.parquet").is_file()  # measured with the curve, and tuned by the file made without it
    assert set(pd.read_parquet(run / "accuracy.parquet")["tuned_sha256"]) == {tuned_sha256(tuned_sgd)}


@pytest.mark.parametrize(("method", "grid", "why"), [
    ("gdumb", "training.lr=0.01,0.05", "have no effect on gdumb"),  # a key gdumb ignores (ignores_training)
    ("sgd", "training.class_loss=seen,all", "has no effect with data.scenario=task"),  # the task scenario's loss
    ("bic", "bic.replay_batch_size=8,16", "has no effect on bic"),  # a hyper-parameter bic ignores
])
def test_a_grid_whose_points_make_one_run_is_refused_before_training(spec_file: Path, tmp_path: Path, method: str,
                                                                     grid: str, why: str) -> None:
    code, output = tune(spec_file, tmp_path, "-m", method, "--grid", grid)
    assert code == 2, output
    assert f"its 2 points make 1 distinct {method} run" in output and why in output
    assert not list((tmp_path / "results").rglob("run.json"))
