"""`clbench bench`: time per batch (forward, forward+backward), per epoch and peak memory, per approach."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from clbench.cli.common import console, default_data_dir, handle_errors, load_methods
from clbench.cli.options import AmpName, Benchmark, DataDir, Device, EpochMode, Methods, Results, SetOption

if TYPE_CHECKING:
    from rich.table import Table

    from clbench.run.bench import BenchRun

@handle_errors
def bench(
    benchmark: Benchmark = "mixture8",
    method: Methods = "hat",
    device: Device = "auto",
    batches: Annotated[int, typer.Option(
        "--batches", min=1, help="Batches timed per measurement, after a warm-up pass over the same batches.")] = 50,
    epoch: Annotated[EpochMode, typer.Option(
        "--epoch", help="Epoch time: measure (a full epoch of the first task), extrapolate (from the timed "
                        "batches), or auto (measure on CUDA, extrapolate on CPU).")] = "auto",
    results: Results = Path("results"),
    overrides: SetOption = [],  # noqa: B006 (Typer copies the default; the list is never mutated)
    compile_network: Annotated[bool, typer.Option(
        "--compile", help="torch.compile the network body (= --set training.compile=true; changes float rounding; "
                          "the warm-up includes compilation).")] = False,
    amp: Annotated[AmpName, typer.Option(
        "--amp", help="bf16: bfloat16 autocast in the training step and evaluation (= --set training.amp=bf16; "
                      "changes numerics). none: float32 as in the paper.")] = "none",
    data_dir: DataDir = None,
    seed: Annotated[int, typer.Option(
        "--seed", min=0, help="Seed of the task order, split and initialisation.")] = 0,
) -> None:
    """Measure each approach's speed and memory on this device (like the paper's "Training Time" table).

    Uses the benchmark's cached data, or synthetic images of the same shapes and sizes when they are not
    cached (the output and the stored rows say which). Stores `<results>/_bench/<benchmark>-<UTC>.parquet`.
    """
    from clbench.results import check_results_folder
    from clbench.run.bench import BenchSettings, run_bench, write_bench
    from clbench.run.engine import resolve_device
    from clbench.run.plan import check_shipped_name
    from clbench.spec import command_argument, load_benchmark

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
