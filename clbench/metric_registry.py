"""The metrics of `clbench report --metric`: one declared `Metric` each, found through one table, `METRICS`.

A metric names its function as "module:function" text, resolved on first use (as the approaches' `BUILTINS` table
names its classes), so this module imports nothing but the standard library: `clbench --help` reads `--metric`'s
choices and help from it without numpy, pandas or torch. It lives at the top of the package, not in
`clbench.report`, because importing any module of that package first runs its `__init__`, which loads pandas.

A metric's function takes the inputs it declares (`INPUTS`), in the declared order, and returns one value per
stage t (length T, NaN where undefined); the report (`clbench.report.statistics.run_values`) builds those inputs
for each run, matches the references they need, and leaves a run out, with a note, when one is missing. The
mathematics stays in `clbench.metrics` (pure functions on accuracy matrices).

Each input is built from one stored file of the run (`INPUT_SOURCES`, `SOURCES`), and each file holds some splits:
the accuracy rows test and validation, the curve test images only. So a metric states the splits it can be computed
on (`Metric.splits`), and a report on another split refuses it where it is asked for by name (`split_refusal`) and
leaves it out of a table with one note (`split_note`): never another split's numbers under `split: validation`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

PERCENT, RATIO = "percent", "ratio"
STEPS, FLOPS = "steps", "flops"
UNITS = (PERCENT, RATIO, STEPS, FLOPS)
"""How a metric's values are written: `percent` (accuracy points: x 100, one decimal), `ratio` (two decimals),
`steps` (optimiser steps, whole numbers) or `flops` (floating-point operations, with a prefix: `1.25 GFLOP`)."""

INPUTS: dict[str, str] = {
    "learned": "the run's T x T accuracy matrix A^{u<=t} of the tasks learned (on and below the diagonal)",
    "stored": "the T x T matrix with the accuracies above the diagonal (a task evaluated before it is learned) "
              "where the run stored them, else `learned`",
    "full": "the T x T matrix with the accuracies above the diagonal; a run that did not store them is left out",
    "initial": "the length-T accuracies b_u of the network at initialisation (stage 0); a run that did not store "
               "them is left out",
    "joint": "the T x T matrix A_J of the run's matching joint reference (same data, network, protocol, seed)",
    "random": "A_R of the run's matching random reference: length-T A_R^u (task-aware, the domain scenario), or "
              "T x T A_R^{u<=t} (task-agnostic: the chance level of each stage); `clbench.metrics.random_reference`",
    "margin": "the T x T smallest clearly positive A_J - A_R (`clbench.metrics.reference_gap_margin`)",
    "flops": "the run's training FLOPs of each stage (`stage_train_flops`: `clbench.approaches.flops`), length T; a "
             "run that did not store them is left out",
    "curve": "the run's continual-evaluation curve (`curve.parquet`, `training.eval_every`) in the chosen evaluation: "
             "step, stage, task, at, accuracy (`clbench.curve_metrics`); a run without one is left out",
}
"""The inputs a metric's function can take, by name: what `run_values` builds for each run."""

INPUT_REFERENCES: dict[str, tuple[str, ...]] = {"joint": ("joint",), "random": ("random",),
                                                "margin": ("joint", "random")}
"""The reference runs each input is computed from (`clbench.report.statistics.REFERENCE_KEYS` matches them)."""

TEST_SPLIT, VALIDATION_SPLIT = "test", "validation"
"""`report --split`'s values (`clbench.results.SPLITS`, spelled here so that this module imports no pandas)."""


@dataclass(frozen=True)
class Source:
    """A stored file of a run that metrics read, and the splits it holds."""

    file: str
    splits: tuple[str, ...]
    what: str


ACCURACY_ROWS, CURVE = "accuracy", "curve"
SOURCES: dict[str, Source] = {
    ACCURACY_ROWS: Source("accuracy.parquet", (TEST_SPLIT, VALIDATION_SPLIT), "the accuracies after each task"),
    CURVE: Source("curve.parquet", (TEST_SPLIT,),
                  "the continual evaluation's curve, `training.eval_subset` test images of each task: "
                  "`clbench.run.curve`"),
}
"""The stored files the metrics read, by name: which split each holds is what a metric can be computed on."""

