"""The command that makes the runs of a paper cell that has none (`clbench report --paper`'s "no runs: ..."):
the cell's approach (and, in a forgetting-ratio table, the joint and random references), the paper's number of runs
and the cell's network size where it is not the shipped spec's default. Torch-free."""

from __future__ import annotations

from typing import TYPE_CHECKING

from clbench.report.commands import train_command

if TYPE_CHECKING:
    from clbench.report.loading import Results
    from clbench.report.paper_results import PaperRow

DEFAULT_RUNS = 5  # the seeds a "no runs" command asks for where the paper does not say how many runs (tab:PMNIST)


def no_runs_command(cell: PaperRow) -> str:
    """`clbench train BENCHMARK -m METHOD --seeds 0-N [--set variant=V]`: the paper's number of runs (DEFAULT_RUNS
    where it does not say), the cell's variant unless it is the spec's default (the spec is the paper's setting),
    and the joint and random references where the table is of the forgetting ratio (`trained_methods`)."""
    options = "".join(f" --set {option}" for option in variant_options(cell.benchmark, cell.variant))
    return install_prefix(cell) + (f"clbench train {cell.benchmark} -m {','.join(trained_methods(cell))} "
                                   f"--seeds {paper_seeds(cell)}{options}")


def install_prefix(cell: PaperRow) -> str:
    """`pip install PLUGIN, then ` for a cell whose method is a plugin shipped with clbench (not built in); ''."""
    return f"pip install {cell.plugin} (in a clone of clbench), then " if cell.plugin else ""


def trained_methods(cell: PaperRow) -> list[str]:
    """What a cell's runs need: its approach, and the references rho is computed from in a forgetting-ratio table."""
    return [str(cell.clbench_method), *(("joint", "random") if cell.metric == "forgetting-ratio" else ())]


def paper_seeds(cell: PaperRow) -> str:
    """The seeds that make the paper's number of runs: `0-9` for 10, `0-4` (DEFAULT_RUNS) where it gives none."""
    return f"0-{(cell.seeds or DEFAULT_RUNS) - 1}"


def variant_options(benchmark: str, variant: str | None) -> list[str]:
    """`["variant=medium"]` to select a variant that is not the shipped spec's default; [] otherwise."""
    from clbench.spec import benchmark_names, load_benchmark

    if variant is None or benchmark not in benchmark_names():
        return []
    return [] if getattr(load_benchmark(benchmark), "variant", None) == variant else [f"variant={variant}"]


def results_command(results: Results, cell: PaperRow) -> str:
    """`no_runs_command` into the report's results folder (`clbench.report.commands.train_command`)."""
    return install_prefix(cell) + train_command(results, trained_methods(cell), paper_seeds(cell),
                                                variant_options(cell.benchmark, cell.variant))
