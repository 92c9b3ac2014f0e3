"""Special floats survive the text path bit for bit: every graph constant printed and parsed
back holds the same bits (±inf, NaN, −0.0, denormals, the largest and smallest normals) in
f32, f16 and bf16, splat or not; and a captured module computing with infinities lowers,
through text, to CUDA that uses them (xDSL 0.75 alone read `dense<0x7f800000>` back as
2139095040.0)."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, TensorType, bf16, f16, f32
from xdsl.ir import Attribute

from tinyopt.backends.loop_reference import run_loop_module
from tinyopt.compiler import apply_pipeline, parse
from tinyopt.dialects import graph

SPECIAL = {
    f32: [
        math.inf,
        -math.inf,
        math.nan,
        -0.0,
        float(np.finfo(np.float32).max),
        -float(np.finfo(np.float32).max),
        float(np.finfo(np.float32).tiny),  # smallest normal
        float(np.finfo(np.float32).smallest_subnormal),
        3 * float(np.finfo(np.float32).smallest_subnormal),
        1.0 / 3.0,
    ],
    f16: [
        math.inf,
        -math.inf,
        math.nan,
        -0.0,
        65504.0,
        -65504.0,
        2.0**-14,  # smallest normal
        2.0**-24,  # smallest subnormal
        -(2.0**-20),
        1.0 / 3.0,
    ],
    bf16: [
        math.inf,
        -math.inf,
        math.nan,
        -0.0,
        3.3895313892515355e38,  # largest
        -3.3895313892515355e38,
        2.0**-126,  # smallest normal
        2.0**-133,  # smallest subnormal
        -(2.0**-130),
        1.0 / 3.0,
    ],
}


def bits(values: list[float], element: Attribute) -> list[int]:
    """The stored bit patterns of `values` at `element`'s width."""
    attr = DenseIntOrFPElementsAttr.from_list(TensorType(element, [len(values)]), values)
    raw = attr.data.data
    width = {f32: "I", f16: "H", bf16: "H"}[element]
    return list(struct.unpack(f"<{len(values)}{width}", raw))


@pytest.mark.parametrize("element", [f32, f16, bf16], ids=str)
@pytest.mark.parametrize("splat", [True, False], ids=["splat", "dense"])
def test_constants_round_trip_through_text(element: Attribute, splat: bool) -> None:
    for value in SPECIAL[element]:
        values = [value] if splat else [value, 1.5, value]
        t = TensorType(element, [len(values)])
        attr = DenseIntOrFPElementsAttr.from_list(t, values)
        text = f"func.func @f() -> {t} {{\n  %c = graph.constant {attr}\n  func.return %c : {t}\n}}"
        (constant,) = [op for op in parse(text).walk() if isinstance(op, graph.ConstantOp)]
        back = list(constant.value.get_values())
        assert bits(back, element) == bits(values, element), f"{value} printed as {attr}"


def test_infinities_reach_the_kernel_through_text() -> None:
    torch = pytest.importorskip("torch")
    from tinyopt.frontends.torch_fx import capture

    class Infinite(torch.nn.Module):
        def forward(self, x):  # noqa: ANN001, ANN202
            return x * float("inf") + torch.clamp(x, min=float("-inf"), max=1.0)

    text = str(capture(Infinite(), torch.randn(4, 8)).module)
    cuda = str(apply_pipeline(parse(text), "fuse,tile,to-cuda"))
    assert "* INFINITY" in cuda and "2.139095e+09" not in cuda


def _only_kernel_for_the_cpu_emulation(program: str):  # noqa: ANN202
    """The one CUDA kernel `program` lowers to, for tests/cpu_cuda.py to run (the test is
    skipped where g++ is missing)."""
    from cpu_cuda import COMPILER

    from tinyopt.dialects import tile

    if COMPILER is None:
        pytest.skip("g++ not found")
    module = apply_pipeline(parse(program), "fuse,tile,to-cuda")
    (kernel,) = [op for op in module.ops if isinstance(op, tile.CudaKernelOp)]
    return kernel


NAN_PROGRAM = """func.func @f(%x: tensor<4x40xf32>, %y: tensor<4x40xf32>) -> tensor<4x40xf32> {
  %r = graph.relu %x : tensor<4x40xf32>
  %n = graph.min %r, %y : tensor<4x40xf32>
  %m = graph.max %n, %x : tensor<4x40xf32>
  func.return %m : tensor<4x40xf32>
}"""


def test_nan_propagates_through_max_min_and_relu_on_the_cpu_emulation() -> None:
    # torch's maximum, minimum and relu give NaN for a NaN operand; CUDA's fmaxf / fminf
    # return the other operand, which made kernels drop NaNs that the loop IR executor kept
    # (a max reduction prints the same helper: tests/lit/to_cuda/nan_propagating.mlir).
    from cpu_cuda import run_on_cpu

    from tinyopt.backends.reference import run_reference

    kernel = _only_kernel_for_the_cpu_emulation(NAN_PROGRAM)
    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal((4, 40)).astype(np.float32) for _ in range(2))
    x[1, 7] = x[3, 39] = np.nan
    y[2, 5] = np.nan
    out = np.zeros((4, 40), np.float32)
    *_, got = run_on_cpu(kernel, [x, y, out])
    (want,) = run_reference(parse(NAN_PROGRAM), x, y)
    assert np.isnan(want).sum() == 3
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got[~np.isnan(got)], want[~np.isnan(want)], rtol=1e-6)


