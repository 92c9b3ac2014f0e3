"""8-bit floats (f8E4M3FN, f8E5M2): rounding as torch rounds, the graph dialect's rules for
them, the frontend's casts and `_scaled_mm`, and programs that quantize and that multiply FP8
operands (the `_scaled_mm` form) run by the loop executor and, compiled to CUDA, on the CPU
emulation (tests/cpu_cuda.h, tests/cpu_wgmma.py) against the reference executor, the GEMM on
CUDA cores and on wgmma's FP8 tensor cores (with its SASS). The same programs run on a GPU in
tests/test_gpu_programs.py."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from conftest import requires_gpu
from cpu_cuda import COMPILER
from cpu_wgmma import error_on_cpu, run_program_on_cpu
from programs import quantize, scaled_matmul
from test_sass import CUOBJDUMP, HAS_NVDISASM, LOCAL_MEMORY, sass
from xdsl.dialects.builtin import bf16, f8E4M3FN, f8E5M2
from xdsl.utils.exceptions import DiagnosticException, VerifyException

from tinyopt.backends.check import from_storage, graph_function, to_storage
from tinyopt.backends.fp8 import E4M3FN, E5M2
from tinyopt.backends.loop_reference import run_loop_module
from tinyopt.backends.reference import random_inputs, run_reference
from tinyopt.compiler import apply_pipeline, lower, parse

EDGES = [0.0, -0.0, np.inf, -np.inf, np.nan, 448, 464, 480, 57344, 61439, 61440, 1e9, -1e9]
EDGES += [2**-6, 2**-9, 2**-10, 3 * 2**-11, 2**-14, 2**-16, 2**-17, 3 * 2**-18, 1.0625, 1.09375]


def _values() -> np.ndarray:
    rng = np.random.default_rng(0)
    spread = rng.standard_normal(20000) * 10.0 ** rng.integers(-7, 7, 20000)
    return np.concatenate([spread, EDGES]).astype(np.float32)


@pytest.mark.parametrize(("fmt", "name"), [(E4M3FN, "float8_e4m3fn"), (E5M2, "float8_e5m2")])
def test_rounding_bits_and_values_match_torch(fmt, name: str) -> None:
    torch = pytest.importorskip("torch")
    x = _values()
    if fmt.saturates:  # past 448 + half a step torch 2.11 gives NaN, torch 2.13 saturates
        beyond = np.abs(x) >= 464
        np.testing.assert_array_equal(fmt.round(x[beyond]), np.copysign(448.0, x[beyond]))
        x = x[~beyond]
    converted = torch.from_numpy(x).to(getattr(torch, name))
    want, want_bits = converted.float().numpy(), converted.view(torch.uint8).numpy()
    got = fmt.round(x)
    np.testing.assert_array_equal(got, want)  # NaNs in the same places, -0.0 == 0.0
    assert np.array_equal(np.signbit(got), np.signbit(want))
    finite = ~np.isnan(want)
    np.testing.assert_array_equal(fmt.bits(got)[finite], want_bits[finite])
    every = torch.arange(256, dtype=torch.uint8).view(getattr(torch, name)).double().numpy()
    np.testing.assert_array_equal(fmt.values, every)


def test_bits_of_a_value_the_format_does_not_hold_are_refused() -> None:
    with pytest.raises(ValueError, match="does not hold"):
        E4M3FN.bits(np.array([1.0625], np.float32))


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("%y = graph.add %x, %x : tensor<4xf8E4M3FN>", "element type must be f32, f16 or bf16"),
        (
            "%y = graph.cast %x : tensor<4xf8E4M3FN> -> tensor<4xf8E5M2>",
            "cannot convert f8E4M3FN to f8E5M2",
        ),
        ("%y = graph.cast %x : tensor<4xf8E4M3FN> -> tensor<4xi32>", "cannot convert"),
    ],
    ids=["arithmetic", "fp8_to_fp8", "fp8_to_integer"],
)
def test_fp8_is_storage_arithmetic_takes_it_after_a_cast(body: str, message: str) -> None:
    result = body.split(" -> ")[-1] if "->" in body else "tensor<4xf8E4M3FN>"
    text = f"""func.func @f(%x: tensor<4xf8E4M3FN>) -> {result} {{
  {body}
  func.return %y : {result}
}}"""
    with pytest.raises(VerifyException, match=message):
        parse(text)


A, B, C, T = (
    "tensor<6x10xf8E4M3FN>",
    "tensor<6x3xf8E4M3FN>",
    "tensor<6x13xf8E4M3FN>",
    "tensor<13x6xf8E4M3FN>",
)
V, BV, S, W = "tensor<10xf8E5M2>", "tensor<4x10xf8E5M2>", "tensor<6x5xf8E4M3FN>", "tensor<6x5xbf16>"
MOVE = f"""func.func @move(%a: {A}, %b: {B}, %v: {V}) -> ({T}, {BV}, {W}) {{
  %c = graph.concat %a, %b {{dim = 1 : i64}} : ({A}, {B}) -> {C}
  %t = graph.transpose %c {{perm = array<i64: 1, 0>}} : {C} -> {T}
  %bv = graph.broadcast %v : {V} -> {BV}
  %s = graph.slice %a {{dim = 1 : i64, start = 1 : i64, step = 2 : i64}} : {A} -> {S}
  %w = graph.cast %s : {S} -> {W}
  func.return %t, %bv, %w : {T}, {BV}, {W}
}}"""
"""8-bit floats through a concat, a transpose, a broadcast and a strided slice."""

PROGRAMS = {
    "scaled_mm_e4m3": scaled_matmul(40, 24, 72),
    "scaled_mm_e5m2_f32": scaled_matmul(17, 9, 33, "f8E5M2", "f32"),
    "quantize": quantize((5, 13)),
    "move": MOVE,
}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_loop_level_program_matches_reference(name: str) -> None:
    program = parse(PROGRAMS[name])
    graph = graph_function(program)
    inputs = random_inputs(graph, seed=1)
    references = run_reference(graph, *inputs)
    lowered = apply_pipeline(program, "fuse")
    outputs = run_loop_module(lowered, graph.sym_name.data, *inputs)
    for out, ref in zip(outputs, references, strict=True):
        np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
@pytest.mark.parametrize("pipeline", ["fuse,tile,to-cuda", "fuse,tile{mma=none},to-cuda"])
@pytest.mark.parametrize("name", ["scaled_mm_e4m3", "scaled_mm_e5m2_f32"])
def test_scaled_matmul_kernels_match_reference_on_cpu(name: str, pipeline: str) -> None:
    """The f32 sums of exact FP8 products: the kernels' output equals the reference's."""
    error, _ = error_on_cpu(PROGRAMS[name], pipeline, seed=2)
    assert error <= 1e-6, error


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
def test_data_movement_kernels_match_reference_on_cpu() -> None:
    program, module = lower(MOVE, "fuse,tile,to-cuda")
    graph = graph_function(program)
    inputs = random_inputs(graph, seed=4)
    types = [t.element_type for t in graph.function_type.inputs]
    outputs = run_program_on_cpu(module, [to_storage(a, t) for a, t in zip(inputs, types)])
    references = run_reference(graph, *inputs)
    for out, ref, t in zip(outputs, references, graph.function_type.outputs, strict=True):
        np.testing.assert_array_equal(from_storage(out, t.element_type), ref)


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
def test_quantize_kernel_rounds_every_edge_as_torch_does() -> None:
    """Saturation (e4m3fn: infinity too), overflow to infinity (e5m2), NaN, ties, subnormals
    and the values that vanish: the CUDA conversions (emulated) give the reference's bits."""
    program, module = lower(PROGRAMS["quantize"], "fuse,tile,to-cuda")
    graph = graph_function(program)
    x = np.resize(np.array(EDGES, np.float32), (5, 13))
    x[4] = np.random.default_rng(3).standard_normal(13)
    x = np.asarray(to_storage(np.asarray(x, np.float32), bf16), np.uint16)
    scale = np.full((5, 13), 0x3F80, np.uint16)  # 1.0 in bf16
    outputs = run_program_on_cpu(module, [x, scale])
    references = run_reference(graph, from_storage(x, bf16), np.ones((5, 13), np.float32))
    for out, ref, t in zip(outputs, references, (f8E4M3FN, f8E5M2, bf16), strict=True):
        np.testing.assert_array_equal(from_storage(out, t), ref)


