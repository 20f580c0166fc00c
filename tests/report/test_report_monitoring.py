"""`clbench report --monitoring`: approach-owned monitoring reporters, found from run.json or the built-in table."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from resultbuilders import GOLDEN, golden_results, portable, write_run, write_run_json
from typer.testing import CliRunner

from clbench.cli import app
from clbench.report.formatting import Table
from clbench.report.loading import Results, load_results
from clbench.report.monitoring import LEGACY_REPORTERS, MonitoringReporter, method_reporter
from clbench.report.sections import monitoring_text
from clbench.results import write_parquet

FAKE_REPORTER = "test_report_monitoring:FakeReporter"


class FakeReporter(MonitoringReporter):
    """A plugin's reporter: one table with the number of runs of its method and their seeds."""

    def tables(self, results: Results) -> list[Table]:
        seeds = sorted(int(run["seed"]) for run in results.info.values() if run["method"] == self.method)
        return [Table(["runs", "seeds"], [[str(len(seeds)), ",".join(map(str, seeds))]],
                      title=f"{self.method}: fake monitoring", notes=["made by FakeReporter"])]

    def csv(self, results: Results) -> str:
        return f"method,runs\n{self.method},{sum(run['method'] == self.method for run in results.info.values())}\n"


def fake_results(root: Path, reporter: str = FAKE_REPORTER) -> Path:
    for seed in (0, 3):
        write_run_json(write_run(root, "fake", seed, [[0.9], [0.8, 0.9]]), monitoring_reporter=reporter)
    write_run_json(write_run(root, "sgd", 0, [[0.9], [0.8, 0.9]]), monitoring_reporter=None)
    return root


def invoke(*arguments: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["report", *arguments])
    return result.exit_code, result.output


def test_a_plugin_reporter_declared_in_run_json_gets_its_tables_printed(tmp_path: Path) -> None:
    code, output = invoke("b", "--results", str(fake_results(tmp_path)), "--monitoring")
    assert code == 0, output
    assert output == ("### fake: fake monitoring\n\n"
                      "| runs | seeds |\n"
                      "|------|-------|\n"
                      "| 2    | 0,3   |\n\n"
                      "- made by FakeReporter\n")


def test_monitoring_csv_comes_from_the_reporter(tmp_path: Path) -> None:
    code, output = invoke("b", "--results", str(fake_results(tmp_path)), "--monitoring", "--format", "csv")
    assert code == 0, output
    assert output == "method,runs\nfake,2\n"


def test_a_reporter_that_cannot_be_imported_is_named(tmp_path: Path) -> None:
    code, output = invoke("b", "--results", str(fake_results(tmp_path, "no_such_module:Reporter")), "--monitoring")
    assert code == 2
    assert "'no_such_module:Reporter'" in output and "method 'fake'" in output


def test_monitoring_prints_hat_exactly_as_hat_does(tmp_path: Path) -> None:
    results = golden_results(tmp_path)
    code, output = invoke("b", "--results", str(results), "--monitoring")
    assert code == 0, output
    assert portable(output, results) == (GOLDEN / "hat.md").read_text()
    code, both = invoke("b", "--results", str(results), "--monitoring", "--hat")
    assert both == output  # HAT's section once, not twice


@pytest.mark.parametrize("fmt", ["markdown", "csv", "latex", "html"])
def test_hat_is_hats_monitoring_reporter_by_name(tmp_path: Path, fmt: str) -> None:
    """`--hat` prints what the generic path prints: `--monitoring` (HAT is the one approach with a reporter here)
    and the text of the reporter that `method_reporter` finds for hat."""
    results = golden_results(tmp_path)
    code, hat = invoke("b", "--results", str(results), "--hat", "--format", fmt)
    assert code == 0, hat
    assert invoke("b", "--results", str(results), "--monitoring", "--format", fmt) == (0, hat)
    loaded = load_results(results, "b")
    reporter = method_reporter(loaded, "hat")
    assert reporter is not None and reporter.method == "hat"
    assert hat == monitoring_text(reporter, loaded, fmt)
    assert "hat" in hat and "fc1" in hat


def test_hat_and_monitoring_write_the_same_figures(tmp_path: Path) -> None:
    results = golden_results(tmp_path / "results")
    for option in ("--hat", "--monitoring"):
        code, output = invoke("b", "--results", str(results), option, "--plot", str(tmp_path / option.strip("-")))
        assert code == 0, output
    hat, generic = ({path.name: path.read_bytes() for path in (tmp_path / folder).iterdir() if path.suffix == ".png"}
                    for folder in ("hat", "monitoring"))
    assert hat == generic
    assert {"b-hat-capacity.png", "b-hat-reuse.png", "b-forgetting-ratio.png"} <= set(hat)


