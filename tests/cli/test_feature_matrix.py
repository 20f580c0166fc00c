"""The walk a user takes, as a matrix: every shipped benchmark x every command that takes one (`list -b`, `spec`,
`train`, `evaluate`, `report` in every format and option, `tune`) x every scenario, for one approach of each family
(ewc: regularisation, er: replay, hat, adahat, packnet and wsn: parameter isolation, gpm: gradient projection,
supsup: masks over fixed weights with the task inferred, joint and random: the references), on synthetic data in
each benchmark's shapes, with tiny settings.

Each (benchmark, scenario) is trained once per module (one `train` per approach: a refusal is a cell of its own);
every other command then reads that results folder. The invariants of every cell: the exit code expected (0, or 2
with a one-line reason), no traceback, the random reference at rho = -1 and the joint at rho = 0 at every stage of
both evaluations and both splits, `evaluate`'s printed means equal to the stored rows, and every `clbench ...`
command the output prints accepted when pasted, naming the same results folder.

The fast part (CI) walks mnist2 in every scenario and the commands that train nothing on every benchmark; the rest
of the matrix is marked slow (`pytest -m slow tests/cli/test_feature_matrix.py`).
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from clioutputs import assert_exit, assert_pasted_commands_work, evaluate_table, stored_stage_means
from synthetic import synthetic_loader
from typer.testing import CliRunner

from clbench.cli import app

BENCHMARKS = ("mnist2", "pmnist", "mixture8", "cifar-incremental", "mnist5", "cifar100-10", "seq-mnist",
              "rot-mnist", "cifar10-5")
SCENARIOS = ("task", "class", "domain")
FAMILIES = ("ewc", "er", "hat", "adahat", "packnet", "wsn", "gpm", "supsup", "joint", "random")
EVALUATIONS = ("task-aware", "task-agnostic")
SPLITS = ("test", "validation")
METRICS = ("forgetting-ratio", "accuracy", "bwt", "forgetting", "forgetting-mammoth", "intransigence",
           "learning-accuracy", "fwt")
FAST = {("mnist2", "task"), ("mnist2", "class"), ("mnist2", "domain")}

# What the specs and the approaches refuse, read by hand from benchmarks/*.yaml and the approaches' classes.
UNEQUAL_TASKS = {"mixture8", "cifar-incremental"}  # tasks of different class counts: no domain scenario
NO_VALIDATION = {"seq-mnist", "cifar10-5"}  # data.validation_fraction 0 (the online protocol)
NEEDS_TASK_ID = {"hat", "adahat", "packnet", "wsn"}  # their prediction picks the task's masks: no domain scenario
NO_DOMAIN = {*NEEDS_TASK_ID, "supsup", "xder"}  # supsup: one mask per task with its id; xder: per-head terms
NO_RESNET = {"hat", "adahat", "packnet", "wsn", "gpm", "supsup"}  # no ResNet-18 (cifar10-5's body)
MLP_ONLY = {"supsup"}  # no AlexNet-like body either
REFUSES_CLASS = {"gpm"}  # the class scenario (`refuses_class`)
RESNET = {"cifar10-5"}
ALEXNET = {"mixture8", "cifar-incremental", "cifar100-10"}
MANY_TASKS = {"pmnist", "rot-mnist"}  # permuted, rotated: data.n_tasks

# Tiny settings: a few samples, one epoch, 3 permutations or rotations; narrow conv bodies without dropout, in small
# batches for 3 epochs (so that the joint beats chance clearly enough for the forgetting ratio to be defined).
TINY = ["--set", "data.max_train_samples=100", "--set", "data.max_test_samples=40", "--set",
        "training.max_epochs=1"]
CONV = ["--set", "training.max_epochs=3", "--set", "training.batch_size=8"]
SHRINK = {**{name: [*CONV, "--set", "network.conv_channels=[4,4,8]", "--set", "network.fc_units=[32,32]", "--set",
                    "network.conv_dropout=[0,0,0]", "--set", "network.fc_dropout=0"] for name in ALEXNET},
          **{name: [*CONV, "--set", "network.nf=2"] for name in RESNET},
          **{name: ["--set", "data.n_tasks=3"] for name in MANY_TASKS}}

runner = CliRunner()


def cell_param(benchmark: str, scenario: str):  # type: ignore[no-untyped-def]
    marks = () if (benchmark, scenario) in FAST else (pytest.mark.slow,)
    return pytest.param((benchmark, scenario), id=f"{benchmark}-{scenario}", marks=marks)


CELLS = [cell_param(benchmark, scenario) for benchmark in BENCHMARKS for scenario in SCENARIOS]


def scenario_refused(benchmark: str, scenario: str) -> bool:
    return scenario == "domain" and benchmark in UNEQUAL_TASKS


def train_exit(benchmark: str, scenario: str, method: str) -> int:
    """2 where the benchmark refuses the scenario or the approach refuses the benchmark or scenario; else 0."""
    refused = scenario_refused(benchmark, scenario) or (scenario == "domain" and method in NO_DOMAIN) \
        or (benchmark in RESNET and method in NO_RESNET) or (benchmark in ALEXNET and method in MLP_ONLY) \
        or (scenario == "class" and method in REFUSES_CLASS)
    return 2 if refused else 0


def default_evaluation(scenario: str) -> str:
    """The evaluation a scenario's comparison reports: task-agnostic in the class scenario, else task-aware."""
    return "task-agnostic" if scenario == "class" else "task-aware"


