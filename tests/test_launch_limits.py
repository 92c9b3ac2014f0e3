"""Launches past the device's limits are re-gridded, index arithmetic is widened where it may
leave `int`, and what no 64-bit index reaches is refused by name (passes/tile/limits.py).

The re-gridded kernels run on the CPU emulation of CUDA (tests/cpu_cuda.py, needs g++) at small
sizes, with the grid limits lowered (`limits.MAX_GRID`) so that the fold into x and the loop
over the excess really run; their results match the float64 reference. The H200-sized cases
(a batch of 100000 GEMMs, attention over 131072 heads) are in tests/lit/tile_pass/launch_limits*
and in programs.CASES (run on the GPU by test_gpu_programs.py).
"""

from __future__ import annotations

import pytest
from cpu_cuda import COMPILER
from programs import batched_matmul, bias_gelu, softmax, tile_with
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser
from xdsl.utils.exceptions import DiagnosticException

from tinyopt.backends.cuda.printer import kernel_source
from tinyopt.compiler import context, lower
from tinyopt.dialects import tile
from tinyopt.passes.tile import limits
from tinyopt.passes.to_cuda import ToCudaPass

requires_gxx = pytest.mark.skipif(COMPILER is None, reason="g++ not found")

CPU_CASES = [
    # grid (1, 2, 5): z past a limit of 2 folds into x, the row tile and batch come from
    # blockIdx.x by remainder and division.
    ("fold_batch_into_x", batched_matmul(5, 33, 20, 17), "mma=none", (2**31 - 1, 65535, 2), 10),
    # grid (2, 3, 5) = 30 blocks, x limited to 7: folded, then 5 rounds of 7 blocks (the last
    # runs 2), each block's x, y and z recovered from its virtual index; shared memory and a
    # barrier between rounds.
    (
        "loop_over_excess_gemm",
        batched_matmul(5, 70, 40, 17),
        "mma=none bm=32 bn=32",
        (7, 2, 2),
        7,
    ),
    # 7 rows of 2048: one block per row (a block-wide reduction), 3 rounds of 3 blocks.
    ("loop_over_excess_rows", softmax((7, 2048)), "", (3, 1, 1), 3),
    # 10 blocks of 256 vectors, 4 launched: 3 rounds, the last with 2.
    ("loop_over_excess_elementwise", bias_gelu((10, 1000)), "", (4, 1, 1), 4),
]


@requires_gxx
@pytest.mark.parametrize(
    ("text", "knobs", "limit", "launched"),
    [c[1:] for c in CPU_CASES],
    ids=[c[0] for c in CPU_CASES],
)
def test_regridded_kernel_matches_float64_on_cpu(
    monkeypatch: pytest.MonkeyPatch, text: str, knobs: str, limit: tuple, launched: int
) -> None:
    from test_sgemm_on_cpu import run_sgemm

    monkeypatch.setattr(limits, "MAX_GRID", limit)
    _, module = lower(text, tile_with(knobs))
    (kernel,) = [op for op in module.ops if isinstance(op, tile.CudaKernelOp)]
    assert list(kernel.grid.get_values()) == [launched, 1, 1]
    assert run_sgemm(text, knobs) < 1e-5


def test_within_limits_is_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    text = batched_matmul(5, 33, 20, 17)
    _, before = lower(text, tile_with("mma=none"))
    monkeypatch.setattr(limits, "MAX_GRID", (2**31 - 1, 65535, 5))
    _, after = lower(text, tile_with("mma=none"))
    assert str(before) == str(after)
    assert "grid = array<i64: 1, 2, 5>" in str(after)


def test_state_kept_across_blocks_is_not_looped(monkeypatch: pytest.MonkeyPatch) -> None:
    """A wgmma kernel's mbarrier phases cannot be re-run by a loop over the excess: refused."""
    monkeypatch.setattr(limits, "MAX_GRID", (2, 1, 1))
    with pytest.raises(DiagnosticException) as e:
        lower(batched_matmul(3, 64, 64, 64, "bf16"), tile_with("mma=wgmma"))
    message = str(e.value)
    assert "kernel @bmm_0" in message and "gridDim.x's limit 2" in message


def test_index_space_beyond_int64_is_refused() -> None:
    with pytest.raises(DiagnosticException) as e:
        lower(softmax((2**32, 2**32)), "fuse,tile")
    message = str(e.value)
    assert "kernel @softmax_0" in message and "beyond the 64-bit indices' limit 2^63 - 1" in message


def _module(grid: int, scale: int = 256, dim: str = "x") -> ModuleOp:
    """A tile kernel storing at blockIdx.`dim` · `scale` + threadIdx.x into a 16-float buffer,
    launched on `grid` blocks along `dim`."""
    shape = [grid if d == dim else 1 for d in "xyz"]
    text = f"""builtin.module {{
  tile.kernel @k grid {shape} block [256, 1, 1] (%0: memref<16xf32>) {{
    %b = tile.block_id {dim}
    %c = arith.constant {scale} : index
    %m = arith.muli %b, %c : index
    %t = tile.thread_id x
    %i = arith.addi %m, %t : index
    %n = arith.constant 16 : index
    %in = arith.cmpi ult, %i, %n : index
    scf.if %in {{
      %z = arith.constant 0.0 : f32
      memref.store %z, %0[%i] : memref<16xf32>
    }}
  }}
}}"""
    return Parser(context(), text).parse_module()


def _kernel(grid: int, scale: int = 256) -> tile.KernelOp:
    (kernel,) = _module(grid, scale).ops
    assert isinstance(kernel, tile.KernelOp)
    return kernel


def test_index_arithmetic_past_int_is_widened() -> None:
    assert limits.index_range(_kernel(8)) == (0, 7 * 256 + 255)
    assert "long long" not in kernel_source(_kernel(8))
    # 2^31 - 1 blocks of 256 threads: the global id needs 39 bits, though the buffer is small.
    assert limits.index_range(_kernel(2**31 - 1))[1] == (2**31 - 2) * 256 + 255
    assert "long long i = m + t;" in kernel_source(_kernel(2**31 - 1))


def test_a_warp_uniform_value_keeps_its_operands_range() -> None:
    """`tile.warp_uniform` (lane 0's value) ranges over what its operand does: the widening
    above sees through it."""
    text = str(_module(2**31 - 1)).replace(
        "%i = arith.addi %m, %t : index",
        "%u = tile.warp_uniform %t\n    %i = arith.addi %m, %u : index",
    )
    (kernel,) = Parser(context(), text).parse_module().ops
    assert isinstance(kernel, tile.KernelOp)
    assert limits.index_range(kernel)[1] == (2**31 - 2) * 256 + 255
    assert "long long i = m + u;" in kernel_source(kernel)


def test_index_arithmetic_past_int64_is_refused() -> None:
    kernel = _kernel(2**31 - 1, scale=2**40)
    with pytest.raises(DiagnosticException) as e:
        limits.fit_launch(kernel, "to-cuda")
    assert str(e.value).startswith("to-cuda: kernel @k: its index arithmetic reaches")
    assert "beyond the 64-bit indices' limit" in str(e.value)


def test_to_cuda_regrids_tile_ir_written_past_the_limits() -> None:
    """Tile IR written by hand with 70000 blocks along y launches them along x."""
    module = _module(70000, dim="y")
    ToCudaPass().apply(context(), module)
    (kernel,) = module.ops
    assert isinstance(kernel, tile.CudaKernelOp)
    assert list(kernel.grid.get_values()) == [70000, 1, 1]
    source = kernel.source.data
    assert "blockIdx.x" in source and "blockIdx.y" not in source
