"""PlainSGD: torch.optim.SGD's plain step without importing torch._dynamo (slow to import at start-up)."""

from __future__ import annotations

import pytest
import torch
from importchecks import loaded_modules

from clbench.approaches.optim import PlainSGD, clip_grad_norm


def network(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3))


def test_plain_sgd_takes_torch_sgd_s_steps_bit_for_bit_over_100_steps() -> None:
    ours, theirs = network(0), network(0)
    optimisers = PlainSGD(ours.parameters(), lr=0.05), torch.optim.SGD(theirs.parameters(), lr=0.05)
    generator = torch.Generator().manual_seed(1)
    for _ in range(100):
        inputs = torch.randn(8, 6, generator=generator)
        targets = torch.randint(0, 3, (8,), generator=generator)
        for model, optimiser in zip((ours, theirs), optimisers):
            optimiser.zero_grad(set_to_none=True)
            torch.nn.functional.cross_entropy(model(inputs), targets).backward()
            optimiser.step()
    for mine, reference in zip(ours.parameters(), theirs.parameters()):
        assert torch.equal(mine, reference)
    assert not torch.equal(next(ours.parameters()), next(network(0).parameters()))  # the steps moved them


def test_one_step_by_hand_and_parameters_without_a_gradient_stay() -> None:
    moved = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
    kept = torch.nn.Parameter(torch.tensor([3.0]))
    optimiser = PlainSGD([moved, kept], lr=0.5)
    moved.grad = torch.tensor([0.2, -0.4])
    optimiser.step()
    # 1 - 0.5 * 0.2 and -2 - 0.5 * (-0.4), in float32
    assert torch.equal(moved.detach(), torch.tensor([0.9, -1.8])) and kept.tolist() == [3.0]


def test_zero_grad_sets_to_none_or_to_zeros() -> None:
    parameter = torch.nn.Parameter(torch.ones(2))
    optimiser = PlainSGD([parameter], lr=0.1)
    parameter.grad = torch.ones(2)
    optimiser.zero_grad(set_to_none=False)
    assert parameter.grad is not None and parameter.grad.tolist() == [0.0, 0.0]
    optimiser.zero_grad()
    assert parameter.grad is None


def test_a_learning_rate_that_is_not_positive_is_refused() -> None:
    with pytest.raises(ValueError, match="learning rate 0"):
        PlainSGD([torch.nn.Parameter(torch.ones(1))], lr=0)


def test_the_optimiser_and_a_step_import_no_torch_dynamo() -> None:
    """The paper's plain SGD compiles nothing: its optimiser and a training step leave torch._dynamo unimported
    (torch.optim.SGD's constructor imported it: about 2 s of start-up). A whole run now imports it once, in its
    counted evaluation: torch wraps every dispatch mode's `__torch_dispatch__` in `torch._disable_dynamo`
    (torch/utils/_python_dispatch.py, `TorchDispatchMode.__init_subclass__`, torch 2.14.1), whose first call imports
    torch._dynamo, so issue 61's FLOP counter (`FlopCounterMode`, a dispatch mode) imports it at its first counted
    operation: 1.7 s here, once per process."""
    script = (
        "import torch\n"
        "from clbench.approaches.optim import PlainSGD\n"
        "layer = torch.nn.Linear(784, 10)\n"
        "optimiser = PlainSGD(layer.parameters(), lr=0.05)\n"
        "torch.nn.functional.cross_entropy(layer(torch.randn(8, 784)), torch.zeros(8, dtype=torch.long)).backward()\n"
        "optimiser.step()\n")
    assert loaded_modules(script, ["torch._dynamo"]) == []


def _gradients(seed: int, dtypes: tuple[torch.dtype, ...] = (torch.float32,) * 4,
               scale: float = 3.0) -> list[torch.nn.Parameter]:
    """Parameters with seeded gradients of several shapes (one without a gradient)."""
    generator = torch.Generator().manual_seed(seed)
    shapes = [(100, 784), (100,), (10, 100), (10,)]
    parameters = []
    for shape, dtype in zip(shapes, dtypes):
        parameter = torch.nn.Parameter(torch.zeros(shape, dtype=dtype))
        parameter.grad = (torch.randn(shape, generator=generator) * scale).to(dtype)
        parameters.append(parameter)
    parameters.append(torch.nn.Parameter(torch.zeros(3)))  # no gradient: left out, as torch leaves it out
    return parameters


@pytest.mark.parametrize(("max_norm", "scale"), [(10000.0, 3.0), (100.0, 3.0), (5.0, 3.0), (0.5, 3.0), (1e-3, 1e-5)])
def test_clip_grad_norm_is_torchs_clip_grad_norm_bit_for_bit(max_norm: float, scale: float) -> None:
    # the norm is about scale * sqrt(78,510): 840, or 0.0028 (where torch's 1e-6 in max_norm / (norm + 1e-6) shows)
    for seed in range(5):
        ours, theirs = _gradients(seed, scale=scale), _gradients(seed, scale=scale)
        total = torch.sqrt(sum((p.grad.double() ** 2).sum() for p in ours[:4]))
        clip_grad_norm(ours, max_norm)
        torch.nn.utils.clip_grad_norm_(theirs, max_norm)
        for mine, reference in zip(ours[:4], theirs[:4]):
            assert torch.equal(mine.grad, reference.grad)
        clipped = torch.sqrt(sum((p.grad.double() ** 2).sum() for p in ours[:4]))
        # by hand: the norm becomes max_norm where it was above it, else stays
        assert clipped.item() == pytest.approx(min(total.item(), max_norm), rel=1e-3)


def test_clip_grad_norm_of_mixed_dtypes_goes_to_torchs_function() -> None:
    dtypes = (torch.float32, torch.float64, torch.float32, torch.float64)
    ours, theirs = _gradients(3, dtypes), _gradients(3, dtypes)
    clip_grad_norm(ours, 1.0)
    torch.nn.utils.clip_grad_norm_(theirs, 1.0)
    for mine, reference in zip(ours[:4], theirs[:4]):
        assert mine.grad.dtype == reference.grad.dtype and torch.equal(mine.grad, reference.grad)


def test_clip_grad_norm_without_gradients_does_nothing() -> None:
    clip_grad_norm([torch.nn.Parameter(torch.ones(2))], 1.0)  # no gradient: no error, nothing to clip
