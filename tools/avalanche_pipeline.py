"""What Avalanche's own pipelines in tools/ share (`avalanche_splitmnist.py`, `avalanche_permutedmnist.py`): MNIST's
upstream files in a temporary torchvision layout, Avalanche's `SimpleMLP` as clbench's 784-100-100 network, the
strategies' common arguments and the final stream accuracy. Needs the extra `avalanche`. Not a test."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

FILES = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
         "t10k-labels-idx1-ubyte.gz")


def mnist_root(mnist: Path, root: str) -> None:
    """MNIST's four `.gz` files from `mnist` copied into `root/MNIST/raw`, torchvision's layout (it checks the files'
    md5 and extracts them; nothing is downloaded)."""
    raw = Path(root) / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for name in FILES:
        shutil.copy(mnist / name, raw / name)


def simple_mlp(xavier: bool) -> Any:
    """Avalanche's `SimpleMLP(hidden_size=100, hidden_layers=2, drop_rate=0)` (784-100-100-10); with `xavier`,
    clbench's initialisation (Xavier-uniform weights, zero biases: clbench/nets/common.py reset_parameters)."""
    import torch
    from avalanche.models import SimpleMLP

    model = SimpleMLP(num_classes=10, hidden_size=100, hidden_layers=2, drop_rate=0)
    if xavier:
        for module in model.modules():
            if isinstance(module, torch.nn.Linear):
                torch.nn.init.xavier_uniform_(module.weight)
                torch.nn.init.zeros_(module.bias)
    return model


def common_arguments(model: Any, lr: float, batch_size: int) -> dict[str, Any]:
    """The arguments every strategy here takes: plain SGD at `lr`, the cross-entropy, one epoch of `batch_size`, the
    CPU and a silent evaluator of the stream's top-1 accuracy."""
    import torch
    from avalanche.evaluation.metrics import accuracy_metrics
    from avalanche.training.plugins import EvaluationPlugin

    return {"optimizer": torch.optim.SGD(model.parameters(), lr=lr), "criterion": torch.nn.CrossEntropyLoss(),
            "train_mb_size": batch_size, "train_epochs": 1, "eval_mb_size": 1000, "device": "cpu",
            "evaluator": EvaluationPlugin(accuracy_metrics(stream=True), loggers=[])}


def final_accuracy(results: dict[str, Any]) -> float:
    """The test stream's top-1 accuracy from `strategy.eval`'s results."""
    return next(value for key, value in results.items() if key.startswith("Top1_Acc_Stream/eval_phase/test"))
