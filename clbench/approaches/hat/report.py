"""HAT's monitoring tables (capacity per layer, weight reuse, smax x c sensitivity), torch-free.

`HatReporter` is the reporter that `clbench.approaches.hat.Hat` declares (`monitoring_reporter`); `clbench report
--hat` and `--monitoring` print its tables. Torch-free (as `clbench/approaches/__init__.py` and this folder's
`__init__.py` are), so `report` imports it without torch.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from clbench.report import MonitoringReporter, Results, Table, format_seeds, plain, read_parquet_files, run_values

CAPACITY_COLUMNS = (("run_id", "string"), ("seed", "int64"), ("stage", "int64"), ("mask", "string"),
                    ("layer", "string"), ("used", "int64"), ("weights", "int64"), ("fraction", "double"))


REUSE_COLUMNS = (("run_id", "string"), ("seed", "int64"), ("stage", "int64"), ("task", "int64"),
                 ("later_task", "int64"), ("shared", "int64"), ("used", "int64"), ("fraction", "double"))


@dataclass
class HatMonitoring:
    """HAT monitoring of one config, mean over its seeds.

    Attributes:
        capacity: columns mask (cumulative | task), stage, layer, mean, std, n: fraction of weights used.
        reuse: columns task, later_task, mean, std, n: fraction of task i's weights reused by task j.
        layers: the gated layers in network order, then `total`.
        task_names: the task names in sequence order when every seed has the same order, else None.
    """

    label: str
    seeds: list[int]
    capacity: pd.DataFrame
    reuse: pd.DataFrame
    layers: list[str]
    task_names: list[str] | None
    masks_file: Path | None


@dataclass
class Sensitivity:
    """rho^{<=T} of HAT runs of one seed over the smax x c grid (NaN where the pair was not run)."""

    seed: int
    stage: int
    smax: list[float]
    c: list[float]
    values: np.ndarray  # (len(smax), len(c))


@dataclass
class HatReport:
    benchmark: str
    configs: list[HatMonitoring] = field(default_factory=list)
    sensitivity: Sensitivity | None = None
    notes: list[str] = field(default_factory=list)


def build_hat_report(results: Results, method: str = "hat") -> HatReport:
    """HAT's capacity and weight-reuse tables per config (mean over seeds) and its smax x c sensitivity."""
    report = HatReport(results.benchmark)
    run_ids = [run_id for run_id, run in results.info.items() if run["method"] == method]
    if not run_ids:
        report.notes.append(f"no finished {method} runs of {results.benchmark} in {results.results_dir}")
        return report
    capacity = _monitoring_table(results, run_ids, "hat_capacity", CAPACITY_COLUMNS)
    reuse = _monitoring_table(results, run_ids, "hat_reuse", REUSE_COLUMNS)
    without = sorted(run_id for run_id in set(run_ids) - set(capacity["run_id"])
                     if results.damage_of(run_id, "hat_capacity.parquet") is None)  # a damaged one is named apart
    if without:
        report.notes.append(f"no hat_capacity.parquet in {', '.join(without)} (runs from before monitoring?)")
    if not reuse.empty:  # every run's pairs as of its last stage (a finished task's mask never changes)
        reuse = reuse[reuse["stage"] == reuse.groupby("run_id")["stage"].transform("max")]
    capacity_means = dict(tuple(_mean_over_seeds(capacity, ["label", "mask", "stage", "layer"]).groupby("label")))
    reuse_means = dict(tuple(_mean_over_seeds(reuse, ["label", "task", "later_task"]).groupby("label")))
    monitored = capacity.groupby("label")["run_id"].unique() if not capacity.empty else {}
    orders = _task_orders(results, list(set(capacity["run_id"])))
    layer_order = list(dict.fromkeys(capacity["layer"]))
    for label in sorted(capacity_means):
        used = sorted(monitored[label], key=lambda run_id: (int(results.info[run_id]["seed"]), run_id))
        layers = [layer for layer in layer_order if layer != "total"] + ["total"]
        layers = [layer for layer in layers if layer in set(capacity_means[label]["layer"])]
        names = {orders.get(run_id) for run_id in used}  # None: no rows of the chosen split to name the tasks
        report.configs.append(HatMonitoring(
            label, sorted(int(results.info[run_id]["seed"]) for run_id in used),
            capacity_means[label].drop(columns="label").reset_index(drop=True),
            reuse_means[label].drop(columns="label").reset_index(drop=True) if label in reuse_means
            else _mean_over_seeds(reuse.iloc[:0], ["task", "later_task"]),
            layers, list(names.pop()) if len(names) == 1 and None not in names else None,
            _masks_file(results, used[0])))
    report.sensitivity = hat_sensitivity(results, method, report.notes)
    return report


