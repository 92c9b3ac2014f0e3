"""A module using topk, sort and a transposed convolution
`tests/lit/capture/ranking_ops.mlir` checks the capture of."""

import torch
from torch import nn


class RankingOps(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.ConvTranspose1d(4, 2, 3, stride=2, padding=1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        top = torch.topk(x, 2)
        return top.values, top.indices, torch.sort(x, -1).values, self.up(x)


def model() -> nn.Module:
    return RankingOps().eval()


def example_inputs() -> tuple[torch.Tensor]:
    return (torch.randn(2, 4, 8),)
