"""Building blocks the twenty-eighth session's capture survey found refused: indexing by a
constant boolean mask (a buffer, or a tensor made in forward: a gather of its True positions),
`F.fold` (col2im, with stride, padding and dilation), `nn.Embedding(max_norm=...)` (the looked-up
rows renormed), `torch.polar` (still refused: tinyopt has no complex tensors) and
`F.grid_sample` in nearest mode or with reflection padding, each captured on the CPU and checked
against torch in float64 at the graph level and, after `fuse`, at the loop level."""

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


# The survey's third part: writes on a diagonal (`fill_diagonal_`, `torch.diagonal_scatter`,
# `x.diagonal().fill_(v)` / `.copy_(y)` of a tensor the module made; SimCLR's `sim.fill_diagonal_
# (-inf)`) as a select on the mask of `col - row == offset`, and cummax/cummin's indices.

INF, NAN = float("inf"), float("nan")


def _filled(x: Tensor, value: float, wrap: bool = False) -> Tensor:
    x.fill_diagonal_(value, wrap=wrap)
    return x


def _diagonal_filled(x: Tensor, value: float, **diagonal: int) -> Tensor:
    x.diagonal(**diagonal).fill_(value)
    return x


def _diagonal_copied(x: Tensor, src: Tensor, **diagonal: int) -> Tensor:
    x.diagonal(**diagonal).copy_(src)
    return x


@pytest.mark.parametrize(
    ("shape", "value", "wrap"),
    [
        ((7, 13), -INF, False),
        ((13, 7), 2.5, False),
        ((7, 13), NAN, True),
        ((1, 9), -9e15, False),
        ((6, 1), 0.0, False),
        ((5, 5), INF, False),
    ],
    ids=["wide", "tall", "wide_wrap_nan", "one_row", "one_column", "square"],
)
def test_fill_diagonal_of_a_tensor_the_module_made(
    shape: tuple[int, int], value: float, wrap: bool
) -> None:
    """torch.export's `as_strided` + `as_strided_scatter` of the diagonal (stride m + 1), for
    non-square matrices too (wrap on a wide matrix changes nothing); `as_strided` reading a
    diagonal, from its first column or its first row."""
    torch.manual_seed(0)
    rows, cols = shape
    later = [min(rows - 1, cols), cols + 1, cols] if rows > 1 else [min(1, cols - 1), cols + 1, 1]

    def fill(m: nn.Module, x: Tensor) -> tuple[Tensor, ...]:
        size, stride, start = later
        diagonal = x.as_strided([min(rows, cols)], [cols + 1])
        return _filled(x * 2, value, wrap), diagonal, x.as_strided([size], [stride], start)

    assert_matches_float64(Fn(fill), torch.randn(*shape))


def test_simclr_similarity_with_its_diagonal_masked() -> None:
    """`sim = z @ z.T; sim.fill_diagonal_(-inf)` before a softmax over rows, and a similarity
    whose diagonal is masked with -9e15 through a view: a select on an index expression, no
    concat."""
    torch.manual_seed(0)

    def similarity(m: nn.Module, z: Tensor) -> tuple[Tensor, ...]:
        z = F.normalize(z, dim=-1)
        sim = z @ z.T / 0.5
        sim.fill_diagonal_(-INF)
        masked = _diagonal_filled(z @ z.T, -9e15)
        return F.log_softmax(sim, -1), masked.softmax(-1)

    assert_matches_float64(Fn(similarity), torch.randn(6, 4))
    ops = {op.name for op in capture(Fn(similarity), torch.randn(6, 4)).module.walk()}
    assert "graph.select" in ops and "graph.concat" not in ops


def test_a_diagonal_view_filled_or_copied() -> None:
    """`x.diagonal(offset, dim1, dim2)` written through (torch.export's `diagonal_scatter`):
    offsets on either side, dims other than the last two and in either order, a tensor src
    (spread over its diagonal) and a fill."""
    torch.manual_seed(0)

    def writes(m: nn.Module, x: Tensor, y: Tensor, a: Tensor, b: Tensor) -> tuple[Tensor, ...]:
        return (
            _diagonal_copied(x * 2, y, offset=1),
            _diagonal_copied(x * 3, y[:5], offset=-2),
            _diagonal_filled(x + 1, -INF, offset=-6),
            _diagonal_copied(a * 2, b, offset=1, dim1=2, dim2=0),
            _diagonal_filled(a - 1, NAN, offset=-1, dim1=-1, dim2=-2),
        )

    inputs = torch.randn(7, 13), torch.randn(7), torch.randn(3, 4, 5), torch.randn(4, 2)
    assert_matches_float64(Fn(writes), *inputs)


