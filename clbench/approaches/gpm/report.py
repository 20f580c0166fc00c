"""GPM's monitoring section of `clbench report --monitoring`: the stored subspace's dimension per layer and task.

Reads the `gpm_subspace` tables GPM stores after every task (per projected layer: the basis' dimension and the
layer's input size) and shows, per GPM config, the dimension after each task as `dimension/size`, mean over seeds
(as the authors print "Layer i : r/d" after each task, main_pmnist.py:190-195). Torch-free, as every reporter must
be.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from clbench.report import MonitoringReporter, Results, Table, format_seeds, plain, read_parquet_files

TABLE = "gpm_subspace"
COLUMNS = (("run_id", "string"), ("seed", "int64"), ("stage", "int64"), ("layer", "string"),
           ("dimension", "int64"), ("size", "int64"))


class GPMReporter(MonitoringReporter):
    """The stored subspace's dimension per projected layer after each task, per config (mean over seeds)."""

    def subspaces(self, results: Results) -> pd.DataFrame:
        """Every stage's rows of every run of this method, with the run's `label`."""
        paths = [results.folder(run_id) / f"{TABLE}.parquet" for run_id, run in results.info.items()
                 if run["method"] == self.method and f"{TABLE}.parquet" in results.files.get(run_id, set())]
        frame = read_parquet_files(paths, COLUMNS)
        labels = {run_id: run["label"] for run_id, run in results.info.items()}
        return frame.assign(label=frame["run_id"].map(labels).astype(object))

    def tables(self, results: Results) -> list[Table]:
        frame = self.subspaces(results)
        tables = []
        for label, group in frame.groupby("label", sort=True):
            means = group.groupby(["layer", "stage"])["dimension"].mean()
            sizes = group.groupby("layer")["size"].max()
            stages = sorted(int(stage) for stage in group["stage"].unique())
            layers = list(dict.fromkeys(group["layer"]))  # in the order GPM stores them, input layer first
            rows = [[layer, *[f"{plain(means.get((layer, stage), float('nan')), 1)}/{int(sizes[layer])}"
                              for stage in stages]] for layer in layers]
            title = (f"{label}: dimension of the stored subspace per layer (of its input size) after each task, "
                     f"mean over seeds {format_seeds(int(seed) for seed in group['seed'].unique())}")
            tables.append(Table(["layer", *[f"after task {stage}" for stage in stages]], rows, title))
        return tables

    def csv(self, results: Results) -> str:
        frame = self.subspaces(results)
        summary = frame.groupby(["label", "stage", "layer"], sort=True).agg(
            mean=("dimension", "mean"), size=("size", "max"), n=("dimension", "count"))
        return summary.reset_index().rename(columns={"label": "approach"}).to_csv(index=False)

    def plots(self, results: Results, folder: Path) -> list[Path]:
        return []
