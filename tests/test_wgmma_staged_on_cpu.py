"""GEMMs whose operand rows TMA cannot address (passes/tile/gemm/wgmma_staged.py): each such
operand copied into a padded workspace, then the TMA + wgmma GEMM, run on the CPU with the K
loop emulated (tests/cpu_wgmma.py) against float64: K and N odd, prime and 2^n - 1 (4095-like,
scaled down), K = 1, batch > 1, A alone, B alone or both staged, the torch-linear layout
(`[N, K]` weights, bias epilogue), two consumer warpgroups, f16. Also the plan the rule
chooses by its estimate (`align=auto`), the knob, M ≤ 64 plans unchanged, FP8 rows off 32-byte
sectors left to the wgmma rule, a shared A (a 1×1 convolution's weight) staged, the small-grid
`mma.sync` tiles (32×32) on the CPU, and NVRTC compiling the kernels for sm_90a.
"""

from __future__ import annotations

import pytest
from cpu_cuda import COMPILER
from cpu_wgmma import error_on_cpu, run_program_on_cpu
from programs import batched_matmul, matmul_plain, scaled_matmul, shared_a_matmul, skinny, tile_with

from tinyopt.backends.check import device_inputs, errors_against_reference, graph_function
from tinyopt.backends.check import tolerance
from tinyopt.compiler import apply_pipeline, lower, parse
from tinyopt.dialects import loop, tile

COPY, GEMM = "elementwise", "wgmma"

CASES = [
    # (id, program, knobs, the rules of the kernels the plan makes, in launch order)
    # 4095³ scaled down: 127-element rows (254 bytes) for A and B, both staged to 128.
    ("bmm_2x127x127x127", batched_matmul(2, 127, 127, 127, "bf16"), "align=on", [COPY, COPY, GEMM]),
    # K misaligned, N aligned: A alone; B's [K, N] rows past K are TMA's zero fill.
    ("bmm_3x70x64x83_a_only", batched_matmul(3, 70, 64, 83, "bf16"), "align=on", [COPY, GEMM]),
    # N misaligned, K aligned: B alone ([K, N] rows padded past N, the output guarded).
    ("bmm_2x65x75x64_b_only", batched_matmul(2, 65, 75, 64, "bf16"), "align=on", [COPY, GEMM]),
    # Primes; x @ w.
    (
        "matmul_131x137x139",
        matmul_plain(131, 137, 139, "bf16", "kn", relu=False),
        "align=on",
        [COPY, COPY, GEMM],
    ),
    # The torch layout (F.linear: w [N, K], + bias): both rows are K; the padded K columns
    # of both are zeros, so their products add zero.
    (
        "linear_130x77x83_bias",
        matmul_plain(130, 77, 83, "bf16", "nk"),
        "align=on",
        [COPY, COPY, GEMM],
    ),
    (
        "linear_bn256_130x300x83",
        matmul_plain(130, 300, 83, "bf16", "nk"),
        "align=on bn=256",
        [COPY, COPY, GEMM],
    ),
    (
        "linear_f16_97x72x45",
        matmul_plain(97, 72, 45, "f16", "nk", relu=False),
        "align=on",
        [COPY, COPY, GEMM],
    ),
    # K = 3: one K step of 64, of which 61 columns are A's padding and B's zero fill (K = 1
    # has no K loop left after `fuse`: `test_k1_is_not_staged`).
    ("bmm_k3_2x67x75x3", batched_matmul(2, 67, 75, 3, "bf16"), "align=on", [COPY, COPY, GEMM]),
    # One A [M, K] for every batch entry of B (a 1×1 convolution's weight), K = 136 off 32-byte
    # sectors, N = 264 too: A staged as a matrix, B per entry (sector_staging took A as
    # `plain_operands` finds it, shared; the rewrite looked for A with the batch index and
    # failed an assertion, wgmma_cpu_fuzz).
    (
        "shared_a_sectors_2x200x264x136",
        shared_a_matmul(2, 200, 264, 136),
        "sms=4 align=on",
        [COPY, COPY, GEMM],
    ),
    # The staged GEMM on a small grid (`sms`) splits its K like any other: chunks of whole
    # 64-wide boxes of the padded rows, the last reading the padding's zeros (A) or TMA's past
    # B's K rows; then the fold.
    (
        "split_linear_100x60x6001",
        matmul_plain(100, 60, 6001, "bf16", "nk"),
        "sms=8",
        [COPY, COPY, GEMM, "sequential"],
    ),
    (
        "split_a_only_100x64x6001",
        matmul_plain(100, 64, 6001, "bf16", "kn", relu=True),
        "sms=8",
        [COPY, GEMM, "sequential"],
    ),
    (
        "split_bmm_2x60x61x6001",
        batched_matmul(2, 60, 61, 6001, "bf16"),
        "sms=16 align=on",
        [COPY, COPY, GEMM, "sequential"],
    ),
    # A batch of 127³ stays on mma.sync, in the small-grid tile (32×32, 4 warps:
    # tests/lit/tile_pass/wgmma_staged.mlir pins it).
    ("mma_sync_32x32_3x127x127x127", batched_matmul(3, 127, 127, 127, "bf16"), "", ["mma_sync"]),
]