def test_hat_uses_the_reporter_its_runs_declare(tmp_path: Path) -> None:
    for seed in (0, 3):
        write_run_json(write_run(tmp_path, "hat", seed, [[0.9], [0.8, 0.9]]), monitoring_reporter=FAKE_REPORTER)
    code, output = invoke("b", "--results", str(tmp_path), "--hat")
    assert code == 0, output
    assert output.startswith("### hat: fake monitoring\n") and "made by FakeReporter" in output


def test_hat_without_hat_runs_says_there_are_none(tmp_path: Path) -> None:
    write_run_json(write_run(tmp_path, "sgd", 0, [[0.9], [0.8, 0.9]]))
    code, output = invoke("b", "--results", str(tmp_path), "--hat")
    assert code == 0, output
    assert output == f"- no finished hat runs of b in {tmp_path}\n"


def test_monitoring_without_any_tables_says_so_and_why(tmp_path: Path) -> None:
    write_run_json(write_run(tmp_path, "sgd", 0, [[0.9], [0.8, 0.9]]), monitoring_reporter=None)
    write_run_json(write_run(tmp_path, "ewc", 0, [[0.9], [0.8, 0.9]]), monitoring_reporter=None)
    code, output = invoke("b", "--results", str(tmp_path), "--monitoring")
    assert code == 0, output
    assert output == "- no monitoring tables for b: ewc, sgd declare no monitoring report\n"
    # si declares one (`LEGACY_REPORTERS`) but its run stored no importance table.
    write_run(tmp_path, "si", 0, [[0.9], [0.8, 0.9]])
    code, output = invoke("b", "--results", str(tmp_path), "--monitoring")
    assert code == 0, output
    assert output == "- no monitoring tables for b: si stored none in its runs; ewc, sgd declare no monitoring report\n"


def method_modules() -> list[str]:
    """Every built-in method's own package or module: `clbench.approaches.hat`, `clbench.approaches.sgd`, ..."""
    from clbench.approaches import BUILTINS

    return sorted({".".join(target.partition(":")[0].split(".")[:3]) for target in BUILTINS.values()})


def test_the_cli_names_no_methods_package() -> None:
    """`clbench/cli` reaches an approach's tables only through the reporter its runs declare (`--hat` too): no
    source file there names a method's package or module, in an import (TYPE_CHECKING blocks included) or a
    string."""
    import clbench.cli

    modules = method_modules()
    assert {"clbench.approaches.hat", "clbench.approaches.packnet", "clbench.approaches.importance"} <= set(modules)
    pattern = re.compile(r"\b(" + "|".join(re.escape(module) for module in modules) + r")\b")
    assert pattern.search("from clbench.approaches.hat.report import HatReport")  # the check can fail
    names = {module.rsplit(".", 1)[1] for module in modules}
    found = []
    for path in sorted(Path(clbench.cli.__file__).parent.rglob("*.py")):
        text = path.read_text()
        found += [f"{path.name}:{number}" for number, line in enumerate(text.splitlines(), 1) if pattern.search(line)]
        found += [f"{path.name}:{node.lineno}" for node in ast.walk(ast.parse(text))
                  if isinstance(node, ast.ImportFrom) and node.module == "clbench.approaches"
                  and names & {alias.name for alias in node.names}]
    assert found == []


def test_importing_the_cli_imports_no_methods_package() -> None:
    probe = "import sys, clbench.cli\nprint('\\n'.join(sorted(sys.modules)))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    modules = method_modules()
    assert [name for name in loaded.split() if any(name == m or name.startswith(m + ".") for m in modules)] == []
    assert "clbench.cli.report" in loaded.split()


def test_built_in_reporters_match_what_the_approach_classes_declare() -> None:
    from clbench.approaches.registry import REGISTRY

    declared = {name: cls.monitoring_reporter for name, cls in REGISTRY.items() if cls.monitoring_reporter}
    # the legacy table is frozen: a method added since (gpm, supsup, ...) records its string in run.json and is not in
    # it; each such string names a built-in reporter module
    assert {name: declared.get(name) for name in LEGACY_REPORTERS} == LEGACY_REPORTERS
    added = set(declared) - set(LEGACY_REPORTERS)
    assert {"adahat", "gpm", "supsup"} <= added
    assert all(re.fullmatch(r"clbench\.approaches\.[\w.]+\.report:\w+", declared[name]) for name in added)


