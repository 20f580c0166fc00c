"""`clbench report`: the paper's tables and figures from stored results (torch-free)."""

from __future__ import annotations

import glob
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from clbench.cli import completion
from clbench.cli.common import console, handle_errors, parse_seeds
from clbench.cli.options import Compare, EvaluationName, FormatName, Results, SplitName
from clbench.errors import ClbenchError
from clbench.metric_registry import METRICS, metric_help

if TYPE_CHECKING:
    from clbench.report.comparison import Comparison
    from clbench.report.loading import Results
    from clbench.report.sections import Section
    from clbench.report.summary import Summary
    from clbench.report.tables import Report

MetricName = Literal[tuple(METRICS)]  # type: ignore[valid-type]
"""`--metric`'s choices: the registered metrics, checked by Typer (`clbench.metric_registry`)."""


@dataclass(frozen=True)
class ReportRequest:
    """What one `clbench report` call asks for."""

    table: bool
    summary: bool
    time: bool
    hat: bool
    fmt: str
    metric: str
    ci: bool
    references: bool
    seeds: list[int] | None
    plot: Path | None
    monitoring: bool = False
    paper: bool = False
    evaluation: str | None = None  # None: the one the runs' scenarios report (`clbench.results.runs_evaluation`)
    split: str = "test"
    tuning: bool = False
    compare: tuple[str, ...] = ()  # `--compare`: the approaches compared pairwise, as given
    continual: bool = False  # `--continual`: the continual evaluation's metrics (`clbench.report.continual`)

    @property
    def named_monitoring(self) -> list[str]:
        """The approaches whose monitoring section is asked for by name (`--hat`: HAT's, through its reporter)."""
        return ["hat"] if self.hat else []


