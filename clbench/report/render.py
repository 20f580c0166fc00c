"""Rendering tables as markdown, LaTeX, HTML, and CSV with the raw numbers."""

from __future__ import annotations

import html
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd

from clbench.errors import ResultsError
from clbench.report.formatting import Table
from clbench.report.statistics import Cell
from clbench.report.summary import Summary, SummaryRow
from clbench.report.tables import Report, report_table
from clbench.report.timing import TimeReport

FORMATS = ("markdown", "csv", "latex", "html")


def render(report: Report, fmt: str = "markdown", ci: bool = False) -> str:
    """The table as markdown, csv, latex or html text (notes follow, as a list or as comments)."""
    if fmt == "csv":
        return report_csv(report, ci)
    return render_tables([report_table(report, ci)], fmt)


def render_tables(tables: Sequence[Table], fmt: str = "markdown") -> str:
    """Markdown, LaTeX or HTML text of `tables`, each with its title before it and its notes after it."""
    if fmt not in ("markdown", "latex", "html"):
        raise ResultsError(f"format {fmt!r}: use one of {', '.join(FORMATS)}")
    blocks = [_render_one(table, fmt) for table in tables]
    return "\n\n".join(blocks) + "\n"


def _render_one(table: Table, fmt: str) -> str:
    """One table (nothing but its notes when it has no columns)."""
    if fmt == "html":
        return _render_html(table)
    prefix = "% " if fmt == "latex" else "- "
    notes = "\n".join(prefix + note for note in table.notes)
    if not table.header:
        return notes
    rows = [table.header, *table.rows]
    body = _render_latex(rows) if fmt == "latex" else _render_markdown(rows)
    title = (("% " if fmt == "latex" else "### ") + table.title + "\n\n") if table.title else ""
    return title + body + ("\n\n" + notes if notes else "")


