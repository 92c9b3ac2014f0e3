"""A GRU of one layer over 2 steps `tests/lit/capture/recurrent.mlir` checks the capture of."""

import torch
from torch import nn


class Recurrent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gru = nn.GRU(4, 3, batch_first=True)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.gru(x)


def model() -> nn.Module:
    return Recurrent().eval()


def example_inputs() -> tuple[torch.Tensor]:
    return (torch.randn(1, 2, 4),)