LOG1P_EXPM1_PROGRAM = """func.func @f(%x: tensor<4x40xf32>) -> tensor<4x40xf32> {
  %a = graph.log1p %x : tensor<4x40xf32>
  %b = graph.expm1 %x : tensor<4x40xf32>
  %c = graph.add %a, %b : tensor<4x40xf32>
  func.return %c : tensor<4x40xf32>
}"""


def test_log1p_and_expm1_keep_f32_precision_near_zero_on_the_cpu_emulation() -> None:
    # log1p(x) + expm1(x) is about 2x for tiny x; in f32, log(1 + x) and exp(x) - 1 would lose
    # most of x's digits (1 + 1e-7 rounds to 1 + 1.19e-7). The kernel calls log1pf / expm1f.
    from cpu_cuda import run_on_cpu

    kernel = _only_kernel_for_the_cpu_emulation(LOG1P_EXPM1_PROGRAM)
    assert "log1pf(" in kernel.source.data and "expm1f(" in kernel.source.data
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((4, 40)) * 1e-7).astype(np.float32)
    x[0, :4] = [0.5, -0.5, 3.0, -0.99]
    *_, got = run_on_cpu(kernel, [x, np.zeros((4, 40), np.float32)])
    wide = x.astype(np.float64)
    np.testing.assert_allclose(got, np.log1p(wide) + np.expm1(wide), rtol=1e-6, atol=0)


@pytest.mark.parametrize(
    ("op", "call", "rounding"),
    [
        ("floor", "floorf", np.floor),
        ("ceil", "ceilf", np.ceil),
        ("round", "rintf", np.rint),
        ("trunc", "truncf", np.trunc),
    ],
)
def test_roundings_keep_halves_signs_and_special_values_on_the_cpu_emulation(
    op: str, call: str, rounding: np.ufunc
) -> None:
    # floorf / ceilf / rintf / truncf give numpy's float64 roundings bit for bit: halves to
    # even for round (rintf in the default rounding mode), -0.0 where the result is a negative
    # zero, and ±inf and NaN unchanged.
    from cpu_cuda import run_on_cpu

    kernel = _only_kernel_for_the_cpu_emulation(
        f"""func.func @f(%x: tensor<4x40xf32>) -> tensor<4x40xf32> {{
  %y = graph.{op} %x : tensor<4x40xf32>
  func.return %y : tensor<4x40xf32>
}}"""
    )
    assert f"{call}(" in kernel.source.data
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((4, 40)) * 4).astype(np.float32)
    x[0, :10] = [-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, -0.25, 0.25, -0.0, 0.0]
    x[0, 10:16] = [math.inf, -math.inf, math.nan, 2.0**23 - 0.5, -(2.0**23 - 0.5), 2.0**100]
    x[1, 0] = np.nextafter(np.float32(0.5), np.float32(0.0))
    *_, got = run_on_cpu(kernel, [x, np.zeros((4, 40), np.float32)])
    want = rounding(x.astype(np.float64))
    np.testing.assert_array_equal(got, want)
    assert np.array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize(
    ("op", "call"), [("atan2", "atan2f"), ("fmod", "fmodf"), ("remainder", "fmodf")]
)
def test_atan2_fmod_and_remainder_keep_signs_zeros_and_infinities_on_the_cpu_emulation(
    op: str, call: str
) -> None:
    # fmodf is exact, so fmod and remainder (fmodf, then one f32 addition where the sign is
    # wrong: torch's formula) give the float64 reference rounded to f32 bit for bit, zeros of
    # the dividend's sign included; atan2f is within an ulp, with C's ±0 and ±π for zeros.
    from cpu_cuda import run_on_cpu

    from tinyopt.backends.reference import run_reference

    program = f"""func.func @f(%a: tensor<4x40xf32>, %b: tensor<4x40xf32>) -> tensor<4x40xf32> {{
  %r = graph.{op} %a, %b : tensor<4x40xf32>
  func.return %r : tensor<4x40xf32>
}}"""
    kernel = _only_kernel_for_the_cpu_emulation(program)
    assert f"{call}(" in kernel.source.data
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((2, 4, 40)) * [[[4.0]], [[1.0]]]).astype(np.float32)
    inf, nan = math.inf, math.nan
    pairs = [
        *((5.0, 3.0), (-5.0, 3.0), (5.0, -3.0), (-5.0, -3.0), (-6.0, 3.0), (6.0, -3.0)),
        *((0.0, -1.0), (-0.0, -1.0), (-0.0, 1.0), (-5.0, inf), (5.0, -inf), (-0.0, inf)),
        *((inf, inf), (-inf, -inf), (inf, 2.0), (1.0, 0.0), (1.0, -0.0), (nan, 1.0), (1.0, nan)),
        (1e30, 0.1),  # a quotient of 10^31
    ]
    a[0, : len(pairs)], b[0, : len(pairs)] = zip(*pairs, strict=True)
    *_, got = run_on_cpu(kernel, [a, b, np.zeros((4, 40), np.float32)])
    (want,) = run_reference(parse(program), a, b)
    want = want.astype(np.float32)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    number = ~np.isnan(want)
    assert np.array_equal(np.signbit(got[number]), np.signbit(want[number]))
    if op == "atan2":
        np.testing.assert_allclose(got, want, rtol=2**-23, atol=0)
    else:
        np.testing.assert_array_equal(got, want)


