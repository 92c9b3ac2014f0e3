"""What the thirty-first session's capture survey found refused, or refused misleadingly:
`cumsum` of an int64 mask (exact where its values are bounded, refused with the fix otherwise),
`torch.frexp`/`torch.ldexp` (exact, subnormals and special values too), `torch.histc` (binned
as torch's kernel rounds), pooling with dilation and `ceil_mode` (already captured: checked
here), `F.interpolate(antialias=True)`, `torch.logspace` and `torch.float_power` (refused:
float64 by definition). Each is checked against torch in float64 at the graph level and,
after `fuse`, at the loop level, and where the op is bit-exact against torch in the input's
own dtype (every op rounded to it) on special values."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
from test_frontend_survey28 import assert_matches_float64  # noqa: E402
from test_frontend_torch import Fn  # noqa: E402
from tinyopt.backends.loop_reference import run_loop_module  # noqa: E402
from tinyopt.backends.reference import run_reference  # noqa: E402
from tinyopt.compiler import apply_pipeline  # noqa: E402
from tinyopt.frontends.torch_fx import FrontendError, capture  # noqa: E402
from torch import Tensor, nn  # noqa: E402

INF, NAN = float("inf"), float("nan")
SPECIAL = [INF, -INF, NAN, 0.0, -0.0, 1e-40, -3e-39, 2.0**-149, 1.1754942e-38, 2.0**127]
SPECIAL += [-3.4e38, 1.0, 0.5, -0.75, 5.0, 2.0**-126]


def assert_as_torch_in_its_dtype(module: nn.Module, *inputs: Tensor, rtol: float = 0.0) -> None:
    """The graph reference with every op rounded to its type, and the loop level after `fuse`
    with f32 rounding, against torch on `inputs` as they are: equal (NaN where torch has NaN,
    zeros of torch's sign) unless `rtol`."""
    cap = capture(module, *inputs)
    with torch.no_grad():
        want = module(*inputs)
    want = [w.float().numpy() for w in (want if isinstance(want, tuple) else (want,))]
    fused = apply_pipeline(cap.module.clone(), "fuse")
    for got in (
        run_reference(cap.module, *cap.arguments(*inputs), dtype=None),
        run_loop_module(fused, "forward", *cap.arguments(*inputs), round_f32=True),
    ):
        for g, w in zip(got, want, strict=True):
            g = np.asarray(g, np.float32)
            if rtol:
                np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol)
                continue
            np.testing.assert_array_equal(g, w)
            assert np.array_equal(np.signbit(g), np.signbit(w))


# 1. cumsum of integers


def _positions(m: nn.Module, ids: Tensor) -> tuple[Tensor, ...]:
    """Position ids from a padding mask (HF's, fairseq's) and prefix counts of bounded ints."""
    mask = ids.ne(1).int()
    return (
        (ids != 0).long().cumsum(-1) - 1,
        (torch.cumsum(mask, dim=1).type_as(mask) + 2) * mask + 1,
        ids.clamp(0, 1).cumsum(1),
        torch.cumsum(ids > 2, 0, dtype=torch.int32),
        (ids > 2).cumsum(1, dtype=torch.float32),
    )


@pytest.mark.parametrize("shape", [(1, 1), (3, 13), (2, 31)])
def test_cumsum_of_a_bounded_integer_mask(shape: tuple[int, int]) -> None:
    torch.manual_seed(0)
    assert_matches_float64(Fn(_positions), torch.randint(0, 5, shape))


def test_cumsum_of_an_integer_input_refused_with_the_fix() -> None:
    def hf_positions(m: nn.Module, mask: Tensor) -> Tensor:
        return (mask.long().cumsum(-1) - 1).masked_fill(mask == 0, 1)

    with pytest.raises(
        FrontendError,
        match=r"cumsum of integers whose results may pass 2\^24: an int32/int64 input",
    ):
        capture(Fn(hf_positions), torch.randint(0, 2, (2, 5)))
    with pytest.raises(FrontendError, match=r"`mask.bool\(\)`.*sums\s+exactly"):
        capture(Fn(lambda m, mask: mask.cumsum(1)), torch.randint(0, 2, (2, 5)))


