"""The options and arguments several commands share, as `Annotated` aliases (Typer's recommended style).

A command writes `seeds: Seeds = "0"`; the default stays in the signature, the declaration here. Fixed choices are
`Literal` types, so that `--help` lists them and Click refuses any other value (exit 2) before the command runs; the
tuples they mirror in the library (`clbench.results.EVALUATIONS`, ...) are checked equal by the tests. Nothing here
imports torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer

from clbench.cli import completion
from clbench.cli.common import absolute_folder, absolute_location

EvaluationName = Literal["task-aware", "task-agnostic"]
"""`clbench.results.EVALUATIONS`."""
SplitName = Literal["test", "validation"]
"""`clbench.report.loading.SPLITS`."""
FormatName = Literal["markdown", "csv", "latex", "html"]
"""`clbench.report.render.FORMATS`."""
RuleName = Literal["accuracy", "forgetting-ratio"]
"""`clbench.tuning.scoring.RULES`."""
ExecutorName = Literal["local", "ray"]
"""`clbench.run.execution.EXECUTORS`."""
EpochMode = Literal["auto", "measure", "extrapolate"]
"""`clbench.run.bench.EPOCH_MODES`."""
AmpName = Literal["none", "bf16"]
"""`clbench bench --amp`: float32, or bfloat16 autocast (`training.amp`)."""

Benchmark = Annotated[str, typer.Argument(help="Benchmark name from benchmarks/ or a path to a YAML spec.",
                                          autocompletion=completion.benchmark_names)]
Methods = Annotated[str, typer.Option(
    "--method", "-m", autocompletion=completion.method_names,
    help="Approach(es), comma-separated, e.g. hat,sgd,joint; a plugin as path/to/file.py:Class or "
         "package.module:Class.")]
Seeds = Annotated[str, typer.Option("--seeds", help="Seeds: 0-9, 0,3,7 or 4.")]
Device = Annotated[str, typer.Option(
    "--device", autocompletion=completion.devices,
    # free text, checked by `clbench.run.engine.resolve_device`: `cuda:N` is no fixed list of choices
    help="auto, cpu, cuda or cuda:N.")]
SetOption = Annotated[list[str], typer.Option(
    "--set", autocompletion=completion.set_keys,
    help="Override a spec value, e.g. --set training.max_epochs=3, --set hat.smax=200 (repeatable).")]
Results = Annotated[Path, typer.Option("--results", envvar="CLBENCH_RESULTS", help="Results folder.")]
DataDir = Annotated[Path | None, typer.Option(
    "--data-dir", envvar="CLBENCH_DATA", help="Data cache folder (default: ~/.cache/clbench).",
    callback=lambda value: absolute_folder(value) if value is not None else None)]
Mirror = Annotated[str | None, typer.Option(
    "--mirror", envvar="CLBENCH_MIRROR", callback=absolute_location,
    help="Folder or URL holding <mirror>/<dataset>/<upstream file name>, used instead of the upstream hosts.")]
Jobs = Annotated[int, typer.Option("--jobs", "-j", help="Runs at once, over this many worker processes.")]
Evaluation = Annotated[EvaluationName | None, typer.Option(
    "--evaluation", help="task-aware or task-agnostic rows (default: the one the scenario's comparison reports: "
                         "task-agnostic in the class scenario, else task-aware).")]
Compare = Annotated[str | None, typer.Option(
    "--compare", autocompletion=completion.method_names,
    help="Compare these approaches pairwise (comma-separated, at least two: e.g. er,derpp,sgd; a method or a "
         "table's row label): per metric, the mean paired difference over seeds with its 95% CI, the paired "
         "t-test (Holm-corrected over the pairs) and the exact Wilcoxon test, a verdict where the corrected test "
         "supports it; over several benchmarks the average ranks (Friedman, Nemenyi).")]
