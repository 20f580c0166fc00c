"""How `clbench report` puts its output together: sections `(benchmark, kind, text)`, the monitoring sections
of approaches (through their `MonitoringReporter`), and the sections joined into one text (a heading before
each when there are several, or one CSV block per kind)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

from clbench.report.formatting import Table
from clbench.report.loading import Results
from clbench.report.monitoring import MonitoringReporter
from clbench.report.notes import damaged_notes
from clbench.report.render import render_tables

Section = tuple[str, str, str]  # (benchmark, kind, text)


def monitoring_text(reporter: MonitoringReporter, results: Results, fmt: str) -> str:
    """The reporter's tables rendered in `fmt` (its CSV for csv); "" when it has none."""
    if fmt == "csv":
        return reporter.csv(results)
    found = reporter.tables(results)
    return render_tables(found, fmt) if found else ""


def monitoring_sections(benchmark: str, results: Results, reporters: Sequence[MonitoringReporter],
                        fmt: str) -> list[Section]:
    """One section per reporter with text, its kind the reporter's method name; a run's damaged monitoring table is
    left out of it, named under it (`damaged_monitoring_text`)."""
    texts = [(reporter.method, monitoring_text(reporter, results, fmt) + damaged_monitoring_text(reporter, results,
                                                                                                   fmt))
             for reporter in reporters]
    return [(benchmark, method, text) for method, text in texts if text]


def damaged_monitoring_text(reporter: MonitoringReporter, results: Results, fmt: str) -> str:
    """The notes naming the reporter's runs left out for a damaged file and their damaged monitoring tables (left out
    of its tables), with the command that remakes each (`clbench.run_files`); "" when there are none, and in csv."""
    notes = damaged_notes(results, reporter.method, kinds=("monitoring",))
    return render_tables([Table([], [], notes=notes)], fmt) if notes and fmt != "csv" else ""


def no_monitoring_sections(benchmark: str, results: Results, reporters: Sequence[MonitoringReporter],
                           fmt: str) -> list[Section]:
    """`--monitoring` when no approach has a table to show: one section saying so and why (which approaches declare
    no monitoring report, which stored no tables); none in csv, which carries no notes."""
    if fmt == "csv":
        return []
    methods = sorted({str(run["method"]) for run in results.info.values()})
    with_reporter = sorted(reporter.method for reporter in reporters)
    without = [method for method in methods if method not in with_reporter]
    why = [f"{', '.join(with_reporter)} stored none in {'its' if len(with_reporter) == 1 else 'their'} runs"] \
        if with_reporter else []
    why += [f"{', '.join(without)} {'declares' if len(without) == 1 else 'declare'} no monitoring report"] \
        if without else []
    note = f"no monitoring tables for {benchmark}: {'; '.join(why) or 'it has no finished runs'}"
    return [(benchmark, "monitoring", render_tables([Table([], [], notes=[note])], fmt))]


def monitoring_figures(results: Results, reporters: Sequence[MonitoringReporter], folder: Path) -> list[Path]:
    """Every reporter's figures, written into `folder`."""
    return [path for reporter in reporters for path in reporter.plots(results, folder)]


def join_text(sections: Sequence[Section], fmt: str, several_benchmarks: bool) -> str:
    """Sections one after the other, with headings when there is more than one."""
    if len(sections) == 1:
        return sections[0][2]
    several_kinds = len({kind for _, kind, _ in sections}) > 1
    blocks = []
    for benchmark, kind, text in sections:
        title = ": ".join([benchmark] * several_benchmarks + [kind] * several_kinds)
        blocks.append(heading(title, fmt) + text)
    return "\n".join(blocks)


def heading(title: str, fmt: str) -> str:
    """A section's heading: a LaTeX comment, an HTML <h2> or a markdown `##`."""
    if fmt == "latex":
        return f"% {title}\n\n"
    if fmt == "html":
        return f"<h2>{html.escape(title)}</h2>\n"
    return f"## {title}\n\n"


def join_csv(sections: Sequence[Section]) -> str:
    """One CSV block per kind of table (benchmarks stacked under one header), blocks separated by a blank line."""
    kinds: dict[str, list[str]] = {}
    for _, kind, text in sections:
        kinds.setdefault(kind, []).append(text)
    blocks = []
    for texts in kinds.values():
        lines = texts[0].splitlines()
        for text in texts[1:]:
            lines += text.splitlines()[1:]
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks)
