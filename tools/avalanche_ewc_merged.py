"""`clbench train` with Avalanche's EWC keeping clbench's one merged penalty instead of one per experience (issue 59).

    CLBENCH_DATA=... python tools/avalanche_ewc_merged.py train pmnist -m av-ewc --seeds 0-2 --jobs 1 \
        --set av-ewc.ewc_lambda=250 --set av-ewc.clip_grad_norm=0 --results OTHER_FOLDER

Avalanche 0.6.0's `EWCPlugin` in its default `mode="separate"` keeps every experience's importance and weights and
adds one penalty per earlier experience, `ewc_lambda * sum_t sum_i F_t,i (theta_i - theta_t,i)^2`
(`avalanche/training/plugins/ewc.py`, `before_backward` lines 81-92; `update_importances` stores each experience's
own importance). clbench's `ewc`, as the HAT reference's (`clbench/approaches/regularizers.py`, `merge_fisher`),
keeps one: the mean of the experiences' Fishers, F = (F_new + t F_old) / (t + 1), anchored at the weights after the
last experience. Here `update_importances` stores that mean under the experience's key and `before_backward`
penalises only the last experience's entry (Avalanche's own `online` branch, which reads the last importance and
weights); Avalanche's importance estimate (`compute_importances`: the squared gradient of each batch's mean loss,
averaged over the batches, as clbench's with `ewc.fisher_batch_size` the batch size) is kept. The arguments are
`clbench`'s; `--jobs 1` (the patch lives in this process) and a results folder of its own (the run's configuration
is av-ewc's, so its folder and hash are the same as a plain av-ewc run's). Needs the extra `avalanche`. Not a test.
"""

from __future__ import annotations

from typing import Any

import torch
from avalanche.training.plugins import ewc

AVALANCHE_PENALTY = ewc.EWCPlugin.before_backward


@torch.no_grad()
def merged_importances(self: ewc.EWCPlugin, importances: dict, t: int) -> None:
    """Store the mean of experiences 0..t's importances under `t` (clbench's `merge_fisher`)."""
    if t > 0:
        earlier = self.importances[t - 1]
        for name, importance in importances.items():
            if name in earlier and earlier[name].shape == importance.shape:
                importance.data = (importance.data + t * earlier[name].data) / (t + 1)
    self.importances[t] = importances


def last_penalty(self: ewc.EWCPlugin, strategy: Any, **kwargs: Any) -> None:
    """Avalanche's penalty of its `online` branch: the last experience's (merged) importance and weights only."""
    mode = self.mode
    self.mode = "online"
    try:
        AVALANCHE_PENALTY(self, strategy, **kwargs)
    finally:
        self.mode = mode


if __name__ == "__main__":
    ewc.EWCPlugin.update_importances = merged_importances  # type: ignore[method-assign]
    ewc.EWCPlugin.before_backward = last_penalty  # type: ignore[method-assign]
    from clbench.cli import console_main

    console_main()
