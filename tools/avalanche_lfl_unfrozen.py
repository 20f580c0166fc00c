"""`clbench train` with Avalanche's LFL leaving the output layer trainable, as clbench's `lfl` does (issue 59).

    CLBENCH_DATA=... python tools/avalanche_lfl_unfrozen.py train pmnist -m av-lfl --seeds 0-2 --jobs 1 \
        --set data.scenario=domain --set av-lfl.clip_grad_norm=0 --results OTHER_FOLDER

Avalanche 0.6.0's `LFLPlugin.after_training_exp` (`avalanche/training/plugins/lfl.py`, lines 76-88) keeps a frozen
copy of the network for the feature penalty and also freezes the network's last linear layer (`get_last_fc_layer`:
in the domain scenario the one shared head), as Jung et al.'s LFL fixes the softmax layer; clbench's `lfl` penalises
the features the same way but leaves every head trainable. Here `after_training_exp` keeps the frozen copy only;
everything else is `av-lfl` as shipped. The arguments are `clbench`'s; `--jobs 1` (the patch lives in this process)
and a results folder of its own (the run's configuration is av-lfl's). Needs the extra `avalanche`. Not a test.
"""

from __future__ import annotations

import copy
from typing import Any

from avalanche.training.plugins import lfl
from avalanche.training.utils import freeze_everything


def keep_previous_network_only(self: lfl.LFLPlugin, strategy: Any, **kwargs: Any) -> None:
    """Avalanche's `after_training_exp` without freezing the current network's last linear layer."""
    self.prev_model = copy.deepcopy(strategy.model)
    freeze_everything(self.prev_model)


if __name__ == "__main__":
    lfl.LFLPlugin.after_training_exp = keep_previous_network_only  # type: ignore[method-assign]
    from clbench.cli import console_main

    console_main()
