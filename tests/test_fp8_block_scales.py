"""FP8 GEMMs with block scales (torch's `_scaled_mm` with `BlockWise1x128` / `BlockWise128x128`
scales): kept inside the GEMM by `fuse`, applied per K step by the wgmma rule
(`passes/tile/gemm/block_scales.py`), captured from torch, refused where the rule cannot."""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import requires_gpu
from cpu_cuda import COMPILER
from cpu_wgmma import error_on_cpu
from programs import block_scaled_matmul, scaled_matmul, tile_with
from test_sass import CUOBJDUMP, HAS_NVDISASM, LOCAL_MEMORY, sass
from xdsl.utils.exceptions import DiagnosticException

from tinyopt.compiler import apply_pipeline, lower

WGMMA_CASES = [
    # (M, N, K, format, output, rows a scale of A / of B covers, knobs): 1×128 activations and
    # 128×128 weights (DeepSeek-V3's recipe) on the default plan, ragged tiles and a K that is
    # not a multiple of 128; a persistent grid; 128×128 scales of both on 64-row blocks (one
    # block of N: the scale's column index folded to 0); a block without a producer warpgroup;
    # 64-column blocks walking 128-column scale blocks on a persistent grid; 192-column blocks,
    # which start on a scale block or half-way through one (two B scales a step), the last
    # one past N, on a grid of its own and on a persistent one.
    (256, 256, 384, "f8E4M3FN", "f32", 1, 128, ""),
    (200, 200, 320, "f8E4M3FN", "bf16", 1, 128, ""),
    (300, 520, 384, "f8E4M3FN", "f32", 1, 128, "sms=4"),
    (129, 128, 256, "f8E5M2", "f32", 128, 128, "mma=wgmma bm=64"),
    (300, 130, 384, "f8E4M3FN", "f32", 1, 128, "mma=wgmma ws=0"),
    (130, 264, 512, "f8E4M3FN", "f32", 128, 128, "mma=wgmma bn=64 sms=3"),
    (200, 520, 384, "f8E4M3FN", "f32", 1, 128, "mma=wgmma bn=192"),
    (140, 776, 320, "f8E4M3FN", "bf16", 128, 128, "mma=wgmma bn=192 sms=3"),
    # `poverlap`: each step's products added while the next step's run, in two sets of
    # registers: 3 K steps (a pair, then one), 4 on a persistent grid (a pair, then two),
    # 5 on 64-row blocks, and 3 without a producer warpgroup (3 stages).
    (256, 256, 384, "f8E4M3FN", "f32", 1, 128, "poverlap=on"),
    (300, 520, 512, "f8E4M3FN", "bf16", 1, 128, "poverlap=on sms=4"),
    (129, 128, 640, "f8E5M2", "f32", 128, 128, "mma=wgmma bm=64 poverlap=on"),
    (300, 130, 384, "f8E4M3FN", "f32", 1, 128, "mma=wgmma ws=0 stages=3 poverlap=on"),
    # Steps promoted in halves of 128 columns (bn=256, 128 accumulators and 64 products a
    # thread): both scales by blocks on persistent blocks, ragged tiles, to bf16 without turns.
    (300, 776, 512, "f8E4M3FN", "f32", 1, 128, "mma=wgmma bn=256 sms=4"),
    (200, 600, 640, "f8E5M2", "bf16", 128, 128, "mma=wgmma bm=128 bn=256 pturns=off"),
    # `pscales=pair`: the first step of each pair computes both steps' factors, then reads
    # the next pair's scales: 3 steps (a pair, then one), 5 on a persistent grid (two pairs,
    # then one), 4 on 192-column blocks (two B scales a step), 6 on 64-row blocks.
    (256, 256, 384, "f8E4M3FN", "f32", 1, 128, "mma=wgmma bm=128 pscales=pair"),
    (300, 520, 640, "f8E4M3FN", "f32", 1, 128, "pscales=pair sms=4"),
    (140, 776, 512, "f8E4M3FN", "bf16", 128, 128, "mma=wgmma bn=192 sms=3 pscales=pair"),
    (129, 128, 768, "f8E5M2", "f32", 128, 128, "mma=wgmma bm=64 pscales=pair"),
    # `pturns` (on by default where 128-row blocks promote): off, and on 128-row blocks
    # without a producer warpgroup (thread 0 of the first consumer copies while taking turns).
    (200, 200, 320, "f8E4M3FN", "bf16", 1, 128, "pturns=off"),
    (300, 130, 384, "f8E4M3FN", "f32", 1, 128, "mma=wgmma bm=128 ws=0 pturns=on"),
]


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
@pytest.mark.parametrize(
    ("m", "n", "k", "fmt", "out", "a_rows", "b_rows", "knobs"),
    WGMMA_CASES,
    ids=lambda v: str(v).replace(" ", "_"),
)
def test_block_scaled_wgmma_gemm_matches_reference_on_cpu(
    m: int, n: int, k: int, fmt: str, out: str, a_rows: int, b_rows: int, knobs: str
) -> None:
    """One wgmma kernel with promoted K steps, each step's products times A's scale of the
    row and B's of the block's columns, on the CPU emulation: as the float64 reference."""
    text = block_scaled_matmul(m, n, k, fmt, out, a_rows, b_rows)
    pipeline = f"fuse,tile{{{knobs}}},to-cuda"
    program, tiled = lower(text, pipeline.removesuffix(",to-cuda"))
    planned = str(tiled)
    assert len(re.findall(r"#tile.plan<", planned)) == 1  # the scales stay in the GEMM
    assert re.search(r'#tile.plan<wgmma, .*promote = "on"', planned)
    lowered = (program, apply_pipeline(tiled, "to-cuda"))  # `pipeline`, lowered once
    error, _ = error_on_cpu(text, pipeline, seed=7, lowered=lowered)
    assert error <= (1e-6 if out == "f32" else 2**-8), error


