"""A module using atan2, fmod, remainder, copysign, rounding, other log bases, threshold,
hardshrink, outer, logit, vector norms, a 3-D convolution, isinf/isfinite, mv and weight norm
`tests/lit/capture/math_ops.mlir` checks the capture of."""

import torch
from torch import nn


class MathOps(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv3d(2, 2, (1, 2, 2))
        self.normed = nn.utils.parametrizations.weight_norm(nn.Linear(8, 3, bias=False))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        angles = torch.atan2(x, y) + torch.fmod(x, 0.5) + x % 0.5
        rounded = torch.round(x) + torch.floor(y) + torch.log2(x.abs() + 1) + torch.exp2(y)
        shrunk = nn.functional.threshold(x, 0.1, 2.0) + nn.functional.hardshrink(y)
        norms = torch.linalg.vector_norm(x, 1, -1) + torch.linalg.vector_norm(y, float("inf"), -1)
        volume = self.conv(x.reshape(1, 2, 2, 2, 2))
        return (
            angles,
            rounded,
            shrunk,
            torch.outer(x[0], y[1]),
            torch.logit(x.sigmoid()),
            norms,
            volume,
            torch.isinf(x).float() + torch.isfinite(y).float(),
            torch.mv(x, y[0]),
            self.normed(x),
            torch.copysign(x, y),
        )


def model() -> nn.Module:
    return MathOps().eval()


def example_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(2, 8), torch.randn(2, 8)
