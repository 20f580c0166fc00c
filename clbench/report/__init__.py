"""Tables from stored results: what a researcher puts in a paper, computed from the results folder.

Torch-free (numpy, pandas, pyarrow). One benchmark's runs are loaded once (`load_results`: the accuracy files read by
a small thread pool) and shared by every table and plot:

- `build_report`: forgetting ratio rho^{<=t} (or mean accuracy A^{<=t}) per approach and stage;
- `build_summary`: after the last task T, A^{<=T}, backward transfer and max-previous forgetting, with the
  parameter count (the paper's permuted / split MNIST tables);
- `build_time_report`: training time (total, per epoch, per batch) and the bench's per-batch forward and
  forward+backward times (the paper's training-time table);
- monitoring: each approach's own tables (`monitoring.py`: the reporter an approach declares; HAT's, PackNet's,
  SI's and MAS's live in their folders under `clbench/approaches/`).

Cells are mean (std) over seeds (sample std, ddof=1) or, asked for, mean +- the half-width of the Student-t 95%
confidence interval of the mean. Runs are grouped by (method, config hash); a method with several configs is
labelled by what differs between them. Incomplete runs, partial matrices and missing references are never
averaged silently: they are listed in the notes with the command that fixes them.

One module per job: `loading` (results folders, Parquet reads, schema checks, labels), `statistics` (Cell,
summarize, Student-t, per-run forgetting-ratio values against matched references), `tables` (the per-stage table),
`summary` and `timing` (the --summary and --time tables), `notes` (what was left out and why), `cells` (how a
cell is written), `render` (markdown / LaTeX / HTML / CSV), `monitoring` (approach-owned reporters), `formatting`
(`Table` and number formats); every public name of these is re-exported here. `figures` (matplotlib, `--plot`),
`heatmaps` (accuracy-matrix heat maps), `html_page` and `html_sections` (the one-page HTML report, `--html`),
`paper_results` (the paper's published numbers, `--paper`) and `sections` (how `clbench report` joins its tables)
are imported where they are used.
"""

from __future__ import annotations

from clbench.report.cells import format_cell, format_parameters, format_value
from clbench.report.formatting import Table, format_seeds, plain
from clbench.report.loading import (
    IDENTITY,
    READ_COLUMNS,
    READ_THREADS,
    REFERENCES,
    Results,
    benchmarks_in,
    load_results,
    method_labels,
    read_parquet_files,
    run_folders,
)
from clbench.report.monitoring import (
    LEGACY_REPORTERS,
    MOVED_REPORTERS,
    MonitoringReporter,
    load_reporter,
    method_reporter,
    monitoring_reporters,
    monitoring_table_notes,
    reporter_string,
)
from clbench.report.notes import complete_runs, incomplete_notes, seed_coverage_notes
from clbench.report.render import (
    FORMATS,
    LATEX_SPECIALS,
    latex_escape,
    render,
    render_tables,
    report_csv,
    summary_csv,
    time_csv,
)
from clbench.report.statistics import (
    CONFIDENCE,
    METRICS,
    REFERENCE_KEYS,
    Cell,
    match_reference,
    reference_candidates,
    run_values,
    student_t_quantile,
    student_t_two_sided,
    summarize,
)
from clbench.report.summary import Summary, SummaryRow, build_summary, summary_table
from clbench.report.tables import Report, build_report, header, report_table, table_rows
from clbench.report.timing import TimeReport, TimeRow, build_time_report, latest_bench, time_table
from clbench.results import BENCH_COLUMNS, BENCH_FOLDER

__all__ = [
    "BENCH_COLUMNS", "BENCH_FOLDER", "CONFIDENCE", "FORMATS", "IDENTITY", "LATEX_SPECIALS", "LEGACY_REPORTERS",
    "METRICS", "MOVED_REPORTERS", "READ_COLUMNS", "READ_THREADS", "REFERENCES", "REFERENCE_KEYS", "benchmarks_in",
    "build_report", "build_summary", "build_time_report", "Cell", "complete_runs", "format_cell", "format_parameters",
    "format_seeds", "format_value", "header", "incomplete_notes", "latest_bench", "latex_escape", "load_reporter",
    "load_results", "match_reference", "method_labels", "method_reporter", "monitoring_reporters",
    "monitoring_table_notes", "MonitoringReporter", "plain", "read_parquet_files", "reference_candidates", "render",
    "render_tables", "Report", "report_csv", "report_table", "reporter_string", "Results", "run_folders", "run_values",
    "seed_coverage_notes", "student_t_quantile", "student_t_two_sided", "summarize", "Summary", "summary_csv",
    "summary_table", "SummaryRow", "Table", "table_rows", "time_csv", "time_table", "TimeReport", "TimeRow",
]