@pytest.mark.parametrize(
    ("m", "n", "k", "bn"),
    [(8192, 8192, 8192, 192), (4096, 4096, 4096, 128), (1000, 4096, 4096, 128)],
    ids=["8192", "4096", "1000x4096"],
)
def test_block_scaled_blocks_are_chosen_by_waves(m: int, n: int, k: int, bn: int) -> None:
    # 21 rounds of 128×192 where 128×128 take 32 (H100: 1096 against 1180 µs); 6 against 8
    # (151.5 against 139.6), 2 against 2 (54.3 against 40.0) keep 128 columns.
    plan = str(lower(block_scaled_matmul(m, n, k), "fuse,tile")[1])
    assert re.search(rf"#tile.plan<wgmma, bm = 128, bn = {bn},", plan)


@pytest.mark.skipif(CUOBJDUMP is None or not HAS_NVDISASM, reason="cuobjdump or nvdisasm not found")
@pytest.mark.parametrize("a_rows", [1, 128], ids=["1x128", "128x128"])
def test_block_scaled_sass_has_fp8_products_scaled_by_fma_and_no_spills(
    a_rows: int, tmp_path
) -> None:
    """4096³: QGMMA 64x128x32 on E4M3 operands fed by TMA, each accumulator's step added as
    one FFMA (products times the step's factor), no local memory; and the scales a K step
    loads among its QGMMAs (the next step's) are not read before the step's wgmmas are waited
    for: not even moved, which would stall the warp on the load as the step's adds did when
    they read their own scales. Under `pscales=step`: with `pair` (the default) ptxas may
    compute the first pair's factors from the loads before the loop ahead of the first wait."""
    text = block_scaled_matmul(4096, 4096, 4096, a_rows=a_rows)
    code = sass(text, "fuse,tile{pscales=step},to-cuda", tmp_path)
    assert set(re.findall(r"\bQGMMA\.\w+\.\w+\.\w+\.\w+", code)) == {
        "QGMMA.64x128x32.F32.E4M3.E4M3"
    }
    assert "UTMALDG" in code
    assert len(re.findall(r"\bFFMA\b", code)) >= 64
    assert not LOCAL_MEMORY.search(code)
    loaded: set[str] = set()  # registers loaded since the last QGMMA wait, in the K loop
    in_loop = False
    for line in code.splitlines():
        if "QGMMA" in line:
            in_loop = True
        if "WARPGROUP.DEPBAR" in line:
            loaded.clear()
        elif in_loop and (load := re.search(r"\bLDG\.E\.CONSTANT (R\d+),", line)):
            loaded.add(load[1])
        elif loaded and (operands := re.search(r"\b[A-Z][\w.]* R\d+, (.*);", line)):
            assert not loaded & set(re.findall(r"\bR\d+\b", operands[1])), line
    assert in_loop


