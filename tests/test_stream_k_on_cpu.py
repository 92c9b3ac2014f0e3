"""Stream-K kernels (`streamk=on`, `tail`) run on the CPU emulation of CUDA (tests/cpu_cuda.py)
and match the float64 reference: tiles whose K steps are split among shares, summed through the
workspace and flags, with the partial sums of a few shares added in unrolled code and of many
in a loop, and `tail`'s tiles run whole after the shared ones.

The emulation runs blocks one after another in launch order, so a block that waited on a flag
not yet set would wait for ever; here a flag wait aborts instead. These kernels passing shows
each handoff goes from a block to one launched later (`passes/tile/gemm/stream_k.py`). Needs g++.
"""

from __future__ import annotations


import numpy as np
import pytest
from cpu_cuda import COMPILER, run_on_cpu
from programs import matmul_plain, matmul_relu, skinny, tile_with
from test_sgemm_on_cpu import ALIGNED_SHARED, PRELUDE
from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerType, StringAttr
from xdsl.ir import BlockArgument

from tinyopt.backends.check import device_inputs, errors_against_reference, graph_function
from tinyopt.compiler import apply_pipeline, lower, parse
from tinyopt.dialects import loop, tile

pytestmark = pytest.mark.skipif(COMPILER is None, reason="g++ not found")


def on_cpu(source: str) -> str:
    """The kernel with its shared arrays static (one block runs at a time)."""
    return ALIGNED_SHARED.sub(r"\1 static ", source)


CASES = [
    # One 32×64 tile, 40 K steps handed out two at a time: 20 shares, the first adding the
    # partial sums of 19 in a loop.
    (
        "one_tile_20_shares_32x64x640",
        matmul_plain(32, 64, 640, "f32", relu=False),
        "bm=32 bn=64 tm=4 tn=4",
    ),
    # Two tiles, a ragged last K step, relu after the sum: 10 shares, at most 5 per tile, the
    # partial sums added in unrolled code.
    ("two_tiles_ragged_k_relu_64x64x150", matmul_relu(64, 64, 150), "bm=32 bn=64 tm=4 tn=4"),
    # tail: 144 tiles of 32×16 on 132 slots: 12 shared by 36 shares (one K step each) launched
    # first, then 132 blocks of one whole tile each.
    (
        "tail_384x192x40",
        matmul_plain(384, 192, 40, "f32", relu=False),
        "bm=32 bn=16 tm=4 tn=4 streamk=tail",
    ),
]


