"""The FP32 SGEMM kernels (`mma=none`, CUDA cores) run on a CPU emulation of CUDA
(tests/cpu_cuda.py) and match the float64 reference: the registers-staged K loop (`copy=ld`) two
K steps per iteration (an even and an odd number of steps, one step) and one per iteration (a
large register tile), each side's next slice copied in turn (`interleave`), single-buffered
(`stages=1`), a fused prologue and epilogue, M, N and K that are not multiples of the tile,
batch 3, operands stored transposed, chunk layouts whose rows do not divide among the threads;
and the cp.async ring (16- and 4-byte copies, several copies per thread, swizzled). The L2
prefetch of the next tile (`prefetch`) is checked line by line: every block asks for exactly the
lines of the first two K steps of the tile launched a wave later, all inside the buffers.
Needs g++ (C++20); no GPU.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from cpu_cuda import COMPILER, run_on_cpu
from programs import (
    batched_matmul,
    gqa_scores,
    masked_scores,
    matmul_plain,
    matmul_relu,
    matmul_transposed,
    shared_weight_batch_bias,
    tile_with,
)
from xdsl.dialects import func, memref
from xdsl.dialects.builtin import StringAttr
from xdsl.ir import BlockArgument, SSAValue

from tinyopt.backends.check import device_inputs, errors_against_reference, graph_function
from tinyopt.compiler import lower
from tinyopt.dialects import loop, tile

pytestmark = pytest.mark.skipif(COMPILER is None, reason="g++ not found")

PRELUDE = r"""
#define __shared__ static
static inline void tinyopt_cp_async_4(void* dst, const void* src, bool valid) {
    if (valid) memcpy(dst, src, 4); else memset(dst, 0, 4);
}
static inline void tinyopt_cp_async_8(void* dst, const void* src, bool valid) {
    if (valid) memcpy(dst, src, 8); else memset(dst, 0, 8);
}
"""
"""Static shared arrays are shared by the block's threads (blocks run one after another), and
the narrower cp.async copies (the header has the 16-byte one)."""

ALIGNED_SHARED = re.compile(r"__shared__ (alignas\(\d+\)) ")
"""`__shared__ alignas(16) float ...`: C++ wants the attribute before `static`."""

CASES = [
    # 32×64 tiles, bk=8: two steps per iteration; 11 steps (the last iteration's second step
    # is skipped), a bias prologue on A and relu.
    ("ld_unrolled_odd_70x90x83", matmul_relu(70, 90, 83), "mma=none bk=8"),
    ("ld_unrolled_even_70x90x80", matmul_relu(70, 90, 80), "mma=none bk=8"),
    ("ld_one_step_70x90x5", matmul_relu(70, 90, 5), "mma=none bk=8"),
    # The default K step (16): 5 steps, a ragged last one; and B staged as it is (pairswap=0,
    # the default swaps its column pairs).
    ("ld_default_bk16_70x90x70", matmul_relu(70, 90, 70), "mma=none"),
    ("ld_pairswap0_70x90x70", matmul_relu(70, 90, 70), "mma=none pairswap=0"),
    # Ragged last tiles read their rows and columns past the data again at the last one in
    # range: A along K (row 69), B in 4-wide vectors along N (columns 88..91), 128×128 tiles.
    ("ld_ragged_clamped_rows_150x92x64", matmul_relu(150, 92, 64), "mma=none bm=128 bn=128"),
    # bk·tm·tn = 2048: one step per iteration (the buffer index computed), 3 steps.
    (
        "ld_single_130x140x47",
        matmul_relu(130, 140, 47),
        "mma=none bm=128 bn=128 bk=16 tm=16 tn=8",
    ),
    (
        "ld_8x8_tiles_130x260x40",
        matmul_plain(130, 260, 40, "f32"),
        "mma=none bm=128 bn=128 tm=8 tn=8",
    ),
    # interleave: A's next slice copied during the first half of a step's FMAs, B's during
    # the second; asked for at a ragged shape (bk=8, odd step count), and auto's own choice
    # where 128×128×16 tiles divide the shape.
    ("ld_interleave_70x90x83", matmul_relu(70, 90, 83), "mma=none bk=8 interleave=on"),
    (
        "ld_interleave_auto_128x256x64",
        matmul_plain(128, 256, 64, "f32"),
        "mma=none bm=128 bn=128 tm=8 tn=8",
    ),
    ("ld_stages1_65x70x47", matmul_relu(65, 70, 47), "mma=none stages=1 bk=16"),
    ("ld_bmm_3x65x33x47", batched_matmul(3, 65, 33, 47), "mma=none"),
    # Two batch dims merged into one (`collapse_dims`), the mask read at the first alone.
    ("ld_two_batch_dims_mask_2x3x40x16", masked_scores(2, 3, 40, 16), "mma=none"),
    # The batch merged into the rows (B shared), the bias read at the batch index alone.
    ("ld_batch_into_rows_3x37x20x24", shared_weight_batch_bias(3, 37, 20, 24), "mma=none"),
    # GQA keys read at a batch index divided down to the KV head (sunk into the K loop).
    ("ld_gqa_keys_2x2x3x40x16", gqa_scores(2, 2, 3, 40, 16), "mma=none"),
    ("ld_transposed_65x33x47", matmul_transposed(65, 33, 47), "mma=none bk=16"),
    # 64 threads; B's 256-float rows copied one float at a time do not divide among them.
    (
        "ld_vec1_rows_over_threads_20x300x19",
        matmul_plain(20, 300, 19, "f32", relu=False),
        "mma=none vec=1 bm=16 bn=256 tm=4 tn=16",
    ),
    (
        "cp_async_two_copies_each_130x140x84",
        matmul_plain(130, 140, 84, "f32"),
        "mma=none copy=cp_async bm=128 bn=128 bk=16 tm=8 tn=8",
    ),
    (
        "cp_async_4_byte_stages4_70x90x83",
        matmul_plain(70, 90, 83, "f32"),
        "mma=none copy=cp_async stages=4",
    ),
    (
        "cp_async_swizzle_linear_70x90x84",
        matmul_plain(70, 90, 84, "f32", "nk"),
        "mma=none copy=cp_async swizzle=1 bk=16",
    ),
]


@pytest.mark.parametrize(("text", "knobs"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_sgemm_kernel_matches_float64_on_cpu(text: str, knobs: str) -> None:
    assert run_sgemm(text, knobs) < 1e-5


def run_sgemm(text: str, knobs: str, prefetch_log: Path | None = None) -> float:
    """Runs a one-kernel GEMM program's kernel on the CPU; returns its error against float64."""
    program, module = lower(text, tile_with(knobs))
    graph = graph_function(program)
    inputs, arrays = device_inputs(graph, seed=3)
    (kernel,) = [op for op in module.ops if isinstance(op, tile.CudaKernelOp)]
    kernel = kernel.clone()
    kernel.properties["source"] = StringAttr(ALIGNED_SHARED.sub(r"\1 static ", kernel.source.data))
    (function,) = [op for op in module.ops if isinstance(op, func.FuncOp)]
    (launch,) = [op for op in function.walk() if isinstance(op, loop.LaunchOp)]
    sources = [viewed(a) for a in launch.args]  # a collapse_shape view: its buffer, reshaped
    (output,) = [a for a in sources if not isinstance(a, BlockArgument)]
    out = np.full(output.type.get_shape(), np.nan, np.float32)  # type: ignore[attr-defined]
    buffers = [
        (out if s is output else arrays[s.index]).reshape(a.type.get_shape())  # type: ignore[attr-defined]
        for a, s in zip(launch.args, sources)
    ]
    result = run_on_cpu(kernel, buffers, PRELUDE, prefetch_log)[sources.index(output)]
    (error,) = errors_against_reference(graph, [result.reshape(out.shape)], inputs)
    return error


