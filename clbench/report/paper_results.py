"""The paper's published numbers beside ours (`clbench report --paper`). Torch-free.

The HAT paper's tables (split MNIST tab:5MNIST, permuted MNIST tab:PMNIST, mixture-8 tab:mixture0/1, incremental
CIFAR tab:cifar1) are typed once in `paper_results.yaml` next to this module; `load_paper_results` reads them
(accuracy in fractions, like clbench's results). `compare` is a pure function from our per-(approach, config,
stage) cells to a comparison: ours, the paper's, the difference ours - paper, and the difference in units of the
paper's std where it gives one, and whether ours is within the paper's std (`clbench.report.paper_verdict`). Every
row lists how our runs differ from the paper's protocol (seeds, data subsampling, epochs, network, `--set` options);
a row with any difference is flagged "not a reproduction". Every paper cell of an approach clbench has is a row,
those without runs with the command that makes them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clbench.errors import ResultsError
from clbench.report.paper_commands import no_runs_command, results_command
from clbench.report.paper_verdict import verdict
from clbench.spec.fields import flatten

if TYPE_CHECKING:
    from clbench.report.loading import Results
    from clbench.report.statistics import Cell
    from clbench.report.tables import Report

PAPER_FILE = Path(__file__).with_name("paper_results.yaml")
PROTOCOL_SECTIONS = ("data", "network", "training", "variant")
NO_SPREAD = "–"
VARIANT_ORDER = {"small": 0, "medium": 1, "large": 2}  # pmnist's rows, by network size


@dataclass(frozen=True)
class PaperRow:
    """One cell of one of the paper's tables.

    Attributes:
        table: the LaTeX label of the table (e.g. `tab:mixture1`).
        benchmark: clbench's benchmark name (mnist2, pmnist, mixture8, cifar-incremental).
        metric: `accuracy` or `forgetting-ratio`.
        approach: the approach as the paper names it.
        clbench_method: clbench's method name, or None for approaches clbench does not implement.
        variant: pmnist's network size (small, medium, large), None elsewhere or when the paper does not say.
        stage: t of A^{<=t} or rho^{<=t}.
        mean: the paper's value (accuracy as a fraction, not percent).
        std: the paper's standard deviation in the same unit, None where it gives none.
        seeds: the number of runs the paper averages (10), None where it does not say.
        parameters: the paper's parameter count text (`0.1M`, `Unknown*`), None where it gives none.
        source: the paper that reported the number, when it is not HAT's own run.
        primary: False for a table whose cells repeat another table's (not used for the comparison).
        other_protocol: how `source`'s protocol differs from the HAT paper's, where the number was trained under
            another protocol (then never called within: there is nothing to reproduce with the HAT protocol).
        plugin: where `clbench_method` is not built in but a plugin shipped with clbench, the `pip install` argument
            that installs it (relative to a clone's root), named in the command that makes its runs.
    """

    table: str
    benchmark: str
    metric: str
    approach: str
    clbench_method: str | None
    variant: str | None
    stage: int
    mean: float
    std: float | None
    seeds: int | None
    parameters: str | None = None
    source: str | None = None
    primary: bool = True
    other_protocol: str | None = None
    plugin: str | None = None


@dataclass(frozen=True)
class PaperResults:
    """Every typed cell of the paper and the settings of its protocol (dotted keys of a run's resolved config)."""

    rows: tuple[PaperRow, ...]
    protocol: Mapping[str, Any]

    def benchmarks(self) -> list[str]:
        return sorted({row.benchmark for row in self.rows})

    def primary_rows(self, benchmark: str) -> list[PaperRow]:
        return [row for row in self.rows if row.benchmark == benchmark and row.primary]

    def expected_settings(self, benchmark: str, variant: str | None, method: str) -> dict[str, Any]:
        """The paper's setting for one approach on one benchmark (and pmnist variant), as dotted config keys."""
        section = self.protocol.get("benchmarks", {}).get(benchmark, {})
        settings = dict(self.protocol.get("common", {}))
        settings |= section.get("network", {})
        variant_section = section.get("variants", {}).get(variant, {}) if variant is not None else {}
        settings |= {key: value for key, value in variant_section.items() if key != "methods"}
        settings |= section.get("methods", {}).get(method, {})
        settings |= variant_section.get("methods", {}).get(method, {})
        return settings


def load_paper_results(path: Path = PAPER_FILE) -> PaperResults:
    """The paper's tables from `path` (accuracy converted from percent to fractions)."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as error:
        raise ResultsError(f"cannot read the paper's results file {path}: {error}; reinstall clbench") from error
    rows = []
    for table in data["tables"]:
        percent = table["metric"] == "accuracy"
        for cell in table["rows"]:
            std = cell.get("std")
            rows.append(PaperRow(
                table=table["label"], benchmark=table["benchmark"], metric=table["metric"],
                approach=str(cell["approach"]), clbench_method=cell.get("clbench_method"),
                variant=cell.get("variant"), stage=int(cell["stage"]), mean=_fraction(cell["mean"], percent),
                std=None if std is None else _fraction(std, percent), seeds=table.get("seeds"),
                parameters=cell.get("parameters"), source=cell.get("source"), primary=bool(table["primary"]),
                other_protocol=cell.get("other_protocol"), plugin=cell.get("plugin")))
    return PaperResults(tuple(rows), data.get("protocol", {}))


def _fraction(value: float, percent: bool) -> float:
    """`value` as a fraction: 96.9 (percent) -> 0.969 (rounded to 10 decimals, so 0.969 prints as 0.969)."""
    return round(float(value) / 100, 10) if percent else float(value)


# ---------------------------------------------------------------------------------------------- comparison

@dataclass(frozen=True)
class OurRow:
    """One of our table rows (an approach and config): its cells per stage and how its runs were set up.

    Attributes:
        label: the row label of `clbench report` (method, plus what tells its configs apart).
        method: clbench's method name.
        variant: the runs' variant (pmnist network size), None when unknown.
        cells: mean/std/seed count per stage t (1-based; `cells[0]` is t = 1).
        differences: how the runs' settings differ from the paper's, except the seed count (see `compare`).
    """

    label: str
    method: str
    variant: str | None
    cells: tuple[Cell, ...]
    differences: tuple[str, ...] = ()


@dataclass(frozen=True)
class ComparisonRow:
    """Ours beside one paper cell: difference = ours - paper; `in_paper_std` = difference / paper std; `verdict`:
    within the paper's std or not, or why not said (`clbench.report.paper_verdict.verdict`); `ran`: False for a
    paper cell without runs here (its verdict: the command that makes them)."""

    label: str
    paper: PaperRow
    ours: Cell | None
    difference: float | None
    in_paper_std: float | None
    settings: tuple[str, ...]
    verdict: str = ""
    ran: bool = True

    @property
    def reproduction(self) -> bool:
        """True when runs exist and nothing differs from the paper's protocol."""
        return self.ran and not self.settings


@dataclass
class Comparison:
    """The comparison table of one benchmark with the paper's primary tables for it."""

    benchmark: str
    metric: str | None
    tables: list[str]
    rows: list[ComparisonRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    ours: list[OurRow] = field(default_factory=list)  # our rows compared (also what a table beyond the paper's shows)

    @property
    def reproduction(self) -> bool:
        """True when every row with runs follows the paper's protocol (rows without runs say so themselves)."""
        return all(row.reproduction for row in self.rows if row.ran)


def compare(benchmark: str, ours: Sequence[OurRow], paper: PaperResults,
            command_for: Callable[[PaperRow], str] | None = None) -> Comparison:
    """Each of our rows beside the paper's cells of the same method (and pmnist variant), stage by stage; each
    paper cell of an approach clbench has and no row of ours matches is a row without runs, its verdict the command
    that makes them (`command_for`, default `no_runs_command`). Rows in the paper's order, pmnist's by network size
    (small, medium, large)."""
    cells = paper.primary_rows(benchmark)
    if not cells:
        return Comparison(benchmark, None, [], notes=[
            f"the paper has no table for {benchmark}; it has {', '.join(paper.benchmarks())}"])
    comparison = Comparison(benchmark, cells[0].metric, sorted({cell.table for cell in cells}))
    for row in ours:
        matching = [cell for cell in cells if cell.clbench_method == row.method]
        if any(cell.variant is not None for cell in matching):
            matching = [cell for cell in matching if cell.variant == row.variant]
            if row.variant is None and matching == []:
                comparison.notes.append(f"{row.label}: its runs record no variant; not compared")
        comparison.rows += [compare_cell(row, cell) for cell in matching]
    matched = {row.paper for row in comparison.rows}
    command_for = command_for or no_runs_command
    comparison.rows += [no_runs_row(cell, command_for(cell)) for cell in cells
                        if cell.clbench_method is not None and cell not in matched]
    order = {cell: index for index, cell in enumerate(cells)}
    comparison.rows.sort(key=lambda row: (VARIANT_ORDER.get(row.paper.variant or "", len(VARIANT_ORDER)),
                                          order[row.paper], row.label))
    comparison.notes += _unmatched_notes(cells)
    comparison.notes = _reproduction_notes(comparison.rows) + _quoted_notes(comparison.rows) + comparison.notes
    if not any(row.ran for row in comparison.rows):
        comparison.notes.insert(0, _nothing_compared_note(comparison, cells, ours))
    return comparison


def _nothing_compared_note(comparison: Comparison, cells: Sequence[PaperRow], ours: Sequence[OurRow]) -> str:
    """Why no row of ours is beside the paper's: none has a number in the paper's metric, or none is of an approach
    (and variant) of the paper's table."""
    tables = ", ".join(comparison.tables)
    if not ours:
        return (f"nothing to compare with the paper ({tables}): no approach of {comparison.benchmark} has a number "
                f"in its metric ({comparison.metric}) here (see the notes below)")
    theirs = sorted({f"{cell.clbench_method}" + (f" ({cell.variant})" if cell.variant else "")
                     for cell in cells if cell.clbench_method is not None})
    here = ", ".join(row.label for row in ours)
    return f"nothing to compare with the paper ({tables}): no approach here ({here}) is one of its {', '.join(theirs)}"


def compare_cell(row: OurRow, cell: PaperRow) -> ComparisonRow:
    """Our row's cell at the paper cell's stage beside it, with the settings that differ (seed count included) and
    the verdict (`clbench.report.paper_verdict.verdict`)."""
    ours = row.cells[cell.stage - 1] if cell.stage <= len(row.cells) and row.cells[cell.stage - 1].n else None
    settings = list(row.differences)
    if ours is None:
        settings.insert(0, f"no result at stage {cell.stage}")
    elif cell.seeds is not None and ours.n != cell.seeds:
        settings.insert(0, f"{ours.n} {'seed' if ours.n == 1 else 'seeds'} (paper: {cell.seeds})")
    difference = ours.mean - cell.mean if ours is not None else None
    in_std = difference / cell.std if difference is not None and cell.std else None
    other = f"the paper quotes {cell.source}'s number, another protocol (see the notes)" \
        if cell.other_protocol else None
    found = verdict(None if ours is None else ours.mean, 0 if ours is None else ours.n, cell.mean, cell.std,
                    cell.metric, paper_seeds=cell.seeds, differences=tuple(settings if ours is None else
                                                                           row.differences),
                    other_protocol=other)
    return ComparisonRow(row.label, cell, ours, difference, in_std, tuple(settings), found)


def no_runs_row(cell: PaperRow, command: str) -> ComparisonRow:
    """A paper cell of an approach clbench has, without runs here: its verdict names the command that makes them."""
    label = str(cell.clbench_method)
    return ComparisonRow(label, cell, None, None, None, (), verdict(None, 0, cell.mean, cell.std, cell.metric,
                                                                    command=command), ran=False)


def paper_name(cell: PaperRow) -> str:
    """The approach as the paper names it, with its parameter count on pmnist (`EWC (5.8M)`)."""
    return f"{cell.approach} ({cell.parameters})" if cell.parameters and cell.benchmark == "pmnist" else cell.approach


def _unmatched_notes(cells: Sequence[PaperRow]) -> list[str]:
    absent = sorted({paper_name(cell) for cell in cells if cell.clbench_method is None})
    return [f"paper rows for approaches clbench does not implement: {', '.join(absent)}"] if absent else []


def _quoted_notes(rows: Sequence[ComparisonRow]) -> list[str]:
    """One note per paper cell beside ours that the paper quotes from another paper (`source`): trained under that
    paper's protocol, not the HAT paper's, which is the one our settings are compared with; with how that protocol
    differs where the data file says (`other_protocol`)."""
    quoted = dict.fromkeys((paper_name(row.paper), row.paper.source, row.paper.other_protocol) for row in rows
                           if row.paper.source)
    return [f"{name}: the paper quotes this number from {source}, trained under {source}'s protocol, not the HAT "
            f"paper's (the settings compared here)" + (f": {other}" if other else "") for name, source, other in quoted]


def _reproduction_notes(rows: Sequence[ComparisonRow]) -> list[str]:
    """One "not a reproduction" note per row label (with runs) whose settings differ from the paper's."""
    notes, seen = [], set()
    for row in rows:
        if row.ran and row.settings and row.label not in seen:
            seen.add(row.label)
            notes.append(f"NOT A REPRODUCTION: {row.label}: {'; '.join(row.settings)}")
    return notes


# ---------------------------------------------------------------------------------------------- settings

def setting_differences(config: Mapping[str, Any] | None, overrides: Sequence[str], method: str,
                        expected: Mapping[str, Any]) -> list[str]:
    """How a run's resolved config and `--set` options differ from the paper's `expected` settings.

    `config` is run.json's resolved config (None when unknown: then that is a difference too); a spec's own data
    sets (`datasets`) are a difference. `--set`
    options are listed unless they select the variant, concern another approach, or set a key the config
    check already covers.
    """
    found = []
    flat = flatten(config) if config is not None else {}
    if config is None:
        found.append("settings unknown (no run.json with the resolved config)")
    elif config.get("datasets"):
        found.append(f"own data sets {', '.join(sorted(config['datasets']))} (paper: the built-in ones)")
    for key, value in expected.items():
        if key in flat and not same_value(flat[key], value):
            found.append(f"{key}={_text(flat[key], key)} (paper: {_text(value, key)})")
    for option in overrides:
        key, _, value = option.partition("=")
        setting = override_setting(key, method)
        if setting is None or (config is not None and setting in expected):
            continue
        found.append(f"--set {key}={value}")
    return found


def override_setting(key: str, method: str) -> str | None:
    """The config key a `--set` key changes for `method` (`hat.smax` -> `hyperparameters.smax`); None when it
    selects the variant or concerns another approach."""
    head, _, rest = key.partition(".")
    if head == "variant":
        return None
    if head in PROTOCOL_SECTIONS:
        return key
    if head != method:
        return None
    return rest if rest.startswith("training.") else f"hyperparameters.{rest}"


def same_value(ours: Any, paper: Any) -> bool:
    """Equal, numbers up to float rounding, lists and tuples element by element."""
    if isinstance(ours, (list, tuple)) and isinstance(paper, (list, tuple)):
        return len(ours) == len(paper) and all(same_value(a, b) for a, b in zip(ours, paper))
    numbers = (int, float)
    if isinstance(ours, numbers) and isinstance(paper, numbers) and not isinstance(ours, bool):
        return math.isclose(float(ours), float(paper), rel_tol=1e-9, abs_tol=1e-12)
    return bool(ours == paper)


def _text(value: Any, key: str = "") -> str:
    """A setting as `--set` spells it (`[100,100]`, `0.0001`); a null subsample limit reads `all`."""
    if value is None:
        return "all" if key.endswith("_samples") else "null"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_text(v) for v in value) + "]"
    return f"{value:g}" if isinstance(value, float) else str(value)


# ---------------------------------------------------------------------------------------------- from results

def our_rows(results: Results, report: Report, paper: PaperResults) -> list[OurRow]:
    """Our report's rows with their method, variant and setting differences (read from the runs' run.json)."""
    by_label: dict[str, list[str]] = {}
    for run_id, info in results.info.items():
        by_label.setdefault(info["label"], []).append(run_id)
    rows = []
    for label, cells in report.rows:
        run_ids = by_label.get(label, [])
        if not run_ids:
            continue
        info = results.info[run_ids[0]]
        variant = info.get("variant") if isinstance(info.get("variant"), str) else None
        overrides_text = info.get("overrides")
        overrides = json.loads(overrides_text) if isinstance(overrides_text, str) else []
        expected = shipped_definition(results.benchmark, variant) | paper.expected_settings(
            results.benchmark, variant, info["method"])
        differences = setting_differences(_run_config(results, run_ids), overrides, info["method"], expected)
        rows.append(OurRow(label, info["method"], variant, tuple(cells), tuple(differences)))
    return rows


def shipped_definition(benchmark: str, variant: str | None) -> dict[str, Any]:
    """Every data and network setting of the shipped spec (with `variant`), as dotted config keys: what defines the
    benchmark the paper's table is about. {} for a benchmark clbench does not ship."""
    from clbench.errors import SpecError
    from clbench.spec import benchmark_names, load_benchmark
    from clbench.spec.fields import identity_dict

    if benchmark not in benchmark_names():
        return {}
    try:
        spec = load_benchmark(benchmark, [f"variant={variant}"] if variant else [])
    except SpecError:
        spec = load_benchmark(benchmark)
    return flatten({"data": identity_dict(spec.data), "network": identity_dict(spec.network)})


def _run_config(results: Results, run_ids: Sequence[str]) -> dict[str, Any] | None:
    """The resolved config of the first run of `run_ids` whose run.json has one."""
    for run_id in run_ids:
        config = (results.run_file(run_id) or {}).get("config")
        if isinstance(config, dict):
            return config
    return None


def build_paper_comparison(results_dir: Path, benchmark: str, *, results: Results | None = None,
                           paper: PaperResults | None = None) -> Comparison:
    """Our runs of `benchmark` beside the paper's table for it (in the paper's metric)."""
    from clbench.report.loading import load_results
    from clbench.report.tables import build_report

    paper = paper if paper is not None else load_paper_results()
    cells = paper.primary_rows(benchmark)
    if not cells:
        return compare(benchmark, [], paper)
    results = results if results is not None else load_results(results_dir, benchmark)
    report = build_report(results_dir, benchmark, cells[0].metric, results=results)
    ours = our_rows(results, report, paper)
    comparison = compare(benchmark, ours, paper, command_for=lambda cell: results_command(results, cell))
    comparison.ours = ours
    comparison.notes += [note for note in report.notes if note not in comparison.notes]
    return comparison