@handle_errors
def report(
    benchmark: Annotated[str | None, typer.Argument(
        help="Benchmark name or a path to its YAML spec (default: every benchmark in the results).",
        autocompletion=completion.benchmark_names)] = None,
    results: Results = Path("results"),
    table: Annotated[bool | None, typer.Option(
        "--table/--no-table", help="The per-stage table of --metric (default: on, unless --summary, --time, --hat, "
                                   "--monitoring or --paper is given).")] = None,
    summary: Annotated[bool, typer.Option(
        "--summary", help="After the last task: parameters, A<=T, backward transfer, max-previous "
                          "forgetting.")] = False,
    continual: Annotated[bool, typer.Option(
        "--continual", help="After the last task: min-ACC, WC-ACC, windowed forgetting WF10, the stability gap and "
                            "the steps to recover, from the curves of runs trained with training.eval_every "
                            "(De Lange et al. 2023); with --plot, every task's accuracy over the steps.")] = False,
    time: Annotated[bool, typer.Option(
        "--time", help="Training time: total, per epoch, per batch (and the bench's batch-F / batch-FB from "
                       "<results>/_bench).")] = False,
    hat: Annotated[bool, typer.Option(
        "--hat", help="HAT monitoring: capacity per layer and task, weight reuse, smax x c sensitivity.")] = False,
    fmt: Annotated[FormatName, typer.Option("--format", help="The tables' format.")] = "markdown",
    metric: Annotated[MetricName, typer.Option("--metric", help=metric_help())] = "forgetting-ratio",
    evaluation: Annotated[EvaluationName | None, typer.Option(
        "--evaluation", help="task-aware (the task's own head: the task id given, the paper's numbers) or "
                             "task-agnostic (argmax over every class seen so far, no task id). Default: the one the "
                             "runs' scenario reports (task-agnostic in the class scenario, else task-aware).")] = None,
    split: Annotated[SplitName, typer.Option(
        "--split", help="test (each task's test set: the paper's numbers) or validation (the split the protocol "
                        "holds out of each task's training data).")] = "test",
    ci: Annotated[bool, typer.Option(
        "--ci", help="Cells as mean ± half-width of the Student-t 95% confidence interval instead of mean "
                     "(std).")] = False,
    references: Annotated[bool, typer.Option("--references", help="Also list joint and random as rows.")] = False,
    monitoring: Annotated[bool, typer.Option(
        "--monitoring", help="Every present approach's own monitoring tables (e.g. HAT's, as --hat; a plugin "
                             "approach may declare its own).")] = False,
    seeds: Annotated[str | None, typer.Option("--seeds", help="Only these seeds: 0-9, 0,3,7 or 4.")] = None,
    plot: Annotated[Path | None, typer.Option(
        "--plot", help="Write the figures (PNG and PDF) to this folder.")] = None,
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="Write the tables to this file too.")] = None,
    paper: Annotated[bool, typer.Option(
        "--paper", help="The paper's published numbers beside ours (same approach, stage and pmnist variant), with "
                        "the settings where our runs differ, whether ours is within the paper's std (1 point "
                        "without one), and the command that makes each cell without runs; on pmnist, a table "
                        "beyond the paper's (its baselines beside HAT, with the forgetting ratio).")] = False,
    tuning: Annotated[bool, typer.Option(
        "--tuning", help="Each tuned file of `clbench tune`: every grid point's validation score (and test score), "
                         "the chosen point, a warning when test would have chosen another, and the seeds trained "
                         "with it (--tuned).")] = False,
    html_file: Annotated[Path | None, typer.Option(
        "--html", help="Write one self-contained HTML page instead: the --metric table and curves, accuracy-matrix "
                       "heat maps, the summary in both evaluations, time, every approach's monitoring, each run's "
                       "provenance (and the --compare section when given).")] = None,
    compare: Compare = None,
) -> None:
    """The paper's tables (forgetting ratio or accuracy per stage, summary, time, HAT) and figures."""
    if paper and split != "test":
        raise ClbenchError("--paper compares test numbers with the paper's: leave out --split validation")
    names = tuple(name.strip() for name in compare.split(",") if name.strip()) if compare is not None else ()
    if compare is not None and len(set(names)) < 2:
        raise ClbenchError(f"--compare needs at least two approaches, comma-separated (got {compare!r})")
    check_compare_names(names, results)
    others = summary or continual or time or hat or monitoring or paper or tuning or bool(names)
    _check_outputs(html_file, output, plot)
    if html_file is not None:
        given = [name for name, on in (("--table", table is not None), ("--summary", summary),
                                       ("--continual", continual), ("--time", time),
                                       ("--hat", hat), ("--monitoring", monitoring), ("--paper", paper),
                                       ("--tuning", tuning), ("--plot", plot is not None),
                                       ("--output", output is not None), ("--format", fmt != "markdown")) if on]
        if given:
            raise ClbenchError(f"--html writes every section into one page: leave out {', '.join(given)}")
        _check_split(metric, False, split)
        write_html_report(results, benchmark, html_file, metric, ci, references, seeds, evaluation, split, names)
        return
    request = ReportRequest(table if table is not None else not others, summary, time, hat, fmt, metric, ci,
                            references, parse_seeds(seeds) if seeds else None, plot, monitoring, paper, evaluation,
                            split, tuning, names, continual)
    _check_split(metric if request.table or plot is not None else None, continual, split)
    text, figures = run_report(results, benchmark, request)
    if output is not None:
        from clbench.results import atomic_write_bytes

        atomic_write_bytes(output, text.encode())
    console().print(text, markup=False, highlight=False, soft_wrap=True, end="")
    if figures:
        console(stderr=True).print(f"wrote {len(figures)} figure files to {plot}", markup=False, highlight=False)


def _check_split(metric: str | None, continual: bool, split: str) -> None:
    """Refuse, before any work, the metrics asked for by name (`metric`: `--metric` where its table or figures are
    made; `continual`: `--continual`'s) that cannot be computed on `--split` (`split_refusal`: the curves hold test
    images only); a table that merely includes such a metric leaves it out with a note instead."""
    from clbench.metric_registry import split_refusal
    from clbench.report.continual import CONTINUAL_METRICS

    asked = [(f"--metric {metric}", (metric,)) if metric is not None else None,
             ("--continual", CONTINUAL_METRICS) if continual else None]
    for option, names in filter(None, asked):
        refusal = split_refusal(names, split, option)
        if refusal is not None:
            raise ClbenchError(refusal)


def _check_outputs(html_file: Path | None, output: Path | None, plot: Path | None) -> None:
    """Refuse, before any work, an --html or --output that cannot be written as a file, or a --plot folder."""
    from clbench.results import check_output_path

    for option, path in (("--html", html_file), ("--output", output)):
        if path is not None:
            check_output_path(path, option)
    if plot is not None:
        check_output_path(plot, "--plot", folder=True)


