"""Running runs on a Ray cluster (`clbench train ... --executor ray [--address ADDR]`).

Each (benchmark, approach, seed) run is one Ray task that executes the same `run_request` as the local
executors, writing into the shared results folder (so it must be on a file system every node sees, at the
same path; the per-run lock then also keeps two clusters or commands apart). A task asks for one CPU, and
`gpus_per_run` GPUs (e.g. 0.25: four runs share a GPU) when runs use CUDA. Each node loads its data from
its own data cache (`--data-dir`, fetched from `--mirror` when missing). Progress events come back through
a `ray.util.queue.Queue`.

Ray is an optional dependency: `pip install 'clbench[ray]'`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from clbench.errors import ClbenchError
from clbench.results import RunStatus
from clbench.run.engine import RunOutcome
from clbench.run.scheduler import (
    Event,
    EventSink,
    ForwardingObserver,
    RunRequest,
    ScheduleListener,
    dispatch,
    run_request,
)


def import_ray() -> Any:
    """The `ray` module, or a ClbenchError that says how to install it."""
    try:
        import ray
    except ImportError:
        raise ClbenchError("--executor ray needs Ray: pip install 'clbench[ray]' (or pip install 'ray>=2.9')") from None
    return ray


def ray_device(requested: str, cluster_gpus: float) -> str:
    """The device of every Ray task: `auto` means CUDA when the cluster has GPUs (Ray picks which)."""
    if requested == "auto":
        return "cuda" if cluster_gpus > 0 else "cpu"
    if requested == "cpu":
        return "cpu"
    if requested.startswith("cuda"):
        if cluster_gpus <= 0:
            raise ClbenchError(f"--device {requested}: the Ray cluster has no GPU; use --device cpu or auto")
        return "cuda"  # Ray sets CUDA_VISIBLE_DEVICES for each task: its GPU is cuda:0 there
    raise ClbenchError(f"--device {requested!r} is not a device: use auto, cpu or cuda")


def task_resources(device: str, gpus_per_run: float) -> dict[str, float]:
    """Ray resources of one run: 1 CPU, plus `gpus_per_run` GPUs on CUDA."""
    return {"num_cpus": 1, "num_gpus": gpus_per_run} if device == "cuda" else {"num_cpus": 1}


def run_on_ray(requests: Sequence[RunRequest], listener: ScheduleListener, *, address: str | None = None,
               device: str = "auto", gpus_per_run: float = 1.0, grace_seconds: float = 60.0) -> list[RunOutcome]:
    """Run every request as a Ray task; returns the outcomes in request order.

    Connects to `address` (None: `RAY_ADDRESS` or a new local Ray) unless Ray is already initialised in this
    process; shuts down only what it started. On KeyboardInterrupt the tasks are cancelled (each records
    `interrupted`), and the interrupt is re-raised.
    """
    ray = import_ray()
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(address=address)
    try:
        target = ray_device(device, ray.cluster_resources().get("GPU", 0))
        requests = [replace(request, device=target, threads=1) for request in requests]
        return _RaySchedule(ray, requests, listener, task_resources(target, gpus_per_run), grace_seconds).run()
    finally:
        if started_here:
            ray.shutdown()


def ray_task(request: RunRequest, index: int, sink: EventSink) -> tuple[int, RunOutcome]:
    """The body of a Ray task: one run, its events forwarded to the driver's queue."""
    return index, run_request(request, ForwardingObserver(sink, index))


class _RaySchedule:
    """Submit every run, then collect events and outcomes until all are in."""

    def __init__(self, ray: Any, requests: Sequence[RunRequest], listener: ScheduleListener,
                 resources: dict[str, float], grace_seconds: float) -> None:
        from ray.util.queue import Queue

        self.ray = ray
        self.requests = list(requests)
        self.plans = [request.plan for request in self.requests]
        self.listener = listener
        self.resources = resources
        self.grace_seconds = grace_seconds
        self.events = Queue(actor_options={"num_cpus": 0})
        self.pending: dict[Any, int] = {}
        self.launched: set[int] = set()
        self.outcomes: dict[int, RunOutcome] = {}

    def run(self) -> list[RunOutcome]:
        remote = self.ray.remote(ray_task).options(**self.resources)
        try:
            self.pending = {remote.remote(request, index, self.events): index
                            for index, request in enumerate(self.requests)}
            while self.pending:
                self._collect(timeout=0.5)
        except KeyboardInterrupt:
            self._cancel()
            raise
        finally:
            self.events.shutdown()
        return [self.outcomes[index] for index in range(len(self.requests))]

    def _collect(self, timeout: float) -> None:
        ready, _ = self.ray.wait(list(self.pending), num_returns=1, timeout=timeout)
        self._drain_events()
        for reference in ready:
            index = self.pending.pop(reference)
            self._record(index, self._result(reference, index))

    def _result(self, reference: Any, index: int) -> RunOutcome:
        try:
            _, outcome = self.ray.get(reference)
        except Exception as error:  # the task's worker died, or Ray cancelled it
            status = (RunStatus.INTERRUPTED if isinstance(error, self.ray.exceptions.TaskCancelledError)
                      else RunStatus.FAILED)
            return RunOutcome(self.plans[index], status, error=f"{type(error).__name__}: {error}")
        return outcome

    def _drain_events(self) -> None:
        while not self.events.empty():
            for event in self.events.get_nowait_batch(self.events.qsize()):
                self._dispatch(event)

    def _dispatch(self, event: Event) -> None:
        index = event[1]
        if index not in self.launched:  # a Ray task reports when it really starts
            self.launched.add(index)
            self.listener.run_launched(self.plans[index], self.requests[index].device)
        dispatch(event, self.plans, self.listener)

    def _record(self, index: int, outcome: RunOutcome) -> None:
        self.outcomes[index] = outcome
        self.listener.run_ended(outcome)

    def _cancel(self) -> None:
        """Cancel the unfinished tasks (a running one gets KeyboardInterrupt) and wait for them to record it."""
        for reference in self.pending:
            self.ray.cancel(reference)
        deadline = time.monotonic() + self.grace_seconds
        while self.pending and time.monotonic() < deadline:
            self._collect(timeout=0.5)
        for index in self.pending.values():
            self._record(index, RunOutcome(self.plans[index], RunStatus.INTERRUPTED, error="cancelled after Ctrl-C"))
        self.pending.clear()
