"""What the TMA-store epilogue (`store=tma`, passes/tile/gemm/wgmma_tma_store.py) refuses, by
name: outputs TMA cannot store (f32, rows off 16 bytes), blocks whose last box would cross into
the next block's columns, a cluster split (whose epilogue adds the cluster's sums in shared
memory), and the rules that have no such epilogue; and in the SASS, outputs that leave by TMA
stores only."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from programs import block_scaled_matmul, matmul_plain, scaled_matmul, tile_with
from test_sass import CUOBJDUMP, HAS_NVDISASM, LOCAL_MEMORY, sass
from xdsl.utils.exceptions import DiagnosticException

from tinyopt.compiler import apply_pipeline, parse

REFUSED = [
    (scaled_matmul(256, 256, 256, out="f32"), "mma=wgmma", "a 16-bit float output"),
    (matmul_plain(300, 261, 512, "bf16", "nk"), "mma=wgmma", "N a multiple of 8), not N = 261"),
    (matmul_plain(300, 520, 512, "bf16", "nk"), "mma=wgmma bn=208", "whole boxes of 64 columns"),
    (
        matmul_plain(300, 520, 512, "bf16", "nk"),
        "mma=wgmma splitk=2 splitk_mode=cluster",
        "not with store=tma",
    ),
    (matmul_plain(300, 520, 512, "bf16", "nk"), "mma=sync", "direct or through smem"),
    (matmul_plain(300, 520, 512, "f32", "nk"), "mma=3xtf32", "not with TMA"),
]


@pytest.mark.parametrize("text,knobs,why", REFUSED, ids=[r[2] for r in REFUSED])
def test_store_tma_is_refused_by_name(text: str, knobs: str, why: str) -> None:
    with pytest.raises(DiagnosticException, match=re.escape(why)):
        apply_pipeline(parse(text), f"fuse,tile{{{knobs} store=tma}}")


@pytest.mark.skipif(CUOBJDUMP is None or not HAS_NVDISASM, reason="cuobjdump or nvdisasm not found")
@pytest.mark.parametrize(
    "text,knobs",
    [
        (matmul_plain(4096, 4096, 4096, "bf16", "nk"), "mma=wgmma"),
        (block_scaled_matmul(4096, 4096, 4096), ""),
    ],
    ids=["bf16", "fp8_block_scales"],
)
def test_outputs_leave_by_tma_stores_only(text: str, knobs: str, tmp_path: Path) -> None:
    """The SASS: the boxes go out by TMA stores (UTMASTG), no thread stores to global memory
    or reads its results back from shared memory (the staged epilogue's STG and LDS), and
    nothing spills."""
    code = sass(text, tile_with(f"{knobs} store=tma".strip()), tmp_path)
    assert "UTMASTG" in code
    assert not re.search(r"\bSTG\b", code)
    assert not LOCAL_MEMORY.search(code)