def write_html_report(results: Path, benchmark: str | None, page: Path, metric: str, ci: bool, references: bool,
                      seeds: str | None, evaluation: str | None, split: str, compare: tuple[str, ...] = ()) -> None:
    """`--html FILE`: the page of one benchmark (or of every benchmark in the results), written atomically."""
    from clbench.report.html_page import PageOptions, build_page, write_page

    chosen = tuple(parse_seeds(seeds)) if seeds else None
    options = PageOptions(metric, ci, references, chosen, evaluation, split, compare)
    write_page(page, build_page(results, _benchmarks(results, benchmark, chosen), options))
    console(stderr=True).print(f"wrote {page}", markup=False, highlight=False)


def run_report(results: Path, benchmark: str | None, request: ReportRequest) -> tuple[str, list[Path]]:
    """The text of every table asked for, for one or every benchmark, and the figure files written."""
    from clbench.report.sections import join_csv, join_text

    names = _benchmarks(results, benchmark, request.seeds)
    sections: list[Section] = []
    figures: list[Path] = []
    comparisons: list[Comparison] = []
    summaries: list[Summary] | None = [] if len(names) > 1 else None  # several: one FLOPs figure, a panel each
    for name, spec_argument in names:
        found, drawn = _benchmark_sections(results, name, request, spec_argument, alone=len(names) == 1,
                                           comparisons=comparisons, summaries=summaries)
        sections += found
        figures += drawn
    if summaries and request.plot is not None:
        from clbench.report.figures import plot_accuracy_flops

        figures += plot_accuracy_flops(summaries, request.plot)
    if request.compare:
        found, drawn = _compare_sections(comparisons, request, several=len(names) > 1)
        sections += found
        figures += drawn
    if request.fmt == "csv":
        return join_csv(sections), figures
    return join_text(sections, request.fmt, several_benchmarks=len(names) > 1), figures


def _benchmarks(results: Path, benchmark: str | None,
                seeds: Sequence[int] | None = None) -> list[tuple[str, str | None]]:
    """(name, spec argument) of the benchmark asked for, or of every benchmark in the results: the spec argument is
    the spec file the user named it by, or the one its runs were trained from unless that is the shipped spec.
    Every report format asks here first: with nothing to report (no finished run of them at `seeds`), a
    ClbenchError (exit 2) says why."""
    from clbench.report.loading import benchmarks_in, nothing_to_report

    if benchmark:
        name = _benchmark_name(benchmark)
        names = [(name, benchmark if benchmark != name else None)]
    else:
        names = [(name, _spec_file_of_runs(results, name)) for name in benchmarks_in(results)]
    reason = nothing_to_report(results, [name for name, _ in names], seeds)
    if reason is not None:
        raise ClbenchError(reason)
    return names


def _beside_rows(request: ReportRequest) -> bool:
    """True when the request asks for something that does not come from the accuracy rows (HAT's masks, a method's
    monitoring tables, tuned files, training times): a benchmark without rows of `--split` still has that."""
    return request.hat or request.monitoring or request.tuning or request.time


def _benchmark_name(benchmark: str) -> str:
    """The name a benchmark's runs are stored under: the name itself, or the `name:` of the spec file given."""
    from clbench.spec import is_spec_path, load_benchmark

    return load_benchmark(benchmark).name if is_spec_path(benchmark) else benchmark


def _spec_file_of_runs(results: Path, name: str) -> str | None:
    """The spec file a benchmark's runs were trained from (their run.json), unless it is the shipped spec."""
    from clbench.results import DamagedFileError, parse_run_file
    from clbench.spec import benchmarks_dir

    for run_file in sorted(Path(results, name).glob("*/*/seed-*/run.json")):
        try:
            spec_file = parse_run_file(run_file).get("spec_file")
        except DamagedFileError:  # named by the report's notes
            continue
        if not spec_file:
            continue
        path = Path(spec_file)
        shipped = path.name == f"{name}.yaml" and path.parent.name == "benchmarks" and \
            (benchmarks_dir() / path.name).is_file()
        return None if shipped else spec_file
    return None


