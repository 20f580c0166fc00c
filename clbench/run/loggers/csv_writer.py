"""CSV: `<run_dir>/logs/scalars.csv`, long format, one row per (step, tag), flushed as it is written.

Columns: `step` (global), `stage` (the task trained, 1-based; 0: initialisation), `epoch` (1-based within the
stage; empty for a stage's evaluation), `tag`, `value`. A resumed run keeps the rows before its first step and
drops the rest (what an interrupted attempt wrote after the checkpoint), then appends.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from clbench.results import atomic_write_bytes
from clbench.run.loggers.scalars import Record

COLUMNS = ("step", "stage", "epoch", "tag", "value")


class CsvWriter:
    """Scalars appended to the CSV file at `path`, from `first_step` on."""

    def __init__(self, path: Path, first_step: int) -> None:
        kept = rows_before(path, first_step)
        text = io.StringIO()
        csv.writer(text, lineterminator="\n").writerows([COLUMNS, *kept])
        atomic_write_bytes(path, text.getvalue().encode())
        self.file = path.open("a", newline="", encoding="utf-8")
        self.writer = csv.writer(self.file, lineterminator="\n")

    def write(self, record: Record) -> None:
        epoch = "" if record.epoch is None else record.epoch
        self.writer.writerows([(record.step, record.stage, epoch, tag, repr(float(value)))
                               for tag, value in record.scalars.items()])
        self.file.flush()

    def close(self) -> None:
        self.file.close()


def rows_before(path: Path, first_step: int) -> list[list[str]]:
    """The rows of an existing file at `path` whose step is before `first_step` ([] if there is no such file)."""
    if first_step <= 0 or not path.is_file():
        return []
    with path.open(newline="", encoding="utf-8") as file:
        reader = csv.reader(file)
        header = next(reader, None)
        if header is None or tuple(header) != COLUMNS:
            return []
        return [row for row in reader if len(row) == len(COLUMNS) and row[0].isdigit() and int(row[0]) < first_step]
