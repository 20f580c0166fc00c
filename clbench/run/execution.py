"""Choosing an executor for a command's runs: in this process, over local worker processes, or on Ray.

`Execution` is what `clbench train` asks for (`--executor`, `--jobs`, `--device(s)`, `--address`,
`--gpus-per-run`); `check_execution` validates it before any work and `run_plans` hands the runs to the local
executors (`clbench.run.scheduler`) or to Ray (`clbench.run.ray_executor`). Both executors import only the
scheduler's run requests and events, so neither imports the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from clbench.data.tasks import DatasetLoader
from clbench.run.engine import RunOutcome
from clbench.run.plan import RunPlan
from clbench.run.scheduler import (
    RunRequest,
    ScheduleListener,
    already_finished,
    cpu_threads_per_job,
    grouped_requests,
    run_in_processes,
    run_serially,
)

EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class Execution:
    """How a command's runs are executed: where, how many at once, on which devices."""

    executor: str = "local"  # local: this machine (in this process, or `jobs` worker processes); ray: a Ray cluster
    jobs: int = 1
    device: str = "auto"  # auto, cpu, cuda, cuda:N (every run, unless `devices`)
    devices: tuple[str, ...] = ()  # the local workers' devices, round-robin over worker slots
    address: str | None = None  # Ray cluster address (None: RAY_ADDRESS or a new local Ray)
    gpus_per_run: float = 1.0  # Ray: GPUs per run on CUDA (a fraction shares a GPU)
    force: bool = False
    loggers: tuple[str, ...] = ()  # training logs every run writes (`--log`; `clbench.run.loggers`)


def parse_devices(text: str) -> tuple[str, ...]:
    """`0,1` -> (`cuda:0`, `cuda:1`); names (`cpu`, `cuda`, `cuda:1`) are kept."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    return tuple(f"cuda:{name}" if name.isdigit() else name for name in names)


def check_execution(execution: Execution) -> Execution:
    """Validate the options before any work (ClbenchError naming the option); resolves local devices."""
    from clbench.errors import ClbenchError
    from clbench.run.engine import resolve_device

    if execution.executor not in EXECUTORS:
        raise ClbenchError(f"--executor {execution.executor!r}: use one of {', '.join(EXECUTORS)}")
    if execution.jobs < 1:
        raise ClbenchError(f"--jobs {execution.jobs}: give at least 1")
    if execution.executor == "ray":
        from clbench.run.ray_executor import import_ray

        if execution.jobs != 1 or execution.devices:
            raise ClbenchError("--jobs and --devices are for the local executor; Ray places runs by their "
                               "resources (use --gpus-per-run to share GPUs)")
        if execution.gpus_per_run <= 0 or (execution.gpus_per_run > 1 and execution.gpus_per_run % 1):
            raise ClbenchError(f"--gpus-per-run {execution.gpus_per_run}: use a fraction in (0, 1] or a whole number")
        import_ray()
        return execution
    if execution.devices and execution.device != "auto":
        raise ClbenchError("give either --device or --devices, not both")
    devices = execution.devices or (execution.device,)
    return replace(execution, devices=tuple(str(resolve_device(name)) for name in devices))


def run_plans(plans: Sequence[RunPlan], execution: Execution, loader: DatasetLoader,
              listener: ScheduleListener) -> list[RunOutcome]:
    """Execute the plans as `execution` says (checked by `check_execution`); outcomes in plan order."""
    requests = [RunRequest(plan, execution.devices[0] if execution.devices else execution.device, loader,
                           execution.force, loggers=execution.loggers) for plan in plans]
    to_run, skipped = already_finished(requests)
    if execution.executor == "local":  # runs on the same data in turn: a process builds their tasks once
        to_run = grouped_requests(to_run)
    for outcome in skipped:
        listener.run_ended(outcome)
    if execution.executor == "ray":
        from clbench.run.ray_executor import run_on_ray

        outcomes = run_on_ray(to_run, listener, address=execution.address, device=execution.device,
                              gpus_per_run=execution.gpus_per_run)
    elif execution.jobs == 1:
        outcomes = run_serially(to_run, listener)
    else:
        threads = cpu_threads_per_job(execution.jobs)
        outcomes = run_in_processes([replace(request, threads=threads) for request in to_run], execution.jobs,
                                    execution.devices, listener)
    by_folder = {outcome.plan.run_dir: outcome for outcome in [*skipped, *outcomes]}
    return [by_folder[plan.run_dir] for plan in plans]
