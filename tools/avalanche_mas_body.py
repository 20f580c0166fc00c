"""`clbench train` with Avalanche's MAS penalising the network's body only, as clbench's `mas` does (issue 59).

    CLBENCH_DATA=... python tools/avalanche_mas_body.py train seq-mnist -m av-mas --seeds 0-2 --jobs 1 \
        --set av-mas.lambda_reg=0.01 --set av-mas.clip_grad_norm=0 --results OTHER_FOLDER

Avalanche 0.6.0's `MASPlugin` (`avalanche/training/plugins/mas.py`) takes an importance for every named parameter
of the model (`_get_importance`, lines 102-109) and penalises every name it holds (`before_backward`, lines 135-140),
the output layer included; clbench's `mas` penalises the shared body only. Here `_get_importance` drops the output
layer's names (under clbench's bridge: `network.heads.<i>.weight` and `.bias`), so neither the importance nor the
penalty holds them; everything else is `av-mas` as shipped. The arguments are `clbench`'s; `--jobs 1` (the patch
lives in this process) and a results folder of its own (the run's configuration is av-mas's, so its folder and hash
are the same as a plain av-mas run's). Needs the extra `avalanche`. Not a test.
"""

from __future__ import annotations

from typing import Any

from avalanche.training.plugins import mas

AVALANCHE_IMPORTANCE = mas.MASPlugin._get_importance


def body_importance(self: mas.MASPlugin, strategy: Any) -> dict:
    """Avalanche's importance without the output layer's parameters."""
    importance = AVALANCHE_IMPORTANCE(self, strategy)
    heads = [name for name in importance if ".heads." in name]
    if not heads:
        raise SystemExit(f"no output layer among the model's parameters {sorted(importance)}")
    for name in heads:
        del importance[name]
    return importance


if __name__ == "__main__":
    mas.MASPlugin._get_importance = body_importance
    from clbench.cli import console_main

    console_main()
