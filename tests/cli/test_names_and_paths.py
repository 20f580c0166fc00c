"""Names that become folders follow one rule, and clbench writes only inside the results and data folders."""

from __future__ import annotations

from pathlib import Path

import pytest
from clihelpers import flat
from typer.testing import CliRunner

from clbench.cli import app
from clbench.errors import ResultsError, SpecError
from clbench.results import run_directory

runner = CliRunner()
SPEC = """\
name: {name}
data: {{kind: split, datasets: [mnist], classes_per_task: [5], form: mnist28, shuffle_tasks: false}}
network: {{kind: mlp, hidden: [8]}}
"""


pytestmark = pytest.mark.usefixtures("restored_registry")



def entries(folder: Path) -> set[str]:
    return {path.name for path in folder.iterdir()}


@pytest.mark.parametrize("name", ["..", "../escape-spec", "a/b", ".", "-x"])
def test_a_spec_name_that_is_not_one_folder_exits_2_and_writes_nothing(name: str, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    spec = work / "my.yaml"
    spec.write_text(SPEC.format(name=f"'{name}'"))
    before = entries(tmp_path)
    result = runner.invoke(app, ["train", str(spec), "-m", "sgd", "--results", str(work / "results"),
                                 "--data-dir", str(work / "data"), "--mirror", str(work / "no-mirror")])
    assert result.exit_code == 2, result.output
    assert f"{spec}: `name` is {name!r}: a name uses letters, digits" in flat(result.output)
    assert entries(tmp_path) == before and entries(work) == {"my.yaml"}


def test_a_spec_name_that_is_not_a_string_exits_2(tmp_path: Path) -> None:
    spec = tmp_path / "my.yaml"
    spec.write_text(SPEC.format(name="[a, b]"))
    result = runner.invoke(app, ["spec", str(spec)])
    assert result.exit_code == 2
    assert "`name` is ['a', 'b']" in flat(result.output)


@pytest.mark.parametrize("name", ["../../escape", "a/b", ".."])
def test_a_plugin_name_that_is_not_one_folder_exits_2_naming_the_class(name: str, tmp_path: Path) -> None:
    plugin = tmp_path / "escape.py"
    plugin.write_text(f"import clbench.api as cl\n\n\nclass Escape(cl.Approach):\n    name = {name!r}\n")
    results = tmp_path / "deep" / "results"
    result = runner.invoke(app, ["train", "mnist2", "-m", f"{plugin}:Escape", "--results", str(results)])
    assert result.exit_code == 2, result.output
    assert f"Escape.name is {name!r}: a name uses letters, digits" in flat(result.output)
    assert entries(tmp_path) == {"escape.py"}


def test_a_run_folder_outside_the_results_folder_is_refused(tmp_path: Path) -> None:
    results = tmp_path / "results"
    assert run_directory(results, "mnist2", "sgd", "abc", 0) == results / "mnist2" / "sgd" / "abc" / "seed-0"
    for benchmark, method in (("..", "sgd"), ("mnist2", "../../.."), ("../escape", "sgd")):
        with pytest.raises(ResultsError, match="is not inside"):
            run_directory(results, benchmark, method, "abc", 0)


def test_a_monitoring_table_name_that_is_a_path_is_refused(tmp_path: Path) -> None:
    from clbench.run.rows import monitoring_path

    assert monitoring_path(tmp_path, "hat_masks") == tmp_path / "hat_masks.parquet"
    for table in ("../../escape", "a/b"):
        with pytest.raises(SpecError, match="monitoring table name"):
            monitoring_path(tmp_path, table)


def test_a_bench_file_stays_in_the_bench_folder(tmp_path: Path) -> None:
    from clbench.run.bench import bench_path

    assert bench_path(tmp_path, "mnist2", "2024-01-01T00:00:00+00:00").parent == tmp_path / "_bench"
    with pytest.raises(ResultsError, match="is not inside"):
        bench_path(tmp_path, "../../escape", "2024-01-01T00:00:00+00:00")


def test_a_custom_cache_folder_stays_in_the_data_folder(tmp_path: Path) -> None:
    from clbench.data.custom import cache_folder

    assert cache_folder(tmp_path, "my-arrays", "0" * 64).parent == tmp_path / "custom"
    with pytest.raises(ResultsError, match="is not inside"):
        cache_folder(tmp_path, "../../escape", "0" * 64)