INPUT_SOURCES: dict[str, str] = {"learned": ACCURACY_ROWS, "stored": ACCURACY_ROWS, "full": ACCURACY_ROWS,
                                 "initial": ACCURACY_ROWS, "joint": ACCURACY_ROWS, "random": ACCURACY_ROWS,
                                 "margin": ACCURACY_ROWS, "flops": ACCURACY_ROWS, "curve": CURVE}
"""The stored source (`SOURCES`) each input (`INPUTS`) is built from."""


@dataclass(frozen=True)
class Metric:
    """One `--metric`: how its per-stage values are computed from a run's accuracies, and how they are shown.

    Attributes:
        name: the `--metric` value, and the suffix of its figure's file (`mnist2-forgetting-ratio.png`).
        symbol: its column's symbol: `rho` gives the columns `rho<=1`, `rho<=2`, ...
        unit: `percent` or `ratio` (`UNITS`).
        title: the metric in words, for help and notes ("forward transfer").
        inputs: the names (`INPUTS`) of what `function` takes, in its order.
        function: "module:function" -> (the inputs) -> the per-stage values, length T, NaN where undefined.
        definition: its formula at stage t, in one line (the README's metric table has the same text).
        source: the paper or code it comes from.
        peers: how the peers' code computes it (or that it does not), each citing the file and commit it was read in;
            the metrics reference renders it beside the definition.
        explain: "module:function" -> (run id, the inputs) -> notes on where the value is undefined; None: none.
        lists_references: the table lists the joint and random runs as rows without `--references` (where their
            own value is worth reading beside the approaches': their accuracy).
        higher_is_better: which way is better; `report --compare` ranks approaches by it (rank 1: the best).
    """

    name: str
    symbol: str
    unit: str
    title: str
    inputs: tuple[str, ...]
    function: str
    definition: str
    source: str
    peers: str = ""
    explain: str | None = None
    lists_references: bool = False
    higher_is_better: bool = True

    def __post_init__(self) -> None:
        unknown = [name for name in self.inputs if name not in INPUTS]
        if unknown or self.unit not in UNITS:
            raise ValueError(f"metric {self.name!r}: inputs must be among {', '.join(INPUTS)} and the unit one of "
                             f"{', '.join(UNITS)} (got inputs {list(self.inputs)}, unit {self.unit!r})")

    @property
    def references(self) -> tuple[str, ...]:
        """The reference runs (`joint`, `random`) its inputs need, in the order they are first named."""
        needed = [reference for name in self.inputs for reference in INPUT_REFERENCES.get(name, ())]
        return tuple(dict.fromkeys(needed))

    @property
    def sources(self) -> tuple[str, ...]:
        """The stored sources (`SOURCES`) its inputs are built from, in the order they are first named."""
        return tuple(dict.fromkeys(INPUT_SOURCES[name] for name in self.inputs))

    @property
    def splits(self) -> tuple[str, ...]:
        """The splits it can be computed on: those every one of its sources holds."""
        return tuple(split for split in SOURCES[ACCURACY_ROWS].splits
                     if all(split in SOURCES[source].splits for source in self.sources))

    def reads(self, split: str) -> bool:
        """Whether its value can be computed on `split` (`report --split`)."""
        return split in self.splits

    @property
    def percent(self) -> bool:
        return self.unit == PERCENT

    def compute(self, *inputs: Any) -> Any:
        """The per-stage values from the inputs, given in `self.inputs`' order."""
        return resolve(self.function)(*inputs)

    def notes(self, run_id: str, *inputs: Any) -> list[str]:
        """Why some of a run's values are undefined (`explain`), in words; [] when it declares no explanation."""
        return [] if self.explain is None else list(resolve(self.explain)(run_id, *inputs))


def resolve(target: str) -> Callable[..., Any]:
    """The function a "module:function" text names (its module imported now)."""
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