@requires_gpu
def test_quantize_rounds_every_edge_as_torch_does_on_gpu() -> None:
    """The same edges through the CUDA conversions themselves (cvt with saturation for e4m3,
    without for e5m2, infinity handled before it)."""
    from tinyopt.backends.cuda.runtime import compile_module

    program, module = lower(PROGRAMS["quantize"], "fuse,tile,to-cuda")
    graph = graph_function(program)
    x = np.resize(np.array(EDGES, np.float32), (5, 13))
    x = np.asarray(to_storage(np.asarray(x, np.float32), bf16), np.uint16)
    scale = np.full((5, 13), 0x3F80, np.uint16)
    outputs = compile_module(module, poison=True).function(graph.sym_name.data)(x, scale)
    references = run_reference(graph, from_storage(x, bf16), np.ones((5, 13), np.float32))
    for out, ref, t in zip(outputs, references, (f8E4M3FN, f8E5M2, bf16), strict=True):
        np.testing.assert_array_equal(from_storage(out, t), ref)


def _scaled_mm_module():
    """`torch._scaled_mm` of FP8 activations and `[N, K]` FP8 weights (passed transposed, as
    torch requires), with the scales given and an optional bias, to bf16."""
    import torch
    from torch import nn

    class ScaledMM(nn.Module):
        def forward(self, a, w, scale_a, scale_w, bias=None):
            return torch._scaled_mm(a, w.t(), scale_a, scale_w, bias=bias, out_dtype=torch.bfloat16)

    return ScaledMM()


