"""Live training logs beside the stored results: TensorBoard event files, a CSV file, a W&B run (`clbench train
--log tensorboard,csv,wandb`, or `CLBENCH_LOG`).

What is logged, at a global step that keeps increasing across tasks (one step per epoch; step 0: the network at
initialisation):
- per epoch: `train/loss`, `train/lr`, `train/task` (the task being trained, 1-based), `valid/loss`,
  `valid/accuracy` and `valid/accuracy/task<t>`, and the approach's own scalars as `approach/<name>`
  (`Approach.log_scalars`: HAT's capacity, SI's and MAS's importance and stiffness maxima, a replay buffer's fill);
- per stage, at the step of its last epoch: every task's test accuracy in each evaluation the run stores,
  `accuracy/<evaluation>/task<u>`, and their mean over the tasks learned so far, `accuracy/<evaluation>/mean`.

Files go to `<run_dir>/logs/` (`events.out.tfevents.*`, `scalars.csv`, `wandb/`). A resumed run appends from the
step after its checkpoint: TensorBoard purges the later steps an interrupted attempt wrote (`purge_step`), the CSV
keeps only the rows before it. Loggers only read what the run computes: they never change a stored number, and a
logger that fails is reported once and dropped while the run goes on.

- `choice`: the logger names, `--log` parsing and the check that each one's package is installed (torch-free);
- `scalars`: the tags and values of an epoch and of a stage, and the step a resumed run continues from;
- `run_loggers`: `RunLoggers`, what the engine calls: the step counter and the writers, each guarded;
- `tensorboard_writer`, `csv_writer`, `wandb_writer`: one writer per logger.
"""

from clbench.run.loggers.choice import LOGGERS, check_loggers, parse_loggers

__all__ = ["LOGGERS", "check_loggers", "parse_loggers"]
