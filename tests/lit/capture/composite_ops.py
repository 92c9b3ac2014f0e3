"""A module using lerp, logaddexp, floor division, sinh, kthvalue, cumprod, diagonal and
var_mean `tests/lit/capture/composite_ops.mlir` checks the capture of."""

import torch
from torch import nn


class CompositeOps(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        mixed = torch.lerp(x, y, 0.25) + torch.logaddexp(x, y) + torch.sinh(x)
        floored = torch.div(x, y, rounding_mode="floor")
        variance, mean = torch.var_mean(x, -1)
        third = torch.kthvalue(x, 3, -1).values
        return mixed, floored, third, torch.cumprod(x, -1), torch.diagonal(x), variance + mean


def model() -> nn.Module:
    return CompositeOps().eval()


def example_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(4, 4), torch.randn(4, 4)
