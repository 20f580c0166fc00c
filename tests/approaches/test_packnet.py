"""PackNet: pruning by hand, frozen and masked earlier tasks, disjoint ownership, capacity monitoring."""

from __future__ import annotations

import io
from dataclasses import replace

import pytest
import torch
from learned import Learned, inputs_of, learned
from synthetic import TINY_TRAINING, make_approach, tiny_spec, tiny_tasks
from torch.func import functional_call

from clbench.approaches.packnet.pruning import claim_free_weights, evaluation_mask, prune_free_weights
from clbench.approaches.resolution import resolve
from clbench.spec import load_benchmark

QUICK = replace(TINY_TRAINING, max_epochs=2)


def test_prune_free_weights_by_hand() -> None:
    weight = torch.tensor([[0.1, -0.5, 0.01], [0.05, -0.2, 0.9]])
    owner = torch.tensor([[0, 0, 1], [0, 0, 1]], dtype=torch.int16)  # 0.01 and 0.9 belong to task 1
    new_owner, pruned = prune_free_weights(weight, owner, 0.5, task=2)
    # free: 0.1, -0.5, 0.05, -0.2 -> prune the 2 smallest magnitudes (0.1, 0.05), keep -0.5 and -0.2 for task 2
    assert new_owner.tolist() == [[0, 2, 1], [0, 2, 1]]
    assert pruned.tolist() == [[True, False, False], [True, False, False]]
    assert claim_free_weights(new_owner, 3).tolist() == [[3, 2, 1], [3, 2, 1]]
    assert evaluation_mask(new_owner, 1).tolist() == [[True, False, True], [True, False, True]]


def test_an_odd_count_of_free_weights_prunes_the_rounded_half() -> None:
    # 3 free weights at 0.5: 1.5 rounds to 2 pruned (the two smallest, -0.1 and 0.2), 1 kept (0.3)
    weight = torch.tensor([[0.3, -0.1, 0.2]])
    new_owner, pruned = prune_free_weights(weight, torch.zeros(1, 3, dtype=torch.int16), 0.5, task=1)
    assert pruned.tolist() == [[False, True, True]]
    assert new_owner.tolist() == [[1, 0, 0]]


def history_of(run: Learned) -> list[tuple[dict, dict, list[torch.Tensor]]]:
    """Per stage: (owners, weights, the outputs of every task learned so far)."""
    return [(state["extra"]["owners"], state["network"], outputs) for state, outputs in zip(run.states, run.outputs)]


# Earlier tasks' outputs bit-identical after later tasks, and the masks matter: tests/approaches/test_isolation.py.
@pytest.fixture(scope="module", params=["mlp", "alexnet"])
def trained(request):
    run = learned("packnet", request.param)
    return run.approach, run.tasks, history_of(run)


def test_each_task_is_predicted_with_the_weights_of_tasks_up_to_its_own(trained) -> None:
    approach, tasks, history = trained
    approach.network.eval()
    with torch.no_grad():
        for stage, (_, weights, outputs) in enumerate(history):
            inputs = inputs_of(tasks, stage)
            # no weight belongs to a later task yet and the free ones are zero: the full network's output
            full = functional_call(approach.network, weights, (inputs, stage))
            assert torch.equal(outputs[stage], full), stage
        # after the last task, task 1 sees only the weights task 1 owns (every other one zeroed by hand)
        owners, weights, outputs = history[-1]
        own = {name: weight * (owners[name] == 1) if name in owners else weight for name, weight in weights.items()}
        inputs = inputs_of(tasks, 0)
        torch.testing.assert_close(outputs[0], functional_call(approach.network, own, (inputs, 0)))


def test_each_task_keeps_the_requested_fraction_of_the_free_weights_per_layer(trained) -> None:
    _, _, history = trained
    (owners_1, weights_1, _), (owners_2, weights_2, _), (owners_3, _, _) = history
    for name, owner in owners_1.items():
        n = owner.numel()
        assert int((owner == 1).sum()) == n - round(0.5 * n)  # half of all weights pruned after task 1
        free_1 = int((owner == 0).sum())
        assert int((owners_2[name] == 2).sum()) == free_1 - round(0.5 * free_1)
        assert int((owners_3[name] == 0).sum()) == 0  # the last task takes every free weight
        assert bool((weights_1[name][owner == 0] == 0).all())  # pruned weights are zero
        assert bool((weights_2[name][owners_2[name] == 0] == 0).all())