METRICS: dict[str, Metric] = {}
"""Every metric by name, in the order `--metric` lists them."""


def register(metric: Metric) -> None:
    """Add a metric to `METRICS`; a name already there is an error (ValueError). `--metric`'s choices are read
    when `clbench.cli.report` is imported: a metric registered later is computed by `run_values` but not offered."""
    if metric.name in METRICS:
        raise ValueError(f"metric {metric.name!r} is registered already")
    METRICS[metric.name] = metric


def unreadable(names: Sequence[str], split: str) -> list[str]:
    """The metrics among `names` that cannot be computed on `split` (a source of theirs does not hold it)."""
    return [name for name in names if not METRICS[name].reads(split)]


def _why_not(names: Sequence[str], split: str) -> str:
    sources = dict.fromkeys(source for name in names for source in METRICS[name].sources
                            if split not in SOURCES[source].splits)
    return "; ".join(f"{SOURCES[source].file} ({SOURCES[source].what}), which holds the "
                     f"{' and '.join(SOURCES[source].splits)} split only" for source in sources)


def split_refusal(names: Sequence[str], split: str, asked: str) -> str | None:
    """The one-line refusal of a report that asks (`asked`: `--metric min-accuracy`, `--continual`) for metrics
    that cannot be computed on `split`; None when every one of `names` can. The CLI and
    `clbench.report.statistics.run_values` both refuse with it (exit 2)."""
    left = unreadable(names, split)
    if not left:
        return None
    return (f"{asked}: {', '.join(METRICS[name].symbol for name in left)} cannot be computed on the {split} split: "
            f"{'it is' if len(left) == 1 else 'they are'} read from {_why_not(left, split)}; leave out --split {split}")


def split_note(names: Sequence[str], split: str) -> list[str]:
    """The note of a table that leaves out the metrics among `names` that cannot be computed on `split` (they are
    shown only for the splits their files hold, never with another split's numbers); [] when none is left out."""
    left = unreadable(names, split)
    if not left:
        return []
    return [f"split: {split}: {', '.join(METRICS[name].symbol for name in left)} left out: "
            f"{'it is' if len(left) == 1 else 'they are'} read from {_why_not(left, split)}; `--split {TEST_SPLIT}` "
            f"shows {'it' if len(left) == 1 else 'them'}"]


def metric_help() -> str:
    """`--metric`'s help: every metric with its symbol and source, and the split it is limited to, if any."""
    every = SOURCES[ACCURACY_ROWS].splits

    def only(metric: Metric) -> str:
        return f" ({' and '.join(metric.splits)} split only)" if len(metric.splits) < len(every) else ""

    named = "; ".join(f"{metric.name}: {metric.title} {metric.symbol}, {metric.source}{only(metric)}"
                      for metric in METRICS.values())
    return f"The per-stage metric of the table: {named}. The README's Report section defines each."


MAMMOTH, FACIL, AVALANCHE = "aimagelab/mammoth", "mmasana/FACIL", "ContinualAI/avalanche"
"""The peers whose code the `peers` texts cite (read at the commits they name)."""