@pytest.mark.parametrize("scales", ["tensor", "rowwise", "bias"])
def test_scaled_mm_capture_matches_torch(scales: str) -> None:
    torch = pytest.importorskip("torch")
    from tinyopt.frontends.torch_fx import capture

    generator = torch.Generator().manual_seed(0)
    a = (torch.randn(40, 64, generator=generator) * 8).to(torch.float8_e4m3fn)
    w = torch.randn(24, 64, generator=generator).to(torch.float8_e5m2)
    if scales == "rowwise":
        args = (a, w, torch.rand(40, 1, generator=generator), torch.rand(1, 24))
    else:
        args = (a, w, torch.tensor(0.25), torch.tensor(3.0))
    if scales == "bias":
        args = (*args, torch.randn(24, generator=generator).bfloat16())
    module = _scaled_mm_module()
    captured = capture(module, *args)
    assert "tensor<40x64xf8E4M3FN>" in str(captured.module)
    (got,) = run_reference(captured.module, *captured.arguments(*args))
    # torch's product in float64, rounded to bf16 (torch's CPU `_scaled_mm` takes per-tensor
    # scales only before 2.13); one bf16 step apart at most
    a64, w64, scale_a, scale_w = (v.double() for v in args[:4])
    want = (a64 @ w64.t()) * scale_a * scale_w
    want = want + args[4].double() if scales == "bias" else want
    np.testing.assert_allclose(got, want.bfloat16().float().numpy(), rtol=2**-7, atol=1e-6)


def test_quantizing_module_capture_matches_torch_bits() -> None:
    torch = pytest.importorskip("torch")
    from torch import nn

    from tinyopt.frontends.torch_fx import capture

    class Quantize(nn.Module):
        def forward(self, x):
            # within e4m3fn's range: past it torch releases differ (NaN in 2.11, ±448 in 2.13)
            return (x * 100).to(torch.float8_e4m3fn), (x / 1000).to(torch.float8_e5m2)

    x = torch.randn(6, 50, generator=torch.Generator().manual_seed(1))
    assert x.abs().max() * 100 < 448
    captured = capture(Quantize(), x)
    got = run_reference(captured.module, *captured.arguments(x))
    for out, want in zip(got, Quantize()(x), strict=True):
        np.testing.assert_array_equal(out, want.float().numpy())


