"""192-row wgmma blocks (three consumer warpgroups, `wgmma_plan.TALL`): where the default takes
them (their waves cost no more than 128-row blocks', `_wave_cheapest_block`; `sms` shrinks the
grid the planner sees), run on the CPU (tests/cpu_wgmma.py) against float64: one wave, and
persistent blocks walking a second tile with a partial last row and column of tiles; a bias and
GELU in the staged epilogue; an N-major B in f16 with 128 columns. The settings they do not
run are refused by name, and their machine code keeps every value in registers.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cpu_cuda import COMPILER
from cpu_wgmma import error_on_cpu
from programs import matmul_plain, mlp, swiglu, tile_with
from test_sass import CUOBJDUMP, HAS_NVDISASM, LOCAL_MEMORY, sass_of_each
from xdsl.utils.exceptions import DiagnosticException

from tinyopt.compiler import apply_pipeline, parse
from tinyopt.dialects import loop, tile


def _plan(text: str, knobs: str) -> dict:
    module = apply_pipeline(parse(text), f"fuse,plan{{{knobs}}}")
    first = next(iter(loop.kernels(module)))
    return first.attributes[tile.PLAN].values  # type: ignore[union-attr]


CASES = [
    # 264×264 on 4 SMs: 4 tiles of 192×192 in one wave, where 128-row blocks take 6 in two.
    ("auto_one_wave_264x264x136", matmul_plain(264, 264, 136, "bf16", "nk"), "sms=4", 0),
    # On 2 SMs the 4 tiles take two rounds of persistent blocks; the last row and column of
    # tiles hold 72 of 192 rows and columns. Then GELU and the second linear.
    ("auto_persistent_mlp_264x264x200", mlp(264, 200, 264, "bf16"), "sms=2", 1),
    # Asked for: 400 rows (the last tile 16), an N-major B, f16, 128 columns, a block per tile.
    ("f16_kn_400x136x192", matmul_plain(400, 136, 192, "f16", "kn"), "mma=wgmma bm=192 bn=128", 0),
]


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
@pytest.mark.parametrize(("text", "knobs", "persistent"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])  # fmt: skip
def test_tall_blocks_match_float64_on_cpu(text: str, knobs: str, persistent: int) -> None:
    plan = _plan(text, knobs)
    assert (plan["bm"], plan["persistent"]) == (192, persistent)
    error, tolerance = error_on_cpu(text, tile_with(knobs), seed=3)
    assert error <= tolerance, error


def test_tall_blocks_wait_for_waves_they_fill_as_well() -> None:
    # 4096²: 484 tiles of 192×192 take 4 rounds where 512 of 128×256 do, each a smaller block:
    # 128×256 stays (4096³ ran 0.90× cuBLAS on 192×192 against 0.98×, H100).
    plan = _plan(matmul_plain(4096, 4096, 256, "bf16", "nk"), "")
    assert (plan["bm"], plan["bn"]) == (128, 256)


@pytest.mark.parametrize(
    ("text", "knobs", "message"),
    [
        (matmul_plain(400, 512, 128, "bf16", "nk"), "bm=192 bn=256", "got bn=256"),
        (swiglu(400, 128, 256), "bm=192 dual=on", "got a dual GEMM"),
        (matmul_plain(400, 512, 128, "bf16", "nk"), "bm=192 splitk=2 splitk_mode=cluster",
         "got a cluster split of 2"),
    ],
    ids=["wide", "dual", "cluster"],
)  # fmt: skip
def test_what_tall_blocks_do_not_run_is_refused(text: str, knobs: str, message: str) -> None:
    with pytest.raises(DiagnosticException, match=message):
        apply_pipeline(parse(text), f"fuse,plan{{mma=wgmma {knobs}}}")


@pytest.mark.skipif(CUOBJDUMP is None or not HAS_NVDISASM, reason="cuobjdump or nvdisasm not found")
def test_tall_blocks_keep_their_accumulators_in_registers(tmp_path: Path) -> None:
    # A bias and GELU after 96 accumulators a consumer thread, in 160 registers.
    kernels = sass_of_each(mlp(3000, 1024, 3000, "bf16"), tile_with(""), tmp_path)
    tall = [code for code in kernels.values() if "HGMMA.64x192x16" in code]
    assert tall, list(kernels)
    for code in tall:
        assert not LOCAL_MEMORY.search(code), "a 192-row block spills to local memory"