def viewed(value: SSAValue) -> SSAValue:
    """The buffer under a `memref.collapse_shape` view (`collapse_dims`), else `value`."""
    while isinstance(value.owner, memref.CollapseShapeOp):
        value = value.owner.src
    return value


RESIDENT = 264
"""Blocks resident at once on the H200 at two per SM (`minblocks=2`): the launch-order
distance to the tile that takes a block's slot (`passes/tile/gemm/next_tile_prefetch.py`)."""

PREFETCH_CASES = [
    # 32×32 tiles (64 threads), bk=16: 7 × 6 tiles per batch, 7 batches = 294 blocks, so the
    # first 30 prefetch the tiles of blocks 264…293, ragged in M, N and K.
    ("bmm_7x200x190x40", batched_matmul(7, 200, 190, 40), "prefetch=on", (7, 200, 190, 40), "kn"),
    # Unbatched, 17 × 17 tiles launched in groups of 8 block rows; then A [K, M] and B [N, K].
    (
        "grouped_530x530x40",
        matmul_plain(530, 530, 40, "f32", relu=False),
        "prefetch=on",
        (1, 530, 530, 40),
        "kn",
    ),
    (
        "transposed_530x530x40",
        matmul_transposed(530, 530, 40),
        "prefetch=on",
        (1, 530, 530, 40),
        "mk",
    ),
]
"""(id, program, knobs, (batch, M, N, K), the axes A and B run along in memory: "kn" for A
[M, K] and B [K, N], "mk" for A [K, M] and B [N, K])."""


