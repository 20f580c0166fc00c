"""The CLI follows Typer's and Click's conventions: exit codes per error class (2 usage, 1 runtime, 130 interrupt),
fixed choices that Click validates, `--version`, shell completion without torch, and a `main()` that a Python caller
can call without losing its process."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path
from typing import get_args

import pytest
import typer
from rich.console import Console
from typer.testing import CliRunner

from clbench.approaches.registry import DuplicateApproachError
from clbench.cli import app, completion, main, options
from clbench.cli.common import handle_errors
from clbench.cli.fetch import fetch_failure
from clbench.cli.progress import EvaluationProgress
from clbench.errors import (
    ChecksumError,
    ClbenchError,
    DataError,
    DataNotFoundError,
    ResultsError,
    SpecError,
    UnsafeArchiveError,
)
from clbench.results import DamagedFileError
from clbench.spec.grid import GridError
from clbench.tuning.scoring import TuningError

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()

EXIT_CODES = [(ClbenchError, 2), (SpecError, 2), (GridError, 2), (TuningError, 2), (DuplicateApproachError, 2),
              (ResultsError, 2), (DamagedFileError, 1), (DataError, 1), (DataNotFoundError, 1), (ChecksumError, 1),
              (UnsafeArchiveError, 1)]


def app_raising(error: BaseException) -> typer.Typer:
    """A one-command app whose command (under `handle_errors`, as every clbench command) raises `error`."""
    one = typer.Typer()

    @one.command()
    @handle_errors
    def command() -> None:
        raise error

    return one


@pytest.mark.parametrize(("kind", "code"), EXIT_CODES, ids=[kind.__name__ for kind, _ in EXIT_CODES])
def test_each_error_class_exits_with_its_code(kind: type[ClbenchError], code: int) -> None:
    result = runner.invoke(app_raising(kind("what to do")), [])
    assert result.exit_code == code and kind.exit_code == code
    assert "error: what to do" in result.output and "Traceback" not in result.output


def test_an_interrupt_exits_130() -> None:
    result = runner.invoke(app_raising(KeyboardInterrupt()), [])
    assert result.exit_code == 130 and "interrupted" in result.output


def test_a_usage_error_of_click_exits_2_and_a_runtime_one_1(tmp_path: Path) -> None:
    assert runner.invoke(app, ["report", "--format", "rst"]).exit_code == 2  # Click's own check
    assert runner.invoke(app, ["spec", "mnist2", "--set", "training.lr=-1"]).exit_code == 2  # SpecError
    missing = runner.invoke(app, ["fetch", "mnist", "--data-dir", str(tmp_path / "d"), "--mirror", str(tmp_path)])
    assert missing.exit_code == 1  # not in the mirror: data that cannot be fetched


def test_a_failed_fetch_is_a_runtime_failure_unless_every_failure_was_a_usage_error() -> None:
    assert fetch_failure({"a": ClbenchError("x"), "b": ChecksumError("y")}).exit_code == 1
    assert fetch_failure({"a": ClbenchError("x"), "b": SpecError("y")}).exit_code == 2


def test_the_choices_are_the_librarys() -> None:
    from clbench.report.loading import SPLITS
    from clbench.report.render import FORMATS
    from clbench.results import EVALUATIONS
    from clbench.run.bench import EPOCH_MODES
    from clbench.run.execution import EXECUTORS
    from clbench.tuning.scoring import RULES

    assert get_args(options.EvaluationName) == tuple(EVALUATIONS)
    assert get_args(options.SplitName) == tuple(SPLITS)
    assert get_args(options.FormatName) == tuple(FORMATS)
    assert set(get_args(options.EpochMode)) == set(EPOCH_MODES)
    assert get_args(options.ExecutorName) == tuple(EXECUTORS)
    assert get_args(options.RuleName) == tuple(RULES)


@pytest.mark.parametrize("arguments", [["report", "--evaluation", "both"], ["report", "--split", "train"],
                                       ["tune", "mnist2", "-m", "sgd", "--select", "loss"],
                                       ["train", "--executor", "slurm"], ["bench", "--amp", "fp16"],
                                       ["bench", "--epoch", "never"], ["train", "--log", "mlflow"],
                                       ["fetch", "mnist", "--mirror", "ftp://example.org/x"]])
def test_a_value_outside_the_choices_is_a_usage_error_before_any_work(arguments: list[str]) -> None:
    result = runner.invoke(app, arguments)
    assert result.exit_code == 2 and "Invalid value" in result.output, result.output


def test_help_lists_the_choices() -> None:
    text = runner.invoke(app, ["report", "--help"], env={"COLUMNS": "200"}).output
    assert "markdown|csv|latex|html" in text and "task-aware|task-agnostic" in text and "test|validation" in text


def test_version_names_clbench_torch_cuda_and_python() -> None:
    import torch

    from clbench import __version__

    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    cuda = f"yes ({torch.version.cuda})" if torch.cuda.is_available() else "no"
    expected = [f"clbench {__version__}", f"torch {torch.__version__}, CUDA available: {cuda}"]
    assert result.output.splitlines()[:2] == expected
    assert sys.executable in result.output


def test_main_returns_to_a_python_caller(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(os, "_exit", lambda code: pytest.fail(f"main() ended the process ({code})"))
    with pytest.raises(SystemExit) as done:
        main(["spec", "mnist2"])
    assert done.value.code in (0, None) and "name: mnist2" in capsys.readouterr().out
    with pytest.raises(SystemExit) as failed:
        main(["spec", "no-such-benchmark"])
    assert failed.value.code == 2


def test_the_console_script_is_console_main() -> None:
    import tomllib

    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"clbench": "clbench.cli:console_main"}


class Context:
    """The part of a Click context a completion function reads."""

    def __init__(self, **params: object) -> None:
        self.params = params


def test_completion_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "mine.yaml").write_text("name: mine\n")
    monkeypatch.chdir(tmp_path)
    assert completion.benchmark_names("mnist") == ["mnist2", "mnist5"]
    assert completion.benchmark_names("bench") == [str(Path("benchmarks", "mine.yaml"))]
    assert completion.method_names("hat,e") == ["hat,er", "hat,er-ace", "hat,ewc"]
    assert "sgd-f" in completion.method_names("sgd")
    keys = completion.set_keys(Context(benchmark="mnist2"), "training.l")  # type: ignore[arg-type]
    assert "training.lr=" in keys and all(key.startswith("training.l") for key in keys)
    assert completion.set_keys(Context(), "") == ["data.", "network.", "training.", *(
        f"{name}." for name in sorted(completion_builtins()))]  # type: ignore[arg-type]
    assert completion.set_keys(Context(benchmark="mnist2"), "training.lr=0") == []  # type: ignore[arg-type]
    assert completion.devices("c") == ["cpu", "cuda"]


def completion_builtins() -> list[str]:
    from clbench.approaches import BUILTINS

    return list(BUILTINS)


COMPLETE = """
import atexit, sys
atexit.register(lambda: sys.stderr.write(repr(sorted(m for m in sys.modules if m.split(".")[0] in
                                                     ("torch", "numpy", "pandas")))))
