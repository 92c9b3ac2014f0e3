"""Wrong answers the thirtieth session's capture survey (transformer variants, vision blocks,
numerics edge cases) found: `rsub`'s alpha scaling the wrong operand (and, in `rsub(x, 3.0, 2)`,
passed by position, ignored), integer bounds of `add(alpha=0)` and of a product with 0 read as
NaN (which passes the 2^24 check), `median` of a row holding NaN, and `diff` of a mask (IR that
did not verify). Each is captured on the CPU and checked against torch in float64 at the graph
level and, after `fuse`, at the loop level."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from test_frontend_survey28 import assert_matches_float64  # noqa: E402
from test_frontend_torch import Fn  # noqa: E402
from tinyopt.frontends.torch_fx import FrontendError, capture  # noqa: E402
from torch import Tensor, nn  # noqa: E402

INF, NAN = float("inf"), float("nan")


def test_rsub_with_alpha() -> None:
    """`rsub(x, y, alpha)` is `y - alpha · x` (it computed `alpha · y - x`); the .Scalar
    overload passes alpha by position (it was dropped); add and sub of a scalar with alpha."""
    torch.manual_seed(0)

    def subtractions(m: nn.Module, x: Tensor, y: Tensor) -> tuple[Tensor, ...]:
        return (
            torch.rsub(x, y, alpha=-0.5),
            torch.rsub(x, 3.0, alpha=2),
            torch.rsub(x, 3.0),
            torch.add(x, 3.0, alpha=2),
            torch.sub(x, 3.0, alpha=-2),
            torch.sub(x, y, alpha=3),
        )

    assert_matches_float64(Fn(subtractions), torch.randn(5), torch.randn(5))


def test_rsub_with_alpha_of_bounded_integers() -> None:
    """`3 - 2 · clamp(ids, 0, 2)` as an index (1 and -1 here)."""
    torch.manual_seed(0)
    lookup = Fn(lambda m, x, ids: x[torch.rsub(ids.clamp(0, 2), 3, alpha=2)])
    assert_matches_float64(lookup, torch.randn(9), torch.tensor([1, 2]))


@pytest.mark.parametrize(
    "fn",
    [
        lambda m, x, ids: x[torch.add(ids, ids, alpha=0) - 16777216],
        lambda m, x, ids: x[ids * 0 + ids - 16777216],
    ],
    ids=["add_with_alpha_0", "product_with_0"],
)
def test_unbounded_integers_times_zero_stay_unbounded_in_a_sum(fn) -> None:
    """`0 · inf` bounds read as NaN passed the 2^24 check: ids of 2^24 + 1 rounded in f32 were
    looked up silently at the wrong row. Refused now; an exact zero term is still bounded."""
    with pytest.raises(FrontendError, match="aten.add computes integers unbounded"):
        capture(Fn(fn), torch.randn(3), torch.tensor([16777217, 16777218]))
    torch.manual_seed(0)
    zero = Fn(lambda m, x, ids: x[ids * 0] + x[torch.add(ids.clamp(0, 2), ids, alpha=0)])
    assert_matches_float64(zero, torch.randn(9), torch.tensor([1, 2]))


def test_median_of_rows_holding_nan() -> None:
    """torch's median of a row with NaN is NaN at the row's first NaN (it gave the lower median
    of the other elements, NaN ranked last); of all elements, NaN where any is; in bf16 too."""
    x = torch.tensor(
        [
            [1.0, 2.0, 2.5, 1.5, 3.0, 0.5],
            [5.0, NAN, 4.0, NAN, 0.0, 1.0],
            [NAN, 1.0, 2.0, 3.0, NAN, 0.0],
            [INF, -INF, 1.0, 2.0, 3.0, 4.0],
        ]
    )

    def medians(m: nn.Module, x: Tensor) -> tuple[Tensor, ...]:
        value, index = x.median(-1)
        down, at = x.median(0, keepdim=True)
        return value, index, x.median(), down, at, x[0].median(), x[:, :3].median(1).values

    assert_matches_float64(Fn(medians), x)
    whole = Fn(lambda m, x: (x.median(-1).values, x.median(), x[0].median()))
    assert_matches_float64(whole, x.to(torch.bfloat16))


def test_diff_of_a_mask() -> None:
    """torch's diff of bool is logical_xor of neighbours (it emitted graph.sub of i1, which did
    not verify), with n, prepend and append."""
    torch.manual_seed(0)

    def diffs(m: nn.Module, x: Tensor) -> tuple[Tensor, ...]:
        positive = x > 0
        return (
            torch.diff(positive, dim=0).float(),
            torch.diff(positive, n=2, prepend=x[:, :1] > 1, append=x[:, :2] < 0).float(),
            torch.diff(positive),
        )

    assert_matches_float64(Fn(diffs), torch.randn(3, 6))


def test_pow_of_a_half_is_torch_s_sqrt_and_rsqrt() -> None:
    """torch computes `x ** 0.5` and `x ** -0.5` as sqrt and rsqrt: NaN at -inf and -inf at
    -0 (pow gave 0 and +inf there); other exponents stay pow."""
    x = torch.tensor([-INF, -3.0, -0.0, 0.0, 0.25, 4.0, INF, NAN])

    def powers(m: nn.Module, x: Tensor) -> tuple[Tensor, ...]:
        return x**0.5, torch.pow(x, -0.5), x.pow(-1), x.pow(2), x.pow(-2), x.abs().pow(1.5)

    assert_matches_float64(Fn(powers), x)
    ids = torch.tensor([[0.5, 2.0, 1.0], [3.0, 0.0, 1.0]])
    assert_matches_float64(Fn(lambda m, x: (x.argmax(-1) ** 0.5, x.argmax(-1) ** -0.5)), ids)
