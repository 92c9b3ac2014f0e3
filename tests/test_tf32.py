"""TF32 (`mma=tf32`) is what it says: f32 inputs rounded to TF32 on tensor cores, never a default.

On the GPU its error against float64 sits where TF32 rounding puts it (about 3e-4 relative):
far above f32 FMA's (about 1e-7), so the kernel did round its inputs, and within 1e-3, so it
rounded to nearest and accumulated in f32.
"""

import pytest
from conftest import requires_gpu
from programs import TF32_TOLERANCE, matmul_plain, tile_with

from tinyopt.backends.check import device_inputs, errors_against_reference, graph_function
from tinyopt.backends.cuda.runtime import compile_module
from tinyopt.compiler import lower
from tinyopt.dialects import tile

PROGRAM = matmul_plain(512, 512, 2048, "f32", relu=False)


def test_tf32_is_never_a_default() -> None:
    _, module = lower(PROGRAM, "fuse,tile,to-cuda")
    (kernel,) = [op for op in module.ops if isinstance(op, tile.CudaKernelOp)]
    assert "tf32" not in kernel.source.data


@requires_gpu
@pytest.mark.parametrize("knobs", ["mma=tf32", "mma=tf32 bm=128 bn=128 bk=16"])
def test_tf32_error_is_tf32_rounding(knobs: str) -> None:
    program, module = lower(PROGRAM, tile_with(knobs))
    graph = graph_function(program)
    run = compile_module(module, poison=True).function(graph.sym_name.data)
    inputs, arrays = device_inputs(graph, seed=0)
    (error,) = errors_against_reference(graph, (run(*arrays),), inputs)
    assert 5e-5 < error < TF32_TOLERANCE, error
