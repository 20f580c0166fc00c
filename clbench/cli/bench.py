"""`clbench bench`: time per batch (forward, forward+backward), per epoch and peak memory, per approach."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from clbench.cli.common import DataDirOption, ResultsOption, console, default_data_dir, handle_errors, load_methods

if TYPE_CHECKING:
    from rich.table import Table

    from clbench.run.bench import BenchRun

AMP_CHOICES = ("none", "bf16")


@handle_errors
def bench(
    benchmark: str = typer.Argument("mixture8", help="Benchmark name from benchmarks/ or a path to a YAML spec."),
    method: str = typer.Option("hat", "--method", "-m", help="Approach(es), comma-separated, e.g. hat,sgd,ewc."),
    device: str = typer.Option("auto", "--device", help="auto, cpu, cuda or cuda:N."),
    batches: int = typer.Option(50, "--batches", min=1,
                                help="Batches timed per measurement, after a warm-up pass over the same batches."),
    epoch: str = typer.Option("auto", "--epoch",
                              help="Epoch time: measure (a full epoch of the first task), extrapolate (from the "
                                   "timed batches), or auto (measure on CUDA, extrapolate on CPU)."),
    results: Path = ResultsOption,
    overrides: list[str] = typer.Option([], "--set", help="Override a spec value, e.g. --set training.batch_size=128."),
    compile_network: bool = typer.Option(False, "--compile",
                                         help="torch.compile the network body (= --set training.compile=true; "
                                              "changes float rounding; the warm-up includes compilation)."),
    amp: str = typer.Option("none", "--amp",
                            help="bf16: bfloat16 autocast in the training step and evaluation (= --set "
                                 "training.amp=bf16; changes numerics). none: float32 as in the paper."),
    data_dir: Path | None = DataDirOption,
    seed: int = typer.Option(0, "--seed", min=0, help="Seed of the task order, split and initialisation."),
) -> None:
    """Measure each approach's speed and memory on this device (like the paper's "Training Time" table).

    Uses the benchmark's cached data, or synthetic images of the same shapes and sizes when they are not
    cached (the output and the stored rows say which). Stores `<results>/_bench/<benchmark>-<UTC>.parquet`.
    """
    from clbench.errors import ClbenchError
    from clbench.results import check_results_folder
    from clbench.run.bench import BenchSettings, run_bench, write_bench
    from clbench.run.engine import resolve_device
    from clbench.run.plan import check_shipped_name
    from clbench.spec import command_argument, load_benchmark

    if amp not in AMP_CHOICES:
        raise ClbenchError(f"--amp {amp!r}: use one of {', '.join(AMP_CHOICES)}")
    switches = [*(["training.compile=true"] if compile_network else []),
                *([f"training.amp={amp}"] if amp != "none" else [])]
    check_results_folder(results)
    methods = load_methods(method)
    spec = load_benchmark(benchmark, [*overrides, *switches])
    check_shipped_name(spec, methods)
    torch_device = resolve_device(device)
    settings = BenchSettings(batches=batches, epoch=epoch, seed=seed)
    settings.epoch_mode(torch_device)
    out = console()
    with out.status("measuring") as status:
        run = run_bench(spec, methods, torch_device, settings, data_dir or default_data_dir(),
                        progress=lambda name: status.update(f"measuring {name}"))
    path = write_bench(run, results)
    out.print(_table(run))
    for name, reason in run.skipped.items():
        out.print(f"[yellow]skipped[/] {name}: {reason}")
    if run.data == "synthetic":
        out.print(f"[yellow]synthetic data[/]: {spec.name}'s data are not all cached, so random images of the "
                  f"real shapes and sizes were timed (`clbench fetch {command_argument(spec)}"
                  f"{_data_dir_option(data_dir)}` for the real ones)",
                  soft_wrap=True)
    out.print(f"stored in {path}")


def _data_dir_option(data_dir: Path | None) -> str:
    """` --data-dir DIR` when the command was given one, so that a printed `clbench fetch` fills that cache."""
    import shlex

    return f" --data-dir {shlex.quote(str(data_dir))}" if data_dir is not None else ""


def _table(run: BenchRun) -> Table:
    """The rich table of a bench run."""
    from rich.table import Table

    details = run.details
    mode = {"measure": "measured", "extrapolate": "extrapolated"}[details["epoch_mode"]]
    title = (f"{run.benchmark} on {run.device} ({details['device_name']}, {details['threads']} threads), "
             f"{run.data} data, compile {details['compile']}, amp {details['amp']}")
    table = Table("approach", "batch", "forward [ms]", "fwd+bwd [ms]", f"epoch [s] ({mode})", "peak memory [MiB]",
                  title=title)
    for result in run.results:
        table.add_row(result.method, str(result.batch_size), f"{result.forward_ms:.2f}",
                      f"{result.forward_backward_ms:.2f}", f"{result.epoch_seconds:.2f}",
                      f"{result.peak_memory_mb:,.0f}")
    return table