def test_diagonal_scatter() -> None:
    torch.manual_seed(0)

    def scatters(m: nn.Module, *xs: Tensor) -> tuple[Tensor, ...]:
        x, y, a, b, c, d, row, one = xs
        return (
            torch.diagonal_scatter(x, y, -3),
            torch.diagonal_scatter(a, b, -1, 0, 2),
            torch.diagonal_scatter(a, c, 1, 2, 1),
            torch.diagonal_scatter(a, d, 0, 1, 2),
            torch.diagonal_scatter(row, one),
            torch.diagonal_scatter(x > 0, y > 0, -3).float(),
        )

    inputs = (
        torch.randn(7, 13),
        torch.randn(4),
        torch.randn(3, 4, 5),
        torch.randn(4, 2),
        torch.randn(3, 3),
        torch.randn(3, 4),
        torch.randn(1, 6),
        torch.randn(1),
    )
    assert_matches_float64(Fn(scatters), *inputs)


def test_diagonal_writes_in_bf16() -> None:
    """bf16 values moved, not computed: exact (the fill values bf16 holds)."""
    torch.manual_seed(0)

    def writes(m: nn.Module, x: Tensor, y: Tensor, a: Tensor) -> tuple[Tensor, ...]:
        return (
            _filled(x * 1, -INF),
            torch.diagonal_scatter(x, y, -3),
            _diagonal_filled(a * 1, 2.5, offset=2, dim1=0, dim2=2),
        )

    bf16 = torch.bfloat16
    inputs = torch.randn(7, 13, dtype=bf16), torch.randn(4, dtype=bf16), torch.randn(4, 2, 5)
    assert_matches_float64(Fn(writes), *(x.to(bf16) for x in inputs))


def test_as_strided_other_than_a_whole_diagonal_is_refused() -> None:
    """A wrapped diagonal (`fill_diagonal_(wrap=True)` of a tall matrix), a diagonal of three
    dims and other strides are refused, naming the op and the strides; the input written in
    place stays refused as before."""
    cases = [
        (lambda m, x: _filled(x * 1, 2.0, wrap=True), (13, 4), r"size \[7\], stride \[5\]"),
        (lambda m, x: _filled(x * 1, 2.0), (3, 3, 3), r"size \[3\], stride \[13\]"),
        (lambda m, x: x.as_strided((3,), (5,)), (4, 4), r"size \[3\], stride \[5\]"),
        (lambda m, x: x.as_strided((2, 2), (4, 1), 1), (4, 4), r"size \[2, 2\], stride \[4, 1\]"),
    ]
    for fn, shape, strides in cases:
        with pytest.raises(FrontendError, match=rf"aten\.as_strided with {strides}.*whole diag"):
            capture(Fn(fn), torch.randn(*shape))
    with pytest.raises(FrontendError, match="writes its input xs_0 in place"):
        capture(Fn(lambda m, x: _filled(x, 1.0)), torch.randn(3, 4))


def test_cummax_and_cummin_indices() -> None:
    """torch's indices: among ties the last index, NaN once seen (its last index), -0.0 equal
    to 0.0, an all -inf prefix; along any dim, of 1 x N, 3-D and 0-d tensors and bounded
    integers."""
    x = torch.tensor(
        [
            [1.0, 3.0, 3.0, 2.0, 3.0, 5.0, 5.0],
            [2.0, NAN, 1.0, NAN, 9.0, 0.0, 0.0],
            [-0.0, 0.0, -0.0, 0.0, 1.0, 1.0, -1.0],
            [-INF, -INF, 4.0, 4.0, INF, INF, 4.0],
        ]
    )

    def cumulative(m: nn.Module, x: Tensor, row: Tensor, a: Tensor) -> tuple[Tensor, ...]:
        return (
            *torch.cummax(x, 1),
            *torch.cummin(x, -1),
            torch.cummax(x, 0).indices,
            torch.cummin(-x, 0).indices.float(),
            *torch.cummax(row, 1),
            torch.cummin(a, 1).indices,
            torch.cummax(a[0, 0, 0], 0).indices,
        )

    torch.manual_seed(0)
    row, a = torch.randn(1, 9).round(), torch.randn(2, 5, 3).round()
    assert_matches_float64(Fn(cumulative), x, row, a)
    assert_matches_float64(Fn(cumulative), *(v.to(torch.bfloat16) for v in (x, row, a)))
    ids = torch.tensor([[1, 5, 5, 2, 7, 7, 12, 10]])
    assert_matches_float64(Fn(lambda m, ids: torch.cummin(ids.clamp(0, 9), -1)), ids)
    with pytest.raises(FrontendError, match="aten.cummax indices of integers that may pass"):
        capture(Fn(lambda m, ids: torch.cummax(ids, -1).indices), ids)