@pytest.mark.skipif(CUOBJDUMP is None or not HAS_NVDISASM, reason="cuobjdump or nvdisasm not found")
def test_overlapped_steps_issue_the_next_steps_products_before_the_adds(tmp_path) -> None:
    """`poverlap=on` at 4096³: the two sets of products take no local memory, ptxas keeps each
    step's four QGMMAs one group (only the last carries the scoreboard: serialized, each
    would), and between a group's issue and the wait for it the warp adds the last step's
    products (FFMAs)."""
    code = sass(block_scaled_matmul(4096, 4096, 4096), "fuse,tile{poverlap=on},to-cuda", tmp_path)
    assert not LOCAL_MEMORY.search(code)
    qgmma = re.findall(r"\bQGMMA\.64x128x32\.F32\.E4M3\.E4M3\b[^;]*;", code)
    assert len(qgmma) == 4 * sum("gsb0" in q for q in qgmma) >= 16
    adds_in_flight, issued = 0, False
    for line in code.splitlines():
        if "QGMMA" in line and "gsb0" in line:
            issued = True
        elif "WARPGROUP.DEPBAR" in line:
            issued = False
        elif issued and re.search(r"\bFFMA\b", line):
            adds_in_flight += 1
    assert adds_in_flight >= 32  # most of a step's 64 adds (bn/2 accumulators a thread)


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        ("mma=wgmma bn=192 poverlap=on", "bn up to 128 (bn/2 accumulators and two sets"),
        ("mma=wgmma ws=0 stages=2 poverlap=on", "got ws=0 with stages=2"),
    ],
    ids=["wide_block", "two_stages_without_producer"],
)
def test_overlapped_steps_the_rule_cannot_run_are_refused(knobs: str, message: str) -> None:
    text = block_scaled_matmul(256, 256, 512)
    with pytest.raises(DiagnosticException, match=re.escape(message)):
        lower(text, f"fuse,tile{{{knobs}}}")


@pytest.mark.skipif(CUOBJDUMP is None or not HAS_NVDISASM, reason="cuobjdump or nvdisasm not found")
@pytest.mark.parametrize("knobs", ["", "pturns=off"], ids=["turns", "no_turns"])
def test_consumer_warpgroups_take_turns_to_issue_promoted_steps(knobs: str, tmp_path) -> None:
    """4096³ block scales: by default each step's group of four QGMMAs is issued between a
    wait at the warpgroup's turn barrier (`BAR.SYNC` of both consumers' 256 threads) and an
    arrival at the other's (`BAR.ARV`), before the wait for the group; `pturns=off` has
    neither."""
    code = sass(block_scaled_matmul(4096, 4096, 4096), f"fuse,tile{{{knobs}}},to-cuda", tmp_path)
    groups = turns = 0
    waited = False
    for line in code.splitlines():
        if re.search(r"\bBAR\.SYNC\.DEFER_BLOCKING R\d+, 0x100\b", line):
            waited = True
        elif "QGMMA" in line and "gsb0" in line:
            groups += 1
            last_group = waited
        elif re.search(r"\bBAR\.ARV R\d+, 0x100\b", line) and waited:
            turns += last_group
            waited = False
    assert groups >= 4
    assert turns == (groups if not knobs else 0)


@pytest.mark.skipif(CUOBJDUMP is None or not HAS_NVDISASM, reason="cuobjdump or nvdisasm not found")
def test_steps_promoted_in_halves_issue_128_columns_at_a_time(tmp_path) -> None:
    """bn=256 at 4096³: every QGMMA is 64x128x32 (a half of the block's columns), each half its
    own group waited for before its products are added (two waits a step), and the 128
    accumulators and 64 products fit without local memory."""
    code = sass(
        block_scaled_matmul(4096, 4096, 4096), tile_with("mma=wgmma bn=256 store=direct"), tmp_path
    )
    assert set(re.findall(r"\bQGMMA\.\w+", code)) == {"QGMMA.64x128x32"}
    groups = len(re.findall(r"\bQGMMA\.[^;]*gsb0", code))
    assert groups % 2 == 0 and groups >= 4
    assert not LOCAL_MEMORY.search(code)


