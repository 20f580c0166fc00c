"""SupSup's monitoring section of `clbench report --monitoring`: the edges each task's supermask keeps, per layer.

Reads the `supsup_masks` tables SupSup stores after every task and shows, per SupSup config, the % of each layer's
edges in each task's mask after the last task, mean over seeds. Torch-free, as every reporter must be.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from clbench.report import MonitoringReporter, Results, Table, format_seeds, plain

TABLE = "supsup_masks"
COLUMNS = (("run_id", "string"), ("seed", "int64"), ("stage", "int64"), ("task", "int64"), ("layer", "string"),
           ("used", "int64"), ("weights", "int64"))


class SupSupReporter(MonitoringReporter):
    """% of each layer's edges in each task's supermask after the last task, per config."""

    def masks(self, results: Results) -> pd.DataFrame:
        """The last stage's rows of every run of this method, with `fraction` = used / weights and `label`."""
        frame = self.last_stage_rows(results, TABLE, COLUMNS)
        return frame.assign(fraction=frame["used"] / frame["weights"].where(frame["weights"] > 0))

    def tables(self, results: Results) -> list[Table]:
        frame = self.masks(results)
        tables = []
        for label, group in frame.groupby("label", sort=True):
            means = group.groupby(["layer", "task"])["fraction"].mean()
            tasks = sorted(int(task) for task in group["task"].unique())
            layers = list(dict.fromkeys(group["layer"]))  # in the order SupSup stores them, `total` last
            header = ["layer", *[f"task {task}" for task in tasks]]
            rows = [[layer, *[plain(100 * means.get((layer, task), float("nan")), 1) for task in tasks]]
                    for layer in layers]
            title = (f"{label}: % of each layer's edges in each task's supermask after task "
                     f"{int(group['stage'].max())}, mean over seeds "
                     f"{format_seeds(int(seed) for seed in group['seed'].unique())}")
            tables.append(Table(header, rows, title))
        return tables

    def csv(self, results: Results) -> str:
        frame = self.masks(results)
        summary = frame.groupby(["label", "stage", "layer", "task"], sort=True)["fraction"].agg(["mean", "count"])
        return summary.reset_index().rename(columns={"label": "approach", "count": "n"}).to_csv(index=False)

    def plots(self, results: Results, folder: Path) -> list[Path]:
        return []
