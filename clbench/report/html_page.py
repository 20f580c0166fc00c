"""`clbench report --html FILE`: one self-contained HTML page of a results folder (torch-free).

The page holds, per benchmark, the sections of `clbench.report.html_sections` under a header (results folder,
options, clbench version) and a table of contents. Self-contained: the style sheet is inline, figures are base64
data URIs, there is no script and no reference to anything outside the file, so it opens offline and can be
mailed or archived as one file. Tables stay text (selectable, copyable).
"""

from __future__ import annotations

import html
import re
import tempfile
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

import clbench
from clbench.report.comparison import Comparison
from clbench.report.formatting import format_seeds
from clbench.report.html_sections import PageOptions, PageSection, benchmark_sections, ranking_section
from clbench.results import atomic_write_bytes

ACROSS = "across benchmarks"  # the part of the page after the benchmarks' own (`--compare`'s ranks)

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; max-width: 1200px; margin: 0 auto;
       padding: 1rem 2rem 4rem; color: #1a1a1a; line-height: 1.45; }
h1 { font-size: 1.6rem; margin-bottom: 0.2rem; }
h2 { font-size: 1.35rem; border-bottom: 2px solid #ddd; padding-bottom: 0.2rem; margin-top: 2.2rem; }
h3 { font-size: 1.1rem; margin-top: 1.6rem; }
.meta { color: #555; font-size: 0.9rem; }
nav { background: #f6f8fa; border: 1px solid #e1e4e8; border-radius: 6px; padding: 0.5rem 1.2rem; }
nav ul { margin: 0.2rem 0; padding-left: 1.2rem; }
.tables { overflow-x: auto; }
table { border-collapse: collapse; margin: 0.8rem 0; font-size: 0.88rem; font-variant-numeric: tabular-nums; }
caption { text-align: left; font-weight: 600; padding: 0.3rem 0; }
table:has(caption) { min-width: 36rem; }
th, td { border-bottom: 1px solid #ddd; padding: 0.25rem 0.7rem; }
th { background: #f0f3f6; text-align: center; }
td { text-align: right; }
td:first-child { text-align: left; }
tbody tr:nth-child(even) { background: #fafbfc; }
.tables ul { color: #555; font-size: 0.82rem; margin-top: 0.2rem; }
.figures, .curves, .matrices { display: flex; flex-wrap: wrap; gap: 1rem 2rem; align-items: flex-start; }
figure { margin: 0.5rem 0; max-width: 100%; }
figure img { max-width: 100%; height: auto; }
.curves figure { max-width: 780px; }
.figures figure { max-width: 560px; }
.matrices { gap: 1rem; }
.matrices figure { width: 265px; }
.matrices img { width: 100%; height: auto; }
figcaption { color: #555; font-size: 0.8rem; }
details summary { cursor: pointer; font-weight: 600; }
.error { color: #b00020; }
"""


def build_page(results_dir: Path, benchmarks: Sequence[tuple[str, str | None]], options: PageOptions) -> str:
    """The page of `benchmarks` ((name, spec file the user named it by, or None) pairs) under `results_dir`."""
    comparisons: list[Comparison] = []
    with tempfile.TemporaryDirectory(prefix="clbench-html-") as scratch:
        parts = [(name, benchmark_sections(results_dir, name, options, Path(scratch, str(index)), spec_argument,
                                           comparisons, alone=len(benchmarks) == 1))
                 for index, (name, spec_argument) in enumerate(benchmarks)]
        if options.compare and len(benchmarks) > 1 and comparisons:
            parts.append((ACROSS, [ranking_section(comparisons, Path(scratch, ACROSS))]))
    title = "clbench report: " + ", ".join(name for name, _ in benchmarks)
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(title)}</title>", f"<style>{STYLE}</style>", "</head>", "<body>",
        f"<h1>{html.escape(title)}</h1>", _meta(results_dir, options), _contents(parts),
        *[_benchmark_html(name, sections, several=len(parts) > 1) for name, sections in parts],
        "</body>", "</html>", ""])


def write_page(path: Path, text: str) -> None:
    """Write the page atomically (a reader never sees half of it)."""
    atomic_write_bytes(Path(path), text.encode("utf-8"))


def _meta(results_dir: Path, options: PageOptions) -> str:
    seeds = format_seeds(options.seeds) if options.seeds is not None else "all"
    evaluation = options.evaluation or "the runs' scenario's (named in each section)"
    facts = [("results", str(results_dir)), ("metric", options.metric), ("evaluation", evaluation),
             ("split", options.split), ("seeds", seeds), ("cells", "mean ± 95% CI half-width" if options.ci
                                                         else "mean (std) over seeds"),
             ("references as rows", "yes" if options.references else "no"),
             ("made", datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC") + f" by clbench {clbench.__version__}")]
    items = " · ".join(f"{html.escape(name)}: <code>{html.escape(value)}</code>" for name, value in facts)
    return f'<p class="meta">{items}</p>'


def anchor(text: str) -> str:
    """An id attribute value for `text` (letters, digits, `-`, `_`, `.`)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "section"


def _contents(parts: Sequence[tuple[str, list[PageSection]]]) -> str:
    def links(sections: list[PageSection]) -> str:
        return "".join(f'<li><a href="#{anchor(section.anchor)}">{html.escape(section.title)}</a></li>'
                       for section in sections)

    if len(parts) == 1:
        return f"<nav><strong>Contents</strong><ul>{links(parts[0][1])}</ul></nav>"
    items = "".join(f'<li><a href="#{anchor(name)}">{html.escape(name)}</a><ul>{links(sections)}</ul></li>'
                    for name, sections in parts)
    return f"<nav><strong>Contents</strong><ul>{items}</ul></nav>"


def _benchmark_html(name: str, sections: list[PageSection], several: bool) -> str:
    level = 3 if several else 2
    blocks = [f'<h2 id="{anchor(name)}">{html.escape(name)}</h2>'] if several else []
    blocks += [f'<section>\n<h{level} id="{anchor(section.anchor)}">{html.escape(section.title)}</h{level}>\n'
               f"{section.body}</section>" for section in sections]
    return "\n".join(blocks)
