"""Weights & Biases: one W&B run per attempt, offline unless the user set `WANDB_MODE`, files in
`<run_dir>/logs/wandb/` (`dir=` the logs folder).

Named `<benchmark>/<method>/<config hash>/seed-<n>` (the run folder), grouped by `<benchmark>/<method>/<config
hash>` (the seeds of one config), project `WANDB_PROJECT` or `clbench`, with the run's resolved config. The network
never holds a run up: `wandb.init` gives up after `INIT_TIMEOUT` seconds and, like any failure of a logger, is
reported once while the run goes on. An offline run is uploaded later with `wandb sync <run_dir>/logs/wandb`. A
resumed run is a second W&B run of the same name whose steps continue after the checkpoint.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from clbench.run.loggers.scalars import Record

INIT_TIMEOUT = 20.0  # seconds wandb.init may take (online: reaching the server)
DEFAULT_PROJECT = "clbench"


class WandbWriter:
    """Scalars logged to a W&B run of `run_id` (files under `folder`)."""

    def __init__(self, folder: Path, run_id: str, config: dict[str, Any]) -> None:
        import wandb

        folder.mkdir(parents=True, exist_ok=True)
        benchmark, method, config_hash, seed = run_id.split("/")
        self.run = wandb.init(
            project=os.environ.get("WANDB_PROJECT") or DEFAULT_PROJECT, name=run_id,
            group=f"{benchmark}/{method}/{config_hash}", job_type=method, tags=[benchmark, method, seed],
            config={**config, "run_id": run_id, "seed": int(seed.removeprefix("seed-"))}, dir=str(folder),
            mode=None if os.environ.get("WANDB_MODE") else "offline", reinit="finish_previous",
            settings=wandb.Settings(init_timeout=INIT_TIMEOUT, console="off", silent=True))

    def write(self, record: Record) -> None:
        self.run.log(dict(record.scalars), step=record.step)

    def close(self) -> None:
        self.run.finish()
