"""A table beyond the paper's (`clbench report --paper`): on permuted MNIST the paper compares HAT with numbers
quoted from other papers (tab:PMNIST); this table puts clbench's own baselines beside HAT at one network size, all
trained under the HAT protocol, with the accuracy A<=T and the paper's forgetting ratio rho<=t per stage.

rho<=t needs a joint and a random reference per run (same seed, data, network and protocol): an approach with a
run without them shows `–` (never a mean over the seeds that have them), and a note gives the command that makes
them; an approach without runs says so and a
note gives the command that makes them. Torch-free.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from clbench.metric_registry import PERCENT, RATIO
from clbench.report.cells import format_cell
from clbench.report.commands import option_section, stored_overrides, train_command
from clbench.report.formatting import Table, format_seeds
from clbench.report.notes import one_note_per_cause
from clbench.report.paper_commands import variant_options
from clbench.report.statistics import Cell, match_reference, reference_candidates, run_values
from clbench.report.tables import stage_cells

if TYPE_CHECKING:
    from clbench.report.loading import Results
    from clbench.report.paper_results import OurRow

REFERENCES = ("joint", "random")
GLOBAL = ("data", "network", "training", "variant")


@dataclass(frozen=True)
class BeyondSpec:
    """Which runs the table shows: `methods` at `variant` of `benchmark`; `seeds`: what a missing approach's
    command asks for; `why`: the table's title."""

    benchmark: str
    variant: str
    methods: tuple[str, ...]
    seeds: str
    why: str


# Issue 60: sgd, ewc, si, packnet, gpm and wsn beside HAT at the small network's size (784-100-100), seeds 0-2.
BEYOND = {"pmnist": BeyondSpec("pmnist", "small", ("hat", "sgd", "ewc", "si", "packnet", "gpm", "wsn"), "0-2",
                               "beyond the paper: clbench's approaches at the small network (784-100-100), all under "
                               "the HAT protocol")}


@dataclass(frozen=True)
class BeyondRow:
    """One approach (label): A<=t and rho<=t per stage (rho empty when its runs lack references)."""

    label: str
    method: str
    accuracy: tuple[Cell, ...]
    ratio: tuple[Cell, ...]
    seeds: tuple[int, ...]
    settings: tuple[str, ...]


@dataclass
class Beyond:
    spec: BeyondSpec
    rows: list[BeyondRow] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # methods of the spec without runs
    notes: list[str] = field(default_factory=list)


def build_beyond(results: Results, ours: Sequence[OurRow], spec: BeyondSpec) -> Beyond:
    """The table of `spec`'s approaches from `ours` (the paper comparison's rows: accuracy cells and settings)."""
    beyond = Beyond(spec)
    kept = [row for row in ours if row.method in spec.methods and row.variant == spec.variant]
    candidates = reference_candidates(results)
    lacking: dict[tuple[tuple[str, ...], tuple[str, ...]], dict[str, list[int]]] = {}
    notes: list[str] = []
    for row in kept:
        run_ids = sorted(run_id for run_id, run in results.info.items() if run["label"] == row.label)
        usable = []
        for run_id in run_ids:
            run = results.info[run_id]
            missing = tuple(name for name in REFERENCES if _absent(match_reference(results, candidates, name, run)))
            if missing:
                options = tuple(text for text in stored_overrides(run.get("overrides")) or []
                                if option_section(text) in GLOBAL)
                lacking.setdefault((missing, options), {}).setdefault(row.label, []).append(int(run["seed"]))
            else:
                usable.append(run_id)
        # rho over every seed of the row or none: never a mean over the seeds that happen to have references
        curves = list(run_values(results, "forgetting-ratio", notes, run_ids=usable).values())
        complete = len(curves) == len(run_ids)
        ratio = stage_cells(curves, len(row.cells)) if complete else [Cell(float("nan"), float("nan"), 0)] * len(
            row.cells)
        seeds = tuple(sorted(int(results.info[run_id]["seed"]) for run_id in run_ids))
        beyond.rows.append(BeyondRow(row.label, row.method, row.cells, tuple(ratio), seeds, row.differences))
    order = {method: index for index, method in enumerate(spec.methods)}
    beyond.rows.sort(key=lambda row: (order[row.method], row.label))
    beyond.missing = [method for method in spec.methods if method not in {row.method for row in kept}]
    if beyond.missing:
        command = train_command(results, beyond.missing, spec.seeds, variant_options(results.benchmark, spec.variant))
        beyond.notes.append(f"no runs of {', '.join(beyond.missing)} at the {spec.variant} network: make them with "
                            f"`{command}`")
    beyond.notes += [_reference_note(results, missing, options, runs) for (missing, options), runs in lacking.items()]
    beyond.notes += one_note_per_cause(results, notes)
    return beyond


