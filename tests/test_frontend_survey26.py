"""Building blocks of models nobody had captured (the twenty-sixth session's survey): each is
captured on the CPU and its reference run checked against torch in float64."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
from test_frontend_ops import Fn  # noqa: E402
from test_frontend_torch import assert_matches_float64 as matches_float64  # noqa: E402
from tinyopt.frontends.torch_fx import FrontendError, capture  # noqa: E402
from torch import Tensor, nn  # noqa: E402


def assert_matches_float64(module: nn.Module, *inputs: Tensor) -> None:
    """test_frontend_torch's check (the capture round-trips, its float64 reference equals torch
    in float64), torch's own warnings ignored: scatter's deprecated `reduce`, an odd 'same'
    padding's copy."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        matches_float64(module, *inputs)


def _scatter_with_reduce(m: nn.Module, x: Tensor, ids: Tensor) -> tuple[Tensor, ...]:
    """`scatter` given `reduce`: a value added or multiplied in at ids that repeat, and a src
    tensor added or multiplied in at topk's ids (x's own element kept in every case)."""
    top = x.topk(2, 1).indices
    src = torch.full((3, 2), 3.0, dtype=x.dtype)
    return (
        x.scatter(1, ids, 2.0, reduce="add"),
        x.scatter(1, ids, 2.0, reduce="multiply"),
        x.scatter(1, top, src, reduce="add"),
        x.scatter(1, top, src, reduce="multiply"),
    )


def _integer_floor_division(m: nn.Module, x: Tensor) -> tuple[Tensor, ...]:
    """Floor and truncating division of bounded integers: argmax's, an arange's."""
    i = x.argmax(-1)
    return (
        (i // 2).float(),
        torch.div(i - 3, 2, rounding_mode="floor").float(),
        torch.div(i - 3, -2, rounding_mode="trunc").float(),
        x + torch.arange(6) // 4,
    )


def _split_at_indices(m: nn.Module, x: Tensor) -> tuple[Tensor, ...]:
    """tensor_split by sections and at indices (out of order, negative, past the end: Python
    slices, so parts overlap), hsplit, vsplit and dsplit; the empty parts left out."""
    parts = (
        *torch.tensor_split(x, 3, dim=1),
        *torch.tensor_split(x, [3, 1, -2, 20], dim=1),
        *torch.hsplit(x, [2, 7]),
        *torch.vsplit(x, 2),
        *torch.dsplit(x, [1]),
    )
    return tuple(p for p in parts if p.numel())


def _mask_arithmetic(m: nn.Module, x: Tensor, keep: Tensor) -> tuple[Tensor, ...]:
    """Masks added (or), multiplied (and), their elementwise and whole max and min, and
    amax over a dim, as torch computes them on bool."""
    positive, large = x > 0, x.abs() > 1
    return (
        torch.where(positive + large, x, 0.0),
        torch.where(keep * positive, x, 0.0),
        torch.maximum(positive, large).float() + torch.min(keep, large).float(),
        positive.max().float() + large.min().float(),
        keep.amax(-1).float(),
    )


CASES: dict[str, tuple[nn.Module, tuple[Tensor, ...]]] = {
    "mask_arithmetic": (Fn(_mask_arithmetic), (torch.randn(3, 5), torch.rand(3, 5) > 0.3)),
    "scatter_with_reduce": (
        Fn(_scatter_with_reduce),
        (torch.randn(3, 5), torch.tensor([[0, 1], [2, 2], [4, 0]])),
    ),
    "same_padding_of_an_odd_total": (
        Fn(
            lambda m, x: (m.even(x), m.dilated(x), m.reflected(x), m.wide(x[..., None])),
            even=nn.Conv1d(3, 4, 4, padding="same"),
            dilated=nn.Conv1d(3, 4, 2, padding="same", dilation=3),
            reflected=nn.Conv1d(3, 4, 2, padding="same", padding_mode="reflect"),
            wide=nn.Conv2d(3, 2, (2, 1), padding="same"),
        ),
        (torch.randn(2, 3, 9),),
    ),
    "tensor_split_hsplit_vsplit_dsplit": (Fn(_split_at_indices), (torch.randn(4, 10, 3),)),
    "diff_with_prepend_and_append": (
        Fn(
            lambda m, x: (
                torch.diff(x, n=2, dim=-1, prepend=x[..., :1], append=x[..., -2:]),
                torch.diff(x, dim=0, prepend=torch.zeros(1, 6, dtype=x.dtype)),
            )
        ),
        (torch.randn(2, 6),),
    ),
    "average_pooling_divisor_override": (
        Fn(
            lambda m, x: (
                F.avg_pool2d(x, 2, divisor_override=3),
                F.avg_pool2d(x, 3, 2, padding=1, ceil_mode=True, divisor_override=5),
            )
        ),
        (torch.randn(1, 2, 7, 6),),
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_survey_case_matches_torch_in_float64(name: str) -> None:
    module, inputs = CASES[name]
    assert_matches_float64(module, *inputs)


def test_floor_division_of_bounded_integers_is_exact_and_of_an_input_refused() -> None:
    assert_matches_float64(Fn(_integer_floor_division), torch.randn(2, 6))
    with pytest.raises(FrontendError, match="floor_divide computes integers unbounded"):
        capture(Fn(lambda m, ids: (ids // 2).float()), torch.tensor([5, 7]))


def test_unbatched_convolution_is_refused_by_name() -> None:
    """An input without its batch dim is named as such (it read "convolution over 0 spatial
    dims")."""
    with pytest.raises(FrontendError, match="unbatched input"):
        capture(nn.Conv1d(3, 2, 3), torch.randn(3, 9))


@pytest.mark.parametrize(
    "fn",
    [
        lambda m, x: x.argmax(-1).clamp(max=torch.tensor(2)).float(),
        lambda m, x: torch.where(x > 0, x.argmax(-1, keepdim=True), torch.tensor(3)).float(),
    ],
    ids=["clamp_by_a_constant", "where_of_a_constant"],
)
def test_integer_constants_the_module_makes_are_bounded_by_their_values(fn: Callable) -> None:
    """`torch.tensor(2)` in forward is a constant input of the exported program: its values
    bound the integers computed from it (they were refused as unbounded)."""
    assert_matches_float64(Fn(fn), torch.randn(4, 6))