@pytest.mark.skipif(CUOBJDUMP is None or not HAS_NVDISASM, reason="cuobjdump or nvdisasm not found")
@pytest.mark.parametrize(("knobs", "paired"), [("pscales=step", False), ("", True)])
def test_scales_are_read_a_pair_of_steps_at_a_time(knobs: str, paired: bool, tmp_path) -> None:
    """4096³: with `pscales=step` each K step loads the scales of the step two ahead (every
    step's QGMMA wait is followed by loads before the next); by default (`pair`) only every
    other step loads (the next pair's), so the steps between two waits alternate: with loads,
    without."""
    lines = sass(block_scaled_matmul(4096, 4096, 4096), tile_with(knobs), tmp_path).splitlines()
    body = ""  # the K loop's body (a pair of steps): from its head to the branch back to it
    for end, line in enumerate(lines):
        back = re.search(r"/\*([0-9a-f]{4})\*/.*\bBRA (0x[0-9a-f]+)", line)
        if back and int(back[2], 16) < int(back[1], 16) and "QGMMA" in "".join(lines[:end]):
            head = next(i for i, x in enumerate(lines) if f"/*{int(back[2], 16):04x}*/" in x)
            body = "\n".join(lines[head:end])
            if body.count("WARPGROUP.DEPBAR") == 2:
                break
    loads = ["LDG" in after for after in body.split("WARPGROUP.DEPBAR")[1:]]
    assert loads == ([True, False] if paired else [True, True]), loads


def test_turns_need_two_consumer_warpgroups_that_promote() -> None:
    """On by default where 128-row blocks promote; refused by name on 64-row blocks and
    without promoted steps (per-tensor scales to bf16 sum all of K in the tensor cores)."""
    blocks = block_scaled_matmul(1024, 1024, 512)
    plan = str(lower(blocks, "fuse,tile")[1])
    assert re.search(r'#tile.plan<wgmma, bm = 128, .*promote = "on",.* pturns = "on"', plan)
    plain = str(lower(scaled_matmul(1024, 1024, 512), "fuse,tile{mma=wgmma bm=128}")[1])
    assert re.search(r'#tile.plan<wgmma, bm = 128, .*promote = "off",.* pturns = "off"', plain)
    for text, knobs, got in (
        (blocks, "bm=64", "promote=on bm=64"),
        (scaled_matmul(1024, 1024, 512), "bm=128", "promote=off bm=128"),
    ):
        message = f"(pturns=on) with promote=on and bm=128; got {got}"
        with pytest.raises(DiagnosticException, match=re.escape(message)):
            lower(text, f"fuse,tile{{mma=wgmma pturns=on {knobs}}}")


def test_overlapped_steps_take_blocks_of_at_most_128_columns() -> None:
    # 8192³ runs 128×192 blocks by default; two sets of products need 128 or fewer.
    plan = str(lower(block_scaled_matmul(8192, 8192, 8192), "fuse,tile{poverlap=on}")[1])
    assert re.search(r'#tile.plan<wgmma, bm = 128, bn = 128,.* poverlap = "on"', plan)


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
@pytest.mark.parametrize(
    ("m", "n", "k", "a_rows", "b_rows"),
    [(130, 256, 512, 128, 1), (64, 136, 300, 1, 128), (16, 40, 128, 1, 128)],
    ids=["per_column_b", "unaligned_rows", "one_k_block"],
)
def test_block_scales_the_wgmma_rule_does_not_take_run_on_cuda_cores(
    m: int, n: int, k: int, a_rows: int, b_rows: int
) -> None:
    """A B scale per column (1×128), rows TMA cannot copy (K = 300 bytes) and a K of one block
    (the scales hoisted out of the K loop) leave the GEMM to the CUDA-core rules, which
    compute it as the reference does."""
    text = block_scaled_matmul(m, n, k, "f8E4M3FN", "f32", a_rows, b_rows)
    assert "#tile.plan<wgmma" not in str(lower(text, "fuse,tile")[1])
    error, _ = error_on_cpu(text, "fuse,tile,to-cuda", seed=8)
    assert error <= 1e-6, error


@pytest.mark.parametrize(
    ("knobs", "b_rows", "message"),
    [
        ("mma=wgmma promote=off", 128, "applies block scales per K step (promote=on)"),
        ("mma=wgmma bn=224", 128, "takes B block scales with bn dividing 128, 192 or 256"),
        ("mma=wgmma", 1, "takes B block scales of 128×128 (one per 128 columns and 128 of K)"),
    ],
    ids=["promote_off", "wide_block", "per_column_b"],
)
def test_block_scales_the_wgmma_rule_cannot_apply_are_refused(
    knobs: str, b_rows: int, message: str
) -> None:
    text = block_scaled_matmul(256, 256, 512, "f8E4M3FN", "bf16", 1, b_rows)
    with pytest.raises(DiagnosticException, match=re.escape(message)):
        lower(text, f"fuse,tile{{{knobs}}}")


