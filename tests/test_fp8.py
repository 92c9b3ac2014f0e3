"""8-bit floats (f8E4M3FN, f8E5M2): rounding as torch rounds, the graph dialect's rules for
them, and programs that quantize and that multiply FP8 operands (the `_scaled_mm` form) run by
the loop executor and, compiled to CUDA, on the CPU emulation (tests/cpu_cuda.h) against the
reference executor. The same programs run on a GPU in tests/test_gpu_programs.py."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import requires_gpu
from cpu_cuda import COMPILER
from cpu_wgmma import error_on_cpu, run_program_on_cpu
from programs import quantize, scaled_matmul
from xdsl.dialects.builtin import bf16, f8E4M3FN, f8E5M2
from xdsl.utils.exceptions import VerifyException

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


PROGRAMS = {
    "scaled_mm_e4m3": scaled_matmul(40, 24, 72),
    "scaled_mm_e5m2_f32": scaled_matmul(17, 9, 33, "f8E5M2", "f32"),
    "quantize": quantize((5, 13)),
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