WGMMA_CASES = [
    # (M, N, K, format, output, knobs): the default plan (64x64 blocks at this size), e5m2
    # with an f32 output (K steps promoted by default), persistent grids walking two tiles a
    # block (sms=8: 20 tiles of 128x128) with and without promoted steps, 64x256 blocks, and
    # a promoting block without a producer warpgroup (ws=0), and 128x192 blocks summing all of
    # K in the tensor cores (what the wave choice takes at 3000x3000, bf16 out).
    (200, 136, 272, "f8E4M3FN", "bf16", ""),
    (130, 264, 512, "f8E5M2", "f32", "mma=wgmma"),
    (300, 520, 384, "f8E4M3FN", "bf16", "sms=8 bn=128"),
    (300, 520, 384, "f8E4M3FN", "f32", "sms=8 bn=128"),
    (129, 520, 256, "f8E4M3FN", "bf16", "mma=wgmma bn=256"),
    (64, 64, 128, "f8E5M2", "bf16", "mma=wgmma ws=0 promote=on"),
    (300, 520, 640, "f8E4M3FN", "bf16", "mma=wgmma bn=192 sms=8"),
    # promoted steps overlapped (`poverlap`): 5 K steps on a persistent grid, 2 on 64 rows
    (300, 520, 640, "f8E4M3FN", "bf16", "promote=on poverlap=on sms=8"),
    (64, 64, 256, "f8E5M2", "f32", "mma=wgmma poverlap=on"),
]


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
@pytest.mark.parametrize(
    ("m", "n", "k", "fmt", "out", "knobs"), WGMMA_CASES, ids=lambda v: str(v).replace(" ", "_")
)
def test_wgmma_fp8_gemm_matches_reference_on_cpu(
    m: int, n: int, k: int, fmt: str, out: str, knobs: str
) -> None:
    """The wgmma GEMM on 8-bit floats (TMA bytes, k32 products) on the CPU emulation: the f32
    sums of exact FP8 products equal the reference's."""
    text, pipeline = scaled_matmul(m, n, k, fmt, out), f"fuse,tile{{{knobs}}},to-cuda"
    program, tiled = lower(text, pipeline.removesuffix(",to-cuda"))
    planned = str(tiled)
    assert "#tile.plan<wgmma" in planned
    assert ("persistent = 1" in planned) == ("sms=8" in knobs)
    assert ('promote = "on"' in planned) == ("promote=on" in knobs or out == "f32")
    lowered = (program, apply_pipeline(tiled, "to-cuda"))  # `pipeline`, lowered once
    error, _ = error_on_cpu(text, pipeline, seed=5, lowered=lowered)
    assert error <= 1e-6, error


def test_overlapped_steps_promote_unless_told_not_to() -> None:
    """`poverlap=on` promotes the steps of a GEMM `promote=auto` would sum in the tensor cores
    (a bf16 output); with `promote=off` it is refused."""
    text = scaled_matmul(256, 256, 512, "f8E4M3FN", "bf16")
    plan = str(lower(text, "fuse,tile{poverlap=on}")[1])
    assert re.search(r'#tile.plan<wgmma, .*promote = "on",.* poverlap = "on"', plan)
    with pytest.raises(DiagnosticException, match=re.escape("poverlap=on overlaps promoted")):
        lower(text, "fuse,tile{mma=wgmma promote=off poverlap=on}")


