"""Running a benchmark: plan, execute, checkpoint, and the machinery around it. Importing this package is free
(no torch); its modules are imported where they are needed.

- `plan`: what a command asks for, resolved into run plans, and each run's identity (config, data and
  reference hashes);
- `loaders`: the data loaders runs are given (prepared data sets, fetched when missing; a spec's own data sets);
- `engine`: executing one plan, the sequential protocol task after task (locked, resumable);
- `rows`: each stage's evaluations as stored accuracy rows, written to the run folder; monitoring tables;
- `checkpoints`: saving, reading and resuming from the checkpoint after every task;
- `loggers`: the training logs of `--log` (TensorBoard, CSV, W&B) in each run folder's `logs/`;
- `evaluate`: a trained run's rows recomputed from its checkpoints (`clbench evaluate`);
- `scheduler`: run requests and their events, executed one after another or over local worker processes;
- `ray_executor`: the same run requests as Ray tasks;
- `execution`: what a command asks for (`--executor`, `--jobs`, devices) and handing its runs to an executor;
- `locking`: the per-run lock that keeps two commands from writing one run folder;
- `bench`: timings of the real training loop (`clbench bench`).
"""
