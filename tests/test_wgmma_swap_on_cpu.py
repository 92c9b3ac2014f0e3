"""The f16/bf16 wgmma GEMM with its sides swapped (`swap=on`, wgmma_swap.py): a block's
consumer rows walk B's N, its wgmma N A's M, and an N-major B's tile is read M-major
(trans-a). Run on the CPU (tests/cpu_wgmma.py) against float64, blocks last to first: K-major
and N-major B, ragged M, N and K, a batch, 64-, 128- and 192-row blocks, widths off 64
columns, persistent blocks, the ReLU and an MLP's GELU in the epilogue, rows off sectors
staged first, a SwiGLU's two GEMMs, K split in two passes; the epilogue direct and staged
(`store=smem`). The width `swap_width` picks, what the plan does not run (refused by name),
and its machine code.
"""

from __future__ import annotations

import re

from functools import partial
from pathlib import Path

import pytest
from cpu_cuda import COMPILER
from cpu_wgmma import error_on_cpu, run_program_on_cpu
from programs import batched_matmul, matmul_plain, mlp, scaled_matmul, swiglu, tile_with
from test_sass import CUOBJDUMP, HAS_NVDISASM, LOCAL_MEMORY, sass_of_each
from xdsl.utils.exceptions import DiagnosticException

from tinyopt.compiler import apply_pipeline, lower, parse
from tinyopt.dialects import loop, tile
from tinyopt.passes.tile.gemm.wgmma_swap import swap_width, waves_work
from tinyopt.passes.tile.target import H200

CASES = [
    # (name, program, knobs): a K-major B (torch's linear), N ragged against 128-row blocks;
    # an N-major B read M-major (trans-a), M ragged against the width.
    ("nk", matmul_plain(300, 400, 200, "bf16", "nk"), "swap=on store=direct"),
    ("kn", matmul_plain(300, 400, 200, "bf16", "kn"), "swap=on"),
    # Widths off 64 columns: 208 (the 3×1000³ block) with K of 136, 80 over 64 rows of B.
    (
        "kn_208",
        matmul_plain(260, 440, 136, "bf16", "kn", relu=False),
        "mma=wgmma swap=on bn=208 store=direct",
    ),
    ("kn_80_bm64", matmul_plain(100, 176, 72, "f16", "kn"), "mma=wgmma swap=on bm=64 bn=80"),
    # A batch; three consumer warpgroups over B's N (N = 352 = 192 + 160).
    ("bmm", batched_matmul(3, 130, 248, 104, "bf16"), "swap=on store=direct"),
    (
        "tall_kn",
        matmul_plain(400, 352, 128, "f16", "kn"),
        "mma=wgmma swap=on bm=192 bn=176 store=direct",
    ),
    # GELU and the second linear of an MLP; rows of 1000 elements (off 32-byte sectors)
    # staged onto aligned rows, then the staged GEMM swapped.
    ("mlp", mlp(200, 136, 232, "bf16"), "swap=on"),
    ("staged", matmul_plain(130, 200, 1000, "bf16", "kn"), "swap=on align=on"),
    # A SwiGLU's gate and up: not one dual GEMM swapped, but its two GEMMs each swapped.
    ("swiglu", swiglu(130, 136, 200, "bf16"), "swap=on"),
    # The staged epilogue (store=smem): 208 output rows a block (a last chunk of 16 rows),
    # 192-row blocks, the MLP's GELU, N of 101 (single columns) and of 100 (pairs), persistent.
    (
        "kn_208_smem",
        matmul_plain(260, 440, 136, "bf16", "kn"),
        "mma=wgmma swap=on bn=208 store=smem",
    ),
    ("tall_smem", matmul_plain(400, 352, 128, "f16", "kn"), "mma=wgmma swap=on bm=192 store=smem"),
    ("mlp_smem", mlp(200, 136, 232, "bf16"), "swap=on store=smem"),
    ("odd_n_smem", matmul_plain(230, 101, 128, "bf16", "nk"), "swap=on store=smem"),
    ("n_100_smem", matmul_plain(230, 100, 128, "bf16", "nk"), "swap=on store=smem"),
    (
        "persistent_smem",
        matmul_plain(300, 400, 200, "bf16", "kn"),
        "swap=on store=smem persistent=1 sms=3",
    ),
    # K split in two passes, the partial kernels swapped: a small grid's own split (64 rows of
    # A by 8 blocks of B's 1024), 4 chunks of a batch, 2 with the staged epilogue.
    ("split_auto", matmul_plain(64, 1024, 4096, "bf16", "nk"), "swap=on"),
    ("split_4_bmm", batched_matmul(3, 130, 248, 1024, "bf16"), "swap=on splitk=4 store=direct"),
    ("split_2_smem", matmul_plain(200, 328, 2048, "bf16", "kn"), "swap=on splitk=2 store=smem"),
    # Persistent blocks walking several tiles each (3 and 2 SMs; 192 rows of a K-major B).
    (
        "kn_persistent",
        matmul_plain(300, 400, 200, "bf16", "kn"),
        "swap=on persistent=1 sms=3 store=direct",
    ),
    (
        "nk_tall_persistent",
        matmul_plain(520, 296, 136, "bf16", "nk"),
        "mma=wgmma swap=on persistent=1 sms=2 bm=192",
    ),
]