# 2. frexp and ldexp


def _wide_values(count: int) -> Tensor:
    """SPECIAL, then values over f32's whole range of magnitudes, both signs."""
    torch.manual_seed(0)
    spread = torch.randn(count) * torch.exp(torch.randn(count) * 25)
    return torch.cat([torch.tensor(SPECIAL), spread])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_frexp_exact(dtype: torch.dtype) -> None:
    """Mantissas and int32 exponents bit for bit, subnormals, ±0, ±inf and NaN included."""
    assert_as_torch_in_its_dtype(Fn(lambda m, x: torch.frexp(x)), _wide_values(41).to(dtype))


def test_frexp_and_ldexp_in_float64() -> None:
    torch.manual_seed(0)
    x, e = torch.randn(3, 7) * 100, torch.randint(-20, 20, (3, 7))

    def frexp_ldexp(m: nn.Module, x: Tensor, e: Tensor) -> tuple[Tensor, ...]:
        mantissa, exponent = torch.frexp(x)
        return (
            mantissa,
            exponent,
            torch.ldexp(mantissa, exponent + e.clamp(-20, 20)),
            torch.ldexp(x, e * 0.5),
        )

    assert_matches_float64(Fn(frexp_ldexp), x, e)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_ldexp_of_integer_exponents_rounds_once(dtype: torch.dtype) -> None:
    """torch rounds the exact x · 2^e once: 2^100 · 2^-160 is 2^-60 (not 2^100 · 0, an
    underflowed 2^-160), results that overflow are inf and those past the subnormals 0."""
    x = _wide_values(31)
    torch.manual_seed(1)
    e = torch.randint(-300, 300, x.shape)
    e[:12] = torch.tensor([0, 1, -1, 127, 128, -126, -149, -150, -160, 300, -300, 20])
    ldexp = Fn(lambda m, x, e: torch.ldexp(x, e))
    assert_as_torch_in_its_dtype(ldexp, x.to(dtype), e)
    assert_as_torch_in_its_dtype(ldexp, torch.tensor([2.0**100, 3.0, 2.0**-140]).to(dtype),
                                 torch.tensor([-160, -151, 200]))  # fmt: skip


# 3. histc


def _at_the_edges(bins: int, low: float, high: float, dtype: torch.dtype) -> Tensor:
    """The bin edges, the values next to them, random values, and special values."""
    edges = torch.linspace(low, high, bins + 1, dtype=dtype).float().numpy()
    up, down = (np.nextafter(edges, np.float32(s)) for s in (INF, -INF))
    torch.manual_seed(bins)
    wide = torch.randn(40) * max(abs(low), abs(high))
    values = [*map(torch.from_numpy, (edges, up, down)), wide, torch.tensor(SPECIAL[:6])]
    return torch.cat([v.float() for v in values]).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize(
    ("bins", "low", "high"), [(1, -1.0, 1.0), (7, -1.3, 2.9), (13, 0.1, 0.7), (30, -2.5, 2.5)]
)
def test_histc_bins_as_torch(bins: int, low: float, high: float, dtype: torch.dtype) -> None:
    """An element next to an edge lands in the bin torch's rounded arithmetic puts it in,
    max in the last bin, NaN, ±inf and elements outside [min, max] in none."""
    x = _at_the_edges(bins, low, high, dtype)[-256:]  # torch counts bf16 exactly to 256
    histc = Fn(lambda m, x: torch.histc(x, bins=bins, min=low, max=high))
    assert_as_torch_in_its_dtype(histc, x)
    if dtype == torch.float32:  # away from the edges, which float64 puts elsewhere
        assert_matches_float64(histc, torch.randn(5, 7) * high)


