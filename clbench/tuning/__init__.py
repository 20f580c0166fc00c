"""Hyper-parameter tuning on validation data: scoring grid points, choosing one, and the tuned file (torch-free).

The paper (Serra et al. 2018, Section 4, "Baselines") finds each approach's hyper-parameters by a grid search on
the task sequence of a single seed. Here every point of a `--grid` is trained at one seed (0 by default) and scored
on the validation split only (rows with `split == "validation"`; a test number is never used to choose), by one
of the `RULES`:

- `accuracy` (the default): A^{<=T} = (1/T) sum_{u<=T} A^{u<=T}, the mean validation accuracy over all tasks
  after the last one (`clbench.metrics.average_accuracy` at stage T);
- `forgetting-ratio`: rho^{<=T} = (1/T) sum_{u<=T} [(A^{u<=T} - A_R^u) / (A_J^{u<=T} - A_R^u) - 1], the paper's
  forgetting ratio at stage T (`clbench.metrics.forgetting_ratio`), with the joint reference A_J and the random
  reference A_R (`clbench.metrics.random_reference`) measured on validation too, matched to the run as the report
  matches them (`clbench.report.statistics.REFERENCE_KEYS`: the joint by reference key, the random by data hash,
  same seed).

Higher is better under both. Ties: among the points whose score is within `TIE_TOLERANCE` of the best, the first
in the grid's declared order wins (`clbench.spec.grid.expand_grid`: the first `--grid` option varies slowest).

The choice is a `TunedChoice`, stored as a YAML tuned file (`write_tuned`, `read_tuned`) at
`<results>/<benchmark>/_tuned/<method>-<config hash>.yaml` (`tuned_path`; the report's loader skips `_` folders).
The file guards its content with a sha256 `digest` of its fields, and `read_tuned` also re-derives the chosen point
from the stored scores, rule and tie rule: an edited file is refused, as is one for another benchmark, config or
method (with the `clbench tune` command that makes the right one). `compare_with_test` compares the validation
winner with the point the test split would have chosen (for `report --tuning`).

Rows are the results' long format (one row per run, stage, task, evaluation, split); a missing `split` column, or
a missing value in it, means test.

Modules (torch-free):

- `scoring`: the rules, each grid point's score on a split, and the choice among them (`select`);
- `tuned_file`: the `TunedChoice`, made by `choose`, and its tuned file (written, read, checked);
- `comparison`: the validation winner against the point the test split would have chosen (`report --tuning`).
"""