def _absent(matched: tuple[object, str | None]) -> bool:
    """No reference run at all (`match_reference`'s (None, None)); a refused one is `run_values`' to explain."""
    reference, reason = matched
    return reference is None and reason is None


def _reference_note(results: Results, missing: tuple[str, ...], options: tuple[str, ...],
                    runs: dict[str, list[int]]) -> str:
    """rho needs the references: which rows lack them, for which seeds, and the one command that makes them."""
    seeds = sorted({seed for values in runs.values() for seed in values})
    named = ", ".join(f"{label} seed{'s' if len(set(values)) > 1 else ''} {format_seeds(values)}"
                      for label, values in runs.items())
    return (f"rho<=t needs a {' and a '.join(missing)} reference per seed with the run's data, network and protocol; "
            f"none here for {named} (their rho reads –): make {'them' if len(missing) > 1 else 'it'} with "
            f"`{train_command(results, list(missing), seeds, list(options))}`")


def beyond_table(beyond: Beyond) -> Table:
    """The table: approach, A<=T, rho<=1..T, seeds, settings; an approach without runs reads `no runs`."""
    stages = max((len(row.accuracy) for row in beyond.rows), default=0)
    header = ["approach", f"A<={stages} (%)" if stages else "A<=T (%)",
              *[f"rho<={t}" for t in range(1, stages + 1)], "seeds", "settings"]
    rows = [[row.label, format_cell(row.accuracy[-1], PERCENT),
             *[format_cell(cell, RATIO) for cell in row.ratio], *["–"] * (stages - len(row.ratio)),
             format_seeds(row.seeds), "; ".join(row.settings) or "paper protocol"] for row in beyond.rows]
    rows += [[method, "no runs", *["–"] * stages, "–", "–"] for method in beyond.missing]
    return Table(header, rows, f"{beyond.spec.benchmark} {beyond.spec.why}", list(beyond.notes))


def beyond_csv(beyond: Beyond) -> str:
    """Tidy CSV: one row per (approach, stage) with A<=t and rho<=t (fractions; rho empty without references)."""
    import pandas as pd

    records = [{"benchmark": beyond.spec.benchmark, "variant": beyond.spec.variant, "approach": row.label,
                "method": row.method, "stage": stage, "accuracy": _mean(accuracy), "accuracy_std": _std(accuracy),
                "forgetting_ratio": _mean(ratio), "forgetting_ratio_std": _std(ratio), "seeds": accuracy.n,
                "settings": "; ".join(row.settings)}
               for row in beyond.rows for stage, (accuracy, ratio) in enumerate(zip(row.accuracy, row.ratio), 1)]
    columns = ["benchmark", "variant", "approach", "method", "stage", "accuracy", "accuracy_std", "forgetting_ratio",
               "forgetting_ratio_std", "seeds", "settings"]
    return pd.DataFrame(records, columns=columns).to_csv(index=False)


def _mean(cell: Cell) -> float | None:
    return cell.mean if cell.n else None


def _std(cell: Cell) -> float | None:
    return cell.std if cell.n > 1 else None
