"""Weights & Biases: one W&B run per attempt, offline unless the user set `WANDB_MODE`, every file in
`<run_dir>/logs/wandb/` (`dir=` the logs folder; W&B's cache, where its service writes its debug logs, in `cache/`).

Named `<benchmark>/<method>/<config hash>/seed-<n>` (the run folder), grouped by `<benchmark>/<method>/<config
hash>` (the seeds of one config), project `WANDB_PROJECT` or `clbench`, with the run's resolved config. The network
never holds a run up: `wandb.init` gives up after `INIT_TIMEOUT` seconds and, like any failure of a logger, is
reported once while the run goes on. An offline run is uploaded later with `wandb sync <run_dir>/logs/wandb`. A
resumed run is a second W&B run of the same name whose steps continue after the checkpoint.

Offline sends nothing: W&B's own telemetry (it probes its server from a thread of this process unless the process
is offline as a whole), its error reports and its probes of cloud metadata servers are off. W&B reads these choices
from the environment when it starts, so they are set only while `wandb.init` runs and restored after; each run
ends its W&B service (`wandb.teardown`), so the next run starts one that writes into its own folder.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from clbench.run.loggers.scalars import Record

INIT_TIMEOUT = 20.0  # seconds wandb.init may take (online: reaching the server)
DEFAULT_PROJECT = "clbench"
OFFLINE_MODES = ("offline", "dryrun")  # W&B's names of a run that writes only local files
CACHE_FOLDER = "wandb/cache"  # under the logs folder: W&B's cache, where its service writes its debug logs


def wandb_mode(environ: Mapping[str, str]) -> str:
    """The W&B mode of a run: `WANDB_MODE` where set, else offline."""
    return environ.get("WANDB_MODE") or "offline"


def wandb_environment(folder: Path, mode: str) -> dict[str, str]:
    """The variables set while W&B starts for a run whose logs folder is `folder`: W&B's cache inside it; for an
    offline `mode`, the whole process offline (no telemetry) and no error reports."""
    variables = {"WANDB_CACHE_DIR": str(folder / CACHE_FOLDER)}
    if mode in OFFLINE_MODES:
        variables.update(WANDB_MODE=mode, WANDB_ERROR_REPORTING="false")
    return variables


@contextmanager
def environment(variables: Mapping[str, str]) -> Iterator[None]:
    """`os.environ` with `variables` set inside the block, each restored (or removed) after it."""
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class WandbWriter:
    """Scalars logged to a W&B run of `run_id` (files under `folder`)."""

    def __init__(self, folder: Path, run_id: str, config: dict[str, Any]) -> None:
        import wandb

        folder.mkdir(parents=True, exist_ok=True)
        benchmark, method, config_hash, seed = run_id.split("/")
        mode = wandb_mode(os.environ)
        offline = mode in OFFLINE_MODES
        with environment(wandb_environment(folder, mode)):
            self.run = wandb.init(
                project=os.environ.get("WANDB_PROJECT") or DEFAULT_PROJECT, name=run_id,
                group=f"{benchmark}/{method}/{config_hash}", job_type=method, tags=[benchmark, method, seed],
                config={**config, "run_id": run_id, "seed": int(seed.removeprefix("seed-"))}, dir=str(folder),
                mode=mode, reinit="finish_previous",
                settings=wandb.Settings(init_timeout=INIT_TIMEOUT, console="off", silent=True,
                                        x_disable_machine_info=offline))

    def write(self, record: Record) -> None:
        self.run.log(dict(record.scalars), step=record.step)

    def close(self) -> None:
        import wandb

        try:
            self.run.finish()
        finally:
            wandb.teardown()