@dataclass(frozen=True)
class Cell:
    """One (benchmark, scenario) trained: its results folder, the train command's options and each approach's
    `train` result."""

    benchmark: str
    scenario: str
    results: Path
    options: list[str]  # the --set options of every command on these runs
    trained: dict[str, Any]  # method -> the CliRunner result of its `train`

    @property
    def accepted(self) -> list[str]:
        return [method for method in FAMILIES if train_exit(self.benchmark, self.scenario, method) == 0]


@pytest.fixture(scope="module")
def synthetic_data() -> Iterator[None]:
    """Every command of this module loads synthetic data sets (nothing fetched) and prints on a wide console (no
    wrapped lines, whole table cells)."""
    import clbench.run.loaders as loaders

    with pytest.MonkeyPatch.context() as patch:
        loader = synthetic_loader(n_train=1000, n_test=400)
        patch.setattr(loaders, "fetching_loader", lambda data_dir, mirror: loader)
        patch.setattr(loaders, "prepare_data", lambda specs, data_dir, mirror: None)
        patch.setenv("COLUMNS", "400")
        yield


@pytest.fixture(scope="module", params=CELLS)
def cell(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, synthetic_data: None) -> Cell:
    benchmark, scenario = request.param
    results = tmp_path_factory.mktemp(f"{benchmark}-{scenario}") / "results"
    options = ["--set", f"data.scenario={scenario}", *TINY, *SHRINK.get(benchmark, [])]
    trained = {method: runner.invoke(app, ["train", benchmark, "-m", method, "--results", str(results),
                                           "--seeds", "0", "--device", "cpu", *options]) for method in FAMILIES}
    return Cell(benchmark, scenario, results, options, trained)


@pytest.fixture()
def paste(tmp_path: Path, synthetic_data: None):  # type: ignore[no-untyped-def]
    """Runs a pasted command in an empty current folder (a command without --results writes there, not into the
    checkout); a pasted `train` plans and validates its runs but trains nothing."""
    import importlib

    train_module = importlib.import_module("clbench.cli.train")  # the module (`clbench.cli.train` is the command)

    def invoke(arguments: list[str]):  # type: ignore[no-untyped-def]
        with pytest.MonkeyPatch.context() as patch:
            patch.chdir(tmp_path)
            patch.setattr(train_module, "_run", lambda plans, execution, loader: [])
            return runner.invoke(app, arguments)

    return invoke


def report(cell: Cell, *options: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, ["report", cell.benchmark, "--results", str(cell.results), *options])


# ------------------------------------------------------------------------------------------ without training


def test_the_matrix_walks_every_shipped_benchmark() -> None:
    from clbench.spec import benchmark_names

    assert sorted(BENCHMARKS) == benchmark_names()


@pytest.mark.parametrize("benchmark", BENCHMARKS)
def test_list_of_one_benchmark_exits_0(benchmark: str, paste) -> None:  # type: ignore[no-untyped-def]
    result = runner.invoke(app, ["list", "-b", benchmark])
    assert_exit(result, 0)
    assert_pasted_commands_work(result.output, None, paste)


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("benchmark", BENCHMARKS)
def test_spec_in_every_scenario(benchmark: str, scenario: str, tmp_path: Path, paste) -> None:  # type: ignore[no-untyped-def]
    """The spec, and the command its header suggests run on it as the header says: saved as mine.yaml (in the
    folder `paste` runs in) with its own `name:`."""
    result = runner.invoke(app, ["spec", benchmark, "--set", f"data.scenario={scenario}"])
    assert_exit(result, 2 if scenario_refused(benchmark, scenario) else 0)
    if result.exit_code == 0:
        assert f"scenario: {scenario}" in result.output
        (tmp_path / "mine.yaml").write_text(result.output.replace(f"name: {benchmark}\n", "name: mine\n", 1))
    assert_pasted_commands_work(result.output, None, paste)