def _benchmark_sections(results: Path, name: str, request: ReportRequest, spec_argument: str | None = None,
                        alone: bool = True, comparisons: list[Comparison] | None = None,
                        summaries: list[Summary] | None = None) -> tuple[list[Section], list[Path]]:
    """The sections and figures of one benchmark; `alone`: the only one reported, so a benchmark without rows of
    `--split` is nothing to report (exit 2) rather than a note beside the others. With `--compare`, the
    benchmark's comparison goes to `comparisons` (its table is printed after every benchmark's other sections);
    with `summaries`, its `--plot` summary goes there (one accuracy-against-FLOPs figure for every benchmark)."""
    from clbench.report.loading import load_results
    from clbench.report.monitoring import method_reporter, monitoring_reporters
    from clbench.report.notes import no_split_rows_note
    from clbench.report.render import render, render_tables, summary_csv, time_csv
    from clbench.report.sections import monitoring_figures, monitoring_sections, no_monitoring_sections
    from clbench.report.summary import build_summary, summary_table
    from clbench.report.tables import build_report
    from clbench.report.timing import build_time_report, time_table

    loaded = load_results(results, name, request.seeds, spec_argument=spec_argument,
                          evaluation=request.evaluation, split=request.split)
    if alone and loaded.frame.empty and request.split != "test" and not loaded.runs.empty and not _beside_rows(request):
        raise ClbenchError(no_split_rows_note(loaded))
    fmt, ci = request.fmt, request.ci
    sections = []
    main = None
    if request.table or request.plot is not None:
        main = build_report(results, name, request.metric, request.references, results=loaded)
    if request.table and main is not None:
        sections.append((name, request.metric, render(main, fmt, ci)))
    if request.summary:
        summary = build_summary(loaded)
        text = summary_csv(summary, ci) if fmt == "csv" else render_tables([summary_table(summary, ci)], fmt)
        sections.append((name, "summary", text))
    if request.continual:
        from clbench.report.continual import build_continual, continual_csv, continual_table

        built = build_continual(loaded, request.references)
        if alone and not built.rows:  # only references, not asked for: say so rather than print an empty table
            raise ClbenchError(built.notes[-1])
        sections.append((name, "continual", continual_csv(built, ci) if fmt == "csv"
                         else render_tables([continual_table(built, ci)], fmt)))
    if request.time:
        timing = build_time_report(loaded)
        text = time_csv(timing, ci) if fmt == "csv" else render_tables([time_table(timing, ci)], fmt)
        sections.append((name, "time", text))
    named = [reporter for method in request.named_monitoring
             if (reporter := method_reporter(loaded, method)) is not None]
    sections += monitoring_sections(name, loaded, named, fmt)
    if request.paper:
        from clbench.report.paper_report import paper_sections

        sections += [(name, kind, text) for kind, text in paper_sections(results, name, loaded, fmt)]
    if request.tuning:
        sections.append((name, "tuning", _tuning_text(results, name, request.fmt, spec_argument)))
    if request.compare and comparisons is not None:
        comparisons += _compared(loaded, request.compare, alone)
    figures = _draw(request, main, _other_evaluation(results, name, request, loaded, main))
    if request.plot is not None:
        from clbench.report.figures import plot_accuracy_flops

        figures += monitoring_figures(loaded, named, request.plot)
        if summaries is None:
            figures += plot_accuracy_flops([build_summary(loaded)], request.plot)
        else:
            summaries.append(build_summary(loaded))
    if request.plot is not None and request.continual:
        from clbench.report.continual import plot_continual

        figures += plot_continual(loaded, request.plot, request.references)
    if request.monitoring:
        others = [reporter for reporter in monitoring_reporters(loaded)
                  if reporter.method not in request.named_monitoring]  # --hat printed HAT's already
        shown = monitoring_sections(name, loaded, others, fmt)
        sections += shown or ([] if named else no_monitoring_sections(name, loaded, others, fmt))
        figures += monitoring_figures(loaded, others, request.plot) if request.plot is not None else []
    return sections, figures


def _other_evaluation(results: Path, name: str, request: ReportRequest, loaded: Results,
                      main: Report | None) -> Report | None:
    """With --plot, when the runs have both evaluations: the table of the one not asked for (drawn dashed)."""
    from clbench.report.loading import other_evaluation
    from clbench.report.tables import build_report

    other = other_evaluation(loaded) if request.plot is not None and main is not None else None
    return None if other is None else build_report(results, name, request.metric, request.references,
                                                   results=other)


