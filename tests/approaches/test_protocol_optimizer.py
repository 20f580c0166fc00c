"""`training.optimizer`, `momentum`, `weight_decay`: the optimiser a protocol names, its steps by hand, and no stored
run's identity moved while they keep their defaults."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from synthetic import TINY_TRAINING, make_approach, tiny_spec, tiny_tasks

from clbench.approaches.optim import PlainSGD, protocol_optimizer
from clbench.approaches.resolution import resolve
from clbench.errors import SpecError
from clbench.run.plan import run_config
from clbench.spec import load_benchmark


def one_parameter(value: float) -> torch.nn.Parameter:
    return torch.nn.Parameter(torch.tensor([value]))


def step_with(optimizer_of, gradients: list[float], start: float = 1.0) -> list[float]:
    """The parameter's value after each step taken with the given gradients."""
    parameter = one_parameter(start)
    optimizer = optimizer_of([parameter])
    values = []
    for gradient in gradients:
        optimizer.zero_grad(set_to_none=True)
        parameter.grad = torch.tensor([gradient])
        optimizer.step()
        values.append(float(parameter.detach()))
    return values


def test_the_default_is_the_papers_plain_sgd() -> None:
    assert isinstance(protocol_optimizer([one_parameter(1.0)], 0.1), PlainSGD)
    # p <- p - lr g: 1 - 0.1 * 2 = 0.8, then 0.8 - 0.1 * 1 = 0.7
    assert step_with(lambda ps: protocol_optimizer(ps, 0.1), [2.0, 1.0]) == pytest.approx([0.8, 0.7])


def test_sgd_with_momentum_by_hand() -> None:
    # torch's SGD momentum: v1 = g1 = 2, p = 1 - 0.1 * 2 = 0.8; v2 = 0.9 * 2 + 1 = 2.8, p = 0.8 - 0.28 = 0.52
    values = step_with(lambda ps: protocol_optimizer(ps, 0.1, "sgd", momentum=0.9), [2.0, 1.0])
    assert values == pytest.approx([0.8, 0.52])


def test_weight_decay_by_hand() -> None:
    # g' = g + wd p: 2 + 0.5 * 1 = 2.5, p = 1 - 0.1 * 2.5 = 0.75
    assert step_with(lambda ps: protocol_optimizer(ps, 0.1, "sgd", weight_decay=0.5), [2.0]) == pytest.approx([0.75])


def test_adam_by_hand() -> None:
    # Adam's first step with bias correction: m_hat = g, v_hat = g^2, p = 1 - lr g / (|g| + eps) = 1 - 0.01
    assert step_with(lambda ps: protocol_optimizer(ps, 0.01, "adam"), [3.0]) == pytest.approx([0.99], abs=1e-7)


def test_rmsprop_by_hand() -> None:
    # RMSprop's first step: v = (1 - 0.99) g^2 = 0.09, p = 1 - lr g / (sqrt(v) + eps) = 1 - 0.01 * 3 / 0.3 = 0.9
    assert step_with(lambda ps: protocol_optimizer(ps, 0.01, "rmsprop"), [3.0]) == pytest.approx([0.9], abs=1e-6)


def test_adam_takes_the_weight_decay() -> None:
    """A weight with no gradient: Adam's weight decay (L2, torch's) makes it g = 0 + 0.5 x 1 = 0.5, and the first
    step with bias correction is lr g / (|g| + eps): 1 - 0.01 = 0.99. Without weight decay nothing moves."""
    decayed = step_with(lambda ps: protocol_optimizer(ps, 0.01, "adam", weight_decay=0.5), [0.0])
    assert decayed == pytest.approx([0.99], abs=1e-7)
    assert step_with(lambda ps: protocol_optimizer(ps, 0.01, "adam"), [0.0]) == [1.0]


def test_rmsprop_takes_the_momentum() -> None:
    """Two steps of gradient 3 at lr 0.01 (alpha 0.99): v1 = 0.01 x 9 = 0.09, u1 = 3 / sqrt(v1) = 10; v2 = 0.99 v1 +
    0.09 = 0.1791, u2 = 3 / sqrt(v2). With momentum 0.9 the buffer is 10, then 0.9 x 10 + u2: p = 1 - 0.01 x 10,
    then minus 0.01 (9 + u2); without it the second step is 0.01 u2."""
    u2 = 3 / 0.1791 ** 0.5
    with_momentum = step_with(lambda ps: protocol_optimizer(ps, 0.01, "rmsprop", momentum=0.9), [3.0, 3.0])
    assert with_momentum == pytest.approx([0.9, 0.9 - 0.01 * (9 + u2)], abs=1e-6)
    without = step_with(lambda ps: protocol_optimizer(ps, 0.01, "rmsprop"), [3.0, 3.0])
    assert without == pytest.approx([0.9, 0.9 - 0.01 * u2], abs=1e-6)


def test_an_approach_trains_with_the_protocols_optimizer() -> None:
    spec = tiny_spec(training=replace(TINY_TRAINING, optimizer="adam"))
    approach = make_approach("sgd", spec, tiny_tasks(spec))
    assert isinstance(approach.make_optimizer(0, 0.01), torch.optim.Adam)
    spec = tiny_spec(training=replace(TINY_TRAINING, momentum=0.5))
    optimizer = make_approach("sgd", spec, tiny_tasks(spec)).make_optimizer(0, 0.01)
    assert isinstance(optimizer, torch.optim.SGD) and optimizer.param_groups[0]["momentum"] == 0.5


def test_defaults_leave_the_config_unchanged_and_other_values_enter_it() -> None:
    spec = load_benchmark("pmnist")
    config = run_config(spec, resolve(spec, "sgd"))
    assert not {"optimizer", "momentum", "weight_decay"} & set(config["training"])
    adam = load_benchmark("pmnist", ["training.optimizer=adam", "training.lr=0.001"])
    assert run_config(adam, resolve(adam, "sgd"))["training"]["optimizer"] == "adam"
    per_approach = load_benchmark("pmnist", ["approaches.sgd.training={optimizer: adam}"])
    assert run_config(per_approach, resolve(per_approach, "sgd"))["training"]["optimizer"] == "adam"


def test_momentum_with_adam_is_refused_naming_the_key() -> None:
    with pytest.raises(SpecError, match=r"training.momentum` applies to `training.optimizer: sgd` or rmsprop"):
        load_benchmark("pmnist", ["training.optimizer=adam", "training.momentum=0.9"])
    spec = load_benchmark("pmnist", ["approaches.sgd.training={optimizer: adam, momentum: 0.9}"])
    with pytest.raises(SpecError, match=r"approaches.sgd.training.momentum"):
        resolve(spec, "sgd")


def test_an_unknown_optimizer_is_refused_with_the_choices() -> None:
    with pytest.raises(SpecError, match=r"training.optimizer.*sgd.*adam.*rmsprop"):
        load_benchmark("pmnist", ["training.optimizer=lbfgs"])
