"""`clbench train` with `av-bic` on a torch whose MultiStepLR no longer takes `verbose` (issue 59).

    CLBENCH_DATA=... python tools/avalanche_bic_scheduler.py train seq-mnist -m av-bic --seeds 0-2 --jobs 1 \
        --set av-bic.clip_grad_norm=0 --results FOLDER

Avalanche 0.6.0's `BiCPlugin.bias_correction_step` builds its scheduler as `MultiStepLR(bic_optimizer,
milestones=[50, 100, 150], gamma=0.1, verbose=False)` (`avalanche/training/plugins/bic.py` lines 383-385); torch
deprecated `verbose` in 2.2 and has since removed it, so `av-bic` is refused where torch's MultiStepLR lacks it
(clbench.approaches.avalanche.strategies.bic_scheduler_problem). Here MultiStepLR takes `verbose` and drops it (False:
print nothing, what torch does without it), in Avalanche's BiC module and in torch's namespace that the refusal
reads; everything else is `av-bic` as shipped. The arguments are `clbench`'s; `--jobs 1` (the patch lives in this
process). Needs the extra `avalanche`. Not a test.

    python tools/avalanche_bic_scheduler.py classes-softmax train seq-mnist -m av-bic ...

also replaces the distillation's soft targets (`BiCPlugin.cross_entropy`, bic.py lines 284-296:
`softmax(old_outputs / 2, dim=0)`, over the batch, at a fixed T 2) by the softmax over the old classes at the
plugin's `T` (`dim=1`, as clbench's `bic`, FACIL and the BiC paper's Eq. 2): the matched run of docs/avalanche.md.

    python tools/avalanche_bic_scheduler.py unfitted-bias train seq-mnist -m av-bic ...

leaves the bias layer unfitted: `bias_correction_step` (bic.py lines 355-440) creates the experience's `BiasLayer`
(alpha 1, beta 0, the identity) as Avalanche does and trains nothing, as clbench's `bic` with `bias_epochs=0` (its
`stage_2_epochs` must be at least 1). With both bias stages off, the two runs differ only in the first stage
(distillation, memory, validation share): the bisection of docs/avalanche.md.

    python tools/avalanche_bic_scheduler.py joined-exemplars train seq-mnist -m av-bic ...

joins the memory's exemplars to the experience's training data, shuffled together, as clbench's `bic` (FACIL's rule)
does, instead of Avalanche's memory batch beside every batch of new data (`before_training_exp`, bic.py lines
175-216: `ReplayDataLoader`); the variants combine with a `+` (`joined-exemplars+unfitted-bias`).
"""

from __future__ import annotations

from typing import Any

import torch
from avalanche.training.plugins import bic


class VerboseMultiStepLR(torch.optim.lr_scheduler.MultiStepLR):
    """torch's MultiStepLR with the `verbose` argument (ignored) that Avalanche's BiC passes."""

    def __init__(self, *args: Any, verbose: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)


def classes_softmax_distillation(self: Any, new_outputs: torch.Tensor, old_outputs: torch.Tensor) -> torch.Tensor:
    """Avalanche's distillation with the soft targets over the classes (dim 1) at the plugin's T."""
    targets = torch.nn.functional.softmax(old_outputs / self.T, dim=1)
    return torch.nn.functional.cross_entropy(new_outputs / self.T, targets)


def unfitted_bias_layer(self: Any, strategy: Any, **kwargs: Any) -> None:
    """Avalanche's bias stage without its fit: the experience's bias layer at alpha 1, beta 0, frozen."""
    targets = strategy.adapted_dataset.targets
    self.bias_layer = bic.BiasLayer(targets.uniques).to(strategy.device)
    self.bias_layer.eval()
    for parameter in self.bias_layer.parameters():
        parameter.requires_grad = False


def joined_exemplars(self: Any, strategy: Any, num_workers: int = 0, shuffle: bool = True, **kwargs: Any) -> None:
    """Avalanche's `before_training_exp` with the memory joined to the experience's data in one shuffled loader."""
    from avalanche.benchmarks.utils.data_loader import TaskBalancedDataLoader

    if self.bias_layer is not None:
        for parameter in self.bias_layer.parameters():
            parameter.requires_grad = False
    if len(self.storage_policy.buffer) == 0:
        return
    joined = bic.concat_datasets([strategy.adapted_dataset, self.storage_policy.buffer])
    strategy.dataloader = TaskBalancedDataLoader(joined, oversample_small_groups=True,
                                                 batch_size=strategy.train_mb_size, shuffle=shuffle,
                                                 num_workers=num_workers)


VARIANTS = {"classes-softmax": ("cross_entropy", classes_softmax_distillation),
            "unfitted-bias": ("bias_correction_step", unfitted_bias_layer),
            "joined-exemplars": ("before_training_exp", joined_exemplars)}


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] and set(sys.argv[1].split("+")) <= set(VARIANTS):
        for variant in sys.argv.pop(1).split("+"):
            method, replacement = VARIANTS[variant]
            setattr(bic.BiCPlugin, method, replacement)
    torch.optim.lr_scheduler.MultiStepLR = VerboseMultiStepLR  # type: ignore[misc]
    bic.MultiStepLR = VerboseMultiStepLR  # type: ignore[attr-defined]
    from clbench.cli import console_main

    console_main()
