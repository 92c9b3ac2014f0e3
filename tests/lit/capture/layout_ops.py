"""A module using the padding, copying, norm, any/all and pooling ops
`tests/lit/capture/layout_ops.mlir` checks the capture of."""

import torch
from torch import nn


class LayoutOps(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.BatchNorm1d(4).eval()
        self.groups = nn.GroupNorm(2, 4)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        padded = nn.functional.pad(x, (1, 2), value=-1.0)
        rolled = torch.roll(x, 3, -1)
        copies = x.repeat(1, 2, 1) + x.repeat_interleave(2, dim=1)
        pooled = nn.functional.max_pool1d(x, 2) + nn.functional.avg_pool1d(x, 2)
        windows = x.unfold(-1, 3, 2)  # 3 windows of 3, 2 apart
        out = (padded, rolled, copies, self.norm(x), (x > 0).any(-1), pooled, self.groups(x))
        ceil = nn.functional.avg_pool1d(x, 3, 2, ceil_mode=True)  # 4 windows, the last of 2
        uneven = nn.functional.adaptive_avg_pool1d(x, 3)  # windows [0, 3), [2, 6), [5, 8)
        narrowed, moved = x.narrow(-1, 2, 3), x.movedim(0, -1)
        spaced = x + torch.linspace(0, 1, 8)
        return (*out, windows, ceil, uneven, narrowed, moved, x + torch.eye(4, 8), spaced)


def model() -> nn.Module:
    return LayoutOps().eval()


def example_inputs() -> tuple[torch.Tensor]:
    return (torch.randn(2, 4, 8),)