A8, B8 = "tensor<3x130x256xf8E4M3FN>", "tensor<3x72x256xf8E4M3FN>"
A32, B32, BT, Y = (f"tensor<3x{s}xf32>" for s in ("130x256", "72x256", "256x72", "130x72"))
BATCHED = f"""func.func @bmm8(%a: {A8}, %b: {B8}) -> tensor<3x130x72xbf16> {{
  %a32 = graph.cast %a : {A8} -> {A32}
  %b32 = graph.cast %b : {B8} -> {B32}
  %bt = graph.transpose %b32 {{perm = array<i64: 0, 2, 1>}} : {B32} -> {BT}
  %y = graph.matmul %a32, %bt : ({A32}, {BT}) -> {Y}
  %o = graph.cast %y : {Y} -> tensor<3x130x72xbf16>
  func.return %o : tensor<3x130x72xbf16>
}}"""
"""A batched FP8 GEMM: the batch is the wgmma grid's z (or, persistent, part of each tile)."""


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
@pytest.mark.parametrize(
    "knobs", ["", "mma=wgmma bn=64 sms=4 promote=on"], ids=["default", "persistent_promoted"]
)
def test_batched_wgmma_fp8_gemm_matches_reference_on_cpu(knobs: str) -> None:
    pipeline = f"fuse,tile{{{knobs}}},to-cuda"
    program, tiled = lower(BATCHED, pipeline.removesuffix(",to-cuda"))
    assert "#tile.plan<wgmma" in str(tiled)
    lowered = (program, apply_pipeline(tiled, "to-cuda"))  # `pipeline`, lowered once
    error, _ = error_on_cpu(BATCHED, pipeline, seed=6, lowered=lowered)
    assert error <= 1e-6, error


@pytest.mark.skipif(CUOBJDUMP is None or not HAS_NVDISASM, reason="cuobjdump or nvdisasm not found")
@pytest.mark.parametrize(("knobs", "product"), [("promote=on", "64x128x32"), ("", "64x256x32")])
def test_wgmma_fp8_sass_has_fp8_tensor_core_products_and_no_spills(
    knobs: str, product: str, tmp_path: Path
) -> None:
    """4096³ to bf16: QGMMA (the FP8 wgmma) on E4M3 operands fed by TMA, no local memory:
    128-column blocks whose K steps are promoted to f32 (FADDs of the products), or (the
    default for a 16-bit output) 256-column blocks summing all of K in the tensor cores."""
    code = sass(scaled_matmul(4096, 4096, 4096), f"fuse,tile{{{knobs}}},to-cuda", tmp_path)
    assert set(re.findall(r"\bQGMMA\.\w+\.\w+\.\w+\.\w+", code)) == {
        f"QGMMA.{product}.F32.E4M3.E4M3"
    }
    assert "UTMALDG" in code
    assert not LOCAL_MEMORY.search(code)
    assert (len(re.findall(r"\bFADD\b", code)) >= 64) == (knobs == "promote=on")


@requires_gpu
@pytest.mark.parametrize("shape", [(256, 512, 384), (100, 80, 48)], ids=["aligned", "ragged"])
def test_compiled_scaled_mm_matches_torch_on_gpu(shape: tuple[int, int, int]) -> None:
    """`torch._scaled_mm` captured and run by `CompiledModel` (FP8 tensors bound by address)
    and by a host function called on torch FP8 tensors: both as torch computes it."""
    torch = pytest.importorskip("torch")
    from tinyopt.backends.cuda.runtime import compile_module
    from tinyopt.frontends.compiled_model import CompiledModel

    m, n, k = shape
    generator = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(m, k, device="cuda", generator=generator).to(torch.float8_e4m3fn)
    w = torch.randn(n, k, device="cuda", generator=generator).to(torch.float8_e4m3fn)
    scales = (torch.tensor(0.5, device="cuda"), torch.tensor(0.25, device="cuda"))
    module = _scaled_mm_module()
    want = module(a, w, *scales).double()
    got = CompiledModel(module, a, w, *scales)(a, w, *scales).double()
    assert ((got - want).norm() / want.norm()).item() < 2**-8
    program, lowered = lower(scaled_matmul(m, n, k), "fuse,tile,to-cuda")
    run = compile_module(lowered).function(graph_function(program).sym_name.data)
    direct = run(a, w, (scales[0] * scales[1]).reshape(1)).double()
    assert ((direct - want).norm() / want.norm()).item() < 2**-8