def _monitoring_table(results: Results, run_ids: Iterable[str], name: str,
                      columns: Sequence[tuple[str, str]]) -> pd.DataFrame:
    """One monitoring table of many runs (with each run's `label`), from the runs that have it."""
    paths = [results.folder(run_id) / f"{name}.parquet" for run_id in run_ids
             if f"{name}.parquet" in results.files.get(run_id, set())]
    table = read_parquet_files(paths, columns)
    numerator, denominator = ("used", "weights") if name == "hat_capacity" else ("shared", "used")
    exact = table[numerator] / table[denominator].where(table[denominator] > 0)  # as float64, not float32
    table["fraction"] = exact.fillna(table["fraction"]).astype(float)
    table["label"] = table["run_id"].map({run_id: run["label"] for run_id, run in results.info.items()})
    return table


def _masks_file(results: Results, run_id: str) -> Path | None:
    return results.folder(run_id) / "hat_masks.parquet" if "hat_masks.parquet" in results.files[run_id] else None


def _mean_over_seeds(frame: pd.DataFrame, keys: list[str], value: str = "fraction") -> pd.DataFrame:
    """Mean, sample std and count of `value` over the runs, per `keys`."""
    if frame.empty:
        return pd.DataFrame({**{key: [] for key in keys}, "mean": [], "std": [], "n": []})
    grouped = frame.groupby(keys, sort=True)[value]
    table = grouped.agg(["mean", "std", "count"]).rename(columns={"count": "n"}).reset_index()
    table[["mean", "std"]] = table[["mean", "std"]].astype(float)
    return table


def _task_orders(results: Results, run_ids: Sequence[str]) -> dict[str, tuple[str, ...] | None]:
    """The task names of every run in sequence order (None if a name is missing), from its rows of the chosen split
    in either evaluation (HAT stores no task-agnostic rows; the names do not depend on the evaluation)."""
    rows = results.rows if results.rows is not None else results.frame
    frame = rows[rows["run_id"].isin(run_ids)].drop_duplicates(["run_id", "task"])
    frame = frame.sort_values(["run_id", "task"])
    orders: dict[str, tuple[str, ...] | None] = {}
    for run_id, names in zip(frame["run_id"], frame["task_name"]):
        order = orders.get(run_id, ())
        orders[run_id] = None if order is None or not isinstance(names, str) else (*order, names)
    return orders


def hat_sensitivity(results: Results, method: str, notes: list[str], seed: int | None = None) -> Sensitivity | None:
    """rho^{<=T} over smax x c for `method`'s runs of one seed (default: the lowest seed with two or more configs).

    None when no seed has runs of two or more (smax, c) pairs. Configs that also differ in other
    hyper-parameters with the same (smax, c) are averaged, with a note.
    """
    grid = {}
    for run_id, run in results.info.items():
        if run["method"] != method:
            continue
        hp = json.loads(run["hyperparameters"] or "{}")
        if "smax" in hp and "c" in hp:
            grid[run_id] = (int(run["seed"]), float(hp["smax"]), float(hp["c"]))
    per_seed: dict[int, set[tuple[float, float]]] = {}
    for s, smax, c in grid.values():
        per_seed.setdefault(s, set()).add((smax, c))
    candidates = sorted(s for s, pairs in per_seed.items() if len(pairs) > 1)
    if seed is None:
        if not candidates:
            return None
        seed = candidates[0]
    chosen = [run_id for run_id, (s, _, _) in grid.items() if s == seed]
    values = run_values(results, "forgetting-ratio", notes, run_ids=chosen)
    smax_values = sorted({grid[r][1] for r in chosen})
    c_values = sorted({grid[r][2] for r in chosen})
    cells: dict[tuple[float, float], list[float]] = {}
    for run_id, curve in values.items():
        cells.setdefault(grid[run_id][1:], []).append(float(curve[-1]))
    matrix = np.full((len(smax_values), len(c_values)), np.nan)
    for (smax, c), found in cells.items():
        matrix[smax_values.index(smax), c_values.index(c)] = float(np.mean(found))
        if len(found) > 1:
            notes.append(f"sensitivity: {len(found)} {method} configs with smax={smax:g}, c={c:g} on seed {seed} "
                         f"(they differ in other hyper-parameters) are averaged")
    stage = int(results.frame["stage"].max())
    return Sensitivity(seed, stage, smax_values, c_values, matrix)


