"""Every registered approach runs a tiny 3-task benchmark (MLP and conv) and fills its accuracy matrix."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from synthetic import TINY_TRAINING, synthetic_loader, tiny_spec

from clbench.approaches import REGISTRY
from clbench.engine import execute, plan_runs
from clbench.metrics import accuracy_matrix, is_complete_matrix

FAST = replace(TINY_TRAINING, max_epochs=2)


@pytest.mark.parametrize("network", ["mlp", "alexnet"])
@pytest.mark.parametrize("method", sorted(REGISTRY))
def test_every_approach_fills_the_lower_triangle(method: str, network: str, tmp_path: Path) -> None:
    spec = tiny_spec(network, training=FAST)
    [plan] = plan_runs(spec, [method], [0], tmp_path)
    outcome = execute(plan, device=torch.device("cpu"), loader=synthetic_loader(n_train=160, n_test=60))
    matrix = accuracy_matrix(pd.DataFrame(outcome.rows))
    assert matrix.shape == (3, 3) and is_complete_matrix(matrix)
    assert np.isnan(matrix[np.triu_indices(3, 1)]).all()
