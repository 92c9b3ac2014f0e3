"""Building blocks the twenty-eighth session's capture survey found refused: indexing by a
constant boolean mask (a buffer, or a tensor made in forward: a gather of its True positions),
`F.fold` (col2im, with stride, padding and dilation), `nn.Embedding(max_norm=...)` (the looked-up
rows renormed) and `torch.polar` (still refused: tinyopt has no complex tensors), each captured
on the CPU and checked against torch in float64 at the graph level and, after `fuse`, at the
loop level."""

from __future__ import annotations

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
from test_frontend_torch import Fn  # noqa: E402
from test_frontend_torch import assert_matches_float64 as matches_float64  # noqa: E402
from tinyopt.backends.loop_reference import run_loop_module  # noqa: E402
from tinyopt.compiler import apply_pipeline  # noqa: E402
from tinyopt.frontends.torch_fx import FrontendError, capture  # noqa: E402
from torch import Tensor, nn  # noqa: E402


def assert_matches_float64(module: nn.Module, *inputs: Tensor) -> None:
    """test_frontend_torch's check (the capture round-trips, its float64 reference equals torch
    in float64), and the loop level after `fuse` within 1e-5 of torch in float64."""
    cap = matches_float64(module, *inputs)
    with torch.no_grad():
        doubled = (x.double() if x.is_floating_point() else x for x in inputs)
        want = copy.deepcopy(module).double()(*doubled)
    want = want if isinstance(want, tuple) else (want,)
    fused = apply_pipeline(cap.module.clone(), "fuse")
    got = run_loop_module(fused, "forward", *cap.arguments(*inputs))
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-5)


def _masked(m: nn.Module, x: Tensor) -> tuple[Tensor, ...]:
    """A 1-D mask on columns and (sliced) on rows, a 2-D mask on both dims, a mask with one
    True, a mask made in forward, a mask computed from a buffer, and the result reshaped by its
    count of True."""
    y = x[:, m.columns]
    return (
        y * 2,
        x[m.columns[1:]] + 1,
        x[m.grid],
        x[:, m.one],
        x[:, torch.tensor([False, True, True, False, False, True])],
        x[:, ~m.columns],
        y.reshape(-1),
    )


def test_indexing_with_a_constant_boolean_mask() -> None:
    torch.manual_seed(0)
    module = Fn(
        _masked,
        columns=torch.tensor([True, False, True, True, False, True]),
        grid=torch.rand(5, 6) > 0.5,
        one=torch.tensor([False, False, False, False, True, False]),
    )
    assert_matches_float64(module, torch.randn(5, 6))


def test_a_boolean_mask_index_refused_when_all_false_or_computed_from_the_inputs() -> None:
    none = Fn(lambda m, x: x[:, m.mask] * 2, mask=torch.zeros(4, dtype=torch.bool))
    with pytest.raises(FrontendError, match="constant boolean mask that is all False"):
        capture(none, torch.randn(3, 4))
    with pytest.raises(FrontendError, match="boolean mask index computed from the inputs"):
        capture(Fn(lambda m, x: x[x > 0]), torch.randn(3, 4))


@pytest.mark.parametrize(
    ("channels", "size", "kernel", "stride", "padding", "dilation"),
    [
        (2, (5, 6), (2, 3), 2, 1, 2),
        (3, (7, 5), (3, 3), 1, 0, 1),
        (1, (4, 6), (2, 2), 2, 0, 1),
        (2, (3, 5), (1, 2), (1, 2), (0, 1), (1, 2)),
        (1, (2, 2), (3, 3), 1, 1, 1),
    ],
    ids=["stride2_pad1_dil2", "overlapping", "tiling", "per_dim", "kernel_past_the_input"],
)
def test_fold(
    channels: int,
    size: tuple[int, int],
    kernel: tuple[int, int],
    stride: int | tuple[int, int],
    padding: int | tuple[int, int],
    dilation: int | tuple[int, int],
) -> None:
    """F.fold batched and unbatched, checked as well as the inverse of unfold up to the count
    of windows over each element (`fold(unfold(x)) = x · fold(unfold(1))`)."""
    torch.manual_seed(0)
    options = dict(stride=stride, padding=padding, dilation=dilation)
    blocks = F.unfold(torch.randn(2, channels, *size), kernel, **options)
    fold = Fn(lambda m, x: F.fold(x, size, kernel, **options))
    assert_matches_float64(fold, blocks)
    assert_matches_float64(fold, blocks[1])
    roundtrip = Fn(lambda m, x: F.fold(F.unfold(x, kernel, **options), size, kernel, **options))
    assert_matches_float64(roundtrip, torch.randn(2, channels, *size))


class _TwoLookups(nn.Module):
    """One table with max_norm looked up twice: the second lookup's renorm sees the first's."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, 4, max_norm=2.0)

    def forward(self, a: Tensor, b: Tensor) -> Tensor:
        return self.embed(a) + self.embed(b)


@pytest.mark.parametrize(
    "options",
    [
        dict(max_norm=2.0),
        dict(max_norm=1.5, norm_type=1.0),
        dict(max_norm=1.0, norm_type=3.0),
        dict(max_norm=2.0, padding_idx=0),
    ],
    ids=["two_norm", "one_norm", "three_norm", "padding_idx"],
)
def test_embedding_with_max_norm(options: dict) -> None:
    """Rows over max_norm (some, not all: ids repeat) scaled to it as torch's lookup returns
    them; the table is left as it is (torch renorms its rows in place)."""
    torch.manual_seed(0)
    embed = nn.Embedding(10, 4, **options).eval()
    table = embed.weight.detach().clone()
    ids = torch.tensor([[1, 2, 3, 0], [3, 4, 9, 9]])
    assert_matches_float64(embed, ids)
    assert torch.equal(embed.weight, table)


def test_embedding_with_max_norm_looked_up_twice() -> None:
    torch.manual_seed(0)
    assert_matches_float64(
        _TwoLookups(), torch.tensor([[1, 2, 3], [3, 4, 9]]), torch.tensor([[3, 5, 0], [9, 8, 9]])
    )


def test_embedding_with_max_norm_refused_where_the_table_is_read_after() -> None:
    class ReadAfter(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(10, 4, max_norm=1.0)

        def forward(self, ids: Tensor) -> Tensor:
            return self.embed(ids) * self.embed.weight[0]

    with pytest.raises(FrontendError, match="max_norm.*in place"):
        capture(ReadAfter(), torch.tensor([1, 2]))


def test_polar_is_refused_as_complex() -> None:
    polar = Fn(lambda m, r, angle: torch.polar(r, angle))
    with pytest.raises(FrontendError, match=r"torch\.polar.*complex outputs are not supported"):
        capture(polar, torch.rand(3), torch.randn(3))