for _metric in (
    Metric("forgetting-ratio", "rho", RATIO, "forgetting ratio", ("learned", "joint", "random", "margin"),
           "clbench.metrics:forgetting_ratio",
           "1/t sum_{u<=t} [(A^{u<=t} - A_R) / (A_J^{u<=t} - A_R) - 1], A_J and A_R the matching joint and random "
           "runs (A_R^u, or A_R^{u<=t} task-agnostic: the Reports page)", "Serra et al. 2018 (HAT)",
           peers="The HAT authors' code (joansj/hat `src/plot_results.py`, 6fd0b9d): the same ratio per stage, A_J "
                 "the joint run of the same seed, A_R^u the random run's diagonal entry A_R^{u<=u} (clbench takes "
                 "the mean of the random run's column u, less noisy). CLArena (pengxiang-wang/continual-learning-"
                 "arena `clarena/pipelines/cl_full_eval.py` `evaluate_and_save_fr_to_csv`, bf58528): after the "
                 f"last task only, against one joint run on every task. {MAMMOTH}, {FACIL} and {AVALANCHE}: none.",
           explain="clbench.report.statistics:undefined_ratio_notes"),
    Metric("accuracy", "A", PERCENT, "mean accuracy", ("learned",), "clbench.metrics:average_accuracy",
           "1/t sum_{u<=t} A^{u<=t}", "Lopez-Paz & Ranzato 2017 (GEM's ACC)",
           peers=f"{MAMMOTH} (`utils/loggers.py` `print_mean_accuracy`, e75a491) and {FACIL} (`src/utils.py` "
                 "`print_summary`, \"Avg.\", e09d2c8): the same, the mean over the tasks learned so far (Mammoth's "
                 f"class-IL and task-IL, FACIL's TAg and TAw). {AVALANCHE} (`avalanche/evaluation/metrics/"
                 "accuracy.py` `StreamAccuracy`, 01d9bc8): the accuracy over all patterns of the evaluated stream "
                 "pooled, so weighted by each experience's test size, and over every experience the stream holds "
                 "(`TrainedExperienceAccuracy`: those trained on so far).",
           lists_references=True),
    Metric("bwt", "BWT", PERCENT, "backward transfer", ("learned",), "clbench.metrics:backward_transfer_by_stage",
           "1/(t-1) sum_{u<t} (A^{u<=t} - A^{u<=u}); negative means forgetting", "Lopez-Paz & Ranzato 2017 (GEM)",
           peers=f"{MAMMOTH} (`utils/metrics.py` `backward_transfer`, e75a491): the same, after the last task only "
                 f"(equal to clbench's on every matrix compared; see the reproductions ledger). {AVALANCHE} "
                 "(`avalanche/evaluation/metrics/forgetting_bwt.py` `StreamBWT`, 07aef64): minus its "
                 "`StreamForgetting`, the same terms averaged over the experiences trained on before. CLArena "
                 "(`clarena/pipelines/cl_full_eval.py` `evaluate_and_save_bwt_to_csv`, bf58528): the same, per "
                 f"stage. {FACIL}: none."),
    Metric("forgetting", "F", PERCENT, "forgetting", ("learned",), "clbench.metrics:forgetting_by_stage",
           "1/(t-1) sum_{u<t} [max_{u<=l<t} A^{u<=l} - A^{u<=t}]: the best earlier accuracy minus the current, over "
           "the tasks before the last", "Chaudhry et al. 2018 (Riemannian Walk)",
           peers=f"{FACIL} (`src/main_incremental.py`, e09d2c8): the same, `acc[:t, u].max(0) - acc[t, u]` per task, "
                 f"TAw and TAg. {MAMMOTH}'s is `forgetting-mammoth`. {AVALANCHE} (`forgetting_bwt.py` "
                 "`StreamForgetting`, 07aef64) takes no max: A^{u<=u} - A^{u<=t}, i.e. minus BWT. "
                 "RaptorMai/online-continual-learning (`experiment/metrics.py`, 6175ca0): the max over every stage, "
                 "the last included, averaged over every task; the table in `clbench/metrics.py` has each.",
           higher_is_better=False),
    Metric("forgetting-mammoth", "F_M", PERCENT, "Mammoth's forgetting", ("stored",),
           "clbench.metrics:mammoth_forgetting_by_stage",
           "1/(t-1) sum_{u<t} [max_{u-1<=l<=t} A^{u<=l} - A^{u<=t}]: as forgetting, but the max also takes the "
           "current stage and, where stored, the accuracy just before the task is learned",
           "Mammoth (utils/metrics.py, e75a491)",
           peers=f"{MAMMOTH} (`utils/metrics.py` `forgetting`, e75a491): the max over every row of its results "
                 "(padded with 0.0 above the diagonal), the last included, minus the last row, averaged over the "
                 "tasks but the last, after the last task only; clbench gives it per stage, as if the run stopped "
                 "there. A task whose accuracy rose counts 0 (clbench's `forgetting` counts it negative).",
           higher_is_better=False),
    Metric("intransigence", "I", PERCENT, "intransigence", ("learned", "joint"), "clbench.metrics:intransigence",
           "1/t sum_{k<=t} (A_J^{k<=k} - A^{k<=k}), A_J the matching `joint` run",
           "Chaudhry et al. 2018 (Riemannian Walk)",
           peers=f"None of {MAMMOTH} (`utils/metrics.py`, e75a491), {FACIL} (`src/`, e09d2c8; \"intransigence\" "
                 f"names only a trade-off argument there) or {AVALANCHE} (`avalanche/evaluation/metrics/`) computes "
                 "it. Chaudhry et al. measure it against a model trained on every task's data together; clbench "
                 "takes the matching `joint` run, the forgetting ratio's A_J.", higher_is_better=False),
    Metric("learning-accuracy", "LA", PERCENT, "learning accuracy", ("learned",), "clbench.metrics:learning_accuracy",
           "1/t sum_{k<=t} A^{k<=k}: the accuracy on each task right after learning it", "Riemer et al. 2019 (MER)",
           peers=f"None of {MAMMOTH}, {FACIL} or {AVALANCHE} reports it; its terms are the diagonal of Mammoth's "
                 "and FACIL's accuracy matrices, and the initial value Avalanche's `StreamForgetting` keeps per "
                 "experience (`forgetting_bwt.py`, 07aef64)."),
    Metric("fwt", "FWT", PERCENT, "forward transfer", ("full", "initial"), "clbench.metrics:forward_transfer_by_stage",
           "1/(t-1) sum_{1<u<=t} (A^{u<=u-1} - b_u): the accuracy on each task just before learning it, against "
           "b_u, the accuracy of the network at initialisation (stage 0)", "Lopez-Paz & Ranzato 2017 (GEM)",
           peers=f"{AVALANCHE} (`avalanche/evaluation/metrics/forward_transfer.py` `StreamForwardTransfer`, "
                 "050ccd8): the same, b_u from an evaluation before any training (it needs `eval_every > -1`). "
                 f"{MAMMOTH} (`utils/metrics.py` `forward_transfer` and `utils/training.py`, e75a491; only with "
                 "`--enable_other_metrics`): `results[u-1][u] - random_results[u]`, both task u's accuracy just "
                 "before u is learned (the first appended to the previous stage's row, the second, where it can be, "
                 "before the method's `begin_task`), neither at initialisation. CLArena "
                 "(`clarena/pipelines/cl_full_eval.py` `evaluate_and_save_fwt_to_csv`, bf58528): A^{u<=u} minus "
                 f"the accuracy of an independently trained model on u, another quantity. {FACIL}: none."),
    Metric("train-flops", "FLOPs", FLOPS, "training FLOPs", ("flops",), "clbench.metrics:cumulative_flops",
           "sum_{s<=t} FLOPs of stage s's training: every step (replay passes, projections), validation pass and the "
           "approach's own work (fits, bias stages, exemplar selection), counted by torch's FlopCounterMode on "
           "sampled steps (docs/compute.md)", "Prabhu et al. 2023 (computationally budgeted CL)",
           peers=f"None of {MAMMOTH}, {FACIL} or {AVALANCHE} counts FLOPs. Ghunaim et al. (Yasir-Ghunaim/RealtimeOCL "
                 "`measuring_delay.md`, 0bc8bb4) count passes by hand, check the forward ones with DeepSpeed's "
                 "FlopsProfiler (twice that added for the backward) and apply each method's cost as the delay of "
                 "`avalanche_extend/benchmarks/training/supervised/delay.py` (0bc8bb4).", higher_is_better=False),
):
    register(_metric)