def test_tasks_own_disjoint_weights_taken_from_the_free_ones_and_earlier_ones_are_frozen(trained) -> None:
    _, _, history = trained
    (owners_1, weights_1, _), (owners_2, weights_2, _), (owners_3, weights_3, _) = history
    for name in owners_1:
        assert torch.equal(owners_2[name][owners_1[name] > 0], owners_1[name][owners_1[name] > 0])
        assert bool((owners_1[name][owners_2[name] == 2] == 0).all())  # task 2's weights were free after task 1
        assert bool((owners_2[name][owners_3[name] == 3] == 0).all())
        kept = owners_1[name] == 1
        assert torch.equal(weights_3[name][kept], weights_1[name][kept])  # task 1's weights never move
        assert torch.equal(weights_3[name][owners_2[name] == 2], weights_2[name][owners_2[name] == 2])
        assert not torch.equal(weights_3[name], weights_1[name])  # later tasks did train the free weights
    biases = [name for name in weights_1 if name.endswith("bias") and not name.startswith("heads")]
    assert biases and all(torch.equal(weights_3[name], weights_1[name]) for name in biases)  # shared after task 1


def test_capacity_monitoring_counts_the_weights_of_every_task(trained) -> None:
    approach, tasks, history = trained
    rows = approach.monitoring(2, tasks)["packnet_capacity"]
    owners = history[-1][0]
    totals = {row["task"]: row for row in rows if row["layer"] == "total"}
    n = sum(owner.numel() for owner in owners.values())
    for task in range(4):
        assert totals[task]["used"] == sum(int((owner == task).sum()) for owner in owners.values())
        assert totals[task]["weights"] == n
    assert totals[0]["used"] == 0 and sum(row["used"] for row in totals.values()) == n
    assert totals[1]["fraction"] == pytest.approx(totals[1]["used"] / n)


def test_state_round_trips_with_the_masks() -> None:
    run = learned("packnet", "mlp")
    approach, tasks, history = run.approach, run.tasks, history_of(run)
    buffer = io.BytesIO()
    torch.save(approach.state(), buffer)
    buffer.seek(0)
    fresh = make_approach("packnet", tiny_spec("mlp"), tasks, seed=1)
    fresh.load_state(torch.load(buffer, weights_only=True))
    fresh.network.eval()
    assert all(torch.equal(fresh.owners[name], owner) for name, owner in approach.owners.items())
    with torch.no_grad():
        for task, output in enumerate(history[-1][2]):
            assert torch.equal(fresh.predict(inputs_of(tasks, task), task), output)


def test_retraining_runs_after_every_task_but_the_last() -> None:
    spec = tiny_spec("mlp", training=QUICK)
    tasks = tiny_tasks(spec)
    approach = make_approach("packnet", spec, tasks, retrain_epochs=3)
    logs = [approach.learn_task(stage, tasks) for stage in range(3)]
    # 2 epochs of training, then 3 of retraining (the lr cannot fall below lr_min that fast); the last: none
    assert [log.epochs for log in logs] == [QUICK.max_epochs + 3, QUICK.max_epochs + 3, QUICK.max_epochs]
    assert approach.retraining is None and approach.training_protocol == spec.training


def test_zero_retrain_epochs_skip_retraining_and_keep_the_trainings_log() -> None:
    spec = tiny_spec("mlp", training=QUICK)
    tasks = tiny_tasks(spec)
    approach = make_approach("packnet", spec, tasks, retrain_epochs=0)
    epochs = []
    log = approach.learn_task(0, tasks, progress=epochs.append)
    # the training's 2 epochs at lr 0.05 (patience 2 cannot lower it in 2 epochs), never the retraining's lr 0.005
    assert [epoch.epoch for epoch in epochs] == [1, 2] and [epoch.lr for epoch in epochs] == [0.05, 0.05]
    assert (log.epochs, log.final_lr) == (2, 0.05)
    best = min(epoch.valid_loss for epoch in epochs)
    assert log.best_valid_loss == best and log.best_epoch == 1 + [epoch.valid_loss for epoch in epochs].index(best)


def test_spec_values() -> None:
    assert resolve(tiny_spec("mlp"), "packnet").hyperparameters.prune_fraction == 0.5
    assert resolve(load_benchmark("mnist2"), "packnet").hyperparameters.prune_fraction == 0.5
    assert resolve(load_benchmark("pmnist"), "packnet").hyperparameters.prune_fraction == 0.75
