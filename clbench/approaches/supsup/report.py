"""SupSup's monitoring section of `clbench report --monitoring`: the edges each task's supermask keeps, per layer.

Reads the `supsup_masks` tables SupSup stores after every task and shows, per SupSup config, the % of each layer's
edges in each task's mask after the last task, mean over seeds. Torch-free, as every reporter must be.
"""

from __future__ import annotations

from clbench.report import LayerShareReporter


class SupSupReporter(LayerShareReporter):
    """% of each layer's edges in each task's supermask after the last task, per config."""

    table = "supsup_masks"
    what = "edges in each task's supermask"
