"""ResNet-50: the bottleneck network, written the way torchvision writes it.

    tinyopt capture examples/zoo/resnet.py:model

A 7×7 stride-2 convolution, BatchNorm and ReLU, a 3×3 stride-2 max pooling, then four stages of
bottleneck blocks (1×1 down to the stage's width, 3×3 at its stride, 1×1 up to four times the
width, BatchNorm after each convolution, the shortcut a strided 1×1 convolution and BatchNorm
where the shape changes, ReLU after the sum): 3, 4, 6 and 3 blocks of widths 64, 128, 256 and
512. Global average pooling and the classifier end it. BatchNorm runs in eval mode with running
statistics other than the defaults, so the folding of each norm is exercised.

The zoo's sizes count tokens; here a token is a pixel of the last stage's feature map, which is
the image's side over 32: `image_side(tokens)` is 32 · round(√tokens), so 16 tokens → 128×128,
512 → 736×736, 2048 → 1440×1440.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def image_side(tokens: int) -> int:
    """Return the side of the square image whose last feature map has about `tokens` pixels."""
    return 32 * max(1, round(tokens**0.5))


def _norm(channels: int) -> nn.BatchNorm2d:
    """An eval-mode BatchNorm with running statistics and affine terms away from the defaults."""
    norm = nn.BatchNorm2d(channels)
    with torch.no_grad():
        norm.running_mean.uniform_(-0.1, 0.1)  # type: ignore[union-attr]
        norm.running_var.uniform_(0.5, 1.5)  # type: ignore[union-attr]
        norm.weight.uniform_(0.5, 1.0)
        norm.bias.uniform_(-0.1, 0.1)
    return norm


class Bottleneck(nn.Module):
    """1×1, 3×3 (at the block's stride), 1×1 to four times the width, and the shortcut."""

    expansion = 4

    def __init__(self, inplanes: int, width: int, stride: int):
        super().__init__()
        out = width * self.expansion
        self.conv1 = nn.Conv2d(inplanes, width, 1, bias=False)
        self.bn1 = _norm(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = _norm(width)
        self.conv3 = nn.Conv2d(width, out, 1, bias=False)
        self.bn3 = _norm(out)
        self.downsample = None
        if stride != 1 or inplanes != out:
            self.downsample = nn.Sequential(
                nn.Conv2d(inplanes, out, 1, stride=stride, bias=False), _norm(out)
            )

    def forward(self, x: Tensor) -> Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        shortcut = x if self.downsample is None else self.downsample(x)
        return F.relu(y + shortcut)


class ResNet(nn.Module):
    def __init__(
        self,
        width: int = 64,
        blocks: int = 0,
        classes: int = 1000,
        channels: int = 3,
        side: int = 0,
        stages: int = 4,
    ):
        super().__init__()
        del side  # the image's, read by `example`
        self.channels = channels
        counts = ((blocks,) * 4 if blocks else (3, 4, 6, 3))[:stages]
        self.conv1 = nn.Conv2d(channels, width, 7, stride=2, padding=3, bias=False)
        self.bn1 = _norm(width)
        stages = []
        inplanes = width
        for index, count in enumerate(counts):
            planes = width * 2**index
            stride = 1 if index == 0 else 2
            layer = []
            for block in range(count):
                layer.append(Bottleneck(inplanes, planes, stride if block == 0 else 1))
                inplanes = planes * Bottleneck.expansion
            stages.append(nn.Sequential(*layer))
        for index, stage in enumerate(stages):  # torchvision's names: its weights load
            self.add_module(f"layer{index + 1}", stage)
        self.depth = len(stages)
        self.fc = nn.Linear(inplanes, classes)

    def forward(self, images: Tensor) -> Tensor:
        x = F.relu(self.bn1(self.conv1(images)))
        x = F.max_pool2d(x, 3, stride=2, padding=1)
        for index in range(self.depth):
            x = getattr(self, f"layer{index + 1}")(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def example(batch: int = 1, tokens: int = 16, **sizes: int) -> tuple[ResNet, tuple[Tensor]]:
    """Return ResNet-50 (`sizes` overrides width, blocks per stage, the number of stages,
    classes, channels, and the image's side) for the square image of about `tokens`
    last-stage pixels (`image_side`), with seeded random weights in eval mode, and `batch`
    random images."""
    torch.manual_seed(0)
    side = sizes.get("side") or image_side(tokens)
    module = ResNet(**sizes).eval()
    shape = (batch, module.channels, side, side)
    return module, (torch.randn(*shape, generator=torch.Generator().manual_seed(1)),)


def model() -> ResNet:
    """Return the model `tinyopt capture examples/zoo/resnet.py:model` captures (128×128)."""
    return example()[0]


def example_inputs() -> tuple[Tensor]:
    """Return the image `model()` is captured on: one 128×128 image."""
    return example()[1]
