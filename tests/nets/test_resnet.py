"""The CIFAR ResNet-18 (`network.kind: resnet18`): its shape, size, batch norm, and the spec's checks."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional

from clbench.errors import SpecError
from clbench.nets import ResNet18, build_network, parameter_count
from clbench.nets.resnet import BasicBlock
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


def test_an_identity_block_adds_its_input_to_its_branch() -> None:
    """Convolutions 0, batch norm at its initial statistics (eval mode: (z - 0) / sqrt(1 + eps) * 1 + bias), bn2's
    bias -1: the branch is -1 everywhere, so the block gives relu(x - 1) (a plain net would give relu(-1) = 0)."""
    block = BasicBlock(1, 1, 1).eval()
    with torch.no_grad():
        block.conv1.weight.zero_()
        block.conv2.weight.zero_()
        block.bn2.bias.fill_(-1.0)
        out = block(torch.tensor([[[[0.5, 1.5], [3.0, -2.0]]]]))
    assert isinstance(block.shortcut, torch.nn.Identity)
    assert out.tolist() == [[[[0.0, 0.5], [2.0, 0.0]]]]


def test_a_projection_block_adds_its_strided_1x1_convolution_to_its_branch() -> None:
    """1 -> 2 channels, stride 2: the shortcut takes every second row and column (x[0, 0, ::2, ::2] = [[1, 3],
    [-4, 2]]) through 1x1 weights 2 and -1 and batch norm (divided by sqrt(1 + eps)); the branch (convolutions 0)
    is bn2's bias 0.5. Channel 0: relu(2 x + 0.5), channel 1: relu(-x + 0.5) (a plain net: 0.5 everywhere)."""
    block = BasicBlock(1, 2, 2).eval()
    with torch.no_grad():
        block.conv1.weight.zero_()
        block.conv2.weight.zero_()
        block.bn2.bias.fill_(0.5)
        block.shortcut[0].weight.copy_(torch.tensor([2.0, -1.0]).view(2, 1, 1, 1))
        x = torch.tensor([[1.0, 9.0, 3.0, 9.0], [9.0, 9.0, 9.0, 9.0], [-4.0, 9.0, 2.0, 9.0], [9.0] * 4])
        out = block(x.view(1, 1, 4, 4))
    scale = 1 / (1 + block.shortcut[1].eps) ** 0.5
    expected = [[[max(0.0, 2 * v * scale + 0.5) for v in row] for row in ([1, 3], [-4, 2])],
                [[max(0.0, -v * scale + 0.5) for v in row] for row in ([1, 3], [-4, 2])]]
    torch.testing.assert_close(out, torch.tensor([expected]))


@pytest.mark.parametrize(("inputs", "outputs", "stride"), [(3, 3, 1), (3, 5, 2)])
def test_a_block_is_its_formula_in_training_and_in_evaluation(inputs: int, outputs: int, stride: int) -> None:
    """relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)), written with torch's functional operations, random
    weights and running statistics; the shortcut is the identity or bn(1x1 strided convolution)."""
    torch.manual_seed(0)
    block = BasicBlock(inputs, outputs, stride)
    with torch.no_grad():
        for module in block.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                for tensor in (module.weight, module.bias, module.running_mean):
                    tensor.normal_()
                module.running_var.uniform_(0.5, 2.0)
    x = torch.randn(2, inputs, 6, 6)

    def bn(z: torch.Tensor, module: torch.nn.BatchNorm2d, training: bool) -> torch.Tensor:
        return functional.batch_norm(z, module.running_mean.clone(), module.running_var.clone(), module.weight,
                                     module.bias, training, 0.0, module.eps)

    for training in (False, True):
        block.train(training)
        h = torch.relu(bn(functional.conv2d(x, block.conv1.weight, stride=stride, padding=1), block.bn1, training))
        h = bn(functional.conv2d(h, block.conv2.weight, padding=1), block.bn2, training)
        if stride == 1 and inputs == outputs:
            shortcut = x
        else:
            projection = block.shortcut[0].weight
            shortcut = bn(functional.conv2d(x, projection, stride=stride), block.shortcut[1], training)
        with torch.no_grad():
            torch.testing.assert_close(block(x), torch.relu(h + shortcut))


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
