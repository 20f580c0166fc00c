"""PackNet's monitoring section of `clbench report --monitoring`: the weights each task owns, per layer.

Reads the `packnet_capacity` tables PackNet stores after every task (task 0: the weights still free) and shows,
per PackNet config, the % of each layer's weights owned by each task after the last task, mean over seeds (like
HAT's capacity table). Torch-free, as every reporter must be.
"""

from __future__ import annotations

from clbench.report import LayerShareReporter


class PackNetReporter(LayerShareReporter):
    """% of each layer's weights owned by each task (and still free) after the last task, per config."""

    table = "packnet_capacity"
    what = "weights owned by each task"

    def task_header(self, task: int) -> str:
        return f"task {task}" if task else "free"  # task 0: the weights no task owns yet
