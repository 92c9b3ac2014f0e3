"""Building blocks the twenty-seventh session's capture survey found refused: RMSNorm without
a weight or over several dims, slice assignment with a step (the sinusoidal positional
encoding's `pe[:, 0::2] = sin(...)`), writes at constant ids without repeats, integer
writes into slices of bounded integers (Swin's relative index built in forward), take_along_dim
at an input index and masked_scatter (LLaVA's merge of image features), each captured
on the CPU and its reference checked against torch in float64 (constant ids that repeat stay
refused)."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from test_frontend_ops import Fn  # noqa: E402
from test_frontend_torch import assert_matches_float64  # noqa: E402
from tinyopt.frontends.torch_fx import FrontendError, capture  # noqa: E402
from torch import Tensor, nn  # noqa: E402


@pytest.mark.parametrize(
    ("norm", "shape"),
    [
        (nn.RMSNorm(8, elementwise_affine=False), (3, 5, 8)),
        (nn.RMSNorm((5, 8)), (3, 5, 8)),
        (nn.RMSNorm((5, 8), eps=1e-3, elementwise_affine=False), (3, 5, 8)),
    ],
    ids=["no_weight", "two_dims", "two_dims_no_weight_eps"],
)
def test_rms_norm_without_weight_or_over_several_dims(norm: nn.RMSNorm, shape: tuple) -> None:
    torch.manual_seed(0)
    if norm.weight is not None:
        with torch.no_grad():
            norm.weight.copy_(torch.randn_like(norm.weight))
    assert_matches_float64(norm, torch.randn(shape))


def _sinusoidal(m: nn.Module, x: Tensor) -> Tensor:
    n, d = x.shape[-2], x.shape[-1]
    position = torch.arange(n, dtype=x.dtype).unsqueeze(1)
    frequency = torch.exp(torch.arange(0, d, 2, dtype=x.dtype) * (-math.log(10000.0) / d))
    pe = torch.zeros(n, d, dtype=x.dtype)
    pe[:, 0::2] = torch.sin(position * frequency)
    pe[:, 1::2] = torch.cos(position * frequency)
    return x + pe


def _strided_assignments(m: nn.Module, x: Tensor) -> Tensor:
    y = x.clone()
    y[:, 1:8:3] = x[:, :3] * 2  # columns 1, 4 and 7 of 10: the view's span runs past the end
    y[2::4] = -x[:2]  # rows 2 and 6 of 7
    return y


def test_sinusoidal_positional_encoding() -> None:
    torch.manual_seed(0)
    assert_matches_float64(Fn(_sinusoidal), torch.randn(2, 6, 8))
    assert_matches_float64(Fn(_sinusoidal), torch.randn(2, 5, 10))


def test_slice_assignment_with_a_step() -> None:
    torch.manual_seed(0)
    assert_matches_float64(Fn(_strided_assignments), torch.randn(7, 10))


def test_writes_at_constant_ids_without_repeats() -> None:
    torch.manual_seed(0)
    x, src = torch.randn(3, 6), torch.randn(3, 3)
    assert_matches_float64(Fn(lambda m, x, s: x.index_copy(1, torch.tensor([0, 3, 5]), s)), x, src)

    def put(m: nn.Module, x: Tensor, s: Tensor) -> Tensor:
        y = x.clone()
        y[:, torch.tensor([0, -1, 2])] = s  # -1: the last column
        return y

    assert_matches_float64(Fn(put), x, src)


@pytest.mark.parametrize("ids", [[0, 3, 3], [0, 5, -1]], ids=["repeated", "repeated_from_the_end"])
def test_writes_at_constant_ids_that_repeat_are_refused(ids: list[int]) -> None:
    def put(m: nn.Module, x: Tensor, s: Tensor) -> Tensor:
        y = x.clone()
        y[:, torch.tensor(ids)] = s
        return y

    with pytest.raises(FrontendError, match="ids that may repeat"):
        capture(Fn(put), torch.randn(3, 6), torch.randn(3, 3))


class _SwinRelativeBias(nn.Module):
    """Swin's relative position bias with its index built in forward: integer writes into
    slices of an arange-derived tensor (`rel[:, :, 0] += ws - 1`), bounded by those values."""

    def __init__(self, ws: int) -> None:
        super().__init__()
        self.ws = ws
        self.table = nn.Parameter(torch.randn((2 * ws - 1) ** 2, 2))

    def forward(self, attn: Tensor) -> Tensor:
        ws = self.ws
        coords = torch.stack(torch.meshgrid(torch.arange(ws), torch.arange(ws), indexing="ij"))
        flat = torch.flatten(coords, 1)
        rel = (flat[:, :, None] - flat[:, None, :]).permute(1, 2, 0).contiguous()
        rel[:, :, 0] += ws - 1
        rel[:, :, 1] += ws - 1
        rel[:, :, 0] *= 2 * ws - 1
        index = rel.sum(-1)
        bias = self.table[index.view(-1)].view(ws * ws, ws * ws, -1).permute(2, 0, 1)
        return attn + bias[None]


def test_integer_writes_into_slices_keep_their_values_bounds() -> None:
    torch.manual_seed(0)
    assert_matches_float64(_SwinRelativeBias(3), torch.randn(2, 2, 9, 9))


def test_take_along_dim() -> None:
    """At an input index (negative ones counted from the end), broadcast against x in the other
    dims either way, at argsort's indices, of integers, and without a dim (both flattened)."""
    torch.manual_seed(0)
    x = torch.randn(3, 5)
    ids = torch.tensor([[0, -1], [1, -2], [4, 2]])
    assert_matches_float64(Fn(lambda m, x, i: torch.take_along_dim(x, i, dim=1)), x, ids)
    assert_matches_float64(Fn(lambda m, x, i: torch.take_along_dim(x, i[:1], dim=1)), x, ids)
    columns = torch.tensor([[0, 4, 2]]).expand(3, 3)
    assert_matches_float64(Fn(lambda m, x: torch.take_along_dim(x[:1], columns, dim=1)), x)
    assert_matches_float64(Fn(lambda m, x: torch.take_along_dim(x, x.argsort(dim=0)[:2], dim=0)), x)
    zeros = torch.zeros(3, 1, dtype=torch.long)
    assert_matches_float64(
        Fn(lambda m, x: torch.take_along_dim(x.argmax(-1, keepdim=True), zeros, dim=1).float()), x
    )
    assert_matches_float64(Fn(lambda m, x: torch.take_along_dim(x, x.argsort(1)[:, :2] * 3)), x)


