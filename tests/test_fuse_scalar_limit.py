"""`fuse`'s scalar limit (`fuse_kernel.MAX_SCALARS`): a kernel walk past it asks once, then at
each doubling, whether a recomputed value should get a buffer, so a walk with nothing to give a
buffer costs its length, not its square. A Swin shifted-window mask built in `forward` (9 slice
writes into a zero tensor, two `masked_fill`s) walks far past the limit: asking at every step,
`fuse` had not finished in minutes. Each slice write is a concat of slices of the write before,
recomputed at every point of the next: a concat may get a buffer too (the 4×4 mask's kernel
held 41872 ops and took 12 s to fuse, a 6×6 mask's about a minute; now about 2200 ops)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from test_frontend_survey28 import assert_matches_float64  # noqa: E402
from torch import nn  # noqa: E402

from tinyopt.compiler import apply_pipeline  # noqa: E402
from tinyopt.frontends.torch_fx import capture  # noqa: E402
from tinyopt.passes.graph_to_loop.fuse_kernel import KernelBuilder  # noqa: E402


class SwinMaskInForward(nn.Module):
    """Swin's shifted-window attention mask of a `size`² image in 2×2 windows, shift `shift`."""

    def __init__(self, size: int = 4, shift: int = 1) -> None:
        super().__init__()
        self.size, self.shift = size, shift

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        size, shift, side = self.size, self.shift, self.size // 2
        img, count = torch.zeros((1, size, size, 1)), 0
        cuts = (slice(0, -2 * shift), slice(-2 * shift, -shift), slice(-shift, None))
        for h in cuts:
            for w in cuts:
                img[:, h, w, :] = count
                count += 1
        windows = img.view(1, 2, side, 2, side, 1).permute(0, 1, 3, 2, 4, 5).reshape(-1, side**2)
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


def test_chained_slice_writes_give_a_concat_a_buffer() -> None:
    """The 6×6 mask's writes, each a concat recomputed at every point of the next, fuse into
    a few thousand ops (a concat gets a buffer once the kernel passes the limit) and match
    torch."""
    swin = SwinMaskInForward(size=6, shift=1)
    x = torch.randn(4, 9, 9)
    fused = apply_pipeline(capture(swin, x).module, "fuse")
    ops = sum(1 for _ in fused.walk())
    assert ops < 5000, ops
    assert_matches_float64(swin, x)
