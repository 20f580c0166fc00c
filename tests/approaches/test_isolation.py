"""Isolation, for the methods that promise it: once a task is learned, later tasks never change its outputs (PNN's
frozen columns, PathNet's frozen paths, PackNet's masks, SGD-F's frozen body and one head per task). Each learns
the 3 tiny tasks above chance, keeps every earlier task's outputs bit-identical through every later task, and
leaves what it promises to keep untouched while later tasks do learn (so that the test can fail).

HAT is not here: its attention masks are binary only up to a sigmoid at s_max, so earlier outputs stay within a
tolerance, not bit-identical (tests/approaches/test_hat_approach.py checks that)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from learned import Learned, inputs_of, learned

NETWORKS = ["mlp", "alexnet"]
ISOLATED = ["pnn", "pathnet", "packnet", "sgd-f"]


@pytest.fixture(scope="module", params=[(method, network) for method in ISOLATED for network in NETWORKS],
                ids=lambda parameters: "-".join(parameters))
def run(request: pytest.FixtureRequest) -> Learned:
    return learned(*request.param)


def test_learns_every_task_above_chance(run: Learned) -> None:
    assert [len(row) for row in run.accuracy] == [1, 2, 3]
    values = torch.tensor([a for row in run.accuracy for a in row])
    assert torch.isfinite(values).all()
    assert run.accuracy[0][0] > 1.5 / run.tasks[0].n_classes
    assert run.accuracy[-1][0] == run.accuracy[0][0]  # task 1 never forgets


def test_earlier_tasks_outputs_are_bit_identical_after_later_tasks(run: Learned) -> None:
    final_outputs = run.outputs[-1]
    for stage, outputs in enumerate(run.outputs):
        for task, output in enumerate(outputs):
            assert torch.equal(output, final_outputs[task]), (stage, task)
    KEPT[run.method](run)


# ---------------------------------------------------------------------------- what each method keeps, and learns
def pnn_keeps_the_first_column(run: Learned) -> None:
    first, final = run.weights(0), run.weights(2)
    column = [key for key in final if key.startswith("columns.0.")]
    assert column and all(torch.equal(final[key], first[key]) for key in column)
    later = run.weights(1)
    assert any(not torch.equal(value, final[key]) for key, value in later.items()
               if key.startswith("columns.2."))  # the last column did learn


def pathnet_keeps_the_first_path(run: Learned) -> None:
    approach, before_second, now = run.approach, run.weights(0), run.weights(2)
    layers = approach.pathnet.n_layers
    assert all(torch.equal(now[key], before_second[key]) for key in module_keys(approach.best_paths[0], layers))
    new_modules = [[m for m in approach.best_paths[2][layer] if m not in approach.best_paths[0][layer]]
                   for layer in range(layers)]
    assert any(not torch.equal(now[key], before_second[key]) for key in module_keys(new_modules, layers))


def module_keys(path: list[list[int]], layers: int) -> list[str]:
    return [f"layers.{layer}.{module}.{name}" for layer in range(layers) for module in path[layer]
            for name in ("weight", "bias")]


def packnet_masks_matter(run: Learned) -> None:
    # the masks matter: the unmasked network gives task 1 other outputs
    run.approach.network.eval()
    with torch.no_grad():
        unmasked = run.approach.network(inputs_of(run.tasks, 0), 0)
    assert not torch.equal(unmasked, run.outputs[-1][0])


def sgd_frozen_keeps_the_body(run: Learned) -> None:
    first, second = run.weights(0), run.weights(1)
    body = [key for key in first if not key.startswith("heads.")]
    assert body and all(torch.equal(run.weights(stage)[key], first[key]) for stage in (1, 2) for key in body)
    assert not torch.equal(second["heads.1.weight"], first["heads.1.weight"])  # the second task's head did learn


KEPT: dict[str, Callable[[Learned], None]] = {"pnn": pnn_keeps_the_first_column,
                                              "pathnet": pathnet_keeps_the_first_path,
                                              "packnet": packnet_masks_matter, "sgd-f": sgd_frozen_keeps_the_body}