def _tuning_text(results: Path, name: str, fmt: str, spec_argument: str | None = None) -> str:
    """`--tuning`: one table per tuned file (each grid point's validation and test score, the chosen point, the
    point test would have chosen) and the notes (`clbench.tuning.tuning_points`); test rows of every seed."""
    from clbench.report.formatting import Table
    from clbench.report.loading import load_results
    from clbench.report.render import render_tables
    from clbench.tuning.comparison import tuning_points
    from clbench.tuning.tuned_file import tuned_files

    paths = tuned_files(results, name)
    if not paths:
        raise ClbenchError(f"no tuned files in {Path(results, name, '_tuned')}: make them with `clbench tune "
                           f"{shlex.quote(spec_argument or name)} -m METHOD --grid KEY=V1,V2,... --results "
                           f"{shlex.quote(str(results))}`")
    rows = load_results(results, name, split="test").rows
    points, notes = tuning_points(rows, paths)
    if fmt == "csv":
        return points.to_csv(index=False)
    tables = []
    for file, group in points.groupby("file", sort=True):
        first = group.iloc[0]
        rule = first["rule"]
        seeds = f"; trained with --tuned at seeds {first['tuned_seeds']}" if first["tuned_seeds"] else ""
        rows_text = [[point, f"{validation:.4f}", "–" if test != test else f"{test:.4f}",
                      "chosen (validation)" if chosen else ("test's choice" if test_choice else "")]
                     for point, validation, test, chosen, test_choice in
                     group[["point", "validation_score", "test_score", "chosen", "test_choice"]].itertuples(
                         index=False)]
        tables.append(Table(["point", f"validation {rule}", f"test {rule}", "chosen"], rows_text,
                            title=f"{first['method']} ({file}): tuned on seed {first['tuning_seed']}, "
                                  f"{first['evaluation']}{seeds}"))
    if notes:
        tables.append(Table([], [], notes=notes))
    return render_tables(tables, fmt)


def _draw(request: ReportRequest, main: Report | None, other: Report | None = None) -> list[Path]:
    """The figures, when --plot is given (matplotlib is imported only then); `other`: the other evaluation's
    table, drawn dashed in the same figure."""
    if request.plot is None or main is None:
        return []
    from clbench.report import figures as plots

    return plots.plot_curves(main, request.plot, ci=request.ci, other=other)


def check_compare_names(names: Sequence[str], results: Path) -> None:
    """ClbenchError (exit 2) for a `--compare` name whose method is unknown: neither registered (a built-in, an
    installed plugin) nor a method with runs in `results` (a row label names its method first: `sgd (... )`)."""
    from clbench.approaches import BUILTINS

    for name in names:
        method = name.split(" (", 1)[0]
        if method in BUILTINS or any(path.is_dir() for path in Path(results).glob(f"*/{glob.escape(method)}")):
            continue
        from clbench.approaches.registry import approach_names  # imports torch: only for a name not known so far

        known = approach_names()
        if method not in known:
            raise ClbenchError(f"--compare: unknown method {method!r} (no approach has that name, and no runs in "
                               f"{results} do); known approaches: {', '.join(known)}")


def _compared(loaded: Results, names: Sequence[str], alone: bool) -> list[Comparison]:
    """`--compare` on one benchmark; among several benchmarks, one that lacks an approach or its seeds is left
    out (the comparison's refusal, exit 2, stands when the benchmark is the only one)."""
    from clbench.errors import ResultsError
    from clbench.report.comparison import build_comparison

    try:
        return [build_comparison(loaded, names)]
    except ResultsError as error:
        if alone:
            raise
        console(stderr=True).print(f"{loaded.benchmark} left out of --compare: {error}", markup=False,
                                   highlight=False, soft_wrap=True)
        return []


def _compare_sections(comparisons: list[Comparison], request: ReportRequest,
                      several: bool) -> tuple[list[Section], list[Path]]:
    """The comparison table of each benchmark and, over several benchmarks, the ranks (and the critical-difference
    figures under --plot)."""
    from clbench.report.comparison import MIN_SEEDS, comparison_csv, comparison_table
    from clbench.report.ranking import build_ranking, ranking_csv, ranking_table
    from clbench.report.render import render_tables

    if not comparisons:
        raise ClbenchError(f"--compare: no benchmark has runs of every one of {', '.join(request.compare)} with "
                           f"{MIN_SEEDS} seeds (see the lines above)")
    fmt = request.fmt
    sections: list[Section] = [
        (comparison.benchmark, "compare", comparison_csv([comparison]) if fmt == "csv"
         else render_tables([comparison_table(comparison)], fmt)) for comparison in comparisons]
    if not several:
        return sections, []
    ranking = build_ranking(comparisons)
    text = ranking_csv(ranking) if fmt == "csv" else render_tables([ranking_table(ranking)], fmt)
    sections.append(("all benchmarks", "ranks", text))
    if request.plot is None:
        return sections, []
    from clbench.report.figures import plot_critical_differences

    return sections, plot_critical_differences(ranking, request.plot)

