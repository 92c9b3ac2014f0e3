"""A module using the activations, log-space ops and norms `tests/lit/capture/activations.mlir`
checks the capture of."""

import torch
from torch import nn


class Activations(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        leaky = nn.functional.leaky_relu(x, 0.2) + nn.functional.hardswish(y)
        logs = torch.log_softmax(x, -1) + torch.logsumexp(y, -1, keepdim=True)
        signs = torch.sign(x) + torch.where(torch.isnan(y), 0.0, y)
        norms = torch.linalg.vector_norm(x, dim=-1) + torch.max(x, y).sum(-1)
        smooth = nn.functional.softplus(x) + nn.functional.elu(y) - nn.functional.mish(x)
        relu6 = nn.functional.relu6(x * 4)
        return leaky, logs, signs, norms, torch.stack([x, y], 1), smooth, relu6


def model() -> nn.Module:
    return Activations().eval()


def example_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(2, 4, 8), torch.randn(2, 4, 8)
