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

    python tools/avalanche_mas_body.py summed train pmnist -m av-mas ...

also sums each experience's importance into the penalty's, as clbench's `mas` and Aljundi et al.'s code accumulate
it (`clbench/approaches/importance/penalty.py`, `consolidate`), where Avalanche averages the new with the old
(`after_training_exp`, lines 171-173: `alpha * old + (1 - alpha) * new`, alpha 0.5). What stays Avalanche's: the
importance of a batch (|the gradient of the batch's mean squared output norm|, averaged over the batches; clbench's
averages each sample's |gradient|) and its estimate in training mode.
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


def summed_importance(self: mas.MASPlugin, strategy: Any, **kwargs: Any) -> None:
    """Avalanche's `after_training_exp` with the experience's importance added to the earlier ones' sum."""
    self.params = dict(mas.copy_params_dict(strategy.model))
    current = self._get_importance(strategy)
    for name, earlier in (self.importance or {}).items():
        if name in current and current[name].shape == earlier.shape:
            current[name].data = current[name].data + earlier.data
    self.importance = current


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["summed"]:
        del sys.argv[1]
        mas.MASPlugin.after_training_exp = summed_importance  # type: ignore[method-assign]
    mas.MASPlugin._get_importance = body_importance
    from clbench.cli import console_main

    console_main()
