"""What a survey of composed models (GPT and ViT blocks, ResNet, UNet, MobileNet, encoder and
decoder layers) and less common module arguments found: batch norm without running statistics
(`track_running_stats=False`, which normalizes by the batch's statistics in eval mode too)
refused as "training mode", and a module returning None (`nn.MultiheadAttention` with
`need_weights=False`) refused with an error naming no op. Each is captured on the CPU and
checked against torch in float64 at the graph level and, after `fuse`, at the loop level."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
from test_frontend_survey28 import assert_matches_float64  # noqa: E402
from test_frontend_torch import Fn  # noqa: E402
from tinyopt.frontends.torch_fx import FrontendError, capture  # noqa: E402
from torch import nn  # noqa: E402


@pytest.mark.parametrize("train", [False, True])
def test_batch_norm_without_running_statistics_uses_the_batch_s(train: bool) -> None:
    """In eval mode and in training mode alike (nothing is updated), over every dim but 1;
    after an in-place ReLU the program is made functional (`_native_batch_norm_legit`'s
    `no_stats` overload)."""
    torch.manual_seed(0)
    conv = nn.Sequential(
        nn.Conv2d(2, 4, 3, padding=1),
        nn.BatchNorm2d(4, track_running_stats=False),
        nn.ReLU(inplace=True),
        nn.BatchNorm2d(4, affine=False, eps=1e-3, track_running_stats=False),
    )
    flat = nn.BatchNorm1d(3, track_running_stats=False)
    with torch.no_grad():
        for bn in (conv[1], flat):
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.5, 0.5)
    for m in (conv, flat):
        m.train(train)
    assert_matches_float64(conv, torch.randn(2, 2, 5, 6))
    assert_matches_float64(flat, torch.randn(6, 3))
    assert_matches_float64(nn.BatchNorm1d(3, track_running_stats=False), torch.randn(2, 3, 5))


def test_batch_norm_that_updates_running_statistics_still_refused() -> None:
    def update(m: nn.Module, x: torch.Tensor) -> torch.Tensor:
        return F.batch_norm(x, m.mean, m.var, training=True)

    module = Fn(update, mean=torch.zeros(3), var=torch.ones(3))
    with pytest.raises(FrontendError, match="batch_norm in training mode"):
        capture(module, torch.randn(4, 3))
    with pytest.raises(FrontendError, match="is in training mode"):
        capture(nn.BatchNorm1d(3), torch.randn(4, 3))


class SelfAttention(nn.Module):
    def __init__(self, output_only: bool) -> None:
        super().__init__()
        self.attention = nn.MultiheadAttention(8, 2, batch_first=True).eval()
        self.output_only = output_only

    def forward(self, x: torch.Tensor) -> object:
        out = self.attention(x, x, x, need_weights=False)
        return out[0] if self.output_only else out


def test_a_none_output_refused_naming_it() -> None:
    with pytest.raises(FrontendError, match=r"returns None, not a tensor, as its output 1"):
        capture(SelfAttention(False), torch.randn(2, 5, 8))
    with pytest.raises(FrontendError, match=r"returns 2, not a tensor, as its output 1"):
        capture(Fn(lambda m, x: (x * 2, x.shape[0])), torch.randn(2, 5))
    assert_matches_float64(SelfAttention(True), torch.randn(2, 5, 8))  # the output alone
