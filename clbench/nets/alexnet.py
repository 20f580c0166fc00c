"""The paper's AlexNet-like conv net for 3x32x32 inputs (mixture-8, incremental CIFAR)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from torch.nn import functional

from clbench.nets.common import MultiHeadNet


def conv_output_side(side: int, kernels: Sequence[int]) -> int:
    """Spatial side after each `conv(k, no padding) -> maxpool(2)` stage."""
    for kernel in kernels:
        side = (side - kernel + 1) // 2
    return side


class AlexNet(MultiHeadNet):
    """conv 64k4 -> 128k3 -> 256k2 (ReLU, dropout, maxpool 2 each), fc 2048 x2, one head per task."""

    def __init__(self, input_shape: Sequence[int], head_sizes: Sequence[int],
                 conv_channels: Sequence[int] = (64, 128, 256), conv_kernels: Sequence[int] = (4, 3, 2),
                 conv_dropout: Sequence[float] = (0.2, 0.2, 0.5), fc_units: Sequence[int] = (2048, 2048),
                 fc_dropout: float = 0.5) -> None:
        super().__init__()
        channels, side, _ = input_shape
        in_channels = [channels, *conv_channels[:-1]]
        self.convs = nn.ModuleList(
            nn.Conv2d(a, b, kernel_size=k) for a, b, k in zip(in_channels, conv_channels, conv_kernels)
        )
        self.conv_dropouts = nn.ModuleList(nn.Dropout(p) for p in conv_dropout)
        self.spatial_side = conv_output_side(side, conv_kernels)
        flat = conv_channels[-1] * self.spatial_side**2
        fc_sizes = [flat, *fc_units]
        self.fcs = nn.ModuleList(nn.Linear(a, b) for a, b in zip(fc_sizes[:-1], fc_sizes[1:]))
        self.fc_dropout = nn.Dropout(fc_dropout)
        self.feature_size = fc_sizes[-1]
        self.heads = self.make_heads(self.feature_size, head_sizes)
        self.reset_parameters()

    def features(self, x: torch.Tensor) -> torch.Tensor:
        h = x  # (B, 3, 32, 32)
        for conv, dropout in zip(self.convs, self.conv_dropouts):
            h = functional.max_pool2d(dropout(torch.relu(conv(h))), 2)  # (B, C_l, S_l, S_l)
        h = h.flatten(1)  # (B, 256 * 2 * 2)
        for fc in self.fcs:
            h = self.fc_dropout(torch.relu(fc(h)))  # (B, 2048)
        return h