def test_sorts_and_arg_extremes_of_a_0d_tensor() -> None:
    """argmax/argmin, topk, sort and argsort of a 0-d tensor (dim 0 or -1): the element itself,
    index 0; they were refused by an error inside their handlers (found by the frontend fuzzer)."""

    def f(m: nn.Module, x: Tensor) -> tuple[Tensor, ...]:
        s = x.sum()
        value, index = s.topk(1)
        ordered, order = s.sort(-1)
        return (
            value + x,
            index.float(),
            ordered * 2,
            order.float(),
            s.argsort().float(),
            s.topk(1, largest=False).values,
            s.argmax(-1).float(),
            s.argmin(0, keepdim=True).float(),
        )

    assert_matches_float64(Fn(f), torch.randn(4))


class _ImageFeaturesIntoTokens(nn.Module):
    """LLaVA's merge: the rows of image features written in turn at the image tokens' rows."""

    def forward(self, ids: Tensor, embeds: Tensor, features: Tensor) -> Tensor:
        mask = (ids == 7).unsqueeze(-1).expand_as(embeds)
        return embeds.masked_scatter(mask, features)


def test_masked_scatter() -> None:
    """By rows where the mask is an expansion (LLaVA), with more source than masked rows, with a
    mask broadcast without an expansion, and element by element."""
    torch.manual_seed(0)
    ids = torch.tensor([[1, 7, 7, 2, 3], [7, 4, 7, 7, 5]])
    merge = _ImageFeaturesIntoTokens()
    assert_matches_float64(merge, ids, torch.randn(2, 5, 4), torch.randn(5, 4))
    assert_matches_float64(merge, ids, torch.randn(2, 5, 4), torch.randn(2, 4, 4))
    rows = Fn(lambda m, x, s: x.masked_scatter(x.sum(-1, keepdim=True) > 0, s))
    assert_matches_float64(rows, torch.randn(3, 4), torch.randn(3, 4))
    elements = Fn(lambda m, x, s: x.masked_scatter(x > 0.3, s))
    assert_matches_float64(elements, torch.randn(3, 4), torch.randn(20))
