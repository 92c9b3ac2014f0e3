"""The skinny-GEMM kernels (GEMV, M ≤ 64; passes/tile/gemm/skinny.py) run on the CPU emulation
of CUDA (tests/cpu_cuda.py) and match the float64 reference on fresh random data: both weight
layouts (`[N, K]` lanes along K with shuffles, `[K, N]` lanes along N with warps over K), f32
and bf16, M of 1, 3, 8, 17 and 64 (ragged row chunks), N and K of 1, primes and other lengths
that are not multiples of the vector width (narrower vectors, guarded tails), a bias + GELU
epilogue, a weight per batch entry, and the split over K (partial sums, then a fold that
applies the epilogue once). Needs g++ (C++20); no GPU.
"""

from __future__ import annotations

import numpy as np
import pytest
from cpu_cuda import COMPILER, run_on_cpu
from programs import skinny, tile_with
from test_sgemm_on_cpu import ALIGNED_SHARED, PRELUDE, viewed
from xdsl.dialects import func, memref
from xdsl.dialects.builtin import MemRefType, StringAttr
from xdsl.ir import BlockArgument, SSAValue

from tinyopt.backends.check import (
    device_inputs,
    errors_against_reference,
    graph_function,
    tolerance,
)
from tinyopt.compiler import apply_pipeline, lower, parse
from tinyopt.dialects import loop, tile

pytestmark = pytest.mark.skipif(COMPILER is None, reason="g++ not found")

CASES = [
    # (id, program, knobs, the kernels the plan makes: rule names in launch order). Where N is
    # less than 4·M, `skinny=auto` leaves the kernel to the tile rules; `skinny=on` takes it.
    ("gemv_nk_f32_1x13x521", skinny(1, 13, 521), "skinny=on", ["skinny"]),
    (
        "gemv_nk_bf16_1x33x1000_bias_gelu",
        skinny(1, 33, 1000, "bf16", epilogue="bias_gelu"),
        "skinny=on",
        ["skinny"],
    ),
    ("nk_f32_3x1x45_one_column", skinny(3, 1, 45), "skinny=on", ["skinny"]),
    # K = 1: `fuse` hoists both loads out of the K loop (an outer product); the rule refuses it
    # ("computes per point before its K loop") and the row rule writes it.
    ("outer_product_f32_3x5x1", skinny(3, 5, 1), "", ["row_reduction"]),
    (
        "nk_bf16_8x17x2056_relu",
        skinny(8, 17, 2056, "bf16", epilogue="relu"),
        "skinny=on",
        ["skinny"],
    ),
    ("nk_f32_17x7x129_rows8", skinny(17, 7, 129), "skinny=on rows=8", ["skinny"]),
    # Several output columns a warp (knob cols): N not a multiple of cols × warps.
    ("nk_bf16_8x37x264_cols4", skinny(8, 37, 264, "bf16"), "skinny=on cols=4", ["skinny"]),
    ("nk_f32_5x19x72_cols8", skinny(5, 19, 72), "skinny=on cols=8", ["skinny"]),
    ("nk_f32_64x3x64_bias_gelu", skinny(64, 3, 64, epilogue="bias_gelu"), "skinny=on", ["skinny"]),
    ("kn_f32_1x37x29", skinny(1, 37, 29, layout="kn"), "", ["skinny"]),
    ("kn_bf16_3x520x67_bias_gelu", skinny(3, 520, 67, "bf16", "kn", "bias_gelu"), "", ["skinny"]),
    (
        "kn_f32_17x130x40_threads64",
        skinny(17, 130, 40, layout="kn"),
        "skinny=on threads=64",
        ["skinny"],
    ),
    ("batched_nk_bf16_2x3x11x48", skinny(3, 11, 48, "bf16", batch=2), "skinny=on", ["skinny"]),
    ("batched_kn_f32_3x1x40x33", skinny(1, 40, 33, layout="kn", batch=3), "", ["skinny"]),
    # Split over K: the M = 1 form the planner cannot split (the rule splits it itself), with
    # an epilogue the fold applies; and a [K, N] GEMM split by the planner (atomic adds into
    # the zeroed f32 output), the rule taking its partial-sum kernel.
    (
        "split_gemv_nk_bf16_1x19x256_bias_gelu",
        skinny(1, 19, 256, "bf16", epilogue="bias_gelu"),
        "skinny=on splitk=4",
        ["skinny", "sequential"],
    ),
    ("split_kn_f32_5x24x96", skinny(5, 24, 96, layout="kn"), "splitk=2", ["elementwise", "skinny"]),
    # The row rule's GEMV with every row preloaded into registers (cache=2): K past a whole
    # number of the threads' vectors (guarded tails), narrow vectors, a warp a row.
    ("row_gemv_bf16_1x37x14344_cache2", skinny(1, 37, 14344, "bf16"), "cache=2", ["row_reduction"]),
    (
        "row_gemv_f32_1x9x1003_cache2_bias_gelu",
        skinny(1, 9, 1003, epilogue="bias_gelu"),
        "cache=2",
        ["row_reduction"],
    ),
    (
        "row_gemv_bf16_1x16x520_cache2_warp_rows4",
        skinny(1, 16, 520, "bf16"),
        "cache=2 threads=32 rows=4",
        ["row_reduction"],
    ),
]