# ------------------------------------------------------------------------------------------------- training


@pytest.mark.parametrize("method", FAMILIES)
def test_train_exits_as_expected(cell: Cell, method: str, paste) -> None:  # type: ignore[no-untyped-def]
    result = cell.trained[method]
    expected = train_exit(cell.benchmark, cell.scenario, method)
    assert_exit(result, expected)
    runs = list((cell.results / cell.benchmark / method).glob("*/seed-0/accuracy.parquet"))
    assert len(runs) == (1 if expected == 0 else 0)
    assert_pasted_commands_work(result.output, cell.results, paste)


# --------------------------------------------------------------------------------------------------- report


def report_exit(cell: Cell, options: tuple[str, ...]) -> int:
    """2 where there is nothing to report: no run trained, or validation rows of a benchmark that holds none."""
    nothing = not cell.accepted or (cell.benchmark in NO_VALIDATION and "validation" in options)
    return 2 if nothing else 0


REPORT_OPTIONS = [
    *[("--format", name) for name in ("markdown", "csv", "latex", "html")],
    *[("--metric", name) for name in METRICS],
    *[("--split", name) for name in SPLITS],
    *[("--evaluation", name) for name in EVALUATIONS],
    ("--references",), ("--summary",), ("--monitoring",), ("--summary", "--evaluation", "task-agnostic"),
]


@pytest.mark.parametrize("options", REPORT_OPTIONS, ids=" ".join)
def test_report_option(cell: Cell, options: tuple[str, ...], paste) -> None:  # type: ignore[no-untyped-def]
    result = report(cell, *options)
    assert_exit(result, report_exit(cell, options))
    assert_pasted_commands_work(result.output, cell.results, paste)


def test_report_plot_writes_figures(cell: Cell, tmp_path: Path, paste) -> None:  # type: ignore[no-untyped-def]
    result = report(cell, "--plot", str(tmp_path / "figures"))
    assert_exit(result, report_exit(cell, ()))
    if result.exit_code == 0:
        assert list((tmp_path / "figures").glob("*.png")) and list((tmp_path / "figures").glob("*.pdf"))
    assert_pasted_commands_work(result.output, cell.results, paste)


def test_report_html_writes_a_page(cell: Cell, tmp_path: Path, paste) -> None:  # type: ignore[no-untyped-def]
    page = tmp_path / "page.html"
    result = report(cell, "--html", str(page))
    assert_exit(result, report_exit(cell, ()))
    assert page.is_file() == (result.exit_code == 0)
    assert_pasted_commands_work(result.output, cell.results, paste)


@pytest.mark.parametrize("split", SPLITS)
@pytest.mark.parametrize("evaluation", EVALUATIONS)
def test_references_read_minus_one_and_zero(cell: Cell, evaluation: str, split: str) -> None:
    """The joint reference's forgetting ratio is 0 at every stage where it is defined, in the table `report
    --references` prints. The random reference's is -1 exactly where A_R is taken per stage (the task-agnostic
    evaluation outside the domain scenario); where it is the paper's A_R^u (the task-aware evaluation, the domain
    scenario) it is the mean of the random run's re-drawn column, so the random run reads -1 only up to its draws'
    noise: there it must equal rho computed by hand from the stored rows. A stage is shown only where it is defined;
    where none is, the report says why."""
    result = report(cell, "--references", "--format", "csv", "--evaluation", evaluation, "--split", split)
    assert_exit(result, report_exit(cell, ("--split", split)))
    if result.exit_code != 0:
        return
    table = pd.read_csv(io.StringIO(result.output))
    table["method"] = table["approach"].str.split().str[0]
    n_tasks = _n_tasks(cell)
    per_stage = evaluation == "task-agnostic" and cell.scenario != "domain"
    by_hand = None if per_stage else paper_random_rho(cell, split)
    for method in ("random", "joint"):
        rows = table[table["method"] == method].set_index("stage")["mean"]
        assert sorted(rows.index) == list(range(1, n_tasks + 1)), f"{method}:\n{result.output}"
        defined = rows.dropna()
        if defined.empty:  # the joint never beats chance clearly at these settings: said in a note, never a number
            notes = report(cell, "--references", "--evaluation", evaluation, "--split", split).output
            assert "rho undefined" in notes, f"{method}: no stage defined and no note why\n{notes}"
            continue
        expected = np.zeros(len(defined)) if method == "joint" else \
            np.full(len(defined), -1.0) if per_stage else by_hand[defined.index.to_numpy() - 1]
        assert np.allclose(defined.to_numpy(), expected, atol=1e-9), \
            f"{method} should read {expected}:\n{result.output}"


