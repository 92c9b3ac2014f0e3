"""`torch._scaled_mm` with per-tensor and with 1×128 / 128×128 block scales, and a cast to
e4m3fn, which `tests/lit/capture/fp8_ops.mlir` checks the capture of."""

import torch
from torch import nn


class Fp8Ops(nn.Module):
    def forward(
        self,
        a: torch.Tensor,
        w: torch.Tensor,
        scale_a: torch.Tensor,
        scale_w: torch.Tensor,
        blocks_a: torch.Tensor,
        blocks_w: torch.Tensor,
    ) -> tuple[torch.Tensor, ...]:
        per_tensor = torch._scaled_mm(a, w.t(), scale_a, scale_w, out_dtype=torch.bfloat16)
        blocked = torch._scaled_mm(a, w.t(), blocks_a, blocks_w, out_dtype=torch.bfloat16)
        return per_tensor, blocked, (per_tensor.float() * 4).to(torch.float8_e4m3fn)


def model() -> nn.Module:
    return Fp8Ops().eval()


def example_inputs() -> tuple[torch.Tensor, ...]:
    a = torch.randn(8, 256).to(torch.float8_e4m3fn)
    w = torch.randn(16, 256).to(torch.float8_e4m3fn)
    scales = torch.tensor(0.5), torch.tensor(2.0)
    return a, w, *scales, torch.rand(8, 2) + 0.5, torch.rand(2, 1) + 0.5
