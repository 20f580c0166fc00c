"""TensorBoard: event files in `<run_dir>/logs/`, one scalar per tag and step (`torch.utils.tensorboard`).

The writer is opened with `purge_step` = the first step this attempt writes, so TensorBoard's reader drops what an
interrupted attempt wrote from that step on: a resumed run shows each step once.
"""

from __future__ import annotations

from pathlib import Path

from clbench.run.loggers.scalars import Record

FLUSH_SECONDS = 10  # how long written scalars may wait before TensorBoard can see them


class TensorBoardWriter:
    """Scalars as TensorBoard events in `folder`, from `first_step` on."""

    def __init__(self, folder: Path, first_step: int) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(folder), purge_step=first_step, flush_secs=FLUSH_SECONDS)

    def write(self, record: Record) -> None:
        for tag, value in record.scalars.items():
            self.writer.add_scalar(tag, value, record.step)
        if record.epoch is None:  # a stage's evaluation: visible now, not after FLUSH_SECONDS
            self.writer.flush()

    def close(self) -> None:
        self.writer.close()
