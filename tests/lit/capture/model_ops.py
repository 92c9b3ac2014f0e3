"""A module using the ops `tests/lit/capture/model_ops.mlir` checks the capture of."""

import torch
from torch import nn


class Ops(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv1d(8, 8, 3, padding=1, groups=2)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
        t = x.shape[-1]
        causal = torch.tril(torch.ones(t, t)) == 0
        scores = x.masked_fill(causal, float("-inf")).softmax(-1)
        where = torch.where(mask, x.clamp(-1.0, 1.0), torch.erf(x))
        ramp = x * torch.arange(t) + x.var(-1, keepdim=True) + x.amin(-1, keepdim=True)
        first, second = x.split(4, dim=-1)
        mixed = torch.addmm(x[0, 0], x[0], x[1], beta=0.5) + self.conv(x).cos()
        return scores, where, ramp, first * second, mixed


def model() -> nn.Module:
    return Ops().eval()


def example_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(2, 8, 8), torch.rand(2, 8, 8) > 0.5