PRODUCT_PROGRAM = """func.func @f(%x: tensor<6x40xf32>) -> tensor<6xf32> {
  %p = graph.reduce_prod %x {dims = array<i64: 1>} : tensor<6x40xf32> -> tensor<6xf32>
  func.return %p : tensor<6xf32>
}"""


def test_row_products_keep_zeros_infinities_and_nan_on_the_cpu_emulation() -> None:
    # Each lane multiplies its share of the row from 1.0, then the warp's shuffle tree
    # multiplies the partial products: a zero keeps the product's sign (the xor of the
    # factors' signs, whatever the order), NaN and 0 · inf give NaN, an overflow gives ±inf.
    from cpu_cuda import run_on_cpu

    kernel = _only_kernel_for_the_cpu_emulation(PRODUCT_PROGRAM)
    assert "__shfl_xor_sync(" in kernel.source.data
    rng = np.random.default_rng(0)
    x = (rng.uniform(0.5, 1.5, (6, 40)) * rng.choice([-1.0, 1.0], (6, 40))).astype(np.float32)
    x[0, 9], x[1, 30] = -0.0, 0.0
    x[2, 17] = math.nan
    x[3, 3], x[3, 38] = 0.0, -math.inf
    x[4, :] = 1e5  # 1e200: past f32's range
    x[5, 21] = math.inf
    *_, got = run_on_cpu(kernel, [x, np.zeros(6, np.float32)])
    with np.errstate(invalid="ignore", over="ignore"):
        want = np.prod(x.astype(np.float64), axis=1).astype(np.float32)
    assert np.isnan(want[[2, 3]]).all() and np.isinf(want[[4, 5]]).all()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    number = ~np.isnan(want)
    assert np.array_equal(np.signbit(got[number]), np.signbit(want[number]))
    np.testing.assert_allclose(got, want, rtol=2.0**-18, atol=0)


@pytest.mark.parametrize("op", ["sin", "cos"])
def test_sin_and_cos_of_infinities_are_nan_in_the_loop_executor(op: str) -> None:
    """C's sin and cos give NaN at ±inf (Python's `math` raises): the loop-level executor does
    as the kernels do, found by the frontend fuzzer (a std of one element, then sin)."""
    text = f"""func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {{
      %y = graph.{op} %x : tensor<4xf32>
      func.return %y : tensor<4xf32>
    }}"""
    x = np.array([np.inf, -np.inf, np.nan, 0.5], np.float32)
    (got,) = run_loop_module(apply_pipeline(parse(text), "fuse"), "f", x)
    assert np.isnan(got[:3]).all() and got[3] == pytest.approx(getattr(np, op)(0.5))


def test_loop_executor_rounds_each_f32_op_when_asked() -> None:
    """`round_f32` makes the loop executor round every f32 op as torch and the GPU do: there
    sqrt(x·x) is exactly |x| (x·x rounded to f32 first), so `sqrt(x·x) > |x|` is false, where
    computing in Python floats rounds the sum of squares at its store but not the root, which
    can make it true
    (the frontend fuzzer's seed 2309, case 1229: a norm over one element against copysign)."""
    text = """func.func @f(%x: tensor<64x1xf32>) -> tensor<64xi1> {
      %s = graph.mul %x, %x : tensor<64x1xf32>
      %t = graph.reduce_sum %s {dims = array<i64: 1>} : tensor<64x1xf32> -> tensor<64xf32>
      %r = graph.sqrt %t : tensor<64xf32>
      %a = graph.reshape %x : tensor<64x1xf32> -> tensor<64xf32>
      %b = graph.abs %a : tensor<64xf32>
      %c = graph.compare %r, %b {predicate = "gt"} : tensor<64xf32> -> tensor<64xi1>
      func.return %c : tensor<64xi1>
    }"""
    x = np.random.default_rng(0).standard_normal((64, 1)).astype(np.float32)
    module = apply_pipeline(parse(text), "fuse")
    (unrounded,) = run_loop_module(module, "f", x)
    (rounded,) = run_loop_module(module, "f", x, round_f32=True)
    assert unrounded.any()  # the f64 intermediates break some ties
    torch_like = (np.sqrt(x * x) > np.abs(x))[:, 0]  # numpy in f32, one rounding per op
    assert not torch_like.any()
    np.testing.assert_array_equal(rounded, torch_like)
