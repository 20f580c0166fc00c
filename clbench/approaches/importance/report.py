"""SI's and MAS's monitoring section of `clbench report --monitoring`: is the penalty stable under plain SGD?

Reads the `penalty_stiffness` tables SI and MAS store after every task (`functions.stiffness_rows`) and
shows, per config and body parameter after the last task, mean over seeds: the max importance Omega, the max
stiffness lr * 2 * strength * Omega, the % of weights whose stiffness exceeds 2, and the minimum of Omega and its
number of negative entries before SI's clip at zero. There plain SGD overshoots
the anchor on every step: those weights oscillate (held only by clipping and the lr decay) and the penalty both
blocks the new task and stops protecting the old ones. A note names the configs where it happens. Torch-free.
"""

from __future__ import annotations

import math
import shlex
from pathlib import Path

import pandas as pd

from clbench.report import MonitoringReporter, Results, Table, format_seeds, plain

TABLE = "penalty_stiffness"
STRENGTH = {"si": "c", "mas": "lamb"}  # the hyper-parameter that scales each method's penalty
COLUMNS = (("run_id", "string"), ("seed", "int64"), ("stage", "int64"), ("parameter", "string"),
           ("weights", "int64"), ("max_importance", "float64"), ("max_stiffness", "float64"), ("unstable", "int64"),
           ("min_importance", "float64"), ("negative", "int64"))  # the last two: SI before its clip (null in old runs)
MEANS = ["max_importance", "max_stiffness", "fraction", "min_importance", "negative"]


CLIP_NOTE = ["min Omega / Omega < 0 before clip: the accumulated importance before SI clips it at zero (as Zenke "
             "et al.'s code does; MAS's is never negative); – for runs stored before clbench recorded it"]


def significant(value: float) -> str:
    """Three significant digits: `0.0123`, `2.33`, `3.41e+04`; `–` when not finite."""
    return "–" if not math.isfinite(value) else f"{value:.3g}"


class PenaltyReporter(MonitoringReporter):
    """Per body parameter after the last task: max Omega, max SGD stiffness, % of weights beyond 2."""

    def stiffness(self, results: Results) -> pd.DataFrame:
        """The last stage's rows of every run of this method, with `fraction` = unstable / weights and `label`."""
        frame = self.last_stage_rows(results, TABLE, COLUMNS)
        return frame.assign(fraction=frame["unstable"] / frame["weights"].where(frame["weights"] > 0))

    def tables(self, results: Results) -> list[Table]:
        frame = self.stiffness(results)
        tables = []
        for label, group in frame.groupby("label", sort=True):
            means = group.groupby("parameter", sort=False)[MEANS].mean()
            rows = [[name, significant(row.max_importance), significant(row.max_stiffness),
                     plain(100 * row.fraction, 2), significant(row.min_importance), significant(row.negative)]
                    for name, row in means.iterrows()]
            unstable = means[means["fraction"] > 0].index.tolist()
            notes = ([f"plain SGD is unstable on {', '.join(unstable)}: weights with lr * 2 * strength * Omega > 2 "
                      "overshoot the anchor on every step; lower the strength (or training.lr) and compare"]
                     if unstable else [])
            title = (f"{label}: importance and SGD stiffness of the penalty after task {int(group['stage'].max())}, "
                     f"mean over seeds {format_seeds(int(seed) for seed in group['seed'].unique())}")
            tables.append(Table(["parameter", "max Omega", "max lr*2*strength*Omega", "% weights > 2",
                                 "min Omega before clip", "Omega < 0 before clip"], rows, title, notes + CLIP_NOTE))
        return tables

    def table_notes(self, results: Results) -> list[str]:
        """One warning per config whose penalty was unstable under plain SGD after its last task."""
        frame = self.stiffness(results)
        notes = []
        for label, group in frame.groupby("label", sort=True):
            unstable = group[group["unstable"] > 0]
            if unstable.empty:
                continue
            seeds = format_seeds(int(seed) for seed in unstable["seed"].unique())
            notes.append(f"{label}: plain SGD is unstable on its penalty (lr * 2 * strength * Omega > 2, up to "
                         f"{significant(float(unstable['max_stiffness'].max()))}) for {int(unstable['unstable'].sum())}"
                         f" weights of {', '.join(dict.fromkeys(unstable['parameter']))} (seeds {seeds}): its numbers"
                         f" may reflect the unstable optimisation rather than the method; see `clbench report "
                         f"{results.command_name} --monitoring --results {shlex.quote(str(results.results_dir))}` "
                         f"and compare a smaller strength "
                         f"(--grid {self.method}.{STRENGTH.get(self.method, 'STRENGTH')}=...)")
        return notes

    def csv(self, results: Results) -> str:
        frame = self.stiffness(results)
        summary = frame.groupby(["label", "stage", "parameter"], sort=True)[MEANS].mean()
        return summary.reset_index().rename(columns={"label": "approach"}).to_csv(index=False)

    def plots(self, results: Results, folder: Path) -> list[Path]:
        return []
