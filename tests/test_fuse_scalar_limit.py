"""`fuse`'s scalar limit (`fuse_kernel.MAX_SCALARS`): a kernel walk past it asks once, then at
each doubling, whether a recomputed value should get a buffer, so a walk with nothing to give a
buffer costs its length, not its square. A Swin shifted-window mask built in `forward` (9 slice
writes into a zero tensor, two `masked_fill`s) walks far past the limit: asking at every step,
`fuse` had not finished in minutes."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from test_frontend_survey28 import assert_matches_float64  # noqa: E402
from torch import nn  # noqa: E402

from tinyopt.passes.graph_to_loop.fuse_kernel import KernelBuilder  # noqa: E402


class SwinMaskInForward(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        img, count = torch.zeros((1, 4, 4, 1)), 0
        for h in (slice(0, -2), slice(-2, -1), slice(-1, None)):
            for w in (slice(0, -2), slice(-2, -1), slice(-1, None)):
                img[:, h, w, :] = count
                count += 1
        windows = img.view(1, 2, 2, 2, 2, 1).permute(0, 1, 3, 2, 4, 5).reshape(-1, 4)
        mask = windows.unsqueeze(1) - windows.unsqueeze(2)
        mask = mask.masked_fill(mask != 0, -100.0).masked_fill(mask == 0, 0.0)
        return x + mask


def test_a_long_walk_asks_for_a_buffer_at_doublings_only(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = 0
    ask = KernelBuilder._too_many_scalars

    def counted(self: KernelBuilder, visited) -> None:  # type: ignore[no-untyped-def]
        nonlocal asked
        asked += 1
        assert asked < 100, "the scalar limit is asked at every step of a long walk"
        ask(self, visited)

    monkeypatch.setattr(KernelBuilder, "_too_many_scalars", counted)
    assert_matches_float64(SwinMaskInForward(), torch.randn(4, 4, 4))
    assert asked > 0  # the walk did pass the limit