@pytest.mark.parametrize(("text", "knobs"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_stream_k_matches_float64_on_cpu(text: str, knobs: str) -> None:
    knobs = knobs if "streamk" in knobs else f"{knobs} streamk=on"
    _matches_float64(text, tile_with(f"mma=none copy=ld {knobs}"))


def test_default_tile_counts_on_stream_k_between_one_and_two_blocks_per_sm() -> None:
    """With 4 SMs, 6 tiles of 128×128 (rows 300: the last tile ragged) are more than one and
    fewer than two blocks per SM; over 65 K steps the heuristic takes them, two blocks per SM
    of 256 threads, with stream-K sharing the K steps over one wave of 8 blocks."""
    program, module = lower(matmul_plain(300, 256, 1040, "f32", relu=False), tile_with("sms=4"))
    source = next(op for op in module.ops if "flags" not in op.sym_name.data).source.data
    assert "__launch_bounds__(256, 2)" in source
    kernels = [op for op in module.ops if isinstance(op, tile.CudaKernelOp)]
    assert [list(k.grid.get_values()) for k in kernels][-1] == [8, 1, 1]
    _matches_float64(matmul_plain(300, 256, 1040, "f32", relu=False), tile_with("sms=4"))


def test_default_row_block_at_40_rows_on_stream_k() -> None:
    """With 2 SMs, 40 rows of a torch-layout linear (the weights `[N, K]`, N and K ragged) take
    one 64×64 block of 8×4 register tiles (`row_block`: 128 threads; 31.5 steps of a 64×64
    tile a block, too few for 64×128 ones) over its 4 column tiles, stream-K sharing their 63
    K steps over a wave of 8 blocks."""
    text = skinny(40, 200, 1000)
    planned = str(apply_pipeline(parse(text), "fuse,plan{sms=2 swap=off}"))
    assert "bm = 64, bn = 64, bk = 16, tm = 8, tn = 4" in planned
    assert 'minblocks = 4, interleave = "off", prefetch = "off", streamk = "on"' in planned
    program, module = lower(text, tile_with("sms=2 swap=off"))
    kernels = [op for op in module.ops if isinstance(op, tile.CudaKernelOp)]
    assert [list(k.grid.get_values()) for k in kernels][-1] == [8, 1, 1]
    assert [list(k.block.get_values()) for k in kernels][-1] == [128, 1, 1]
    _matches_float64(text, tile_with("sms=2 swap=off"))


def test_default_row_block_with_relu_at_33_rows_ragged_on_stream_k() -> None:
    """33 rows (one held of the block's last 32), 330 columns over three 128-wide tiles (the
    last 74 wide) and K = 1048 (65.5 steps of 16), a ReLU epilogue, on one SM (99 steps of a
    64×64 tile a block: the 64×128 block of 8×8): the pieces of each tile meet through the
    workspace and the epilogue runs once, as tests/programs.py's GPU case
    `linear_f32_row_block_relu_33x2056x4104` does at full size."""
    text = skinny(33, 330, 1048, epilogue="relu")
    planned = str(apply_pipeline(parse(text), "fuse,plan{sms=1 swap=off}"))
    assert "bm = 64, bn = 128, bk = 16, tm = 8, tn = 8" in planned and 'streamk = "on"' in planned
    _matches_float64(text, tile_with("sms=1 swap=off"))


@pytest.mark.parametrize(
    ("m", "n", "k", "sms", "tiling", "grid"),
    [
        # 2 tiles of 64×64 (8×8 register tiles, 64 threads: eight blocks an SM) over 120 rows
        # (94% held; 128-row tiles would be 47%): fewer than two blocks per SM, 100 K steps
        # each, shared over a wave of 16 blocks (12.5 steps a block).
        (120, 64, 1600, 2, "bm = 64, bn = 64, bk = 16, tm = 8, tn = 8", 16),
        # 2 tiles of 128×128 over 250 rows (0.5 a SM of 4, 98% held), 50 K steps each,
        # shared over a wave of 8 blocks (two an SM).
        (250, 128, 800, 4, "bm = 128, bn = 128, bk = 16, tm = 8, tn = 8", 8),
    ],
    ids=["64x64_tiles_120x64x1600_sms2", "128x128_tiles_250x128x800_sms4"],
)
def test_default_tile_counts_on_stream_k_below_one_block_per_sm(
    m: int, n: int, k: int, sms: int, tiling: str, grid: int
) -> None:
    """Where the grid of 8×8 register tiles alone leaves SMs idle but its tiles are mostly
    rows and columns (`FULL_ENOUGH`) and the wave gets enough K steps a block
    (`STREAM_K_STEPS`), the heuristic takes those tiles with stream-K rather than the 32×64
    tiles of 4×4 that fill the SMs by number (0.67-0.69x cuBLAS at 231 rows on the H200,
    against 1.24x)."""
    text = matmul_plain(m, n, k, "f32", relu=False)
    planned = str(apply_pipeline(parse(text), f"fuse,plan{{sms={sms}}}"))
    assert tiling in planned and 'streamk = "on"' in planned
    program, module = lower(text, tile_with(f"sms={sms}"))
    kernels = [op for op in module.ops if isinstance(op, tile.CudaKernelOp)]
    assert [list(k.grid.get_values()) for k in kernels][-1] == [grid, 1, 1]
    _matches_float64(text, tile_with(f"sms={sms}"))


def _matches_float64(text: str, pipeline: str) -> None:
    """Runs the program's stream-K kernel on the CPU (flags zeroed, other buffers NaN) and
    compares its output with the float64 reference."""
    program, module = lower(text, pipeline)
    graph = graph_function(program)
    inputs, arrays = device_inputs(graph, seed=5)
    kernel = next(
        op
        for op in module.ops
        if isinstance(op, tile.CudaKernelOp) and "flags" not in op.sym_name.data
    )
    kernel = kernel.clone()
    kernel.properties["source"] = StringAttr(on_cpu(kernel.source.data))
    (function,) = [op for op in module.ops if isinstance(op, func.FuncOp)]
    (launch,) = [
        op
        for op in function.walk()
        if isinstance(op, loop.LaunchOp) and op.callee.string_value() == kernel.sym_name.data
    ]
    output = function.body.block.last_op.operands[0]
    buffers = []
    for a in launch.args:
        if isinstance(a, BlockArgument):
            buffers.append(arrays[a.index])
        elif isinstance(a.type.element_type, IntegerType):
            buffers.append(np.zeros(a.type.get_shape(), np.int32))  # the flags, as zeroed
        else:
            buffers.append(np.full(a.type.get_shape(), np.nan, np.float32))
    result = run_on_cpu(kernel, buffers, PRELUDE)[list(launch.args).index(output)]
    (error,) = errors_against_reference(graph, [result], inputs)
    assert error < 1e-5, error
