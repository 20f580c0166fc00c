"""`clbench fetch`: download, verify and convert data sets into the cache, or list them.

Torch and numpy are imported inside the command only, so that `clbench --help` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from clbench.cli import completion
from clbench.cli.common import console, default_data_dir, handle_errors
from clbench.cli.options import DataDir, Mirror
from clbench.errors import EXIT_FAILURE, ClbenchError, DataError, SpecError

if TYPE_CHECKING:
    from rich.progress import Progress

    from clbench.data.custom import CustomDataset
    from clbench.spec import BenchmarkSpec


@handle_errors
def fetch(
    names: Annotated[list[str] | None, typer.Argument(
        metavar="NAME...", autocompletion=completion.dataset_names,
        help="Data sets (mnist, fashion-mnist, ...) or benchmarks (mixture8, my.yaml, ...); a spec's own `datasets:` "
             "are converted too.")] = None,
    data_dir: DataDir = None,
    mirror: Mirror = None,
    force: Annotated[bool, typer.Option("--force", help="Prepare again even if the cache is valid.")] = False,
    list_: Annotated[bool, typer.Option(
        "--list", help="List every data set: classes, sizes, cached or not, where.")] = False,
) -> None:
    """Download, verify and convert data sets (once) into the data cache."""
    from clbench.data import sources
    from clbench.results import check_output_path

    data_dir = data_dir or default_data_dir()
    if list_:
        _print_table(data_dir)
        return
    if not names:
        raise ClbenchError(f"name at least one data set or benchmark; data sets: {', '.join(sources.DATASET_NAMES)}")
    targets = fetch_targets(names)
    check_output_path(data_dir, "--data-dir", folder=True)
    failed = {name: error for name, own in targets
              if (error := _fetch_one(name, data_dir, mirror, force, own)) is not None}
    if failed:
        raise fetch_failure(failed)
    _check_tasks(names)


def fetch_failure(failed: dict[str, ClbenchError]) -> ClbenchError:
    """The error `clbench fetch` ends with when data sets failed (each printed already): a runtime failure (exit 1,
    `DataError`) if one of them failed at run time (a download, a checksum), else a usage error (exit 2: a bad
    `--mirror`, a spec's own data that fails its checks)."""
    runtime = any(error.exit_code == EXIT_FAILURE for error in failed.values())
    kind = DataError if runtime else ClbenchError
    return kind(f"could not fetch {', '.join(failed)} (see above)")


def _check_tasks(names: list[str]) -> None:
    """The tasks of each benchmark named (its own data sets' tasks) can be trained and scored, or ClbenchError."""
    from clbench.data.custom import check_own_tasks
    from clbench.spec.catalogue import DATASET_NAMES

    for name in names:
        if name not in DATASET_NAMES:
            check_own_tasks(_benchmark_spec(name, DATASET_NAMES))


def _fetch_one(name: str, data_dir: Path, mirror: str | None, force: bool,
               own: CustomDataset | None = None) -> ClbenchError | None:
    """Fetch one data set (`own`: a spec's own one); print its failure and return the error (None when it is ready)
    so that the others are still fetched."""
    from rich.markup import escape

    from clbench.data import sources
    from clbench.data.custom import prepare_custom

    try:
        if own is not None:
            folder = prepare_custom(own, data_dir, force=force)
        else:
            with _progress_bar() as progress:
                folder = sources.fetch_dataset(name, data_dir, mirror, progress=_callback(progress), force=force)
    except ClbenchError as error:
        console(stderr=True).print(f"[bold red]failed:[/] {escape(str(error))}", soft_wrap=True)
        return error
    console().print(f"[green]ready[/] {name}: {escape(str(folder))}")
    return None


def expand_names(names: list[str]) -> list[str]:
    """Data set names, with benchmark names replaced by their data sets; order kept, duplicates dropped."""
    return [name for name, _ in fetch_targets(names)]


def fetch_targets(names: list[str]) -> list[tuple[str, CustomDataset | None]]:
    """(data set name, the spec's own data set or None for a built-in) for each data set to prepare; benchmark
    names and spec files are replaced by their data sets; order kept, duplicates dropped."""
    from clbench.data.custom import custom_datasets
    from clbench.spec.catalogue import DATASET_NAMES

    targets: list[tuple[str, CustomDataset | None]] = []
    for name in names:
        if name in DATASET_NAMES:
            found: list[tuple[str, CustomDataset | None]] = [(name, None)]
        else:
            spec = _benchmark_spec(name, DATASET_NAMES)
            own = custom_datasets(spec)
            found = [(dataset, own.get(dataset)) for dataset in spec.data.datasets]
        targets.extend(target for target in found if target not in targets)
    return targets


def _benchmark_spec(name: str, dataset_names: tuple[str, ...]) -> BenchmarkSpec:
    from clbench.spec import load_benchmark

    try:
        return load_benchmark(name)
    except SpecError as error:
        raise ClbenchError(
            f"{name!r} is neither a data set ({', '.join(dataset_names)}) nor a usable benchmark: {error}"
        ) from None


def _progress_bar() -> Progress:
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                    TimeRemainingColumn(), console=console(stderr=True), transient=False)


def _callback(progress: Progress) -> Any:
    """A download progress callback that keeps one rich task (bar) per file."""
    tasks: dict[str, Any] = {}

    def report(file_name: str, done_bytes: int, total_bytes: int | None) -> None:
        if file_name not in tasks:
            tasks[file_name] = progress.add_task(file_name, total=total_bytes)
        progress.update(tasks[file_name], completed=done_bytes, total=total_bytes)

    return report


def _print_table(data_dir: Path) -> None:
    from rich.table import Table

    from clbench.data.sources import dataset_status
    from clbench.spec.catalogue import DATASET_NAMES

    table = Table(title=f"data sets in {data_dir}")
    for column in ("name", "classes", "train", "test", "cached", "size"):
        table.add_column(column, justify="right" if column in ("classes", "train", "test", "size") else "left")
    table.add_column("where", overflow="fold")
    for name in DATASET_NAMES:
        status = dataset_status(name, data_dir)
        if status["cached"]:
            sizes = (f"{status['n_train']:,}", f"{status['n_test']:,}")
            table.add_row(name, str(status["n_classes"]), *sizes, "[green]yes[/]", _human_bytes(status["bytes"]),
                          status["path"])
        else:  # the paper's sizes, dimmed
            sizes = (f"[dim]{status['paper_n_train']:,}[/]", f"[dim]{status['paper_n_test']:,}[/]")
            table.add_row(name, str(status["n_classes"]), *sizes, "no", "", "")
    console().print(table)


def _human_bytes(count: int) -> str:
    size = float(count)
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} GB"
