"""The wgmma GEMM's epilogue, `store=direct` and `store=smem`, run on the CPU (tests/cpu_cuda.py).

The K loop is not emulated: its TMA copies and mbarrier ops do nothing, and each `wgmma` adds
to every accumulator a value that says where the wgmma D fragment puts it (thread t of a
warpgroup holds rows 16·(t/32) + (t%32)/4 (+8), columns 8j + 2(t%4) (+1)). What the kernels
store then shows where each accumulator went: both stores must write every output element, the
same bits, and a plain product must be the fragment's pattern. This checks the staging through
shared memory (its swizzle, its warpgroup barriers, the 8-column threads, the edge guards and
narrower vectors) without a GPU; the products themselves are checked on the GPU
(tests/test_gpu_programs.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pytest
from cpu_cuda import COMPILER, run_on_cpu
from programs import batched_linear, batched_matmul, gated, matmul_plain, swiglu, tile_with
from xdsl.dialects import memref
from xdsl.dialects.builtin import Float8E4M3FNType, IndexType, MemRefType, StringAttr, bf16, f32
from xdsl.ir import Attribute, Block

from tinyopt.backends.check import from_storage, to_storage
from tinyopt.compiler import lower
from tinyopt.dialects import tile
from tinyopt.passes.tile.gemm.wgmma import narrow_rows

pytestmark = pytest.mark.skipif(COMPILER is None, reason="g++ not found")

PRELUDE = r"""
#define __shared__ static
template <typename... T> static inline void cpu_cuda_ignore(T...) {}
#define tinyopt_mbarrier_init cpu_cuda_ignore
#define tinyopt_mbarrier_arrive cpu_cuda_ignore
#define tinyopt_mbarrier_arrive_expect_tx cpu_cuda_ignore
#define tinyopt_mbarrier_wait cpu_cuda_ignore
#define tinyopt_tma_load_2d cpu_cuda_ignore
#define tinyopt_tma_load_3d cpu_cuda_ignore
#define tinyopt_tma_load_2d_evict_first cpu_cuda_ignore
#define tinyopt_tma_load_3d_evict_first cpu_cuda_ignore
static inline unsigned long long tinyopt_wgmma_desc(const void*, unsigned, unsigned) { return 0; }
static inline float cpu_cuda_fragment_value(int row, int column) {
    return (float)((row * 7 + column * 3) % 17 - 8) / 8;
}
template <int H>
static inline void cpu_cuda_wgmma(float (&d)[H], unsigned long long, unsigned long long) {
    int t = threadIdx.x % 128, warp = t / 32, lane = t % 32;
    for (int i = 0; i < H; ++i)
        d[i] += cpu_cuda_fragment_value(16 * warp + lane / 4 + 8 * (i / 2 % 2),
                                        8 * (i / 4) + 2 * (lane % 4) + i % 2);
}
static cpu_cuda_barrier cpu_cuda_named[3] = {cpu_cuda_barrier(128), cpu_cuda_barrier(128),
                                             cpu_cuda_barrier(128)};
static inline void cpu_cuda_bar_sync(unsigned id) { cpu_cuda_named[id].arrive_and_wait(); }
"""
"""Stand-ins for the K loop's ops and `bar.sync id, 128` (a 128-thread barrier per id)."""

TENSOR_MAP = re.compile(r"const __grid_constant__ CUtensorMap (\w+), ")
BAR_SYNC = re.compile(
    r'asm volatile\("bar\.sync %0, 128;" :: "r"\(\(unsigned\)(\w+)\) : "memory"\);'
)
OTHER_ASM = re.compile(r"^\s*asm volatile\(.*\);$", re.MULTILINE)


def _fake_k_loop(kernel: tile.CudaKernelOp) -> tuple[tile.CudaKernelOp, str]:
    """Returns the kernel with its tensor-map parameters turned into globals, wgmma into the
    pattern, bar.sync into the emulated barrier and the other inline PTX dropped."""
    source = kernel.source.data
    maps = TENSOR_MAP.findall(source)
    source = TENSOR_MAP.sub("", source)
    source = re.sub(r"tinyopt_wgmma_m64n\d+k16_\w+\(", "cpu_cuda_wgmma(", source)
    source = BAR_SYNC.sub(r"cpu_cuda_bar_sync(\1);", source)
    source = OTHER_ASM.sub("", source)
    fake = kernel.clone()
    fake.properties["source"] = StringAttr(source)
    return fake, PRELUDE + "".join(f"static int {name};\n" for name in maps)