def _plans(text: str, knobs: str) -> list[dict]:
    module = apply_pipeline(parse(text), f"fuse,plan{{{knobs}}}")
    return [k.attributes[tile.PLAN].values for k in loop.kernels(module)]  # type: ignore[union-attr]


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
@pytest.mark.parametrize(("text", "knobs"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_swapped_blocks_match_float64_on_cpu(text: str, knobs: str) -> None:
    assert any(p.get("swap") == "on" for p in _plans(text, knobs))
    backwards = partial(run_program_on_cpu, reverse=True)
    error, tolerance = error_on_cpu(text, tile_with(knobs), seed=7, run=backwards)
    assert error <= tolerance, error


def test_an_n_major_b_is_read_m_major_and_a_k_major_one_as_it_is() -> None:
    for layout, helper in (("kn", "_bf16_k_ta("), ("nk", "_bf16_k(")):
        _, module = lower(matmul_plain(300, 400, 200, "bf16", layout), tile_with("swap=on"))
        (source,) = [op.source.data for op in module.ops if isinstance(op, tile.CudaKernelOp)]
        assert re.search(rf"tinyopt_wgmma_m64n\d+k16{re.escape(helper)}", source), layout


def test_the_width_takes_the_fewest_waves_of_work() -> None:
    # 3×1000³: 5 columns of 208 × 8 rows × 3 = 120 blocks, one wave (cuBLAS: 128×200).
    assert swap_width(3, 1000, 1000, 128, H200) == 208
    # 5000³: 23 × 40 = 920 blocks, 6.97 waves of 128×224 against 8 of 128×208.
    assert swap_width(1, 5000, 5000, 128, H200) == 224
    # No narrower than 128 where M is wider, M rounded up to 16 where it is not.
    assert swap_width(1, 4096, 4096, 128, H200) >= 128
    assert swap_width(1, 100, 4096, 128, H200) == 112
    assert swap_width(1, 5000, 5000, 192, H200) <= 192


def test_narrow_widths_pay_their_efficiency_on_grids_of_many_waves() -> None:
    # 70B down at M = 16384: 128×160 takes 50 rounds where 128×256 takes 32; counted at the
    # plain kernel's efficiencies (128 columns 0.65 of 256's) 256 is cheaper. It ran 0.62× the
    # plain plan on 128×160 (RESULTS.md fifty-first session).
    assert swap_width(1, 16384, 8192, 128, H200) != 160
    assert swap_width(7, 1000, 1000, 128, H200) == 256  # 224 blocks, 2 rounds; 144: 392, 3
    assert (
        waves_work(1, 4096, 4096, 128, 128, H200)[0] > waves_work(1, 4096, 4096, 128, 256, H200)[0]
    )


def test_the_plan_takes_the_block_of_least_work_that_can_run() -> None:
    # N = 576: three 192-row blocks against five of 128 rows, but 192 rows take no bn of 256
    # (three consumer warpgroups); it had picked that block and refused the GEMM.
    (plan,) = _plans(matmul_plain(11264, 576, 256, "bf16", "nk"), "swap=on bn=256")
    assert (plan["bm"], plan["bn"]) == (128, 256), plan


def test_a_small_grid_splits_k_with_its_partial_kernels_swapped() -> None:
    plans = _plans(matmul_plain(64, 1024, 4096, "bf16", "nk"), "swap=on")
    assert [p.get("swap") for p in plans][0] == "on" and len(plans) == 2, plans


def test_swap_auto_leaves_f16_and_bf16_unswapped() -> None:
    for text in (batched_matmul(3, 1000, 1000, 1000, "bf16"), matmul_plain(300, 400, 200, "f16")):
        assert all(p.get("swap") == "off" for p in _plans(text, "mma=wgmma"))


@pytest.mark.parametrize(
    ("knobs", "clash"),
    [
        ("store=tma", "store=tma"),
        ("multicast=b", "multicast=b"),
        ("streamk=tail", "streamk=tail"),
        ("ws=0", "ws=0"),
        ("splitk=2 splitk_mode=cluster", "splitk_mode=cluster"),
    ],
)
def test_what_the_swapped_plan_does_not_run_is_refused(knobs: str, clash: str) -> None:
    text = matmul_plain(512, 512, 2048, "bf16", "nk")
    with pytest.raises(DiagnosticException, match=f"swap=on runs .*not with {clash}"):
        apply_pipeline(parse(text), f"fuse,plan{{mma=wgmma swap=on {knobs}}}")


def test_fp8_is_refused_swapped() -> None:
    with pytest.raises(DiagnosticException, match="not with 8-bit float operands"):
        apply_pipeline(parse(scaled_matmul(256, 256, 256)), "fuse,plan{mma=wgmma swap=on}")


@pytest.mark.skipif(CUOBJDUMP is None or not HAS_NVDISASM, reason="cuobjdump or nvdisasm not found")
@pytest.mark.parametrize(("store", "stores"), [("direct", "STG.E.U16"), ("smem", "STG.E.128")])
def test_swapped_blocks_keep_their_accumulators_in_registers(
    tmp_path: Path, store: str, stores: str
) -> None:
    # 104 accumulators a consumer thread, an N-major B read M-major (`HGMMA ... .tnspA`); the
    # direct epilogue stores single elements, the staged one 16 bytes a thread.
    text = batched_matmul(3, 1000, 1000, 1000, "bf16")
    kernels = sass_of_each(text, tile_with(f"swap=on store={store}"), tmp_path)
    wide = [code for code in kernels.values() if "HGMMA.64x208x16" in code]
    assert wide, list(kernels)
    for code in wide:
        assert not LOCAL_MEMORY.search(code), "a swapped 208-column block spills to local memory"
        assert ".tnspA" in code, "B's N-major tile is not read M-major"
        assert stores in code, stores