def test_histc_refused_for_a_range_from_the_data_or_inexact_counts() -> None:
    with pytest.raises(FrontendError, match="histc with min == max"):
        capture(Fn(lambda m, x: torch.histc(x, bins=4)), torch.randn(10))
    with pytest.raises(FrontendError, match="torch counts in the input's dtype, exact only to 256"):
        capture(Fn(lambda m, x: torch.histc(x, 4, -1, 1)), torch.randn(300).bfloat16())


# 4. pooling with dilation and ceil_mode


@pytest.mark.parametrize(
    ("kernel", "stride", "padding", "dilation", "ceil_mode"),
    [
        (2, None, 0, 2, False),
        (3, 2, 1, 2, True),
        (2, None, 0, 1, True),
        ((2, 3), (2, 3), (1, 0), (2, 1), True),
    ],
    ids=["dilation", "dilation_ceil", "ceil", "per_dim"],
)  # fmt: skip
def test_max_pool_with_dilation_and_ceil_mode(
    kernel: object, stride: object, padding: object, dilation: object, ceil_mode: bool
) -> None:
    torch.manual_seed(0)
    options = dict(stride=stride, padding=padding, dilation=dilation, ceil_mode=ceil_mode)
    for size in [(1, 1, 7, 7), (2, 3, 11, 13)]:
        assert_matches_float64(
            Fn(lambda m, x: F.max_pool2d(x, kernel, **options)), torch.randn(size)
        )
    one_d = {k: v[0] if isinstance(v, tuple) else v for k, v in options.items()}
    k1 = kernel[0] if isinstance(kernel, tuple) else kernel
    assert_matches_float64(Fn(lambda m, x: F.max_pool1d(x, k1, **one_d)), torch.randn(2, 3, 13))
    x = torch.randn(2, 3, 7, 9)
    x[0, 0, :2, :2], x[1, 2, 3, 4], x[1, 1, -1, -1] = NAN, INF, -INF
    for dtype in (torch.float32, torch.bfloat16):
        assert_as_torch_in_its_dtype(
            Fn(lambda m, x: F.max_pool2d(x, kernel, **options)), x.to(dtype)
        )


@pytest.mark.parametrize(
    ("kernel", "stride", "padding", "ceil_mode", "count_include_pad"),
    [
        (2, None, 0, True, True),
        (3, 2, 1, True, False),
        (3, 2, 1, False, False),
        (2, 3, 1, True, False),
    ],
)
def test_avg_pool_with_ceil_mode_and_count_include_pad(
    kernel: int, stride: int | None, padding: int, ceil_mode: bool, count_include_pad: bool
) -> None:
    torch.manual_seed(0)
    options = dict(
        stride=stride, padding=padding, ceil_mode=ceil_mode, count_include_pad=count_include_pad
    )
    for size in [(1, 1, 7, 7), (2, 3, 11, 13)]:
        assert_matches_float64(
            Fn(lambda m, x: F.avg_pool2d(x, kernel, **options)), torch.randn(size)
        )
    for length in (5, 13):
        pool = Fn(lambda m, x: F.avg_pool1d(x, kernel, **options))
        assert_matches_float64(pool, torch.randn(2, 3, length))


# 5. antialiased interpolation


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_antialiased_interpolate(mode: str, align_corners: bool) -> None:
    """Downsampling (a window of taps per output row), upsampling, scale factors, sizes of 1
    and primes; ±inf and NaN reach the rows whose windows hold them, as in torch's."""
    torch.manual_seed(0)
    cases = [
        ((13, 5), dict(size=(4, 11))),
        ((1, 17), dict(size=(1, 5))),
        ((1, 8), dict(size=(2, 4))),
        ((16, 11), dict(scale_factor=(0.3, 1.7))),
    ]
    for size, options in cases:
        interpolate = Fn(
            lambda m, x, options=options: F.interpolate(
                x, mode=mode, antialias=True, align_corners=align_corners, **options
            )
        )
        x = torch.randn(2, 3, *size)
        assert_matches_float64(interpolate, x)
        x[0, 0, 0, 0], x[0, 1, -1, 1], x[1, 2, -1, -1] = INF, NAN, -INF
        assert_as_torch_in_its_dtype(interpolate, x, rtol=1e-5)


