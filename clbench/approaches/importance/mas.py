"""MAS: memory aware synapses (Aljundi, Babiloni, Elhoseiny, Rohrbach & Tuytelaars, ECCV 2018).

After task t (best weights restored), the importance of each shared parameter is the mean over the task's
training samples of |d ||f(x)||^2 / d theta| (eq. 2 with the squared L2 norm of the task head's output; no
labels needed), computed in eval mode; Omega is the sum over tasks (as Aljundi et al.'s code accumulates it)
and the anchor theta* becomes the current weights. From the second task on the loss is CE + lambda sum Omega
(theta - theta*)^2 (eq. 3). Only the shared body is penalised: each head is trained at its own task only.
"""

from __future__ import annotations

from dataclasses import dataclass

from clbench.approaches.datatypes import Hyperparameters
from clbench.approaches.importance.functions import mas_importance
from clbench.approaches.importance.penalty import ImportancePenalty
from clbench.data.batches import TaskSequence
from clbench.spec.fields import field


@dataclass(frozen=True)
class MASHyperparameters(Hyperparameters):
    """MAS's hyper-parameters (Aljundi et al. 2018: lambda = 1)."""

    clip_grad_norm: float = field(100.0, doc="gradient-norm clipping (clbench: 100, as the reference's ewc)",
                                  minimum=0.0, special={0.0: "no clipping"})
    lamb: float = field(1.0, doc="penalty strength lambda (Aljundi et al. eq. 3: 1; grid 0.01, 0.1, 0.5, 1, 2, 4)",
                        minimum=0.0)
    importance_batch_size: int = field(64, doc="samples per vectorised per-sample-gradient pass of the importance "
                                               "(memory only; the result does not depend on it)", minimum=1)


class MAS(ImportancePenalty):
    """Quadratic penalty towards the previous weights, weighted by the output's sensitivity to each parameter.

    The authors' code: rahafaljundi/MAS-Memory-Aware-Synapses `MAS_to_be_published/MAS_utils/MAS_based_Training.py`
    and `MAS_to_be_published/Demo.ipynb`, which estimate the importance per batch rather than per sample
    (`tools/mas_batch_importance.py` measures the difference).
    """

    name = "mas"
    summary = "memory aware synapses (Aljundi et al. 2018)"
    hyperparameters_class = MASHyperparameters
    hparams: MASHyperparameters

    def strength(self) -> float:
        return self.hparams.lamb

    def end_task(self, stage: int, tasks: TaskSequence) -> None:
        self.consolidate(mas_importance(self.network, self.body, tasks[stage].train, stage,
                                        self.hparams.importance_batch_size, seen=self.class_scenario))
