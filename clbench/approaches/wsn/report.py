"""WSN's monitoring section of `clbench report --monitoring`: per layer, the weights each task's mask holds, how
many of them it reused from earlier tasks, and the weights used by any task so far (the frozen ones).

Reads the `wsn_capacity` tables WSN stores after every task and shows, per WSN config, per layer (and in total) the
last task's mask, what it reused and what all tasks used, mean over seeds. Torch-free, as every reporter
must be.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from clbench.report import MonitoringReporter, Results, Table, format_seeds, plain

TABLE = "wsn_capacity"
COLUMNS = (("run_id", "string"), ("seed", "int64"), ("stage", "int64"), ("layer", "string"), ("in_mask", "int64"),
           ("reused", "int64"), ("used", "int64"), ("weights", "int64"), ("mask_bytes", "int64"))


class WSNReporter(MonitoringReporter):
    """Per config: after each task, % of the weights in its mask, reused and used so far, per layer and total."""

    def capacity(self, results: Results) -> pd.DataFrame:
        """The last stage's rows of every run of this method, with the fractions and `label`."""
        frame = self.last_stage_rows(results, TABLE, COLUMNS)
        if frame.empty:
            return frame
        weights = frame["weights"].where(frame["weights"] > 0)
        return frame.assign(mask=frame["in_mask"] / weights, reused_fraction=frame["reused"] / weights,
                            used_fraction=frame["used"] / weights)

    def tables(self, results: Results) -> list[Table]:
        frame = self.capacity(results)
        tables = []
        for label, group in frame.groupby("label", sort=True):
            means = group.groupby("layer", sort=False)[["mask", "reused_fraction", "used_fraction"]].mean()
            mask_bytes = group.groupby("layer", sort=False)["mask_bytes"].mean()
            rows = [[layer, plain(100 * row["mask"], 1), plain(100 * row["reused_fraction"], 1),
                     plain(100 * row["used_fraction"], 1), plain(mask_bytes[layer], 0)]
                    for layer, row in means.iterrows()]
            stage = int(group["stage"].max())
            title = (f"{label}: task {stage}'s mask, the weights it reused and those used by tasks 1..{stage} "
                     f"(% of each layer), mean over seeds {format_seeds(int(s) for s in group['seed'].unique())}")
            tables.append(Table(["layer", "mask", "reused", "used", "mask bytes"], rows, title))
        return tables

    def csv(self, results: Results) -> str:
        frame = self.capacity(results)
        columns = ["mask", "reused_fraction", "used_fraction", "mask_bytes"]
        summary = frame.groupby(["label", "stage", "layer"], sort=True)[columns].mean()
        return summary.reset_index().rename(columns={"label": "approach"}).to_csv(index=False)

    def plots(self, results: Results, folder: Path) -> list[Path]:
        return []
