"""Tables from stored results: what a researcher puts in a paper, computed from the results folder.

Torch-free (numpy, pandas, pyarrow). One benchmark's runs are loaded once (`load_results`: the accuracy files read by
a small thread pool) and shared by every table and plot:

- `build_report`: forgetting ratio rho^{<=t} (or mean accuracy A^{<=t}) per approach and stage;
- `build_summary`: after the last task T, A^{<=T}, backward transfer and max-previous forgetting, with the
  parameter count (the paper's permuted / split MNIST tables);
- `build_comparison` (`--compare`): each pair of approaches per metric, paired over seeds, and `build_ranking`,
  their average ranks across benchmarks (Friedman, Nemenyi);
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
(`Table` and number formats), `figures` (matplotlib, `--plot`), `heatmaps` (accuracy-matrix heat maps), `html_page`
and `html_sections` (the one-page HTML report, `--html`), `paper_results` (the paper's published numbers
beside ours, `--paper`), `paper_verdict` (within the paper's std or not), `paper_commands` (what makes a cell's
runs), `paper_beyond` (pmnist's table beyond the paper's) and `paper_report` (`--paper`'s output), `comparison`,
`ranking` and `significance` (`--compare`: paired tests across seeds, ranks across benchmarks, and the statistics
as pure functions) and `sections` (how `clbench report` joins its tables). Code imports a name from the module
that defines it. This package exports only what a monitoring reporter imports (a plugin's too, without torch; the
same objects as `clbench.api`'s): `MonitoringReporter`, `Results`, `Table`, `format_seeds`, `plain`,
`read_parquet_files` and `run_values`.
"""

from __future__ import annotations

from clbench.report.formatting import Table, format_seeds, plain
from clbench.report.loading import Results
from clbench.report.monitoring import LayerShareReporter, MonitoringReporter
from clbench.report.reading import read_parquet_files
from clbench.report.statistics import run_values

__all__ = ["LayerShareReporter", "MonitoringReporter", "Results", "Table", "format_seeds", "plain",
           "read_parquet_files", "run_values"]
