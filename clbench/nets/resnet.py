"""The CIFAR variant of ResNet-18 (He et al. 2016) that the replay papers train on seq-CIFAR-10.

A 3x3 stem convolution (stride 1, no max-pool), four stages of two BasicBlocks with nf, 2nf, 4nf and 8nf channels
and strides 1, 2, 2, 2, batch norm after every convolution, global average pooling, then one linear head per task.
The same network as Mammoth's `resnet18` (aimagelab/mammoth@e75a491, backbone/ResNetBlock.py: `ResNet(BasicBlock,
[2, 2, 2, 2], num_classes, nf)`, nf 64) and GEM's reduced ResNet-18 (facebookresearch/GradientEpisodicMemory@34c6b8e,
model/common.py: `ResNet18(nclasses, nf=20)`); written here, not copied. Convolutions have no bias (batch norm
follows each). The weights keep PyTorch's default initialisation, as both references do (GEM's `Xavier` is applied
to its MLP only), not the Xavier initialisation of clbench's MLP and AlexNet-like net.

Batch norm keeps running statistics (buffers, in `state_dict`, so in every snapshot and checkpoint): training mode
normalises by the batch and updates them, evaluation mode (`Approach.evaluate_*`) normalises by them.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from torch.nn import functional

from clbench.nets.common import MultiHeadNet

STAGE_BLOCKS = (2, 2, 2, 2)  # BasicBlocks per stage: ResNet-18
STAGE_STRIDES = (1, 2, 2, 2)
STAGE_WIDTHS = (1, 2, 4, 8)  # channels per stage, in units of nf


def conv3x3(inputs: int, outputs: int, stride: int = 1) -> nn.Conv2d:
    """A 3x3 convolution with padding 1 and no bias (batch norm follows)."""
    return nn.Conv2d(inputs, outputs, kernel_size=3, stride=stride, padding=1, bias=False)


class BasicBlock(nn.Module):
    """relu(bn(conv3x3(relu(bn(conv3x3_stride(x))))) + shortcut(x)); the shortcut is the identity, or a strided 1x1
    convolution with batch norm where the block changes the shape."""

    def __init__(self, inputs: int, outputs: int, stride: int) -> None:
        super().__init__()
        self.conv1 = conv3x3(inputs, outputs, stride)
        self.bn1 = nn.BatchNorm2d(outputs)
        self.conv2 = conv3x3(outputs, outputs)
        self.bn2 = nn.BatchNorm2d(outputs)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or inputs != outputs:
            self.shortcut = nn.Sequential(nn.Conv2d(inputs, outputs, kernel_size=1, stride=stride, bias=False),
                                          nn.BatchNorm2d(outputs))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, C_in, S, S) -> (B, C_out, S / stride, S / stride)
        h = torch.relu(self.bn1(self.conv1(x)))
        h = self.bn2(self.conv2(h))
        return torch.relu(h + self.shortcut(x))


class ResNet18(MultiHeadNet):
    """CIFAR ResNet-18 of width `nf` (features: 8 nf), one head per task."""

    def __init__(self, input_shape: Sequence[int], head_sizes: Sequence[int], nf: int = 64) -> None:
        super().__init__()
        channels = input_shape[0]
        self.conv1 = conv3x3(channels, nf)
        self.bn1 = nn.BatchNorm2d(nf)
        stages, inputs = [], nf
        for blocks, stride, width in zip(STAGE_BLOCKS, STAGE_STRIDES, STAGE_WIDTHS):
            outputs = width * nf
            stage = [BasicBlock(inputs, outputs, stride)]
            stage += [BasicBlock(outputs, outputs, 1) for _ in range(blocks - 1)]
            stages.append(nn.Sequential(*stage))
            inputs = outputs
        self.stages = nn.ModuleList(stages)
        self.feature_size = inputs
        self.heads = self.make_heads(self.feature_size, head_sizes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        h = functional.relu(self.bn1(self.conv1(x)))  # (B, nf, 32, 32)
        for stage in self.stages:
            h = stage(h)  # (B, nf, 32, 32) -> (B, 2nf, 16, 16) -> (B, 4nf, 8, 8) -> (B, 8nf, 4, 4)
        return h.mean(dim=(2, 3))  # (B, 8nf): global average pooling
