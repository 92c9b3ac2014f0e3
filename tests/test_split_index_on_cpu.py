"""A copy whose source index is a row c split as `[c / d, ..., c % d]` (attention's
`[b, h, s, d]` output laid out as `[b, s, h·d]`) is read in vectors of up to d's power-of-two
factor (emit.contiguous_alignment); the kernel runs on the CPU emulation of CUDA
(tests/cpu_cuda.py) and must be an exact transpose, including vectors that would be wrong if
they crossed a multiple of d. Needs g++; no GPU.
"""

from __future__ import annotations

import numpy as np
import pytest
from cpu_cuda import COMPILER, run_on_cpu
from programs import heads_to_rows

from tinyopt.backends.check import device_inputs, graph_function
from tinyopt.compiler import lower
from tinyopt.dialects import tile

pytestmark = pytest.mark.skipif(COMPILER is None, reason="g++ not found")


@pytest.mark.parametrize(
    ("shape", "dtype", "width"),
    [((2, 4, 33, 128), "bf16", 8), ((3, 5, 7, 12), "bf16", 4), ((1, 3, 9, 6), "f32", 2)],
)
def test_split_row_copy_is_vectorized_and_exact(
    shape: tuple[int, int, int, int], dtype: str, width: int
) -> None:
    b, h, s, d = shape
    program, module = lower(heads_to_rows(b, h, s, d, dtype), "fuse,tile,to-cuda")
    (kernel,) = [op for op in module.ops if isinstance(op, tile.CudaKernelOp)]
    assert f"tinyopt_vec<{'float' if dtype == 'f32' else '__nv_bfloat16'}, {width}>" in (
        kernel.source.data
    )
    _, (x,) = device_inputs(graph_function(program), seed=1)
    out = np.full((b, s, h * d), 0xFFFF if dtype == "bf16" else np.nan, x.dtype)
    _, result = run_on_cpu(kernel, [x, out])
    expected = x.reshape(b, h, s, d).transpose(0, 2, 1, 3).reshape(b, s, h * d)
    assert np.array_equal(result, expected)