def expected_lines(shape: tuple[int, int, int, int], layout: str) -> dict[int, set]:
    """Returns, per block, the (buffer, byte offset) of each 128-byte line its threads should
    prefetch: the first 2·bk K values of the A and B tiles of the block `RESIDENT` later in
    launch order (32×32 tiles, bk=16, groups of 8 block rows where there are 16 or more)."""
    batch, m, n, k = shape
    bm = bn = 32
    columns, rows = -(-n // bn), -(-m // bm)
    depth = min(32, k)
    lines: dict[int, set] = {}
    for block in range(batch * rows * columns - RESIDENT):
        b, within = divmod(block + RESIDENT, rows * columns)
        if rows >= 16:
            first_row = within // (8 * columns) * 8
            height = min(rows - first_row, 8)
            row = first_row + within % (8 * columns) % height
            column = within % (8 * columns) // height
        else:
            row, column = divmod(within, columns)
        here = set()
        for which, origin, size, extent, k_major in (
            (0, row * bm, bm, m, layout[0] == "k"),
            (1, column * bn, bn, n, layout[1] == "k"),
        ):
            base = b * extent * k
            for o in range(origin, min(origin + size, extent)):
                for kk in range(depth):
                    if k_major and kk % 32 == 0:
                        here.add((which, 4 * (base + o * k + kk)))
                    elif not k_major and (o - origin) % 32 == 0:
                        here.add((which, 4 * (base + kk * extent + o)))
        lines[block] = here
    return lines


@pytest.mark.parametrize(
    ("text", "knobs", "shape", "layout"),
    [c[1:] for c in PREFETCH_CASES],
    ids=[c[0] for c in PREFETCH_CASES],
)
def test_next_tile_prefetch_lines(
    text: str, knobs: str, shape: tuple[int, int, int, int], layout: str, tmp_path: Path
) -> None:
    # Each block prefetches exactly the lines of the next tile's first two K steps, inside
    # the buffers (the emulation aborts otherwise), and computes the same product.
    log = tmp_path / "prefetches.txt"
    tiles = "mma=none bm=32 bn=32 bk=16 tm=4 tn=4 group=8 minblocks=2"
    assert run_sgemm(text, f"{tiles} {knobs}", log) < 1e-5
    logged: dict[int, set] = {}
    for line in log.read_text().splitlines():
        block, which, offset = map(int, line.split())
        logged.setdefault(block, set()).add((which, offset))
    assert logged == expected_lines(shape, layout)
