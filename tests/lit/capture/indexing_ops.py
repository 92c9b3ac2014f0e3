"""A module using writes into a tensor it made, gather and scatter along a dim, one_hot,
unfold, diff and nan_to_num `tests/lit/capture/indexing_ops.mlir` checks the capture of."""

import torch
from torch import nn


class IndexingOps(nn.Module):
    def forward(self, x: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
        written = x.clone()
        written[:, 0] = 0.5
        written[x > 1] = -1.0
        picked = torch.gather(x, 1, ids)
        added = x.new_zeros(2, 8).scatter_add(1, ids, picked)
        hot = nn.functional.one_hot(ids, 8).float()
        windows = nn.functional.unfold(x.reshape(1, 2, 2, 4), 2)
        return written, picked, added, hot, windows, torch.diff(x), torch.nan_to_num(x / x)


def model() -> nn.Module:
    return IndexingOps().eval()


def example_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(2, 8), torch.tensor([[3, 0, 7], [1, 1, 2]])
