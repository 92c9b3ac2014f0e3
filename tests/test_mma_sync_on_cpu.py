"""The `mma.sync` GEMM (passes/tile/gemm/mma_sync.py) run on the CPU (tests/cpu_wgmma.py) against
float64, with its K loop double-buffered through registers (`stages=2`, the default) and not
(`stages=1`): staging by 16-byte vectors (aligned rows) and element by element (odd K), a batch,
the torch-linear layout with a bias, f16, a ragged last K step, the 32×32 small-grid tile and the
128×128 one. Also the register copies in the CUDA (each thread's loads of the next K step come
after the step's barrier and before its `mma`s), and small grids with a long K split by default
(`splitk=0`, passes/tile/gemm/split_k_plan.py) with the partial sums folded.
"""

from __future__ import annotations

import re

import pytest
from cpu_cuda import COMPILER
from cpu_wgmma import error_on_cpu
from programs import batched_matmul, matmul_plain, tile_with

from tinyopt.compiler import apply_pipeline, lower, parse
from tinyopt.dialects import loop, tile
from xdsl.utils.exceptions import DiagnosticException

SHAPES = [
    # (id, program, knobs)
    ("odd_k_linear_40x33x131", matmul_plain(40, 33, 131, "bf16", "nk"), ""),
    ("aligned_bmm_2x64x64x96", batched_matmul(2, 64, 64, 96, "bf16"), ""),
    ("f16_matmul_70x72x40", matmul_plain(70, 72, 40, "f16", "kn", relu=False), ""),
    ("block_128_linear_130x136x48", matmul_plain(130, 136, 48, "bf16", "nk"), "bm=128 bn=128"),
]


def _plan(text: str, knobs: str) -> str:
    module = apply_pipeline(parse(text), f"fuse,plan{{mma=sync {knobs}}}")
    (kernel,) = loop.kernels(module)
    return str(kernel.attributes[tile.PLAN])


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
@pytest.mark.parametrize("stages", [1, 2])
@pytest.mark.parametrize(("text", "knobs"), [s[1:] for s in SHAPES], ids=[s[0] for s in SHAPES])
def test_mma_sync_matches_float64_on_cpu(text: str, knobs: str, stages: int) -> None:
    assert f"stages = {stages}" in _plan(text, f"{knobs} stages={stages}")
    error, bound = error_on_cpu(text, tile_with(f"mma=sync {knobs} stages={stages}"), seed=5)
    assert error < bound, error


SMEM_SHAPES = [
    # (id, program, knobs): odd N (single elements), even N (pairs), 32×32 blocks (16×16 warp
    # tiles: 16 lanes a row), ragged rows and columns
    ("odd_n_linear_70x33x131", matmul_plain(70, 33, 131, "bf16", "nk"), "bm=64 bn=64"),
    ("odd_n_block_128_130x137x48", matmul_plain(130, 137, 48, "bf16", "nk"), "bm=128 bn=128"),
    ("pairs_bmm_2x64x72x96", batched_matmul(2, 64, 72, 96, "bf16"), "bm=64 bn=64"),
    ("small_tile_40x33x131", matmul_plain(40, 33, 131, "bf16", "nk"), "bm=32 bn=32"),
]


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
@pytest.mark.parametrize(
    ("text", "knobs"), [s[1:] for s in SMEM_SHAPES], ids=[s[0] for s in SMEM_SHAPES]
)
def test_smem_epilogue_matches_float64_on_cpu(text: str, knobs: str) -> None:
    """`store=smem`: each warp passes its accumulators through shared memory, 16 rows at a
    time, and stores whole rows of its tile."""
    assert 'store = "smem"' in _plan(text, f"{knobs} store=smem")
    assert "__syncwarp" in _kernel_source(text, f"mma=sync {knobs} store=smem")
    error, bound = error_on_cpu(text, tile_with(f"mma=sync {knobs} store=smem"), seed=6)
    assert error < bound, error


def _kernel_source(text: str, knobs: str) -> str:
    _, module = lower(text, tile_with(knobs))
    (kernel,) = [op for op in module.ops if isinstance(op, tile.CudaKernelOp)]
    return kernel.source.data


def test_stages_default_to_register_double_buffering_on_grids_of_several_waves() -> None:
    assert "stages = 2" in _plan(matmul_plain(4153, 105, 189, "bf16", "nk"), "")


