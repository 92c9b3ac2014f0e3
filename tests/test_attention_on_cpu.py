"""The tensor-core flash-attention kernels run on a CPU emulation of CUDA (tests/cpu_cuda.py)
and match the float64 reference: the cp.async pipeline over several key tiles, two m16 tiles
per warp, a causal mask (tiles skipped, reversed query tiles, the mask on diagonal tiles only),
the scale folded into the exponent, GQA, a partial last tile, fp16, the [B, H, S, D] output
stored directly, and a mask input with fully masked rows (exactly 0) and logits of ~1e4.
Needs g++ (C++20); no GPU.
"""

from __future__ import annotations

import numpy as np
import pytest
from attention_programs import attention, attention_spelled_out
from cpu_cuda import COMPILER, run_on_cpu
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, bf16
from xdsl.ir import BlockArgument

from tinyopt.backends.check import (
    device_inputs,
    errors_against_reference,
    from_storage,
    graph_function,
    relative_error,
    to_storage,
)
from tinyopt.backends.reference import run_reference
from tinyopt.compiler import lower
from tinyopt.dialects import loop, tile

pytestmark = pytest.mark.skipif(COMPILER is None, reason="g++ not found")

PIPELINE = "decompose,fuse,flash-attention,tile{{attn=sync{knobs}}},to-cuda"
MASKED = "fuse,flash-attention,tile{attn=sync},to-cuda"


@pytest.mark.parametrize(
    ("text", "knobs"),
    [
        (attention(2, 1, 200, 128, "bf16", causal=True), ""),
        (attention(1, 2, 130, 64, "f16", causal=True, kv_heads=1), ""),
        (attention(1, 1, 200, 64, "bf16", causal=True), " arows=16 awarps=8"),
    ],
    ids=["d128-bf16-causal-s200-b2", "d64-f16-gqa-causal-s130", "d64-16-rows-8-warps"],
)
def test_attention_kernel_matches_float64_on_cpu(text: str, knobs: str) -> None:
    program, module = lower(text, PIPELINE.format(knobs=knobs))
    graph = graph_function(program)
    inputs, arrays = device_inputs(graph, seed=4)
    result = _run(module, arrays)
    (error,) = errors_against_reference(graph, [result], inputs)
    assert error < 1e-2, error


def test_fully_masked_rows_give_zero_and_large_logits_stay_finite_on_cpu() -> None:
    """A mask input (read on every tile) with rows 3 and 99 all −inf, logits of ~1e4."""
    program, module = lower(attention_spelled_out(2, 100, 64, "bf16", scale=4e2), MASKED)
    graph = graph_function(program)
    inputs, arrays = device_inputs(graph, seed=6)
    mask = np.zeros((100, 100))
    mask[[3, 99], :] = -np.inf
    inputs[3], arrays[3] = mask, to_storage(mask, bf16)
    out = from_storage(_run(module, arrays), bf16)
    (ref,) = run_reference(graph, *inputs)
    assert np.isfinite(out).all()
    assert (out[:, [3, 99]] == 0).all()
    keep = [r for r in range(100) if r not in (3, 99)]
    assert relative_error(out[:, keep], ref[:, keep]) < 2e-2


def _run(module: ModuleOp, arrays: list[np.ndarray]) -> np.ndarray:
    """Runs a program of one launch of one kernel on the CPU; returns its output buffer."""
    (kernel,) = [op for op in module.ops if isinstance(op, tile.CudaKernelOp)]
    (function,) = [op for op in module.ops if isinstance(op, func.FuncOp)]
    (launch,) = [op for op in function.walk() if isinstance(op, loop.LaunchOp)]
    (output,) = [a for a in launch.args if not isinstance(a, BlockArgument)]
    # fp16 travels as its bits, like bf16
    storage = [a.view(np.uint16) for a in arrays]
    out = np.zeros(output.type.get_shape(), np.uint16)  # type: ignore[attr-defined]
    buffers = [out if a is output else storage[a.index] for a in launch.args]
    result = run_on_cpu(kernel, buffers)[list(launch.args).index(output)]
    return result.view(arrays[0].dtype)