# The twenty-ninth session's survey (small modules of other domains: GNN message passing,
# DLRM, wav2vec2, Conformer, YOLO, UNet, NeRF, VAE, PixelCNN, losses, resampling, sorting):
# an integer input compared with positions (a length mask), `index_add(alpha=...)` and
# `torch.quantile` at quantiles known at capture, each refused before.


def test_a_length_mask_from_integer_inputs() -> None:
    """`arange(n) < lengths[:, None]` with int64 lengths of any magnitude: f32 rounding keeps
    an integer's order against integers below 2^24. Two integer inputs compared stay refused."""
    torch.manual_seed(0)
    mask = Fn(lambda m, x, lengths: x * (torch.arange(x.shape[1])[None] < lengths[:, None]))
    assert_matches_float64(mask, torch.randn(4, 7), torch.tensor([3, 7, 0, 2**40]))
    ids = torch.tensor([3, 2**40, -(2**40), 2**24 + 1, 2**24 - 1, -(2**24) - 1, 16777214])
    for op in (torch.lt, torch.le, torch.gt, torch.ge, torch.eq, torch.ne):
        near = Fn(lambda m, x, ids, op=op: op(torch.arange(7)[:, None] + 16777208, ids).float() * x)
        assert_matches_float64(near, torch.randn(7, 7), ids)
    with pytest.raises(FrontendError, match=r"comparison of integers beyond 2\^24"):
        capture(Fn(lambda m, a, b: (a < b).float()), torch.tensor([1, 2]), torch.tensor([2, 1]))


def test_index_add_with_alpha() -> None:
    """GNN-style message passing: src rows scaled by alpha, summed into repeated ids."""
    torch.manual_seed(0)
    add = Fn(lambda m, x, s: x.index_add(0, m.ids, s, alpha=-2.0), ids=torch.tensor([4, 0, 4]))
    assert_matches_float64(add, torch.randn(5, 7), torch.randn(3, 7))
    along = Fn(lambda m, x, s: x.index_add(1, m.ids, s, alpha=0.5), ids=torch.tensor([2, 2]))
    assert_matches_float64(along, torch.randn(3, 5), torch.randn(3, 2))


@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "midpoint", "nearest"])
def test_quantile(interpolation: str) -> None:
    """torch.quantile at a number and at a constant tensor of quantiles, along a dim, with
    keepdim and of all elements; rows holding NaN give NaN, infinities interpolate as torch's
    lerp (inf at the top quantile of a row with inf gives NaN)."""
    torch.manual_seed(0)
    x = torch.randn(5, 7)
    x[1, 3], x[2, 0], x[3, 5], x[4, 1] = float("nan"), float("inf"), -float("inf"), float("inf")
    x[4, 2] = -float("inf")
    levels = [0.0, 0.2, 0.25, 0.3, 0.5, 0.6, 0.8, 1.0]

    def quantiles(m: nn.Module, x: Tensor) -> tuple[Tensor, ...]:
        q = torch.tensor(levels, dtype=x.dtype)
        return (
            torch.quantile(x, q, dim=1, interpolation=interpolation),
            torch.quantile(x, 0.4, dim=0, keepdim=True, interpolation=interpolation),
            torch.quantile(x[:, 4:], q[1:3], keepdim=True, interpolation=interpolation),
            torch.quantile(x[0], 0.37, interpolation=interpolation),
        )

    assert_matches_float64(Fn(quantiles), x)


def test_quantile_at_quantiles_from_the_inputs_is_refused() -> None:
    with pytest.raises(FrontendError, match="aten.quantile at quantiles computed from the inputs"):
        capture(Fn(lambda m, x, q: torch.quantile(x, q, dim=1)), torch.randn(3, 5), torch.rand(2))


# grid values whose source coordinates are exact in f32 and f64: pixel centres, halves
# between them (ties, which nearest rounds to the even neighbour) and points past the input
_GRID_EXACT = (-3.0, -2.0, -1.5, -1.25, -1.0, -0.75, -0.5, -0.25, 0.0, 0.25, 0.5, 0.75, 1.0)
_GRID_EXACT += (1.25, 1.5, 2.0, 3.0)


@pytest.mark.parametrize("align_corners", [True, False])
def test_grid_sample_nearest_and_reflection(align_corners: bool) -> None:
    torch.manual_seed(0)
    exact = torch.tensor(_GRID_EXACT)[torch.randint(len(_GRID_EXACT), (2, 4, 3, 2))]
    grid = torch.cat([exact, torch.rand(2, 4, 3, 2) * 2.4 - 1.2], 2)  # [2, 4, 6, 2]
    module = Fn(
        lambda m, x, g: tuple(
            F.grid_sample(x, g, mode=mode, padding_mode=padding, align_corners=align_corners)
            for mode in ("nearest", "bilinear")
            for padding in ("zeros", "border", "reflection")
        )
    )
    assert_matches_float64(module, torch.randn(2, 3, 5, 7), grid)
