"""Reading back what `clbench train --log` wrote: TensorBoard event files (TensorBoard's own reader), the CSV file,
and a W&B offline run's `.wandb` file (its records, framed as a LevelDB log: W&B ships no reader for it)."""

from __future__ import annotations

import csv
import json
import struct
from pathlib import Path

Series = dict[str, list[tuple[int, float]]]  # tag -> [(step, value)] in the order read


def tensorboard_scalars(folder: Path) -> Series:
    """Every scalar of the event files in `folder`, as TensorBoard shows them (purged steps left out)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    accumulator.Reload()
    return {tag: [(event.step, event.value) for event in accumulator.Scalars(tag)]
            for tag in accumulator.Tags()["scalars"]}


def csv_rows(path: Path) -> list[list[str]]:
    """The CSV file's rows, header first."""
    with path.open(newline="", encoding="utf-8") as file:
        return list(csv.reader(file))


def csv_series(path: Path) -> Series:
    series: Series = {}
    for step, _, _, tag, value in csv_rows(path)[1:]:
        series.setdefault(tag, []).append((int(step), float(value)))
    return series


WANDB_BLOCK = 32768
WANDB_HEADER = 7  # b":W&B", a 2-byte magic, a version byte; each record: crc32, length, type (<IHB)


def wandb_records(path: Path) -> list[bytes]:
    """The serialised records of a `.wandb` file (LevelDB log framing: 32 KiB blocks, records split in chunks)."""
    data = path.read_bytes()
    assert data[:4] == b":W&B", data[:7]
    records, pending, position = [], b"", WANDB_HEADER
    while position + 7 <= len(data):
        left = WANDB_BLOCK - position % WANDB_BLOCK
        _, length, kind = struct.unpack("<IHB", data[position:position + 7]) if left >= 7 else (0, 0, 0)
        if left < 7 or (length == 0 and kind == 0):  # block trailer: padding
            position += left
            continue
        pending += data[position + 7:position + 7 + length]
        position += 7 + length
        if kind in (1, 4):  # a full record, or the last chunk of one
            records.append(pending)
            pending = b""
    return records


def wandb_run(folder: Path) -> tuple[str, Series]:
    """(display name, scalars by tag) of the one offline run under `folder` (`wandb/offline-run-*/run-*.wandb`);
    W&B's own `_step`, `_runtime`, `_timestamp` left out."""
    from wandb.proto import wandb_internal_pb2

    [path] = folder.glob("wandb/offline-run-*/run-*.wandb")
    name, series = "", {}
    for raw in wandb_records(path):
        record = wandb_internal_pb2.Record()
        record.ParseFromString(raw)
        kind = record.WhichOneof("record_type")
        if kind == "run":
            name = record.run.display_name
        elif kind == "history":
            for item in record.history.item:
                tag = item.key or "/".join(item.nested_key)
                if not tag.startswith("_"):
                    series.setdefault(tag, []).append((record.history.step.num, float(json.loads(item.value_json))))
    return name, series
