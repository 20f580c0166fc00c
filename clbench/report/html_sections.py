"""The sections of one benchmark in the HTML report (`clbench report --html`): the per-stage table and its curves,
the accuracy-matrix heat maps, the summary in both evaluations, the time table, every present approach's
monitoring tables and figures, and each run's provenance.

Tables are exactly the HTML that `clbench report --format html` prints for the same options (the same builders
and `render_tables`), each in a `<div class="tables" data-table="KIND">`; figures are PNGs drawn into a scratch
folder by the `--plot` functions and embedded as base64 data URIs. Every text from the data is escaped.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from clbench.errors import ResultsError
from clbench.report.comparison import Comparison, build_comparison, comparison_table
from clbench.report.formatting import Table, format_seeds
from clbench.report.loading import Results, load_results, other_evaluation, with_evaluation
from clbench.report.monitoring import method_reporter
from clbench.report.ranking import build_ranking, ranking_table
from clbench.report.render import render, render_tables
from clbench.report.sections import monitoring_text
from clbench.report.summary import build_summary, summary_table
from clbench.report.tables import Report, build_report
from clbench.report.timing import build_time_report, time_table
from clbench.results import EVALUATIONS, RunStatus

PNG = ".png"


@dataclass(frozen=True)
class PageOptions:
    """What the tables of the page are computed with (`clbench report`'s options of the same names)."""

    metric: str = "forgetting-ratio"
    ci: bool = False
    references: bool = False
    seeds: tuple[int, ...] | None = None
    evaluation: str | None = "task-aware"  # None: the one the runs' scenarios report (`load_results`)
    split: str = "test"
    compare: tuple[str, ...] = ()  # `--compare`: the approaches compared pairwise; () for no comparison section


@dataclass(frozen=True)
class PageSection:
    """One section of the page: its heading, its anchor (id) and its HTML body."""

    title: str
    anchor: str
    body: str


def benchmark_sections(results_dir: Path, benchmark: str, options: PageOptions, scratch: Path,
                       spec_argument: str | None = None, comparisons: list[Comparison] | None = None,
                       alone: bool = True) -> list[PageSection]:
    """Every section of one benchmark, figures drawn into `scratch` (a folder the caller deletes); with
    `options.compare`, the benchmark's comparison also goes to `comparisons` (for the ranks across benchmarks).
    `alone`: the page's only benchmark, where approaches that cannot be compared are refused (ResultsError), as
    `report --compare` refuses them; beside other benchmarks the section says why instead."""
    chosen = load_results(results_dir, benchmark, options.seeds, spec_argument=spec_argument,
                          evaluation=options.evaluation, split=options.split)
    loaded = {evaluation: with_evaluation(chosen, evaluation) for evaluation in EVALUATIONS}  # files read once
    main = build_report(results_dir, benchmark, options.metric, options.references, results=chosen)
    sections = [
        _table_section(main, _other_report(main, chosen, options), options, scratch),
        _matrices_section(chosen, scratch),
        _summary_section(loaded, options, scratch),
        *([section] if (section := _continual_section(chosen, options, scratch)) else []),
        PageSection("training time", "time", _tables_block("time", render_tables(
            [time_table(build_time_report(chosen), options.ci)], "html"))),
        *[section for method in _methods(chosen) if (section := _monitoring_section(chosen, method, scratch))],
        *([_comparison_section(chosen, options.compare, comparisons, alone)] if options.compare else []),
        _provenance_section(chosen),
    ]
    return [PageSection(section.title, f"{benchmark}-{section.anchor}", section.body) for section in sections]


def _other_report(main: Report, chosen: Results, options: PageOptions) -> Report | None:
    """The per-stage table in the other evaluation, when the runs have both (drawn dashed in the curves)."""
    other = other_evaluation(chosen) if main.rows else None
    return None if other is None else build_report(chosen.results_dir, chosen.benchmark, options.metric,
                                                   options.references, results=other)


def _table_section(main: Report, other: Report | None, options: PageOptions, scratch: Path) -> PageSection:
    from clbench.report.figures import plot_curves

    paths = [path for path in plot_curves(main, scratch, ci=options.ci, other=other) if path.suffix == PNG]
    caption = f"{options.metric} per stage, mean over seeds" + (
        f" ({main.evaluation} solid, {other.evaluation} dashed)" if other is not None else "")
    body = _tables_block("table", render(main, "html", options.ci)) + _figures_block(
        [(caption, path) for path in paths], "curves")
    return PageSection(f"{options.metric} per stage ({main.evaluation})", "table", body)


def _matrices_section(results: Results, scratch: Path) -> PageSection:
    from clbench.report.heatmaps import plot_matrices

    drawn = plot_matrices(results, scratch)
    intro = (f"<p>Accuracy A[t, u] on task u after learning task t ({html.escape(results.evaluation)}, "
             f"{html.escape(results.split)} split), mean over the complete runs of each approach and config.</p>\n")
    body = intro + (_figures_block(drawn, "matrices") if drawn else "<p>No complete runs.</p>\n")
    return PageSection("accuracy matrices", "matrices", body)


def _summary_section(loaded: dict[str, Results], options: PageOptions, scratch: Path) -> PageSection:
    """The `--summary` table (A<=T, BWT, forgetting, LA, FWT, I, memory, training FLOPs) in each evaluation, each
    with its accuracy against training FLOPs where the runs counted them."""
    from clbench.report.figures import plot_accuracy_flops

    summaries = {evaluation: build_summary(results) for evaluation, results in loaded.items()}
    blocks = [f"<h4>{html.escape(evaluation)}</h4>\n" + _tables_block(
        f"summary-{evaluation}", render_tables([summary_table(summary, options.ci)], "html")) + _figures_block(
        [(f"accuracy against training FLOPs ({evaluation}), mean and std over seeds", path)
         for path in plot_accuracy_flops([summary], scratch / evaluation) if path.suffix == PNG], "compute")
        for evaluation, summary in summaries.items()]
    return PageSection("summary and memory (after the last task)", "summary", "".join(blocks))


def _continual_section(results: Results, options: PageOptions, scratch: Path) -> PageSection | None:
    """`--continual`'s table and figure (`clbench.report.continual`); None when no run has a curve; on a split the
    curves do not hold, the note that says so instead (`split_note`)."""
    from clbench.metric_registry import split_note
    from clbench.report.continual import (
        CONTINUAL_METRICS,
        build_continual,
        continual_table,
        curves_by_label,
        plot_continual,
    )

    left_out = split_note(CONTINUAL_METRICS, results.split)
    if left_out:
        if not curves_by_label(results, options.references):
            return None
        return PageSection(f"continual evaluation ({results.evaluation})", "continual",
                           "".join(f"<p>{html.escape(note)}</p>\n" for note in left_out))
    paths = [path for path in plot_continual(results, scratch, options.references) if path.suffix == PNG]
    if not paths:
        return None
    caption = "each task's accuracy over the optimiser steps (task boundaries dotted), the lowest seed of each approach"
    built = build_continual(results, options.references)
    body = _tables_block("continual", render_tables([continual_table(built, options.ci)], "html")) + _figures_block(
        [(caption, paths[0])], "continual")
    return PageSection(f"continual evaluation ({results.evaluation})", "continual", body)


def _comparison_section(results: Results, names: Sequence[str], comparisons: list[Comparison] | None,
                        alone: bool) -> PageSection:
    """`--compare`'s table (`clbench.report.comparison`); the reason instead where the approaches cannot be
    compared on this benchmark (raised when it is the page's only one)."""
    try:
        comparison = build_comparison(results, names)
    except ResultsError as error:
        if alone:
            raise
        body = f"<p class=\"error\">{html.escape(str(error))}</p>\n"
    else:
        body = _tables_block("compare", render_tables([comparison_table(comparison)], "html"))
        if comparisons is not None:
            comparisons.append(comparison)
    return PageSection("paired comparisons across seeds", "compare", body)


def ranking_section(comparisons: Sequence[Comparison], scratch: Path) -> PageSection:
    """The ranks across benchmarks (`clbench.report.ranking`) and their critical-difference diagrams."""
    from clbench.report.figures import plot_critical_differences

    ranking = build_ranking(comparisons)
    paths = [path for path in plot_critical_differences(ranking, scratch) if path.suffix == PNG]
    body = _tables_block("ranks", render_tables([ranking_table(ranking)], "html")) + _figures_block(
        [(path.stem, path) for path in paths])
    return PageSection("ranks across benchmarks", "ranks", body)


def _methods(results: Results) -> list[str]:
    return sorted({str(run["method"]) for run in results.info.values()})


def _monitoring_section(results: Results, method: str, scratch: Path) -> PageSection | None:
    """The tables and figures of `method`'s monitoring reporter (as `--monitoring --plot`); None when it declares
    none or has nothing to show; a reporter that cannot be imported is named instead."""
    try:
        reporter = method_reporter(results, method)
    except ResultsError as error:
        return PageSection(f"{method} monitoring", f"monitoring-{method}",
                           f"<p class=\"error\">{html.escape(str(error))}</p>\n")
    if reporter is None:
        return None
    text = monitoring_text(reporter, results, "html")
    paths = [path for path in reporter.plots(results, scratch / f"monitoring-{method}") if path.suffix == PNG]
    if not text and not paths:
        return None
    body = (_tables_block(f"monitoring-{method}", text) if text else "") + _figures_block(
        [(path.stem, path) for path in paths])
    return PageSection(f"{method} monitoring", f"monitoring-{method}", body)


# ---------------------------------------------------------------------------------------------- provenance

PROVENANCE_HEADER = ["run", "status", "config hash", "seed", "commit", "device", "clbench", "torch", "finished (UTC)"]
PROVENANCE_KEYS = ("git_commit", "device", "clbench_version", "torch_version", "finished_utc")


def provenance_table(results: Results) -> Table:
    """One row per run (finished, incomplete or damaged) with what its run.json records of where it came from."""
    rows = []
    for run_id, run in sorted(results.info.items()):
        stored = results.run_file(run_id) or {}
        rows.append(_provenance_row(run_id, str(stored.get("status", RunStatus.COMPLETE)), str(run["config_hash"]),
                                    run["seed"], stored))
    for run in results.incomplete:
        stored = results.run_files.get(str(Path(results.results_dir, str(run["run_id"])))) or run
        config_hash = stored.get("config_hash") or str(run["run_id"]).split("/")[-2]
        rows.append(_provenance_row(str(run["run_id"]), str(run["status"]), str(config_hash), run["seed"], stored))
    for folder, _ in results.damaged:
        run_id = "/".join(folder.parts[-4:])
        rows.append([run_id, "damaged", folder.parent.name, folder.name.removeprefix("seed-"), *["–"] * 5])
    notes = [f"every run's resolved config and the rest of its provenance: run.json in its folder under "
             f"{results.results_dir}"]
    notes += [f"damaged: {problem}" for _, problem in results.damaged]
    return Table(PROVENANCE_HEADER, rows, notes=notes)


def _provenance_row(run_id: str, status: str, config_hash: str, seed: object, stored: dict) -> list[str]:
    values = [stored.get(key) for key in PROVENANCE_KEYS]
    return [run_id, status, config_hash, str(seed), *["–" if value in (None, "") else str(value) for value in values]]


def _provenance_section(results: Results) -> PageSection:
    table = provenance_table(results)
    seeds = format_seeds(int(run["seed"]) for run in results.info.values()) or "none"
    summary = f"{len(table.rows)} runs (seeds {seeds}): config hash, commit, device, versions"
    body = (f"<details>\n<summary>{html.escape(summary)}</summary>\n"
            + _tables_block("provenance", render_tables([table], "html")) + "</details>\n")
    return PageSection("provenance", "provenance", body)


# ---------------------------------------------------------------------------------------------- HTML pieces

def _tables_block(kind: str, text: str) -> str:
    """`text` (HTML from `render_tables`) unchanged in a block the page's tests and styles find by `kind`."""
    return f'<div class="tables" data-table="{html.escape(kind, quote=True)}">\n{text}</div>\n'


def _figures_block(figures: Sequence[tuple[str, Path]], kind: str = "figures") -> str:
    """Each (caption, PNG) as a <figure> with the image embedded as a data URI (the caption also its alt text)."""
    shown = kind != "matrices"  # a heat map's title names its approach already
    items = [f'<figure><img src="{png_data_uri(path)}" alt="{html.escape(caption, quote=True)}">'
             + (f"<figcaption>{html.escape(caption)}</figcaption>" if shown else "") + "</figure>"
             for caption, path in figures]
    return f'<div class="{html.escape(kind, quote=True)}">\n' + "\n".join(items) + "\n</div>\n" if items else ""


def png_data_uri(path: Path) -> str:
    """`data:image/png;base64,...` of a PNG file."""
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")
