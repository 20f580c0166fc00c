"""Running a benchmark: plan, execute, checkpoint, and the machinery around it. Importing this package is free
(no torch); its modules are imported where they are needed.

- `engine`: a run's plan and identity (config, data and reference hashes), the sequential protocol task after
  task, checkpoints and resuming, stored rows, re-evaluation;
- `scheduler`: run requests and their events, executed one after another or over local worker processes;
- `ray_executor`: the same run requests as Ray tasks;
- `execution`: what a command asks for (`--executor`, `--jobs`, devices) and handing its runs to an executor;
- `locking`: the per-run lock that keeps two commands from writing one run folder;
- `bench`: timings of the real training loop (`clbench bench`).
"""