def test_antialiased_interpolate_refused_where_torch_is_not_separable() -> None:
    """torch's CPU kernel gives the output rows of a 1-wide image one value."""
    down = Fn(lambda m, x: F.interpolate(x, size=(2, 1), mode="bilinear", antialias=True))
    with pytest.raises(FrontendError, match="_upsample_bilinear2d_aa resampling the height"):
        capture(down, torch.randn(1, 2, 31, 29))


# 6. logspace and float_power


def test_logspace() -> None:
    def spaced(m: nn.Module, x: Tensor) -> tuple[Tensor, ...]:
        return (
            x + torch.logspace(0, 2, 7),
            x[:1] + torch.logspace(-1.5, 1.0, 1, base=2.0),
            x + torch.logspace(3, -3, 7, base=3.0),
        )

    assert_matches_float64(Fn(spaced), torch.randn(7))
    assert_as_torch_in_its_dtype(Fn(spaced), torch.randn(7), rtol=1e-6)


def test_float_power_refused_naming_float64_and_pow() -> None:
    with pytest.raises(FrontendError, match=r"float_power.*returns float64.*use torch.pow"):
        capture(Fn(lambda m, x: torch.float_power(x, 2)), torch.randn(5))


# 7. awkward inputs (review of the above)


@pytest.mark.parametrize(("dtype", "bins"), [(torch.bfloat16, 257), (torch.float16, 2049)])
def test_histc_multiplies_by_the_bin_count_in_the_inputs_dtype(
    dtype: torch.dtype, bins: int
) -> None:
    """torch's kernel takes `(x − min) · bins` with bins in x's dtype (bf16 257 is 256, f16
    2049 is 2048), which moves most elements of the upper half down a bin."""
    torch.manual_seed(0)
    x = torch.rand(16).to(dtype)
    assert_as_torch_in_its_dtype(Fn(lambda m, x: torch.histc(x, bins, -1, 1)), x)


def test_histc_refused_where_min_and_max_round_to_one_value() -> None:
    for dtype, high in [(torch.bfloat16, 1.001), (torch.float32, 1.00000001)]:
        with pytest.raises(FrontendError, match=r"aten.histc over \[1.0, 1.0.*round to the same"):
            capture(Fn(lambda m, x: torch.histc(x, 4, 1.0, high)), torch.ones(4, dtype=dtype))


def test_logspace_as_torch_rounds_it() -> None:
    """torch rounds start and end to the dtype and takes each power in float64: bf16
    `logspace(0.1, 1.1, 3)` is 1.2578, 4, 12.625 (not 3.98, 12.56), and f32's 10^e for e
    to 30 are each rounded once (not 4e-6 off from an f32 exponent)."""
    cases = [
        ((0.1, 3.3, 50), {}, torch.bfloat16),
        ((-7.3, 4.1, 50), {}, torch.float16),
        ((0, 30, 301), {}, torch.float32),
        ((-126, 127, 685), dict(base=2.0), torch.float32),
    ]
    for args, options, dtype in cases:
        spaced = Fn(lambda m, x, a=args, o=options: x + torch.logspace(*a, **o, dtype=dtype))
        assert_as_torch_in_its_dtype(spaced, torch.zeros(args[2], dtype=dtype))
    with pytest.raises(FrontendError, match="aten.logspace of 0 steps"):
        capture(Fn(lambda m, x: torch.logspace(0, 1, 0)), torch.zeros(1))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_ldexp_of_reduced_float_exponents_rounds_the_power_first(dtype: torch.dtype) -> None:
    """torch's `x · pow(2, e)` rounds the power to e's dtype before the product."""
    torch.manual_seed(0)
    x, e = (torch.randn(200) * 10).to(dtype), (torch.randn(200) * 4).to(dtype)
    assert_as_torch_in_its_dtype(Fn(lambda m, x, e: torch.ldexp(x, e)), x, e)
