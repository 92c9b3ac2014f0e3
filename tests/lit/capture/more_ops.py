"""A module using max over a dim, einsum, norms without affine terms and gated or shrinking
activations `tests/lit/capture/more_ops.mlir` checks the capture of."""

import torch
from torch import nn


class MoreOps(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.prelu = nn.PReLU(4)
        self.instance = nn.InstanceNorm1d(4)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        top = torch.max(x, -1)
        scores = torch.einsum("bij,bkj->bik", x, y)
        norms = nn.functional.layer_norm(x, (4, 8)) + self.instance(y)
        gated = nn.functional.glu(x, -1)
        shrunk = self.prelu(x) + nn.functional.softshrink(y) + nn.functional.logsigmoid(x)
        similar = nn.functional.cosine_similarity(x, y, dim=-1)
        return top.values, top.indices, scores, norms, gated, shrunk, similar


def model() -> nn.Module:
    return MoreOps().eval()


def example_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(2, 4, 8), torch.randn(2, 4, 8)
