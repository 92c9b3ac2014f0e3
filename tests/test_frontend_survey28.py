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


# The survey's second part (common layers of popular models): a module writing its input in
# place captured with that input as a second output, `torch.linalg.norm(A, ord)` of a matrix
# taken as a vector norm, and refusals of `torch.empty` and of an integer clamp to [min, max].


def test_a_module_writing_its_input_in_place_is_refused() -> None:
    """Once captured with the written input as one more output (two outputs where torch
    returns one)."""
    with pytest.raises(FrontendError, match="writes its input xs_0 in place"):
        capture(Fn(lambda m, x: x.mul_(2)), torch.randn(3, 7))
    with pytest.raises(FrontendError, match="writes its input xs_0 in place"):
        capture(Fn(lambda m, x, y: (x.add_(y), x * y)[1]), torch.randn(3, 7), torch.randn(3, 7))


def _clip_mask(m: nn.Module, scores: Tensor, padding: Tensor) -> Tensor:
    """CLIP's causal mask, `torch.empty(...).fill_(min).triu_(1)`, and its padding mask."""
    n = scores.shape[-1]
    lowest = torch.finfo(scores.dtype).min
    causal = torch.empty(n, n, dtype=scores.dtype).fill_(lowest).triu_(1)
    kept = 1.0 - padding[:, None, None, :].to(scores.dtype)
    return F.softmax(scores + causal + kept.masked_fill(kept.to(torch.bool), lowest), -1)


def test_empty_tensors_written_before_they_are_read() -> None:
    torch.manual_seed(0)
    padding = torch.tensor([[1, 1, 1, 1, 1, 0, 0], [1] * 7])
    assert_matches_float64(Fn(_clip_mask), torch.randn(2, 2, 7, 7), padding)
    filled = Fn(lambda m, x: torch.empty_like(x).copy_(x * 2) + x.new_empty(3, 7).fill_(1.0))
    assert_matches_float64(filled, torch.randn(3, 7))


def test_clamp_of_integer_inputs_to_a_min_and_a_max() -> None:
    """Bounded by its min and max whatever the ids (`pe[ids.clamp(0, n - 1)]`); a clamp on
    one side only stays refused."""
    torch.manual_seed(0)
    ids = torch.tensor([0, 3, 8, -1, 5, 2, 9])

    def lookups(m: nn.Module, x: Tensor, ids: Tensor) -> Tensor:
        low, high = torch.full_like(ids, -6), torch.full_like(ids, 5)
        return x + m.pe[ids.clamp(0, 5)] + m.pe[ids.clamp(4, 2)] + m.pe[ids.clamp(low, high)]

    assert_matches_float64(Fn(lookups, pe=torch.randn(6, 4)), torch.randn(7, 4), ids)
    one_side = Fn(lambda m, x, ids: x + m.pe[ids.clamp(max=5)], pe=torch.randn(6, 4))
    with pytest.raises(FrontendError, match="aten.clamp computes integers unbounded"):
        capture(one_side, torch.randn(7, 4), ids)


def test_linalg_norm_of_a_matrix() -> None:
    """Once a vector norm of the flattened matrix: the induced 1- and ∞-norms (largest column
    and row sums of |A|, smallest for -1 and -inf), over the dims given in order; Frobenius
    and the default stay the 2-norm; the spectral and nuclear norms are refused."""
    torch.manual_seed(0)

    def norms(m: nn.Module, a: Tensor, b: Tensor) -> tuple[Tensor, ...]:
        return (
            torch.linalg.norm(a, 1),
            torch.linalg.norm(a, float("inf")),
            torch.linalg.norm(a, -1),
            torch.linalg.norm(a, "fro"),
            torch.linalg.norm(a),
            torch.linalg.norm(b, 1, dim=(2, 0), keepdim=True),
            torch.linalg.norm(b, -float("inf"), dim=(-1, -2)),
            torch.linalg.matrix_norm(b, 1),
        )

    assert_matches_float64(Fn(norms), torch.randn(7, 5), torch.randn(2, 7, 5))
    for order in (2, -2, "nuc"):
        with pytest.raises(FrontendError, match=f"linalg_norm of a matrix with ord={order}"):
            capture(Fn(lambda m, a: torch.linalg.norm(a, order)), torch.randn(7, 5))
