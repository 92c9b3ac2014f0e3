"""The tensor-core flash-attention kernels run on a CPU emulation of CUDA (tests/cpu_cuda.py)
and match the float64 reference: the cp.async pipeline over several key tiles, two m16 tiles
per warp, a causal mask (tiles skipped, reversed query tiles, the mask on diagonal tiles only),
the scale folded into the exponent, GQA, a partial last tile, fp16, and the [B, H, S, D] output
stored directly. Needs g++ (C++20); no GPU.
"""

from __future__ import annotations

import numpy as np
import pytest
from attention_programs import attention
from cpu_cuda import COMPILER, run_on_cpu

from tinyopt.backends.check import device_inputs, errors_against_reference, graph_function
from tinyopt.compiler import lower
from tinyopt.dialects import tile

pytestmark = pytest.mark.skipif(COMPILER is None, reason="g++ not found")

PIPELINE = "decompose,fuse,flash-attention,tile,to-cuda"


@pytest.mark.parametrize(
    "text",
    [
        attention(2, 1, 200, 128, "bf16", causal=True),
        attention(1, 2, 130, 64, "f16", causal=True, kv_heads=1),
    ],
    ids=["d128-bf16-causal-s200-b2", "d64-f16-gqa-causal-s130"],
)
def test_attention_kernel_matches_float64_on_cpu(text: str) -> None:
    program, module = lower(text, PIPELINE)
    (kernel,) = [op for op in module.ops if isinstance(op, tile.CudaKernelOp)]
    graph = graph_function(program)
    inputs, arrays = device_inputs(graph, seed=4)
    storage = [a.view(np.uint16) for a in arrays]  # fp16 travels as its bits too
    *_, result = run_on_cpu(kernel, [*storage, np.zeros_like(storage[0])])
    (error,) = errors_against_reference(graph, [result.view(arrays[0].dtype)], inputs)
    assert error < 1e-2, error