def paper_random_rho(cell: Cell, split: str) -> np.ndarray:
    """The random run's rho^{<=t} by hand from its stored rows and the joint's (task-aware rows: the domain scenario
    stores its one evaluation under that name), with the paper's A_R^u, the mean of its column u over t >= u."""
    random, joint = (stored_matrix(cell, method, split) for method in ("random", "joint"))
    size = len(random)
    chance = [np.mean([random[t][u] for t in range(u, size)]) for u in range(size)]
    return np.array([np.mean([(random[t][u] - chance[u]) / (joint[t][u] - chance[u]) - 1 for u in range(t + 1)])
                     for t in range(size)])


def stored_matrix(cell: Cell, method: str, split: str) -> list[list[float]]:
    """The task-aware accuracies of a method's run, row t holding tasks 1..t+1 (learned tasks only)."""
    [path] = (cell.results / cell.benchmark / method).glob("*/seed-0/accuracy.parquet")
    rows = pd.read_parquet(path)
    rows = rows[(rows["split"] == split) & (rows["evaluation"] == "task-aware") & (rows["stage"] >= 1)
                & (rows["task"] <= rows["stage"])]
    size = int(rows["stage"].max())
    return [[float(rows[(rows["stage"] == t) & (rows["task"] == u)]["accuracy"].iloc[0]) for u in range(1, t + 1)]
            for t in range(1, size + 1)]


def _n_tasks(cell: Cell) -> int:
    [path] = (cell.results / cell.benchmark / "joint").glob("*/seed-0/accuracy.parquet")
    return int(pd.read_parquet(path)["stage"].max())


# ------------------------------------------------------------------------------------------------- evaluate


@pytest.mark.parametrize("evaluation", [None, *EVALUATIONS])
def test_evaluate_prints_the_stored_means(cell: Cell, evaluation: str | None, paste) -> None:  # type: ignore[no-untyped-def]
    """Each printed per-stage mean is the mean over the tasks learned so far of the stored test rows, in the
    evaluation asked for (by default the scenario's): those `evaluate` wrote and those `train` wrote."""
    chosen = [] if evaluation is None else ["--evaluation", evaluation]
    methods = cell.accepted or list(FAMILIES)
    result = runner.invoke(app, ["evaluate", cell.benchmark, "-m", ",".join(methods), "--results", str(cell.results),
                                 "--seeds", "0", "--device", "cpu", *cell.options, *chosen])
    assert_exit(result, 0 if cell.accepted else 2)
    if not cell.accepted:
        return
    printed: dict[str, dict[int, float]] = {}
    for run_id, stage, mean in evaluate_table(result.output):
        printed.setdefault(run_id, {})[stage] = mean
    shown = evaluation or default_evaluation(cell.scenario)
    for method in methods:
        [folder] = (cell.results / cell.benchmark / method).glob("*/seed-0")
        run_id = str(folder.relative_to(cell.results))
        for name in ("evaluation.parquet", "accuracy.parquet"):
            stored = stored_stage_means(folder / name, shown)
            assert stored or method in NEEDS_TASK_ID, f"{run_id}: no {shown} rows in {name}"
            assert printed.get(run_id, {}).keys() == stored.keys(), f"{run_id} ({shown}):\n{result.output}"
            for stage, mean in stored.items():
                assert abs(printed[run_id][stage] - mean) <= 5e-5 + 1e-9, \
                    f"{run_id} stage {stage}: printed {printed[run_id][stage]:.4f}, {name} {mean:.4f} ({shown})"
    assert_pasted_commands_work(result.output, cell.results, paste)


# --------------------------------------------------------------------------------------------------- tuning


def test_tune_then_report_tuning(cell: Cell, tmp_path: Path, paste) -> None:  # type: ignore[no-untyped-def]
    """A two-point grid of ewc tuned on validation data, then `report --tuning` on its folder; every command the
    two print works pasted."""
    results = tmp_path / "tuning"
    tuned = runner.invoke(app, ["tune", cell.benchmark, "-m", "ewc", "--grid", "ewc.lamb=1,100", "--results",
                                str(results), "--device", "cpu", *cell.options])
    refused = not cell.accepted or cell.benchmark in NO_VALIDATION
    assert_exit(tuned, 2 if refused else 0)
    assert_pasted_commands_work(tuned.output, results, paste)
    if refused:
        return
    assert list((results / cell.benchmark / "_tuned").glob("*"))
    shown = runner.invoke(app, ["report", cell.benchmark, "--results", str(results), "--tuning"])
    assert_exit(shown, 0)
    assert_pasted_commands_work(shown.output, results, paste)