def _scaled_mm_module():
    import torch
    from torch import nn

    class ScaledMM(nn.Module):
        def forward(self, a, w, scale_a, scale_w):
            return torch._scaled_mm(a, w.t(), scale_a, scale_w, out_dtype=torch.bfloat16)

    return ScaledMM()


def _block_inputs(m: int, n: int, k: int, a_rows: int, b_rows: int, device: str = "cpu"):
    """FP8 a `[M, K]`, w `[N, K]` and f32 block scales as torch takes them: scale_a `[M/a_rows,
    K/128]`, scale_w `[K/128, N/b_rows]` (rounded up)."""
    import torch

    generator = torch.Generator(device=device).manual_seed(m + n + k)
    kb = -(-k // 128)

    def draw(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, device=device, generator=generator)

    a, w = draw(m, k).to(torch.float8_e4m3fn), draw(n, k).to(torch.float8_e4m3fn)
    scale_a = draw(-(-m // a_rows), kb).abs() + 0.5
    scale_w = draw(kb, -(-n // b_rows)).abs() + 0.5
    return a, w, scale_a, scale_w


def _dequantized_product(a, w, scale_a, scale_w, a_rows: int, b_rows: int):
    """(a · scale_a) @ (w · scale_w)ᵀ in float64, each scale repeated over its block."""
    (m, k), n = a.shape, w.shape[0]

    def spread(scale, rows: int, extent: int):
        return scale.double().repeat_interleave(rows, 0)[:extent].repeat_interleave(128, 1)[:, :k]

    dequantized_a = a.double() * spread(scale_a, a_rows, m)
    dequantized_w = w.double() * spread(scale_w.t(), b_rows, n)
    return dequantized_a @ dequantized_w.t()


@pytest.mark.parametrize(
    ("m", "n", "k", "a_rows", "b_rows"),
    [(200, 264, 384, 1, 128), (130, 256, 512, 128, 1), (64, 136, 300, 1, 128)],
    ids=["1x128_128x128", "128x128_1x128", "ragged_k"],
)
def test_block_scaled_mm_capture_matches_float64(
    m: int, n: int, k: int, a_rows: int, b_rows: int
) -> None:
    """`torch._scaled_mm` with block scales (torch's CPU build takes per-tensor scales only, so
    the reference is the float64 product of the dequantized operands, rounded to bf16)."""
    pytest.importorskip("torch")
    from tinyopt.backends.reference import run_reference
    from tinyopt.frontends.torch_fx import capture

    args = _block_inputs(m, n, k, a_rows, b_rows)
    captured = capture(_scaled_mm_module(), *args)
    (got,) = run_reference(captured.module, *captured.arguments(*args))
    want = _dequantized_product(*args, a_rows, b_rows).bfloat16().double().numpy()
    np.testing.assert_allclose(got, want, rtol=2**-8, atol=1e-6)


@requires_gpu
@pytest.mark.parametrize(
    ("m", "n", "k", "a_rows", "b_rows"),
    [(1000, 784, 640, 1, 128), (2000, 1552, 1024, 1, 128), (130, 256, 512, 128, 1)],
    ids=["1x128_128x128", "persistent", "cuda_cores"],
)
def test_compiled_block_scaled_mm_matches_float64_on_gpu(
    m: int, n: int, k: int, a_rows: int, b_rows: int
) -> None:
    """Captured and run by `CompiledModel` on the GPU: within bf16's rounding of the float64
    product of the dequantized operands. N is a multiple of 16 but not of 128 (a partial last
    scale block): torch's CUDA `_scaled_mm`, which the capture traces, refuses N off 16, and
    takes 128×128 scales on one operand only (torch 2.11)."""
    pytest.importorskip("torch")
    from tinyopt.frontends.compiled_model import CompiledModel

    args = _block_inputs(m, n, k, a_rows, b_rows, "cuda")
    want = _dequantized_product(*args, a_rows, b_rows)
    got = CompiledModel(_scaled_mm_module(), *args)(*args).double()
    assert ((got - want).norm() / want.norm()).item() < 2**-8