def hat_tables(report: HatReport) -> list[Table]:
    """Per HAT config: capacity used by a^{<=t} and by a^t per layer and stage (%), and the reuse matrix (%)."""
    tables = []
    for config in report.configs:
        seeds = (f"mean over seeds {format_seeds(config.seeds)}" if len(config.seeds) > 1
                 else f"seed {config.seeds[0]}")
        for mask, what in (("cumulative", "a^{<=t}, all tasks so far"), ("task", "a^t, task t alone")):
            tables.append(_capacity_table(config, mask, f"{config.label}: % of weights used by {what} ({seeds})"))
        if not config.reuse.empty:
            tables.append(_reuse_table(config, f"{config.label}: % of task i's weights reused by task j ({seeds})"))
    if report.sensitivity is not None:
        tables.append(sensitivity_table(report.sensitivity))
    if tables:
        tables[-1].notes += report.notes
    else:
        tables.append(Table([], [], notes=list(report.notes)))
    return tables


def _capacity_table(config: HatMonitoring, mask: str, title: str) -> Table:
    part = config.capacity[config.capacity["mask"] == mask]
    means = {(int(stage), layer): value for stage, layer, value in zip(part["stage"], part["layer"], part["mean"])}
    rows = []
    for stage in sorted({stage for stage, _ in means}):
        cells = [plain(100 * means[(stage, layer)], 1) if (stage, layer) in means else "–" for layer in config.layers]
        rows.append([str(stage), *cells])
    notes = [_task_order_note(config)] if mask == "task" else []
    return Table(["after task", *config.layers], rows, title, [note for note in notes if note])


def _reuse_table(config: HatMonitoring, title: str) -> Table:
    reuse = {(int(i), int(j)): value for i, j, value in zip(config.reuse["task"], config.reuse["later_task"],
                                                             config.reuse["mean"])}
    size = max(j for _, j in reuse)
    rows = [[str(i), *[plain(100 * reuse[(i, j)], 1) if (i, j) in reuse else ""
                                       for j in range(2, size + 1)]] for i in range(1, size)]
    return Table(["task i \\ j", *[str(j) for j in range(2, size + 1)]], rows, title)


def _task_order_note(config: HatMonitoring) -> str:
    if config.task_names is None:
        return f"{config.label}: the seeds have different task orders; tasks are averaged by position"
    return f"{config.label} tasks: " + ", ".join(f"{i} {name}" for i, name in enumerate(config.task_names, 1))


def sensitivity_table(sensitivity: Sensitivity) -> Table:
    rows = [[f"smax={smax:g}", *[plain(value) for value in values]]
            for smax, values in zip(sensitivity.smax, sensitivity.values)]
    title = f"hat: rho<={sensitivity.stage} over smax x c (seed {sensitivity.seed})"
    return Table(["", *[f"c={c:g}" for c in sensitivity.c]], rows, title)


def hat_csv(report: HatReport) -> str:
    """Tidy CSV of the HAT tables: capacity (mask, stage, layer), reuse (task, later_task), sensitivity."""
    frames = []
    for config in report.configs:
        capacity = config.capacity.assign(table="capacity")
        reuse = config.reuse.assign(table="reuse")
        frames += [frame.assign(approach=config.label) for frame in (capacity, reuse) if not frame.empty]
    if report.sensitivity is not None:
        s = report.sensitivity
        grid = [{"table": "sensitivity", "approach": "hat", "seed": s.seed, "stage": s.stage, "smax": smax, "c": c,
                 "mean": s.values[i, j], "n": 1} for i, smax in enumerate(s.smax) for j, c in enumerate(s.c)]
        frames.append(pd.DataFrame(grid))
    columns = ["benchmark", "table", "approach", "mask", "stage", "layer", "task", "later_task", "seed", "smax", "c",
               "mean", "std", "n"]
    if not frames:
        return pd.DataFrame(columns=columns).to_csv(index=False)
    frame = pd.concat(frames, ignore_index=True).assign(benchmark=report.benchmark)
    frame = frame.reindex(columns=columns)
    for column in ("stage", "task", "later_task", "seed", "n"):
        frame[column] = frame[column].astype("Int64")
    return frame.to_csv(index=False)


class HatReporter(MonitoringReporter):
    """HAT's monitoring section: capacity and reuse tables per config, the sensitivity grid, and their figures."""

    def __init__(self, method: str) -> None:
        super().__init__(method)
        self._cache: tuple[Results, HatReport] | None = None

    def report(self, results: Results) -> HatReport:
        """`build_hat_report` of this method, built once per loaded results."""
        if self._cache is None or self._cache[0] is not results:
            self._cache = (results, build_hat_report(results, self.method))
        return self._cache[1]

    def tables(self, results: Results) -> list[Table]:
        return hat_tables(self.report(results))

    def csv(self, results: Results) -> str:
        return hat_csv(self.report(results))

    def plots(self, results: Results, folder: Path) -> list[Path]:
        from clbench.approaches.hat import figures

        return figures.plot_hat(self.report(results), folder)