@pytest.mark.parametrize(
    ("text", "knobs", "rules"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_skinny_kernels_match_float64_on_cpu(text: str, knobs: str, rules: list[str]) -> None:
    assert planned_rules(text, knobs) == rules
    program, module = lower(text, tile_with(knobs))
    graph = graph_function(program)
    inputs, arrays = device_inputs(graph, seed=11)
    (result,) = run_program(module, arrays)
    (error,) = errors_against_reference(graph, [result], inputs)
    assert error < tolerance(graph), error


def planned_rules(text: str, knobs: str) -> list[str]:
    """The rule of each kernel the plan makes of `text`, in order."""
    module = apply_pipeline(parse(text), f"fuse,plan{{{knobs}}}")
    return [k.attributes[tile.PLAN].rule.data for k in loop.kernels(module)]  # type: ignore[union-attr]


def run_program(module, arrays: list[np.ndarray]) -> list[np.ndarray]:
    """Runs the host function's launches in order on the CPU, over the inputs and buffers it
    allocates (NaN-filled); returns the arrays it returns."""
    (function,) = [op for op in module.ops if isinstance(op, func.FuncOp)]
    kernels = {op.sym_name.data: op for op in module.ops if isinstance(op, tile.CudaKernelOp)}
    held: dict[SSAValue, np.ndarray] = {}
    for op in function.body.block.ops:
        if isinstance(op, memref.AllocOp):
            t = op.memref.type
            assert isinstance(t, MemRefType)
            storage = np.float32 if str(t.element_type) == "f32" else np.uint16
            fill = np.nan if storage is np.float32 else 0x7FC0
            held[op.memref] = np.full(t.get_shape(), fill, storage)
        elif isinstance(op, loop.LaunchOp):
            kernel = kernels[op.callee.string_value()].clone()
            source = ALIGNED_SHARED.sub(r"\1 static ", kernel.source.data)
            kernel.properties["source"] = StringAttr(source)
            sources = [viewed(a) for a in op.args]
            buffers = [
                _buffer(s, arrays, held).reshape(a.type.get_shape())  # type: ignore[attr-defined]
                for a, s in zip(op.args, sources)
            ]
            for s, out in zip(sources, run_on_cpu(kernel, buffers, PRELUDE)):
                if not isinstance(s, BlockArgument):
                    held[s] = out.reshape(held[s].shape)
    returned = function.body.block.last_op.operands
    return [held[viewed(v)] for v in returned]


def _buffer(value: SSAValue, arrays: list[np.ndarray], held: dict) -> np.ndarray:
    if isinstance(value, BlockArgument):
        return arrays[value.index]
    return held[value]
