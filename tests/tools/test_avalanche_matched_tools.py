"""The matched runs' patches of Avalanche (issue 59): each changes the one part its docs say, checked by hand."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("avalanche.training")

from avalanche.training.plugins import EWCPlugin, MASPlugin  # noqa: E402
from avalanche.training.utils import ParamData  # noqa: E402
from toolloader import load_tool  # noqa: E402


def importance(value: float) -> dict[str, ParamData]:
    return {"w": ParamData("w", init_tensor=torch.full((2,), value))}


def test_ewc_merged_keeps_the_mean_fisher_and_penalises_only_the_last_anchor() -> None:
    tool = load_tool("avalanche_ewc_merged")
    plugin = EWCPlugin(ewc_lambda=0.5)  # mode "separate", Avalanche's default
    for t, value in enumerate([1.0, 4.0, 7.0]):
        tool.merged_importances(plugin, importance(value), t)
    # by hand: t=1 (4 + 1 x 1) / 2 = 2.5; t=2 (7 + 2 x 2.5) / 3 = 4 = the mean of 1, 4, 7
    assert plugin.importances[1]["w"].data.tolist() == [2.5, 2.5]
    assert plugin.importances[2]["w"].data.tolist() == [4.0, 4.0]

    weight = torch.nn.Parameter(torch.tensor([3.0, 1.0]))
    model = SimpleNamespace(named_parameters=lambda: [("w", weight)])
    plugin.saved_params = {0: {"w": ParamData("w", init_tensor=torch.tensor([9.0, 9.0]))},
                           1: {"w": ParamData("w", init_tensor=torch.tensor([1.0, 1.0]))}}
    strategy = SimpleNamespace(clock=SimpleNamespace(train_exp_counter=2), model=model, device="cpu",
                               loss=torch.tensor(0.0))
    tool.last_penalty(plugin, strategy)
    # experience 2 trains: only experience 1's entry (the merge of 0 and 1: 2.5) and anchor (1, 1) count:
    # 0.5 x 2.5 x ((3 - 1)^2 + (1 - 1)^2) = 5; Avalanche's separate sum would add experience 0's term too
    assert float(strategy.loss.detach()) == pytest.approx(5.0)
    assert plugin.mode == "separate"  # restored


def test_mas_summed_adds_each_experience_importance_to_the_earlier_sum() -> None:
    tool = load_tool("avalanche_mas_body")
    plugin = MASPlugin(lambda_reg=1.0)
    weight = torch.nn.Parameter(torch.tensor([2.0, 5.0]))
    strategy = SimpleNamespace(model=torch.nn.Module())
    strategy.model.w = weight
    for value in (1.0, 3.0, 0.5):
        plugin._get_importance = lambda strategy, value=value: importance(value)  # type: ignore[method-assign]
        tool.summed_importance(plugin, strategy)
    # by hand: 1 + 3 + 0.5 (Avalanche's alpha 0.5 average would give 0.5 x (0.5 x 1 + 0.5 x 3) + 0.5 x 0.5 = 1.25)
    assert plugin.importance["w"].data.tolist() == [4.5, 4.5]
    assert plugin.params["w"].data.tolist() == [2.0, 5.0]  # anchored at the current weights


def test_bic_unfitted_bias_layer_is_the_identity_on_the_experience_classes() -> None:
    tool = load_tool("avalanche_bic_scheduler")
    plugin = SimpleNamespace(bias_layer=None)
    strategy = SimpleNamespace(adapted_dataset=SimpleNamespace(targets=SimpleNamespace(uniques={2, 3})),
                               device="cpu")
    tool.unfitted_bias_layer(plugin, strategy)
    logits = torch.tensor([[1.0, -2.0, 3.0, 4.0]])
    assert plugin.bias_layer.clss.tolist() == [2, 3]
    assert torch.equal(plugin.bias_layer(logits), logits)
    assert not any(parameter.requires_grad for parameter in plugin.bias_layer.parameters())


def test_lfl_unfrozen_keeps_the_previous_network_and_leaves_the_output_layer_trainable() -> None:
    from avalanche.training.plugins import LFLPlugin

    tool = load_tool("avalanche_lfl_unfrozen")
    plugin = LFLPlugin(lambda_e=0.1)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    tool.keep_previous_network_only(plugin, SimpleNamespace(model=model))
    assert all(parameter.requires_grad for parameter in model.parameters())  # Avalanche's would freeze model[2]
    assert not any(parameter.requires_grad for parameter in plugin.prev_model.parameters())
    assert plugin.prev_model is not model and torch.equal(plugin.prev_model[2].weight, model[2].weight)
    LFLPlugin.after_training_exp(plugin, SimpleNamespace(model=model))  # as shipped, for contrast
    assert not model[2].weight.requires_grad and model[0].weight.requires_grad


def test_bic_joined_exemplars_shuffles_the_memory_into_the_experience_s_data_once_per_epoch() -> None:
    from avalanche.benchmarks.utils.classification_dataset import _make_taskaware_tensor_classification_dataset

    tool = load_tool("avalanche_bic_scheduler")

    def dataset(labels: list[int]):  # type: ignore[no-untyped-def]
        targets = torch.tensor(labels)
        return _make_taskaware_tensor_classification_dataset(torch.randn(len(labels), 2), targets,
                                                             targets=labels, task_labels=0)

    new, memory = dataset([2, 2, 3, 3, 3, 2]), dataset([0, 1, 0, 1])
    plugin = SimpleNamespace(bias_layer=None, storage_policy=SimpleNamespace(buffer=memory))
    strategy = SimpleNamespace(adapted_dataset=new, train_mb_size=3, dataloader=None)
    tool.joined_exemplars(plugin, strategy)
    seen = sorted(int(label) for batch in strategy.dataloader for label in batch[1])
    assert seen == [0, 0, 1, 1, 2, 2, 2, 3, 3, 3]  # every sample once: no memory batch beside each batch
    assert max(len(batch[1]) for batch in strategy.dataloader) == 3
    empty = SimpleNamespace(adapted_dataset=new, train_mb_size=3, dataloader="the strategy's")
    tool.joined_exemplars(SimpleNamespace(bias_layer=None, storage_policy=SimpleNamespace(buffer=[])), empty)
    assert empty.dataloader == "the strategy's"  # the first experience: nothing to join