def planned_rules(text: str, knobs: str) -> list[str]:
    module = apply_pipeline(parse(text), f"fuse,plan{{{knobs}}}")
    plans = [k.attributes[tile.PLAN] for k in loop.kernels(module)]
    return [p.rule.data for p in plans]  # type: ignore[union-attr]


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
@pytest.mark.parametrize(
    ("text", "knobs", "rules"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_staged_gemm_matches_float64_on_cpu(text: str, knobs: str, rules: list[str]) -> None:
    assert planned_rules(text, knobs) == rules
    error, bound = error_on_cpu(text, tile_with(knobs), seed=11)
    assert error < bound, error


@pytest.mark.parametrize(
    ("text", "knobs"),
    [
        # 4112 bytes a row, 16 past a multiple of 32: the wgmma rule had stepped aside for a
        # staging this rule does not do for 8-bit floats, leaving the GEMM to FMA on the CUDA
        # cores (`contraction`).
        (scaled_matmul(4096, 4096, 4112), ""),
        (scaled_matmul(4096, 4096, 4112), "align=on"),
        (scaled_matmul(300, 520, 400, "f8E5M2"), "sms=4 align=on"),
    ],
    ids=["e4m3_4096x4096x4112", "e4m3_align_on", "e5m2_300x520x400_align_on"],
)
def test_fp8_rows_off_sectors_stay_on_wgmma(text: str, knobs: str) -> None:
    assert planned_rules(text, knobs) == [GEMM]


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
def test_fp8_rows_off_sectors_match_float64_on_cpu() -> None:
    text = scaled_matmul(300, 520, 400, "f8E5M2")
    error, bound = error_on_cpu(text, tile_with("sms=4 align=on"), seed=11)
    assert error < bound, error


def test_k1_is_not_staged() -> None:
    # `fuse` makes K = 1 an outer product (no K loop): no GEMM rule, nothing to stage.
    assert planned_rules(batched_matmul(2, 67, 75, 1, "bf16"), "align=on") == ["row_reduction"]


def test_padded_columns_must_be_zeros() -> None:
    # The emulation multiplies the padded K columns: ones there instead of zeros are wrong.
    if COMPILER is None:
        pytest.skip("g++ not found")
    from xdsl.dialects.builtin import StringAttr

    text = matmul_plain(130, 77, 83, "bf16", "nk")
    program, module = lower(text, tile_with("align=on"))
    for op in module.ops:
        if isinstance(op, tile.CudaKernelOp) and "_pad_" in op.sym_name.data:
            wrong = op.source.data.replace("__float2bfloat16_rn(0.0f)", "__float2bfloat16_rn(1.0f)")
            assert wrong != op.source.data
            op.properties["source"] = StringAttr(wrong)
    graph = graph_function(program)
    inputs, arrays = device_inputs(graph, seed=11)
    (result,) = run_program_on_cpu(module, arrays)
    (error,) = errors_against_reference(graph, [result], inputs)
    assert error > 10 * tolerance(graph)


@pytest.mark.parametrize(
    ("text", "rules"),
    [
        # Batched 4095³ (the sweep's): 2.5 GFLOP per entry, the copies' bytes cheap.
        (batched_matmul(3, 4095, 4095, 4095, "bf16"), [COPY, COPY, GEMM]),
        (batched_matmul(17, 4095, 4095, 4095, "bf16"), [COPY, COPY, GEMM]),
        (matmul_plain(2047, 2047, 2047, "bf16", "nk"), [COPY, COPY, GEMM]),
        # 1001³: 2 GFLOP, 45 µs on mma.sync's 2-byte loads (H100: 34.7 µs, staged 22.8).
        (matmul_plain(1001, 1001, 1001, "bf16", "nk"), [COPY, COPY, GEMM]),
        # Small: two more launches would cost more than the product.
        (batched_matmul(17, 127, 127, 127, "bf16"), ["mma_sync"]),
        (skinny(790, 72, 190, "bf16"), ["mma_sync"]),
        # Two K steps, 1.2 GFLOP: staged since the staged epilogue's element stores write
        # whole sectors (H100: mma.sync 44.2 µs, staged 20.2; 62.0 before, 5729f1b).
        (skinny(8178, 773, 93, "bf16"), [COPY, COPY, GEMM]),
        (skinny(580, 3399, 85, "bf16"), [COPY, COPY, GEMM]),
        # A small product whose mma.sync time is its K loop's latency, not its 0.16 GFLOP (H100:
        # mma.sync 13.6 µs, staged 10.7). A long K on few blocks: staged, the GEMM on the
        # workspaces then split over a cluster or in two passes (it had stayed on mma.sync's
        # split, 31.3 µs against 33.6 staged unsplit; H100, thirty-ninth session run 7, 24 such
        # shapes staged and split: 0.868 → 1.128× cuBLAS, e.g. 161×135×7163 23.5 → 16.6 µs).
        # One split in 16 on 4 blocks stays.
        (skinny(373, 496, 443, "bf16"), [COPY, COPY, GEMM]),
        (skinny(195, 157, 7402, "bf16"), [COPY, COPY, GEMM]),
        (skinny(120, 81, 1955, "bf16"), ["mma_sync", "sequential"]),
        # Long K on few columns, whose mma.sync time is its FLOPs and its split's latency
        # together (H100: 38.8 and 24.0 µs, staged 25.4 and 17.6); they had been split on
        # mma.sync with the partial kernel's operands copied for nothing.
        (skinny(1260, 110, 3367, "bf16"), [COPY, COPY, GEMM]),
        (skinny(1054, 72, 2014, "bf16"), [COPY, COPY, GEMM]),
        # A 1×1 convolution's GEMM (one weight [1024, 1000] for 8 images of 4096 pixels):
        # the weight's rows off sectors, staged (it had failed an assertion).
        (shared_a_matmul(8, 1024, 4096, 1000), [COPY, GEMM]),
        # Rows already aligned: the wgmma rule takes it as it is.
        (batched_matmul(3, 4095, 4096, 4096, "bf16"), [GEMM]),
    ],
    ids=[
        "3x4095",
        "17x4095",
        "linear_2047",
        "linear_1001",
        "17x127",
        "linear_790x72x190",
        "linear_k93",
        "linear_k85",
        "small_latency",
        "long_k_few_blocks_staged_and_split",
        "split_16_on_4_blocks",
        "long_k_few_columns",
        "long_k_72_columns",
        "conv1x1_sectors",
        "aligned",
    ],
)
def test_auto_stages_where_the_flops_pay_for_the_copies(text: str, rules: list[str]) -> None:
    assert planned_rules(text, "") == rules


@pytest.mark.parametrize("knobs", ["", "splitk=4", "splitk=8 splitk_mode=twopass"])
@pytest.mark.parametrize(
    ("m", "n", "k"), [(1260, 110, 3367), (1146, 90, 2527), (133, 451, 5083), (300, 200, 1001)]
)
def test_copies_feed_only_a_wgmma_gemm(m: int, n: int, k: int, knobs: str) -> None:
    """A split-K partial kernel whose K chunks are not whole 64-wide boxes stays on mma.sync
    unstaged: its staged copies would feed a GEMM the wgmma rule refuses."""
    rules = planned_rules(skinny(m, n, k, "bf16"), knobs)
    assert COPY not in rules or GEMM in rules, rules


@pytest.mark.parametrize(
    "text",
    [
        matmul_plain(64, 4095, 4095, "bf16", "kn", relu=False),
        matmul_plain(64, 4095, 4095, "bf16", "nk"),
        matmul_plain(8, 4095, 4095, "bf16", "nk"),
    ],
    ids=["kn_m64", "nk_m64", "nk_m8"],
)
def test_skinny_shapes_keep_their_plans(text: str) -> None:
    # M ≤ 64 belongs to the skinny and GEMV rules: align=auto leaves their plans as they were.
    def plans(knobs: str) -> list[str]:
        module = apply_pipeline(parse(text), f"fuse,plan{{{knobs}}}")
        return [str(k.attributes[tile.PLAN]) for k in loop.kernels(module)]

    assert plans("") == plans("align=off")


def _cuda(text: str, knobs: str) -> list[str]:
    _, module = lower(text, tile_with(knobs))
    return [op.source.data for op in module.ops if isinstance(op, tile.CudaKernelOp)]


def test_align_knob_changes_the_cuda() -> None:
    text = batched_matmul(3, 4095, 4095, 4095, "bf16")
    staged = _cuda(text, "")
    assert len(staged) == 3 and "wgmma.mma_async" in staged[-1]
    plain = _cuda(text, "align=off")
    assert len(plain) == 1 and "mma.sync" in plain[0]
    assert _cuda(text, "mma=sync") == plain
    small = batched_matmul(17, 127, 127, 127, "bf16")
    assert len(_cuda(small, "align=on")) == 3
    assert _cuda(small, "") == _cuda(small, "align=off")


def test_staged_kernels_compile_for_sm90a() -> None:
    from tinyopt.backends.cuda.runtime import compile_module

    for text, knobs in [
        (batched_matmul(3, 4095, 4095, 4095, "bf16"), ""),
        (matmul_plain(2047, 2047, 2047, "bf16", "nk"), ""),
        (matmul_plain(97, 72, 45, "f16", "nk", relu=False), "align=on"),
        (batched_matmul(3, 127, 127, 127, "bf16"), ""),
    ]:
        _, module = lower(text, tile_with(knobs))
        kernels = {op.sym_name.data for op in module.ops if isinstance(op, tile.CudaKernelOp)}
        assert set(compile_module(module, arch="sm_90a").kernels) == kernels


# Rows TMA addresses but that start off 32-byte sectors (K ≡ 8 mod 16 bf16 elements):
# `sector_staging` copies the operands whose copies save the most by its estimate.
SECTOR_CASES = [
    # (id, program, the staged operands' copy kernels, in launch order)
    ("linear_5000", matmul_plain(5000, 5000, 5000, "bf16", "nk"), ["_pad_a", "_pad_b"]),
    ("linear_3400", matmul_plain(3400, 3400, 3400, "bf16", "nk"), ["_pad_b", "_pad_a"]),
    # B's tiles shared by multicast unstaged: nothing is staged (`multicasts_unstaged`).
    ("linear_3000", matmul_plain(3000, 3000, 3000, "bf16", "nk"), []),
    ("linear_1000x4704x4600", matmul_plain(1000, 4704, 4600, "bf16", "nk"), []),
    ("linear_4096x1024x3000", matmul_plain(4096, 1024, 3000, "bf16", "nk"), []),
    ("matmul_3000", matmul_plain(3000, 3000, 3000, "bf16"), []),
    # Too small for a copy to pay; a small grid the planner splits over K instead.
    ("linear_1000", matmul_plain(1000, 1000, 1000, "bf16", "nk"), []),
    ("linear_2048x2048x1000", matmul_plain(2048, 2048, 1000, "bf16", "nk"), []),
    ("linear_500x1024x20008", matmul_plain(500, 1024, 20008, "bf16", "nk"), []),
    # Rows on sectors (K a multiple of 16): nothing to stage.
    ("linear_3008", matmul_plain(3000, 3000, 3008, "bf16", "nk"), []),
]


def _copies(text: str, knobs: str) -> list[str]:
    module = apply_pipeline(parse(text), f"fuse,plan{{{knobs}}}")
    names = [k.sym_name.data for k in loop.kernels(module)]
    return [name[name.index("_pad_") :] for name in names if "_pad_" in name]


@pytest.mark.parametrize(
    ("text", "copies"), [c[1:] for c in SECTOR_CASES], ids=[c[0] for c in SECTOR_CASES]
)
def test_rows_off_sectors_are_staged_where_the_estimate_says(text: str, copies: list[str]) -> None:
    assert _copies(text, "") == copies


@pytest.mark.parametrize("knobs", ["multicast=off", "multicast=b"])
def test_rows_off_sectors_are_staged_where_multicast_is_not_left_to_the_rule(knobs: str) -> None:
    """Only `multicast=auto` leaves B's rows off sectors for the multicast to share; with the
    knob set, the estimate stages B as it would without multicast."""
    assert _copies(matmul_plain(3000, 3000, 3000, "bf16", "nk"), knobs) == ["_pad_b"]


@pytest.mark.parametrize("knobs", ["align=off", "mma=wgmma", "streamk=tail", "splitk=2"])
def test_rows_off_sectors_stay_where_knobs_ask_for_the_gemm_itself(knobs: str) -> None:
    assert _copies(matmul_plain(3000, 3000, 3000, "bf16", "nk"), knobs) == []


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
@pytest.mark.parametrize(
    ("text", "copies"),
    [
        # K = 200 (400-byte rows, 16 past a sector): both staged, padded to 256.
        (matmul_plain(130, 136, 200, "bf16", "nk"), ["_pad_a", "_pad_b"]),
        # An N-major B [K, N] with N = 200 (its rows are N) and A's K = 136 (272 bytes).
        (matmul_plain(130, 200, 136, "bf16", "kn", relu=False), ["_pad_a", "_pad_b"]),
        # B's rows on sectors (N = 256): A alone, with the ReLU epilogue.
        (matmul_plain(130, 256, 136, "bf16", "kn"), ["_pad_a"]),
    ],
    ids=["nk_both", "kn_both", "kn_a_only"],
)
def test_rows_off_sectors_staged_match_float64_on_cpu(text: str, copies: list[str]) -> None:
    assert _copies(text, "align=on") == copies
    error, bound = error_on_cpu(text, tile_with("align=on"), seed=11)
    assert error < bound, error