def test_stages_default_to_the_deepest_ring_on_a_grid_of_one_partial_wave() -> None:
    """One 64×64 block over K = 131 (5 steps): the ring holds as many steps as 160 registers
    allow (32 accumulators, 32 staged elements a step: 4 steps, stages = 5); on 32×32 blocks
    (8 accumulators, 16 a step) the whole K loop (stages = 6, `ring_depth`)."""
    text = matmul_plain(40, 33, 131, "bf16", "nk")
    plan = _plan(text, "")
    assert "bm = 64, bn = 64" in plan and "stages = 5" in plan
    assert "stages = 6" in _plan(text, "bm=32 bn=32")
    error, bound = error_on_cpu(text, tile_with(""), seed=8)
    assert error < bound, error


def test_stages_default_to_half_the_k_loop_on_a_grid_of_two_blocks_an_sm() -> None:
    """21 blocks of 32×32 over K = 190 (6 steps): on 12 SMs (two blocks an SM) each block keeps
    3 steps in flight (stages = 4), so the SM holds the whole K loop; on 8 SMs (three an SM)
    the register double buffering (`ring_depth`)."""
    text = matmul_plain(200, 72, 190, "bf16", "nk")
    assert "stages = 4" in _plan(text, "bm=32 bn=32 sms=12")
    assert "stages = 2" in _plan(text, "bm=32 bn=32 sms=8")
    error, bound = error_on_cpu(text, tile_with("bm=32 bn=32 sms=12"), seed=9)
    assert error < bound, error


def test_blocks_of_256_threads_keep_double_buffering_at_two_blocks_an_sm() -> None:
    """8 blocks of 128×128 (256 threads) on 4 SMs keep stages = 2: a deeper ring's registers
    would leave room for one of them an SM (`PAIRED_THREADS`); on 8 SMs they take the ring the
    registers allow (4). 32 blocks of 64×64 (128 threads) on 16 SMs deepen (K = 999 in 32
    steps, 16 a block; registers allow 5)."""
    text = matmul_plain(256, 512, 999, "bf16", "nk")
    assert "stages = 2" in _plan(text, "bm=128 bn=128 splitk=1 sms=4")
    assert "stages = 4" in _plan(text, "bm=128 bn=128 splitk=1 sms=8")
    assert "stages = 5" in _plan(text, "bm=64 bn=64 splitk=1 sms=16")


def test_a_k_splits_partial_sums_keep_double_buffering_at_two_blocks_an_sm() -> None:
    """K = 1111 split in 2: 42 partial blocks of 32×32 on 21 SMs keep stages = 2 (measured
    slower deeper), where the unsplit 21 blocks take the deepest ring."""
    text = matmul_plain(200, 72, 1111, "bf16", "nk")
    module = apply_pipeline(parse(text), "fuse,plan{mma=sync bm=32 bn=32 splitk=2 sms=21}")
    (partial,) = [k for k in loop.kernels(module) if k.sym_name.data.endswith("_splitk")]
    assert "stages = 2" in str(partial.attributes[tile.PLAN])
    assert "stages = 8" in _plan(text, "bm=32 bn=32 splitk=1 sms=21")


def test_register_double_buffering_loads_the_next_step_inside_the_k_loop() -> None:
    text = matmul_plain(40, 33, 131, "bf16", "nk")
    source = _kernel_source(text, "mma=sync stages=2")
    # The operand loads: once before the K loop (the first step) and once inside it, between
    # the step's first barrier and its first mma.
    loop_start = re.search(r"for \(int (v\d+) = 0; \1 < 131; \1 \+= 32\)", source)
    assert loop_start is not None
    before, inside = source[: loop_start.start()], source[loop_start.start() :]
    assert before.count(" = v0[") == 1 and before.count(" = v1[") == 1
    first_barrier = inside.index("__syncthreads()")
    first_mma = inside.index("tinyopt_mma_bf16(")
    between = inside[first_barrier:first_mma]
    assert between.count(" = v0[") == 1 and between.count(" = v1[") == 1
    single = _kernel_source(text, "mma=sync stages=1")
    assert single.count(" = v0[") == 1 and single.index(" = v0[") > single.index("< 131;")