DE_LANGE = "De Lange et al. 2023 (continual evaluation)"
CONTINUAL_PEERS = ("The authors' code (Mattdl/ContinualEvaluation `src/eval/continual_eval_metrics.py`, bae2a58) "
                   "computes it after every training iteration. {AVALANCHE}'s `SupervisedTemplate` evaluates during "
                   "training every `eval_every` iterations with `peval_mode='iteration'` (its docstring, as "
                   "ContinualAI/clvision-challenge-2023 `strategies/my_strategy.py` repeats it) and {MAMMOTH} every "
                   "`--eval_epochs` epochs (`utils/args.py`, 010d4ff), but neither turns the points into this metric; "
                   "{FACIL} evaluates after each task only. ")
for _metric in (
    Metric("min-accuracy", "min-ACC", PERCENT, "average minimum accuracy", ("curve",),
           "clbench.curve_metrics:min_accuracy",
           "1/(t-1) sum_{u<t} min_{|T_u| < n <= |T_t|} a_u(n): each earlier task's lowest accuracy on the curve after "
           "it was learned, up to the end of task t", DE_LANGE,
           peers=CONTINUAL_PEERS.format(AVALANCHE=AVALANCHE, MAMMOTH=MAMMOTH, FACIL=FACIL)
           + "The authors' `TaskTrackingMINAccuracyPluginMetric` keeps each task's minimum while another task is "
             "learned."),
    Metric("worst-case-accuracy", "WC-ACC", PERCENT, "worst-case accuracy", ("curve",),
           "clbench.curve_metrics:worst_case_accuracy",
           "1/t a_t(|T_t|) + (1 - 1/t) min-ACC^{<=t}: the current task's accuracy at its end with the earlier tasks' "
           "minima", DE_LANGE,
           peers=CONTINUAL_PEERS.format(AVALANCHE=AVALANCHE, MAMMOTH=MAMMOTH, FACIL=FACIL)
           + "The authors' `WCACCPluginMetric`: the mean of the current task's accuracy and the other tasks' minima."),
    Metric("windowed-forgetting", "WF10", PERCENT, "windowed forgetting", ("curve",),
           "clbench.curve_metrics:windowed_forgetting",
           "1/t sum_{u<=t} max_{i<j, j-i<10} (a_u(n_i) - a_u(n_j)): each task's largest drop within 10 consecutive "
           "evaluations of the curve up to the end of task t, averaged", DE_LANGE,
           peers=CONTINUAL_PEERS.format(AVALANCHE=AVALANCHE, MAMMOTH=MAMMOTH, FACIL=FACIL)
           + "The authors' `WindowedForgettingPluginMetric(window_size=10)` keeps it per task, over evaluations "
             "every iteration (clbench's are every K steps); the mean over the tasks is clbench's.",
           higher_is_better=False),
    Metric("stability-gap", "gap", PERCENT, "stability gap", ("curve",), "clbench.curve_metrics:stability_gap",
           "1/(t-1) sum_{u<t} max(0, a_u(|T_{t-1}|) - min a_u(n)), n the curve's points in the first half of task t: "
           "the largest drop of each earlier task below its accuracy at the task boundary", DE_LANGE,
           peers="De Lange et al. show the gap in figures and measure it through min-ACC and WF^w; their code "
                 "(Mattdl/ContinualEvaluation `src/eval/continual_eval_metrics.py`, bae2a58) has no depth per task "
                 f"boundary, which is clbench's. {AVALANCHE}, {MAMMOTH}, {FACIL}: none.", higher_is_better=False),
    Metric("gap-recovery", "recovery", STEPS, "steps to recover from the stability gap", ("curve",),
           "clbench.curve_metrics:gap_recovery_steps",
           "mean over u<t of the optimiser steps from the start of task t until a_u is back within 1 point of "
           "a_u(|T_{t-1}|) (0 without a drop; a task that does not recover within task t is left out, with a note)",
           "clbench (after De Lange et al. 2023's recovery phase)",
           peers=f"None of {AVALANCHE}, {MAMMOTH} or {FACIL}, nor the authors' code (Mattdl/ContinualEvaluation "
                 "`src/eval/continual_eval_metrics.py`, bae2a58), counts it.",
           explain="clbench.curve_metrics:unrecovered_notes", higher_is_better=False),
):
    register(_metric)