from clbench.cli import app
app(prog_name="clbench")
"""


def test_shell_completion_completes_names_without_torch() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "_CLBENCH_COMPLETE": "complete_bash",
           "COMP_WORDS": "clbench train mnist2 --set training.max", "COMP_CWORD": "4"}
    done = subprocess.run([sys.executable, "-c", COMPLETE], capture_output=True, text=True, env=env, timeout=120)
    assert done.stdout.split() == ["training.max_epochs="] and done.stderr.endswith("[]"), done.stderr


def test_evaluate_progress_is_plain_lines_off_a_terminal() -> None:
    from types import SimpleNamespace

    stream = io.StringIO()
    plans = [SimpleNamespace(spec=SimpleNamespace(name="b"), method=method, seed=0) for method in ("sgd", "hat")]
    with EvaluationProgress(Console(file=stream, force_terminal=False), len(plans)) as progress:
        for plan in plans:
            progress.run_evaluated(plan)  # type: ignore[arg-type]
    assert stream.getvalue().splitlines() == ["INFO evaluated b sgd seed 0 (1/2)", "INFO evaluated b hat seed 0 (2/2)"]


def test_evaluate_progress_is_a_bar_on_a_terminal() -> None:
    stream = io.StringIO()
    with EvaluationProgress(Console(file=stream, force_terminal=True, width=100), 3) as progress:
        progress.run_evaluated(object())  # type: ignore[arg-type]
        assert progress.progress.tasks[0].completed == 1
    assert "INFO" not in stream.getvalue()