RING_SHAPES = [
    # (id, program, knobs): rings of stages - 1 steps in registers; K a whole number of groups
    # of steps or not (the last group's steps past K skipped), element loads (odd K), pairs,
    # 16-byte vectors, a batch, the deepest ring each block holds (`HELD_REGISTERS`).
    ("ring_8_odd_k_70x33x131", matmul_plain(70, 33, 131, "bf16", "nk"), "bm=32 bn=32 stages=8"),
    ("ring_6_short_k_40x72x190", matmul_plain(40, 72, 190, "bf16", "nk"), "bm=32 bn=32 stages=6"),
    ("ring_3_whole_groups_66x40x128", matmul_plain(66, 40, 128, "bf16", "nk"), "stages=3"),
    ("ring_5_block_64_130x137x300", matmul_plain(130, 137, 300, "bf16", "nk"), "stages=5"),
    (
        "ring_3_block_128_130x136x260",
        matmul_plain(130, 136, 260, "bf16", "nk"),
        "bm=128 bn=128 stages=3",
    ),
    ("ring_4_f16_bmm_2x40x72x97", batched_matmul(2, 40, 72, 97, "f16"), "bm=32 bn=32 stages=4"),
]


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
@pytest.mark.parametrize(
    ("text", "knobs"), [s[1:] for s in RING_SHAPES], ids=[s[0] for s in RING_SHAPES]
)
def test_register_ring_matches_float64_on_cpu(text: str, knobs: str) -> None:
    """`stages` ≥ 3: the next stages - 1 K steps' tiles in registers, the loop unrolled over
    the ring."""
    stages = int(knobs.split("stages=")[1])
    assert f"stages = {stages}" in _plan(text, knobs)
    error, bound = error_on_cpu(text, tile_with(f"mma=sync {knobs}"), seed=8)
    assert error < bound, error


def test_register_ring_loads_each_step_ahead() -> None:
    """stages=5 at K = 190 (6 steps of 32): 4 register slots of each side, each filled once
    before the K loop and once inside it, whose iteration runs a group of 4 steps (128 of K),
    two barriers a step; the last two steps of the second group, past K, are skipped."""
    text = matmul_plain(40, 72, 190, "bf16", "nk")
    source = _kernel_source(text, "mma=sync bm=32 bn=32 stages=5")
    body = source[source.index("__global__") :]
    loop_start = re.search(r"for \(int (v\d+) = 0; \1 < 190; \1 \+= 128\)", body)
    assert loop_start is not None
    before, inside = body[: loop_start.start()], body[loop_start.start() :]
    slots = set(re.findall(r"(v\d+)\[v\d+\]\[0\] = ", before))
    assert len(slots) == 8  # 4 slots × 2 sides
    assert all(inside.count(f"{slot}[") >= 2 for slot in slots)  # refilled, then stored
    assert "tinyopt_mma_bf16(" not in before
    assert inside.count("__syncthreads()") == 8  # two a step
    # The third and fourth steps run under `step < K` (the second group's, 192 and 224, skip).
    step_guards = re.findall(
        r"bool (v\d+) = \(unsigned\)v\d+ < \(unsigned\)190;\s+if \(\1\)", inside
    )
    assert len(step_guards) == 2


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        ("mma=sync stages=9", "stages"),
        ("mma=sync bm=128 bn=128 stages=8", "registers a thread"),
        ("stages=4", "stages"),  # a ring under mma=auto: the knob takes 0, 1, 2 there
    ],
)
def test_register_ring_refusals(knobs: str, message: str) -> None:
    with pytest.raises(DiagnosticException, match=message):
        apply_pipeline(parse(matmul_plain(300, 300, 300, "bf16", "nk")), f"fuse,plan{{{knobs}}}")


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
@pytest.mark.parametrize(
    "text",
    [matmul_plain(70, 40, 700, "bf16", "nk"), batched_matmul(2, 66, 20, 515, "bf16")],
    ids=["linear_70x40x700_bias", "bmm_2x66x20x515"],
)
def test_auto_split_matches_float64_on_cpu(text: str) -> None:
    # Small grids with long K: splitk=0 cuts K (split_k_plan.py), ragged last chunk included.
    # K is not a multiple of 8, so mma.sync takes them where their rows are not staged for
    # wgmma (align=off; by default the staging estimate copies them).
    module = apply_pipeline(parse(text), "fuse,plan{align=off}")
    names = [k.sym_name.data for k in loop.kernels(module)]
    assert len(names) == 2 and names[0].endswith("_splitk") and names[1].endswith("_reduce")
    error, bound = error_on_cpu(text, "fuse,tile{align=off},to-cuda", seed=7)
    assert error < bound, error
