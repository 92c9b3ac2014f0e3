"""Captured ops whose NaN and signed-zero rules differ from their plain forms: `fmax`/`fmin` (a
NaN operand gives the other one, where maximum/minimum give NaN) and `signbit` (set for -0.0,
where `x < 0` is not), each checked against torch in float64 on the values that tell them
apart."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from test_frontend_ops import Fn  # noqa: E402
from test_frontend_torch import assert_matches_float64  # noqa: E402

NAN, INF = float("nan"), float("inf")


def test_fmax_fmin_take_the_operand_that_is_not_nan() -> None:
    a = torch.tensor(
        [[1.0, NAN, NAN, -0.0, 0.0, -INF, 3.0], [2.0, -1.0, 5.0, NAN, -2.0, INF, -0.0]]
    )
    b = torch.tensor([[NAN, 2.0, NAN, 0.0, -0.0, 1.0, 3.0], [1.0, NAN, 4.0, -3.0, -2.0, NAN, 0.0]])
    m = Fn(
        lambda m, x, y: (
            torch.fmax(x, y),
            torch.fmin(x, y),
            torch.fmax(x, torch.tensor(2.5)),  # a 0-d operand broadcast
            torch.fmin(x[:1], y),  # rows broadcast
        )
    )
    assert_matches_float64(m, a, b)


def test_fmax_of_integers_is_max() -> None:
    m = Fn(lambda m, x: torch.fmax(x.argmax(-1), torch.tensor(2)).float())
    assert_matches_float64(m, torch.randn(3, 5))


def test_signbit_is_set_for_negative_zero() -> None:
    x = torch.tensor([-1.5, -0.0, 0.0, 2.0, -INF, INF, NAN])
    m = Fn(lambda m, x: (torch.signbit(x).float(), torch.signbit(x.argmax() - 3).float()))
    assert_matches_float64(m, x)
