"""The CIFAR ResNet-18 (`network.kind: resnet18`): its shape, size, batch norm, and the spec's checks."""

from __future__ import annotations

import pytest
import torch

from clbench.errors import SpecError
from clbench.nets import ResNet18, build_network, parameter_count
from clbench.spec import DataSpec, NetworkSpec, load_benchmark
from clbench.spec.fields import identity_dict


def test_mammoths_resnet18_on_five_two_class_tasks_has_its_parameter_count() -> None:
    """By hand, nf = 64 (3x3 convolutions without bias, batch norm: 2 parameters per channel):
    stem 3*64*9 + 128 = 1,856; stage 1, two blocks of 2 * 64*64*9 + 2*128 = 73,984: 147,968;
    stage 2: (64*128*9 + 128*128*9 + 512 + shortcut 64*128 + 256) + (2 * 128*128*9 + 512) = 230,144 + 295,424;
    stage 3: (128*256*9 + 256*256*9 + 1,024 + 128*256 + 512) + (2 * 256*256*9 + 1,024) = 919,040 + 1,180,672;
    stage 4: (256*512*9 + 512*512*9 + 2,048 + 256*512 + 1,024) + (2 * 512*512*9 + 2,048) = 3,673,088 + 4,720,640;
    body 11,168,832; five heads of 2 classes on 512 features: 5 * (512 * 2 + 2) = 5,130, as Mammoth's one 10-class
    classifier (512 * 10 + 10): 11,173,962 in all."""
    net = ResNet18((3, 32, 32), [2] * 5, nf=64)
    assert parameter_count(net) - parameter_count(net.heads) == 11_168_832
    assert parameter_count(net) == 11_173_962


def test_the_stages_keep_32x32_then_halve_and_the_features_are_8nf() -> None:
    net = ResNet18((3, 32, 32), [3, 4], nf=4)
    sides = []
    for stage in net.stages:
        stage.register_forward_hook(lambda module, args, output: sides.append(tuple(output.shape[1:])))
    features = net.features(torch.randn(2, 3, 32, 32))
    assert sides == [(4, 32, 32), (8, 16, 16), (16, 8, 8), (32, 4, 4)]  # no max-pool, stride 1 in stage 1
    assert features.shape == (2, 32) and net.feature_size == 32
    assert net(torch.randn(2, 3, 32, 32), 1).shape == (2, 4)
    assert ResNet18((3, 32, 32), [2], nf=20).feature_size == 160  # GEM's reduced ResNet-18


def test_build_network_makes_the_spec_width() -> None:
    net = build_network(NetworkSpec(kind="resnet18", nf=8), (3, 32, 32), (2, 2))
    assert isinstance(net, ResNet18) and net.feature_size == 64 and net.conv1.out_channels == 8


def test_batch_norm_statistics_move_in_training_and_are_used_in_evaluation() -> None:
    torch.manual_seed(0)
    net = ResNet18((3, 32, 32), [2], nf=4)
    x = torch.randn(8, 3, 32, 32) * 3 + 1
    before = net.bn1.running_mean.clone()
    net.train()
    net(x, 0)
    assert not torch.equal(net.bn1.running_mean, before) and "bn1.running_var" in net.state_dict()
    net.eval()
    with torch.no_grad():  # eval mode: a sample's output does not depend on the rest of its batch
        torch.testing.assert_close(net(x, 0)[:1], net(x[:1], 0))


def test_nf_and_augment_leave_the_identity_of_existing_configs_unchanged() -> None:
    assert "nf" not in identity_dict(NetworkSpec(kind="alexnet"))
    assert identity_dict(NetworkSpec(kind="resnet18", nf=20))["nf"] == 20
    data = DataSpec(kind="split", datasets=("cifar10",), classes_per_task=(2,))
    assert "augment" not in identity_dict(data)
    assert identity_dict(DataSpec(kind="split", datasets=("cifar10",), classes_per_task=(2,), augment=True))["augment"]


@pytest.mark.parametrize(("option", "message"), [
    ("network.kind=resnet18", "`network.kind` resnet18 needs `data.form` image32 (3x32x32 images), not mnist28"),
    ("data.augment=true", "--set data.augment=true: `data.augment` is the random crop and flip of 3x32x32 images "
                          "(data.form image32); it is not defined for data.form mnist28"),
])
def test_resnet18_and_augment_need_32x32_images(option: str, message: str) -> None:
    with pytest.raises(SpecError) as error:
        load_benchmark("mnist2", [option])
    assert message in str(error.value)
