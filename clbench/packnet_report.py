"""PackNet's monitoring section of `clbench report --monitoring`: the weights each task owns, per layer.

Reads the `packnet_capacity` tables PackNet stores after every task (task 0: the weights still free) and shows,
per PackNet config, the % of each layer's weights owned by each task after the last task, mean over seeds (like
HAT's capacity table). Torch-free, as every reporter must be.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from clbench.report.loading import Results, read_parquet_files
from clbench.report.monitoring import MonitoringReporter
from clbench.report.tables import Table, _plain, format_seeds

TABLE = "packnet_capacity"
COLUMNS = (("run_id", "string"), ("seed", "int64"), ("stage", "int64"), ("task", "int64"), ("layer", "string"),
           ("used", "int64"), ("weights", "int64"))


class PackNetReporter(MonitoringReporter):
    """% of each layer's weights owned by each task (and still free) after the last task, per config."""

    def capacity(self, results: Results) -> pd.DataFrame:
        """The last stage's rows of every run of this method, with `fraction` = used / weights and `label`."""
        run_ids = [run_id for run_id, run in results.info.items() if run["method"] == self.method]
        paths = [results.folder(run_id) / f"{TABLE}.parquet" for run_id in run_ids
                 if f"{TABLE}.parquet" in results.files.get(run_id, set())]
        frame = read_parquet_files(paths, COLUMNS)
        if frame.empty:
            return frame.assign(fraction=pd.Series(dtype=float), label=pd.Series(dtype=object))
        frame = frame[frame["stage"] == frame.groupby("run_id")["stage"].transform("max")]
        frame = frame.assign(fraction=frame["used"] / frame["weights"].where(frame["weights"] > 0))
        return frame.assign(label=frame["run_id"].map({run_id: run["label"] for run_id, run in results.info.items()}))

    def tables(self, results: Results) -> list[Table]:
        frame = self.capacity(results)
        tables = []
        for label, group in frame.groupby("label", sort=True):
            means = group.groupby(["layer", "task"])["fraction"].mean()
            tasks = sorted(int(task) for task in group["task"].unique())
            layers = list(dict.fromkeys(group["layer"]))  # in the order PackNet stores them, `total` last
            header = ["layer", *[f"task {task}" if task else "free" for task in tasks]]
            rows = [[layer, *[_plain(100 * means.get((layer, task), float("nan")), 1) for task in tasks]]
                    for layer in layers]
            title = (f"{label}: % of each layer's weights owned by each task after task {int(group['stage'].max())}"
                     f", mean over seeds {format_seeds(int(seed) for seed in group['seed'].unique())}")
            tables.append(Table(header, rows, title))
        return tables

    def csv(self, results: Results) -> str:
        frame = self.capacity(results)
        summary = frame.groupby(["label", "stage", "layer", "task"], sort=True)["fraction"].agg(["mean", "count"])
        return summary.reset_index().rename(columns={"label": "approach", "count": "n"}).to_csv(index=False)

    def plots(self, results: Results, folder: Path) -> list[Path]:
        return []