def test_a_trained_run_records_its_reporter_and_report_uses_it(tmp_path: Path) -> None:
    from runhelpers import run

    from clbench.results import read_run_file

    outcome = run(tmp_path, "hat")
    assert read_run_file(outcome.plan.run_dir)["monitoring_reporter"] == "clbench.approaches.hat.report:HatReporter"
    assert read_run_file(run(tmp_path, "sgd").plan.run_dir)["monitoring_reporter"] is None
    code, output = invoke(outcome.plan.spec.name, "--results", str(tmp_path), "--monitoring")
    assert code == 0, output
    assert output.startswith("### hat: % of weights used by a^{<=t}, all tasks so far (seed 0)")


# A monitoring table as an approach stores it after each task: one row per stage, value = 10 * stage.
TOY_COLUMNS = (("run_id", "string"), ("seed", "int64"), ("stage", "int64"), ("value", "int64"))
TWO_STAGES, THREE_STAGES = [[0.9], [0.8, 0.9]], [[0.9], [0.8, 0.9], [0.7, 0.8, 0.9]]


def write_toy_table(run_dir: Path, stages: list[int]) -> None:
    benchmark, method, config_hash, seed_folder = run_dir.parts[-4:]
    run_id, seed = f"{benchmark}/{method}/{config_hash}/{seed_folder}", int(seed_folder.removeprefix("seed-"))
    write_parquet(run_dir / "toy.parquet", pd.DataFrame([{"run_id": run_id, "seed": seed, "stage": stage,
                                                          "value": 10 * stage} for stage in stages]))


def test_the_last_stage_is_each_runs_own(tmp_path: Path) -> None:
    # config c3 has 3 tasks (two seeds), config c2 of the same method 2 tasks (e.g. --set data.n_tasks=2)
    for seed in (0, 1):
        write_toy_table(write_run(tmp_path, "si", seed, THREE_STAGES, config_hash="c3"), [1, 2, 3])
    write_toy_table(write_run(tmp_path, "si", 0, TWO_STAGES, config_hash="c2"), [1, 2])
    rows = MonitoringReporter("si").last_stage_rows(load_results(tmp_path, "b"), "toy", TOY_COLUMNS)
    assert sorted(zip(rows["run_id"], rows["stage"], rows["value"])) == [
        ("b/si/c2/seed-0", 2, 20), ("b/si/c3/seed-0", 3, 30), ("b/si/c3/seed-1", 3, 30)]
    assert rows["label"].notna().all() and rows["label"].nunique() == 2  # one label per config


def test_a_reporter_reads_only_its_own_methods_rows(tmp_path: Path) -> None:
    for method in ("si", "mas"):
        write_toy_table(write_run(tmp_path, method, 0, TWO_STAGES), [1, 2])
    results = load_results(tmp_path, "b")
    for method in ("si", "mas"):
        rows = MonitoringReporter(method).last_stage_rows(results, "toy", TOY_COLUMNS)
        assert rows["run_id"].tolist() == [f"b/{method}/c0/seed-0"] and rows["label"].tolist() == [method]


@pytest.mark.parametrize(("option", "names_known"), [(("--evaluation", "task-agnostic"), True),
                                                     (("--split", "validation"), False)])
def test_hat_monitoring_does_not_depend_on_the_chosen_rows(tmp_path: Path, option: tuple[str, str],
                                                           names_known: bool) -> None:
    """HAT stores no task-agnostic rows, and these runs have no validation rows: the monitoring tables (masks, not
    accuracies) are the same as with the default rows (both crashed with a KeyError). The task names come from the
    chosen split's rows of either evaluation: without rows of that split they are not shown."""
    results = golden_results(tmp_path)
    code, default = invoke("b", "--results", str(results), "--hat")
    assert code == 0, default
    code, chosen = invoke("b", "--results", str(results), "--hat", *option)
    assert code == 0, chosen
    blocks = default.split("\n\n")
    tables = [block for block in blocks if block.startswith("### ") and "weights" in block]
    names = [block for block in blocks if " tasks: " in block]
    assert tables and names
    assert [block for block in tables if block not in chosen] == []
    assert [block in chosen for block in names] == [names_known] * len(names)
