"""`clbench report --paper`'s output (torch-free): the comparison with the paper's table of a benchmark
(`clbench.report.paper_results`) as a text table or tidy CSV, and, where one is defined, the table beyond the
paper's (`clbench.report.paper_beyond`)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from clbench.report.formatting import Table
from clbench.report.paper_beyond import BEYOND, beyond_csv, beyond_table, build_beyond
from clbench.report.paper_results import (
    NO_SPREAD,
    Comparison,
    ComparisonRow,
    PaperRow,
    build_paper_comparison,
    load_paper_results,
    paper_name,
)
from clbench.report.render import render_tables

if TYPE_CHECKING:
    from clbench.report.loading import Results
    from clbench.report.statistics import Cell

HEADER = ["approach", "paper row", "t", "ours", "seeds", "paper", "difference", "difference / paper std",
          "within the paper's std?", "settings"]
WITHIN_NOTE = ("within the paper's std?: |ours - paper| <= the paper's std, or <= 1 point where it gives none, at "
               "the paper's printed precision; never for runs that differ from the paper's protocol (quick "
               "settings, another network) or a number the paper quotes from another protocol")


def paper_sections(results_dir: Path, benchmark: str, results: Results, fmt: str) -> list[tuple[str, str]]:
    """(kind, text) of `--paper`: `paper` (the comparison), and `paper-beyond` where the benchmark has a table
    beyond the paper's (one text in markdown, latex and html; two CSV blocks)."""
    paper = load_paper_results()
    comparison = build_paper_comparison(results_dir, benchmark, results=results, paper=paper)
    tables = [comparison_table(comparison)]
    spec = BEYOND.get(benchmark)
    beyond = build_beyond(results, comparison.ours, spec) if spec is not None else None
    if beyond is not None:
        tables.append(beyond_table(beyond))
    if fmt != "csv":
        return [("paper", render_tables(tables, fmt))]
    return [("paper", comparison_csv(comparison))] + ([("paper-beyond", beyond_csv(beyond))] if beyond else [])


def comparison_table(comparison: Comparison) -> Table:
    """The comparison as a text table; its title says whether the runs reproduce the paper's setting. A paper row
    without runs over several stages (the forgetting-ratio tables) is one line, its stages as a range (`1-8`)."""
    scale, digits = (100.0, 1) if comparison.metric == "accuracy" else (1.0, 2)
    rows: list[list[str]] = []
    for row, stages in _collapsed(comparison.rows):
        one = len(stages) == 1
        rows.append([row.label, f"{paper_name(row.paper)} [{row.paper.table}]",
                     str(stages[0]) if one else f"{stages[0]}-{stages[-1]}", _cell_text(row.ours, scale, digits),
                     str(row.ours.n) if row.ours is not None else "0",
                     _paper_text(row.paper, scale, digits) if one else NO_SPREAD,
                     _signed(row.difference, scale, digits), _signed(row.in_paper_std, 1.0, 1), row.verdict,
                     ("; ".join(row.settings) or "paper protocol") if row.ran else NO_SPREAD])
    if not rows:
        return Table([], [], notes=list(comparison.notes))
    metric = "accuracy A<=t (%)" if comparison.metric == "accuracy" else "forgetting ratio rho<=t"
    verdict = ("no runs here of its approaches" if not any(row.ran for row in comparison.rows)
               else "the paper's protocol" if comparison.reproduction
               else "NOT A REPRODUCTION: settings differ from the paper's (see settings)")
    title = f"{comparison.benchmark} vs the paper ({', '.join(comparison.tables)}), {metric}: {verdict}"
    return Table(HEADER, rows, title, [*comparison.notes, WITHIN_NOTE])


def _collapsed(rows: list[ComparisonRow]) -> list[tuple[ComparisonRow, list[int]]]:
    """Each row with its stages: consecutive rows without runs of the same approach and paper row merged."""
    merged: list[tuple[ComparisonRow, list[int]]] = []
    for row in rows:
        last = merged[-1][0] if merged else None
        if last is not None and not row.ran and not last.ran and (last.label, last.paper.approach,
                                                                  last.paper.variant) == (
                row.label, row.paper.approach, row.paper.variant):
            merged[-1][1].append(row.paper.stage)
        else:
            merged.append((row, [row.paper.stage]))
    return merged


def _cell_text(cell: Cell | None, scale: float, digits: int) -> str:
    if cell is None:
        return NO_SPREAD
    spread = NO_SPREAD if math.isnan(cell.std) else f"{cell.std * scale:.{digits}f}"
    return f"{cell.mean * scale:.{digits}f} ({spread})"


def _paper_text(cell: PaperRow, scale: float, digits: int) -> str:
    spread = f" ({cell.std * scale:.{digits}f})" if cell.std is not None else ""
    return f"{cell.mean * scale:.{digits}f}{spread}"


def _signed(value: float | None, scale: float, digits: int) -> str:
    if value is None or not math.isfinite(value):
        return NO_SPREAD
    return f"{round(value * scale, digits) + 0.0:+.{digits}f}"  # + 0.0: never "-0.0"


def comparison_csv(comparison: Comparison) -> str:
    """Tidy CSV: one row per (our approach, paper cell), raw fractions (accuracy not in percent); a paper cell
    without runs here has seeds 0 and its command in `verdict`."""
    import pandas as pd

    records = [{"benchmark": comparison.benchmark, "table": row.paper.table, "approach": row.label,
                "paper_approach": row.paper.approach, "variant": row.paper.variant, "metric": row.paper.metric,
                "stage": row.paper.stage, "mean": row.ours.mean if row.ours else None,
                "std": row.ours.std if row.ours else None, "seeds": row.ours.n if row.ours else 0,
                "paper_mean": row.paper.mean, "paper_std": row.paper.std, "paper_seeds": row.paper.seeds,
                "difference": row.difference, "difference_in_paper_std": row.in_paper_std,
                "reproduction": row.reproduction, "verdict": row.verdict, "settings": "; ".join(row.settings)}
               for row in comparison.rows]
    columns = ["benchmark", "table", "approach", "paper_approach", "variant", "metric", "stage", "mean", "std",
               "seeds", "paper_mean", "paper_std", "paper_seeds", "difference", "difference_in_paper_std",
               "reproduction", "verdict", "settings"]
    frame = pd.DataFrame(records, columns=columns)
    for column in ("seeds", "paper_seeds"):
        frame[column] = frame[column].astype("Int64")
    return frame.to_csv(index=False)