def _render_markdown(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["| " + " | ".join(cell.ljust(w) for cell, w in zip(row, widths)) + " |" for row in rows]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


LATEX_SPECIALS = {"\\": "\\textbackslash{}", "&": "\\&", "%": "\\%", "$": "\\$", "#": "\\#", "_": "\\_",
                  "{": "\\{", "}": "\\}", "~": "\\textasciitilde{}", "^": "\\textasciicircum{}", "–": "--",
                  "±": "$\\pm$"}


def latex_escape(text: str) -> str:
    return "".join(LATEX_SPECIALS.get(char, char) for char in text)


def _latex_header(text: str) -> str:
    for symbol, latex in (("rho<=", "\\rho"), ("A<=", "A")):
        if text.startswith(symbol):
            return f"${latex}^{{\\leq {text[len(symbol):]}}}$"
    return latex_escape(text)


def _render_latex(rows: list[list[str]]) -> str:
    head = " & ".join(_latex_header(cell) for cell in rows[0])
    body = [" & ".join(latex_escape(cell) for cell in row) + " \\\\" for row in rows[1:]]
    spec = "l" + "c" * (len(rows[0]) - 1)
    return "\n".join([f"\\begin{{tabular}}{{{spec}}}", "\\toprule", head + " \\\\", "\\midrule", *body,
                      "\\bottomrule", "\\end{tabular}"])


def _html_header(text: str) -> str:
    for symbol, entity in (("rho<=", "&rho;"), ("A<=", "A")):
        if text.startswith(symbol):
            return f"{entity}<sup>&le;{html.escape(text[len(symbol):])}</sup>"
    return html.escape(text)


_SUPERSCRIPT = re.compile(r"\^(?:\{([^{}]*)\}|(\w))")
_SUBSCRIPT = re.compile(r"_\{([^{}]*)\}")


def math_html(text: str) -> str:
    """`text` escaped, with the plain-text maths of titles and notes written as HTML: `a^{<=t}` as a<sup>&le;t</sup>,
    `a^t` as a<sup>t</sup>, `A_{J}` as A<sub>J</sub> (a bare `_` stays: it is in option names)."""
    def script(tag: str) -> Callable[[re.Match[str]], str]:
        def written(match: re.Match[str]) -> str:
            inner = next(group for group in match.groups() if group is not None)
            return f"<{tag}>{inner.replace('&lt;=', '&le;')}</{tag}>"
        return written

    return _SUBSCRIPT.sub(script("sub"), _SUPERSCRIPT.sub(script("sup"), html.escape(text)))


def _render_html(table: Table) -> str:
    lines = []
    if table.header:
        lines.append("<table>")
        if table.title:
            lines.append(f"<caption>{math_html(table.title)}</caption>")
        lines += ["<thead>", "<tr>" + "".join(f"<th>{_html_header(c)}</th>" for c in table.header) + "</tr>",
                  "</thead>", "<tbody>"]
        lines += ["<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in table.rows]
        lines += ["</tbody>", "</table>"]
    if table.notes:
        lines += ["<ul>", *[f"<li>{math_html(note)}</li>" for note in table.notes], "</ul>"]
    return "\n".join(lines)


def _cell_columns(cell: Cell, ci: bool) -> dict[str, Any]:
    columns: dict[str, Any] = {"mean": cell.mean, "std": cell.std, "seeds": cell.n}
    if ci:
        columns["ci95"] = cell.half_width
    return columns


def report_csv(report: Report, ci: bool = False) -> str:
    """Tidy CSV: one row per (approach, stage) with raw mean, std, seeds (and the 95% CI half-width)."""
    records = [{"benchmark": report.benchmark, "approach": label, "metric": report.metric, "stage": stage,
                **_cell_columns(cell, ci)}
               for label, cells in report.rows for stage, cell in zip(report.stages, cells)]
    columns = ["benchmark", "approach", "metric", "stage", "mean", "std", "seeds"] + (["ci95"] if ci else [])
    return pd.DataFrame(records, columns=columns).to_csv(index=False)


def summary_csv(summary: Summary, ci: bool = False) -> str:
    """Tidy CSV: one row per (approach, quantity: accuracy | backward-transfer | forgetting | learning-accuracy |
    forward-transfer | intransigence as fractions, memory-bytes in bytes, and where counted train-flops and the
    real-time batches: `compute_quantities`)."""
    records = [{"benchmark": summary.benchmark, "approach": row.label, "parameters": row.parameters,
                "quantity": quantity, "stage": summary.stages, **_cell_columns(cell, ci)}
               for row in summary.rows for quantity, cell in (("accuracy", row.accuracy),
                                                               ("backward-transfer", row.backward_transfer),
                                                               ("forgetting", row.forgetting),
                                                               ("learning-accuracy", row.learning_accuracy),
                                                               ("forward-transfer", row.forward_transfer),
                                                               ("intransigence", row.intransigence),
                                                               ("memory-bytes", row.memory_bytes),
                                                               *compute_quantities(summary, row),
                                                               *row.continual.items())]
    columns = ["benchmark", "approach", "parameters", "quantity", "stage", "mean", "std", "seeds"]
    frame = pd.DataFrame(records, columns=columns + (["ci95"] if ci else []))
    frame["parameters"] = frame["parameters"].astype("Int64")
    return frame.to_csv(index=False)


def compute_quantities(summary: Summary, row: SummaryRow) -> list[tuple[str, Cell]]:
    """The summary's compute quantities where it shows them: train-flops, and in the real-time protocol
    batches-trained and batches-offered (sums over the stages, means over the seeds)."""
    return ([("train-flops", row.train_flops)] if summary.shows_flops else []) + (
        [("batches-trained", row.batches), ("batches-offered", row.stream_batches)] if summary.shows_stream else [])


def time_csv(report: TimeReport, ci: bool = False) -> str:
    """Tidy CSV: one row per (approach, quantity) in seconds / milliseconds as the quantity names say."""
    records = []
    for row in report.rows:
        for quantity, cell in (("total_seconds", row.total_seconds), ("epoch_seconds", row.epoch_seconds),
                               ("batch_ms", row.batch_ms), ("batch_forward_ms", Cell(row.forward_ms, math.nan, 1)),
                               ("batch_forward_backward_ms", Cell(row.forward_backward_ms, math.nan, 1))):
            if quantity.startswith("batch_forward") and not math.isfinite(cell.mean):
                continue
            records.append({"benchmark": report.benchmark, "approach": row.label, "quantity": quantity,
                            **_cell_columns(cell, ci)})
    columns = ["benchmark", "approach", "quantity", "mean", "std", "seeds"] + (["ci95"] if ci else [])
    return pd.DataFrame(records, columns=columns).to_csv(index=False)
