"""The summary table of `clbench report --summary`: after the last task T, A^{<=T}, backward transfer,
max-previous forgetting, learning accuracy, FWT, intransigence, memory and the parameter count (the paper's
permuted / split MNIST tables), and where the runs stored them the training FLOPs and, in the real-time protocol,
the batches trained of those the stream offered (docs/compute.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import pandas as pd

from clbench import metrics
from clbench.metric_registry import FLOPS, METRICS, split_note
from clbench.report.cells import format_cell, format_memory, format_parameters, sort_value
from clbench.report.formatting import Table
from clbench.report.loading import REFERENCES, Results
from clbench.report.notes import complete_runs, run_notes, seed_coverage_notes, unmeasured_labels
from clbench.report.statistics import (
    Cell,
    _reference_command,
    match_reference,
    reference_candidates,
    run_curve,
    run_values,
    summarize,
)


@dataclass(frozen=True)
class SummaryRow:
    """One approach after the last task: A^{<=T}, backward transfer, max-previous forgetting (fractions)."""

    label: str
    parameters: int | None
    accuracy: Cell
    backward_transfer: Cell
    forgetting: Cell
    seeds: list[int]
    learning_accuracy: Cell = Cell(float("nan"), float("nan"), 0)
    forward_transfer: Cell = Cell(float("nan"), float("nan"), 0)  # empty without stage-0 rows
    intransigence: Cell = Cell(float("nan"), float("nan"), 0)  # empty without a matching joint reference
    memory_bytes: Cell = Cell(float("nan"), float("nan"), 0)  # extra memory after the last task (schema 2)
    continual: dict[str, Cell] = field(default_factory=dict)  # min-ACC and WC-ACC where a run has a curve
    train_flops: Cell = Cell(float("nan"), float("nan"), 0)  # training FLOPs of every stage (empty before they were)
    batches: Cell = Cell(float("nan"), float("nan"), 0)  # the real-time protocol: the batches trained, all stages
    stream_batches: Cell = Cell(float("nan"), float("nan"), 0)  # and the batches its streams offered


@dataclass
class Summary:
    """The paper's permuted / split MNIST table, plus BWT and forgetting: one row per approach."""

    benchmark: str
    stages: int
    rows: list[SummaryRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    unmeasured: dict[str, str] = field(default_factory=dict)  # label -> why no number ("needs the task id")
    continual: tuple[str, ...] = ()  # the continual metrics shown (`SUMMARY_CONTINUAL`), when a run has a curve
    shows_flops: bool = False  # a row has training FLOPs (runs of a clbench that counts them)
    shows_stream: bool = False  # a row ran the real-time stream (`training.realtime`)


def build_summary(results: Results, include_references: bool = True) -> Summary:
    """A^{<=T}, BWT and max-previous forgetting per approach (mean over seeds), with `parameters` from run.json."""
    summary = Summary(results.benchmark, int(results.frame["stage"].max()) if not results.frame.empty else 0)
    summary.notes += run_notes(results, named=True)
    per_label: dict[str, list[str]] = {}
    quiet: list[str] = []  # why a run has no FWT or I: said by `--metric fwt` / `--metric intransigence`
    transfer = run_values(results, "fwt", quiet, True)
    intransigence = run_values(results, "intransigence", quiet, True)
    memory = last_memory_bytes(results)
    for run_id in complete_runs(results, summary.notes):
        run = results.info[run_id]
        if run["method"] not in REFERENCES or include_references:
            per_label.setdefault(run["label"], []).append(run_id)
    for label, run_ids in per_label.items():
        matrices = [results.matrices[run_id] for run_id in run_ids]
        summary.rows.append(SummaryRow(
            label, _parameter_count(results, run_ids, summary.notes),
            summarize(metrics.average_accuracy(m)[-1] for m in matrices),
            summarize(metrics.backward_transfer(m) for m in matrices),
            summarize(metrics.max_previous_forgetting(m) for m in matrices),
            sorted(int(results.info[run_id]["seed"]) for run_id in run_ids),
            summarize(metrics.learning_accuracy(m)[-1] for m in matrices),
            summarize(transfer[run_id][-1] for run_id in run_ids if run_id in transfer),
            summarize(intransigence[run_id][-1] for run_id in run_ids if run_id in intransigence),
            summarize(memory[run_id] for run_id in run_ids if run_id in memory)))
        if len({m.shape[0] for m in matrices}) > 1:
            summary.notes.append(f"{label}: runs have different numbers of tasks; A^<=T is each run's last stage")
    _add_continual(results, summary, per_label)
    _add_compute(results, summary, per_label)
    summary.rows.sort(key=lambda row: (sort_value(row.accuracy), row.label))
    summary.notes += missing_joint_notes(results, per_label, intransigence)
    summary.notes += seed_coverage_notes({row.label: row.seeds for row in summary.rows})
    summary.unmeasured = unmeasured_labels(results, include_references, set(per_label))
    return summary


SUMMARY_CONTINUAL = ("min-accuracy", "worst-case-accuracy")
"""The continual evaluation's metrics the summary shows, where a run has a curve (`training.eval_every`)."""


def _add_continual(results: Results, summary: Summary, per_label: dict[str, list[str]]) -> None:
    """min-ACC and WC-ACC per row when any run has a curve (else the table keeps its columns), with the note naming
    the option for the rows without one."""
    from clbench.report.continual import last_values, no_curve_note

    run_ids = [run_id for runs in per_label.values() for run_id in runs]
    if all(run_curve(results, run_id) is None for run_id in run_ids):
        return
    summary.notes += split_note(SUMMARY_CONTINUAL, results.split)
    shown = tuple(name for name in SUMMARY_CONTINUAL if METRICS[name].reads(results.split))
    values = last_values(results, shown, [], include_references=True)  # joint's and random's rows too
    for row in summary.rows:
        row.continual.update({name: summarize(values[name][run_id] for run_id in per_label[row.label]
                                              if run_id in values[name]) for name in shown})
    summary.continual = shown
    summary.notes += no_curve_note(results, run_ids) if shown else []


COMPUTE = ("stage_train_flops", "stage_batches", "stage_stream_batches")


def run_compute(results: Results) -> pd.DataFrame:
    """Per run (index), its training FLOPs, batches trained and batches offered by the real-time stream, summed over
    its stages (each stage's rows hold its values once); NaN where not stored."""
    rows = results.rows if results.rows is not None else results.frame
    columns = [column for column in COMPUTE if column in rows]
    stages = rows[rows["stage"] >= 1].groupby(["run_id", "stage"])[columns].first()
    return stages.groupby("run_id").sum(min_count=1).reindex(columns=list(COMPUTE))


def _add_compute(results: Results, summary: Summary, per_label: dict[str, list[str]]) -> None:
    """Each row's training FLOPs and, in the real-time protocol, its batches trained of those offered (means over
    its seeds); the columns are shown where a row has them."""
    totals = run_compute(results)
    for index, row in enumerate(summary.rows):
        mine = totals.reindex(per_label[row.label])
        streamed = mine[mine["stage_stream_batches"].notna()]
        summary.rows[index] = replace(row, train_flops=summarize(mine["stage_train_flops"].dropna()),
                                      batches=summarize(streamed["stage_batches"].dropna()),
                                      stream_batches=summarize(streamed["stage_stream_batches"]))
    summary.shows_flops = any(row.train_flops.n for row in summary.rows)
    summary.shows_stream = any(row.stream_batches.n for row in summary.rows)


def missing_joint_notes(results: Results, per_label: dict[str, list[str]],
                        intransigence: dict[str, object]) -> list[str]:
    """Why the I (intransigence) column lacks a run: a note per command that makes the joint reference it needs (no
    joint run with its data, network, protocol and seed), naming the rows, as the forgetting ratio's notes do."""
    candidates = reference_candidates(results)
    missing: dict[str, list[str]] = {}
    for label, run_ids in per_label.items():
        for run_id in run_ids:
            run = results.info[run_id]
            joint, refused = match_reference(results, candidates, "joint", run)
            if run_id in intransigence or joint is not None or refused is not None:
                continue
            labels = missing.setdefault(_reference_command(run, ["joint"], results), [])
            labels += [label] if label not in labels else []
    return [f"I (intransigence) of {', '.join(labels)}: no joint reference with the data, network, protocol and seed "
            f"of {'its' if len(labels) == 1 else 'their'} runs; make it with `{command}`"
            for command, labels in missing.items()]


def last_memory_bytes(results: Results) -> dict[str, float]:
    """Run id -> the bytes it kept besides its network after its last task (`memory_bytes`; none in schema 1)."""
    rows = results.rows if results.rows is not None else results.frame
    last = rows[rows["stage"] == rows.groupby("run_id")["stage"].transform("max")]
    return last.groupby("run_id")["memory_bytes"].first().dropna().to_dict()


def _parameter_count(results: Results, run_ids: Sequence[str], notes: list[str]) -> int | None:
    """`parameters` from the runs' run.json (an int, or a dict with `total`); None when no run has it."""
    counts = set()
    for run_id in run_ids:
        value = (results.run_file(run_id) or {}).get("parameters")
        value = value.get("total") if isinstance(value, dict) else value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            counts.add(int(value))
    if len(counts) > 1:
        notes.append(f"{results.info[run_ids[0]]['label']}: runs report different parameter counts "
                     f"{sorted(counts)}; the largest is shown")
    return max(counts) if counts else None


def compute_cells(summary: Summary, row: SummaryRow, ci: bool = False) -> list[str]:
    """The row's training FLOPs and real-time batches (`trained of offered`), where the summary shows them."""
    stream = (f"{row.batches.mean:.0f} of {row.stream_batches.mean:.0f}" if row.stream_batches.n else "–")
    return ([format_cell(row.train_flops, FLOPS, ci)] if summary.shows_flops else []) + (
        [stream] if summary.shows_stream else [])


def summary_table(summary: Summary, ci: bool = False) -> Table:
    rows = [[row.label, format_parameters(row.parameters), format_cell(row.accuracy, "percent", ci),
             format_cell(row.backward_transfer, "percent", ci), format_cell(row.forgetting, "percent", ci),
             format_cell(row.learning_accuracy, "percent", ci), format_cell(row.forward_transfer, "percent", ci),
             format_cell(row.intransigence, "percent", ci), format_memory(row.memory_bytes),
             *compute_cells(summary, row, ci),
             *(format_cell(row.continual[name], "percent", ci) for name in summary.continual),
             str(len(row.seeds))] for row in summary.rows]
    compute_head = ["train FLOPs"] * summary.shows_flops + ["batches seen"] * summary.shows_stream
    head = ["approach", "parameters", f"A<={summary.stages}", "BWT", "forgetting", "LA", "FWT", "I", "memory",
            *compute_head, *(METRICS[name].symbol for name in summary.continual), "seeds"]
    rows += [[label, "", *[reason.split(" (")[0]] * 6, "", *[""] * len(compute_head),
              *[reason.split(" (")[0]] * len(summary.continual), "-"]
             for label, reason in summary.unmeasured.items()]
    return Table(head, rows, notes=list(summary.notes))