def _run(
    text: str,
    knobs: str,
    store: str,
    inputs: list[np.ndarray],
    storage: Attribute = bf16,
    output: int = -1,
) -> np.ndarray:
    """Runs the last kernel of `text` with the fake K loop; `inputs` are its pointer
    parameters, values of the `storage` type but the output's (bf16, at position `output`),
    which is poisoned; returns the output as float."""
    _, module = lower(text, tile_with(f"{knobs} store={store}"))
    kernel = [op for op in module.ops if isinstance(op, tile.CudaKernelOp)][-1]
    fake, prelude = _fake_k_loop(kernel)
    output %= len(inputs)
    buffers = [
        np.full(a.shape, 0x7FC0, np.uint16)  # NaN: an element never written stays NaN
        if i == output
        else to_storage(a, storage)
        for i, a in enumerate(inputs)
    ]
    return from_storage(run_on_cpu(fake, buffers, prelude)[output], bf16)


def _fragment_pattern(m: int, n: int, k: int, bn: int) -> np.ndarray:
    """The accumulators the fake wgmma leaves: one pattern value per K step's 4 wgmmas."""
    rows, columns = np.arange(m)[:, None] % 64, np.arange(n)[None, :] % bn
    return 4 * -(-k // 64) * (((rows * 7 + columns * 3) % 17 - 8) / 8)


@pytest.mark.parametrize(
    ("m", "n", "k", "knobs", "bn"),
    [
        (100, 136, 72, "mma=wgmma ws=0 bm=64 bn=64 stages=2", 64),
        (100, 136, 72, "mma=wgmma bn=128", 128),
        (70, 330, 72, "mma=wgmma ws=0 bm=64 bn=64 stages=2", 64),
        (100, 135, 72, "mma=wgmma ws=0 bm=64 bn=64 stages=2", 64),
        (130, 331, 72, "mma=wgmma bn=128", 128),
        (130, 330, 72, "mma=wgmma bn=128", 128),
        (130, 332, 72, "mma=wgmma bn=128", 128),
    ],
    ids=[
        "ws0_bn64",
        "ws1_two_warpgroups_bn128",
        "n330_two_column_vectors",
        "n135_element_stores",
        "n331_element_stores_two_warpgroups",
        "n330_pairs_along_rows_two_warpgroups",
        "n332_fours_along_rows_two_warpgroups",
    ],
)
def test_staged_epilogue_puts_each_accumulator_where_direct_does(
    m: int, n: int, k: int, knobs: str, bn: int
) -> None:
    # A torch-layout linear (K-major weights) has any N; its bias is zero here.
    text = matmul_plain(m, n, k, "bf16", "nk")
    expected = _fragment_pattern(m, n, k, bn)
    inputs = [np.zeros(n), np.zeros((m, n))]
    direct = _run(text, knobs, "direct", inputs)
    staged = _run(text, knobs, "smem", inputs)
    assert not np.isnan(staged).any()
    np.testing.assert_array_equal(direct, expected)
    np.testing.assert_array_equal(staged, expected)


@pytest.mark.parametrize("n", [135, 136, 138, 140])
def test_staged_epilogue_adds_the_bias_of_each_column_like_direct(n: int) -> None:
    # The bias is the same for every row: loaded ahead once per group of columns (a key per
    # column of a thread's cells: 32 consecutive columns a warp at odd N, 32 pairs at N ≡ 2
    # mod 8, 16 fours at N ≡ 4 mod 8).
    text = matmul_plain(100, n, 72, "bf16", "nk")
    bias = np.random.default_rng(1).standard_normal(n)
    inputs = [bias, np.zeros((100, n))]
    knobs = "mma=wgmma bn=128"
    direct = _run(text, knobs, "direct", inputs)
    staged = _run(text, knobs, "smem", inputs)
    assert not np.isnan(staged).any()
    np.testing.assert_array_equal(staged, direct)
    expected = _fragment_pattern(100, n, 72, 128) + from_storage(to_storage(bias, bf16), bf16)
    np.testing.assert_allclose(staged, expected, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("n", [64, 66, 68])
def test_staged_epilogue_of_a_batch(n: int) -> None:
    # Batch 3 is the grid's z; each batch's tile gets the same pattern. N = 64 over an
    # N-major B; 66 and 68 (pairs and fours along the rows) over a K-major one.
    text = (
        batched_matmul(3, 65, n, 40, "bf16")
        if n % 8 == 0
        else batched_linear(3, 65, n, 40).replace("f32", "bf16")
    )
    expected = np.broadcast_to(_fragment_pattern(65, n, 40, 64), (3, 65, n))
    staged = _run(text, "mma=wgmma ws=0 bm=64 bn=64 stages=2", "smem", [np.zeros((3, 65, n))])
    np.testing.assert_array_equal(staged, expected)


@pytest.mark.parametrize(
    ("program", "storage", "output", "n"),
    [
        (gated, bf16, -1, 136),
        (swiglu, f32, 0, 136),
        (gated, bf16, -1, 135),
        (gated, bf16, -1, 138),
        (gated, bf16, -1, 140),
    ],
    ids=[
        "gated_reads_bf16_u",
        "swiglu_dual_off_reads_f32_workspace",
        "gated_n135_per_row",
        "gated_n138_pairs_per_row",
        "gated_n140_fours_per_row",
    ],
)
def test_staged_gate_reads_up_like_direct(
    program: Callable[[int, int, int], str], storage: Attribute, output: int, n: int
) -> None:
    # The gate kernel reads `up` in its epilogue: an input of the gated program, or, with
    # dual=off, the f32 workspace swiglu's second product goes through (the last parameter).
    # bn=256 over N=136: four staged chunks, the last two entirely past N. N=135: element
    # stores, `up` loaded ahead per row of a thread's cells.
    text = program(70, 72, n)
    rng = np.random.default_rng(0)
    up = rng.standard_normal((70, n))
    inputs = [up, np.zeros((70, n))] if output == -1 else [np.zeros((70, n)), up]
    knobs = "mma=wgmma bn=256 dual=off"
    direct = _run(text, knobs, "direct", inputs, storage, output)
    staged = _run(text, knobs, "smem", inputs, storage, output)
    assert not np.isnan(staged).any()
    np.testing.assert_array_equal(staged, direct)
    gate = _fragment_pattern(70, n, 72, 256)
    reference = gate / (1 + np.exp(-gate)) * from_storage(to_storage(up, storage), storage)
    np.testing.assert_allclose(staged, reference, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize(
    ("knobs", "bn", "n"),
    [
        ("mma=wgmma bn=256", 256, 200),
        ("mma=wgmma ws=0 bn=128 stages=2", 128, 200),
        ("mma=wgmma bn=256", 256, 199),
    ],
    ids=["bn256_two_warpgroups", "bn128_ws0", "bn256_n199_element_stores"],
)
def test_dual_gemm_epilogue_pairs_each_gate_column_with_its_up_column(
    knobs: str, bn: int, n: int
) -> None:
    # One kernel computes gate and up: accumulator columns 0..bn/2 are the gate's for the
    # block's bn/2 output columns, bn/2..bn the up's for the same columns. N=200 leaves the
    # last block's tile partly past N; N=199 stores elements.
    text = swiglu(70, 72, n)
    half = bn // 2
    columns = np.arange(n) % half
    pattern = _fragment_pattern(70, bn, 72, bn)
    gate, up = pattern[:, columns], pattern[:, columns + half]
    inputs = [np.zeros((70, n))]
    direct = _run(text, f"{knobs} dual=on", "direct", inputs)
    staged = _run(text, f"{knobs} dual=on", "smem", inputs)
    assert not np.isnan(staged).any()
    np.testing.assert_array_equal(staged, direct)
    reference = gate / (1 + np.exp(-gate)) * up
    np.testing.assert_allclose(staged, reference, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize(
    ("element", "width", "narrow"),
    [
        (bf16, 1, True),
        (bf16, 2, True),
        (bf16, 4, True),
        (bf16, 8, False),
        (f32, 2, True),
        (f32, 4, False),
        (Float8E4M3FNType(), 8, False),
    ],
)
def test_stores_under_16_bytes_run_along_the_rows(
    element: Attribute, width: int, narrow: bool
) -> None:
    # A lane's store of fewer than 8 elements and 16 bytes takes the layout along the rows;
    # wider ones keep a thread's 8 columns (its f32 reads of the staged tile are 16 bytes).
    block = Block(arg_types=[MemRefType(element, [64]), IndexType(), element])
    store = memref.StoreOp.get(block.args[2], block.args[0], [block.args[1]])
    assert narrow_rows(width, [store]) is narrow


def test_pairs_read_the_staged_tile_two_floats_a_lane() -> None:
    # N = 330 (2 mod 8): each lane reads 2 consecutive staged floats of one row, where 8
    # columns a thread read 4 at a time.
    _, module = lower(matmul_plain(130, 330, 72, "bf16", "nk"), tile_with("mma=wgmma bn=128"))
    source = [op for op in module.ops if isinstance(op, tile.CudaKernelOp)][-1].source.data
    assert set(re.findall(r"const (tinyopt_vec<float, \d>)\*", source)) == {"tinyopt_vec<float, 2>"}
