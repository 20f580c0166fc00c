"""Running many runs: one after another in this process, or at once over worker processes.

A `RunRequest` is everything one run needs (plan, device, data loader, `force`, CPU threads); it is picklable,
so the same `run_request` executes it here, in a spawned worker process (`run_in_processes`) or in a Ray task
(`clbench.run.ray_executor`). A failing run becomes a `failed` outcome and the others go on; a worker that dies
(killed, out of memory) is reported as failed too. Progress reaches a `ScheduleListener` (the CLI's live
overview): the engine's observer events of every run, plus `run_launched` and `run_ended`.

Ctrl-C: each run records `interrupted` in its run.json and the executor re-raises KeyboardInterrupt once its
workers have stopped; the same command later resumes every unfinished run from its last checkpoint.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import queue as queues
import signal
import time
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from clbench.data.tasks import DatasetLoader
from clbench.results import RunStatus
from clbench.run.engine import RunObserver, RunOutcome
from clbench.run.plan import RunPlan
from clbench.run.shared_tasks import SharedTasks, data_key, grouped_by_data
from clbench.run_files import damaged_files, is_complete

if TYPE_CHECKING:
    from multiprocessing.process import BaseProcess

    from clbench.approaches.datatypes import EpochLog

log = logging.getLogger(__name__)

Event = tuple[str, int, Any]
"""(kind, run index, payload): what a worker reports about run `index`: `RunObserver` event `kind` with its
arguments after the plan as the payload (a tuple), or `outcome` with the `RunOutcome`."""


@dataclass(frozen=True)
class RunRequest:
    """One run to execute: its plan, the device (e.g. `cpu`, `cuda:1`), how to load data, and options."""

    plan: RunPlan
    device: str
    loader: DatasetLoader
    force: bool = False
    threads: int | None = None  # torch CPU threads for the run (None: leave the process's setting)
    loggers: tuple[str, ...] = ()  # training logs to write (`clbench.run.loggers`: tensorboard, csv, wandb)


class ScheduleListener(RunObserver, Protocol):
    """Observes a whole schedule: each run's engine events plus when it is launched and how it ended."""

    def run_launched(self, plan: RunPlan, device: str) -> None: ...
    def run_ended(self, outcome: RunOutcome) -> None: ...


class EventSink(Protocol):
    """Where a worker puts its events (a multiprocessing queue, a Ray queue)."""

    def put(self, item: Event) -> None: ...


class ForwardingObserver(RunObserver):
    """A `RunObserver` that turns the engine's events of run `index` into `Event`s on a sink (sequences as lists,
    which pickle)."""

    def __init__(self, sink: EventSink, index: int) -> None:
        self.sink = sink
        self.index = index

    def run_started(self, plan: RunPlan, task_names: Sequence[str]) -> None:
        self.sink.put(("run_started", self.index, (list(task_names),)))

    def run_resumed(self, plan: RunPlan, stage: int) -> None:
        self.sink.put(("run_resumed", self.index, (stage,)))

    def task_started(self, plan: RunPlan, stage: int) -> None:
        self.sink.put(("task_started", self.index, (stage,)))

    def epoch_finished(self, plan: RunPlan, epoch: EpochLog) -> None:
        self.sink.put(("epoch_finished", self.index, (epoch,)))

    def task_finished(self, plan: RunPlan, stage: int, accuracies: Sequence[float]) -> None:
        self.sink.put(("task_finished", self.index, (stage, list(accuracies))))


def dispatch(event: Event, plans: Sequence[RunPlan], listener: ScheduleListener) -> RunOutcome | None:
    """Hand a worker's event to the listener (the `RunObserver` method of its kind, with its plan and
    arguments); returns the run's outcome when the event is one."""
    kind, index, payload = event
    if kind == "outcome":
        return payload
    getattr(listener, kind)(plans[index], *payload)
    return None


