"""A module using the flips, edge paddings, pixel shuffles, interpolations and cumulative sums
`tests/lit/capture/resampling_ops.mlir` checks the capture of."""

import torch
from torch import nn


class ResamplingOps(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        flipped = torch.flip(x, (-1,))
        reflected = nn.functional.pad(x, (2, 1), mode="reflect")
        replicated = nn.functional.pad(x, (0, 3), mode="replicate")
        shuffled = nn.functional.pixel_shuffle(x.reshape(1, 8, 2, 4), 2)
        nearest = nn.functional.interpolate(x, size=12, mode="nearest")
        linear = nn.functional.interpolate(x, scale_factor=2, mode="linear")
        return flipped, reflected, replicated, shuffled, nearest, linear, torch.cumsum(x, -1)


def model() -> nn.Module:
    return ResamplingOps().eval()


def example_inputs() -> tuple[torch.Tensor]:
    return (torch.randn(2, 4, 8),)