def run_request(request: RunRequest, observer: RunObserver, shared: SharedTasks | None = None) -> RunOutcome:
    """Execute one run wherever this is called; a failure becomes `failed`, Ctrl-C `interrupted`. `shared`: the
    task sequence kept from this process's last run (`clbench.run.shared_tasks`)."""
    import torch

    from clbench.run.engine import execute

    if request.threads:
        torch.set_num_threads(request.threads)
    start = time.perf_counter()
    try:
        return execute(request.plan, device=torch.device(request.device), loader=request.loader,
                       force=request.force, observer=observer, loggers=request.loggers, shared=shared)
    except KeyboardInterrupt:
        return RunOutcome(request.plan, RunStatus.INTERRUPTED, error="KeyboardInterrupt",
                          seconds=time.perf_counter() - start)
    except Exception as error:  # a failed run is reported and does not stop the others
        log.debug("run %s failed", request.plan.run_id, exc_info=True)
        return RunOutcome(request.plan, RunStatus.FAILED, error=f"{type(error).__name__}: {error}",
                          seconds=time.perf_counter() - start)


def already_finished(requests: Iterable[RunRequest]) -> tuple[list[RunRequest], list[RunOutcome]]:
    """Split off the runs that finished earlier (unless forced): (to run, skipped outcomes)."""
    to_run, skipped = [], []
    for request in requests:
        if not request.force and is_complete(request.plan.run_dir):
            evaluation = damaged_files(request.plan.run_dir, ("evaluation",))  # `evaluate` remakes it, not train
            skipped.append(RunOutcome(request.plan, RunStatus.SKIPPED, damaged=tuple(evaluation)))
        else:
            to_run.append(request)
    return to_run, skipped


def grouped_requests(requests: Sequence[RunRequest]) -> list[RunRequest]:
    """The requests with the runs on the same data one after another (`grouped_by_data`: every method of seed 0,
    then of seed 1, ...), so that a process running them in turn builds each task sequence once."""
    return grouped_by_data(requests, lambda request: data_key(request.plan, request.loader, request.device))


def run_serially(requests: Sequence[RunRequest], listener: ScheduleListener) -> list[RunOutcome]:
    """Run each request in this process, in order, consecutive runs on the same data on one task sequence
    (`SharedTasks`); stops (KeyboardInterrupt) after an interrupted run."""
    outcomes = []
    shared = SharedTasks()
    for request in requests:
        listener.run_launched(request.plan, request.device)
        outcome = run_request(request, listener, shared)
        outcomes.append(outcome)
        listener.run_ended(outcome)
        if outcome.status == RunStatus.INTERRUPTED:
            raise KeyboardInterrupt
    return outcomes


def slot_devices(jobs: int, devices: Sequence[str]) -> list[str]:
    """The device of each of `jobs` worker slots: round-robin over `devices` (several slots per GPU allowed)."""
    return [devices[slot % len(devices)] for slot in range(jobs)]


def cpu_threads_per_job(jobs: int) -> int | None:
    """Torch CPU threads per worker so that `jobs` workers share the machine's cores (None: OMP_NUM_THREADS
    is set, and the workers keep it). CPU numbers depend on the thread count, which run.json records."""
    if os.environ.get("OMP_NUM_THREADS"):
        return None
    return max(1, (os.cpu_count() or 1) // jobs)


def run_in_processes(requests: Sequence[RunRequest], jobs: int, devices: Sequence[str],
                     listener: ScheduleListener, grace_seconds: float = 60.0) -> list[RunOutcome]:
    """Run the requests over `jobs` spawned worker processes (one slot each), each worker one run at a time.

    Slot s uses `devices[s % len(devices)]`; each request's own device is replaced by its slot's. A worker
    that dies fails its run and is replaced. Returns the outcomes in request order. On KeyboardInterrupt
    the workers are interrupted, given `grace_seconds` to record it, then killed; the interrupt is re-raised.
    """
    return _WorkerPool(requests, slot_devices(jobs, devices), listener, grace_seconds).run()


def _worker_main(inbox: Any, sink: EventSink) -> None:
    """A worker process: run the requests that arrive in its inbox until it receives None."""
    signal.signal(signal.SIGINT, _interrupt_once)
    shared = SharedTasks()  # the task sequence of this worker's last run
    try:
        for index, request in iter(inbox.get, None):
            outcome = run_request(request, ForwardingObserver(sink, index), shared)
            sink.put(("outcome", index, outcome))
    except KeyboardInterrupt:  # Ctrl-C while idle
        pass


def _interrupt_once(signum: int, frame: object) -> None:
    """SIGINT handler: raise KeyboardInterrupt the first time, ignore later ones (Ctrl-C + forwarded SIGINT)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


@dataclass
class _Slot:
    """One worker process, its device, its inbox and the run it is executing (None: idle)."""

    device: str
    process: BaseProcess | None = None
    inbox: Any = None
    current: int | None = None


class _WorkerPool:
    """The bookkeeping of `run_in_processes`: waiting requests, slots, outcomes."""

    def __init__(self, requests: Sequence[RunRequest], devices: list[str], listener: ScheduleListener,
                 grace_seconds: float) -> None:
        self.context = multiprocessing.get_context("spawn")
        self.events = self.context.Queue()
        self.requests = list(requests)
        self.plans = [request.plan for request in self.requests]
        self.slots = [_Slot(device) for device in devices]
        self.listener = listener
        self.grace_seconds = grace_seconds
        self.waiting = deque(range(len(self.requests)))
        self.outcomes: dict[int, RunOutcome] = {}
        self.stopping = False

    def run(self) -> list[RunOutcome]:
        try:
            while self.waiting or self._busy():
                self._assign()
                self._receive(timeout=0.2)
                self._reap()
            self._close()
        except KeyboardInterrupt:
            self._stop()
            raise
        return [self.outcomes[index] for index in range(len(self.requests))]

    def _busy(self) -> list[_Slot]:
        return [slot for slot in self.slots if slot.current is not None]

    def _assign(self) -> None:
        """Give each idle slot the next waiting run (starting its worker if it has none)."""
        for slot in self.slots:
            if not self.waiting:
                return
            if slot.current is not None:
                continue
            if slot.process is None:
                slot.inbox = self.context.SimpleQueue()
                slot.process = self.context.Process(target=_worker_main, args=(slot.inbox, self.events),
                                                    daemon=True, name=f"clbench-worker-{slot.device}")
                slot.process.start()
            slot.current = self.waiting.popleft()
            request = replace(self.requests[slot.current], device=slot.device)
            slot.inbox.put((slot.current, request))
            self.listener.run_launched(request.plan, request.device)

    def _receive(self, timeout: float) -> None:
        """Dispatch the events that arrive within `timeout` (then whatever else is already there)."""
        try:
            event = self.events.get(timeout=timeout)
            while True:
                outcome = dispatch(event, self.plans, self.listener)
                if outcome is not None:
                    self._record(event[1], outcome)
                event = self.events.get_nowait()
        except queues.Empty:
            pass

    def _record(self, index: int, outcome: RunOutcome) -> None:
        for slot in self.slots:
            if slot.current == index:
                slot.current = None
        if index not in self.outcomes:
            self.outcomes[index] = outcome
            self.listener.run_ended(outcome)

    def _reap(self) -> None:
        """A worker that died fails the run it had (if it did not report it); its slot gets a new worker."""
        for slot in self.slots:
            if slot.process is None or slot.process.is_alive():
                continue
            slot.process.join()
            code, slot.process = slot.process.exitcode, None
            if slot.current is not None:
                self._receive(timeout=0.5)  # its last events may still be in the pipe
            if slot.current is not None:
                self._record(slot.current, RunOutcome(
                    self.plans[slot.current], RunStatus.INTERRUPTED if self.stopping else RunStatus.FAILED,
                    error=f"worker process exited with code {code} before reporting (killed, out of memory, "
                          f"or a crash in native code)"))

    def _close(self, timeout: float = 30.0) -> None:
        """Tell every worker to finish, wait for it, kill it if it does not."""
        for slot in self.slots:
            if slot.process is not None and slot.process.is_alive():
                slot.inbox.put(None)
        for slot in self.slots:
            if slot.process is not None:
                slot.process.join(timeout)
                if slot.process.is_alive():
                    slot.process.kill()
                    slot.process.join()
                slot.process = None

    def _stop(self) -> None:
        """Interrupt the workers, wait for them to record it, then close them."""
        self.waiting.clear()
        self.stopping = True
        for slot in self.slots:
            if slot.process is not None and slot.process.is_alive() and slot.process.pid is not None:
                os.kill(slot.process.pid, signal.SIGINT)
        deadline = time.monotonic() + self.grace_seconds
        while self._busy() and time.monotonic() < deadline:
            self._receive(timeout=0.2)
            self._reap()
        for index in [slot.current for slot in self._busy() if slot.current is not None]:
            self._record(index, RunOutcome(self.plans[index], RunStatus.INTERRUPTED, error="killed after Ctrl-C"))
        self._close(timeout=5.0)

