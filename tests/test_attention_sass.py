"""The machine code of the flash-attention kernels at the benchmark shapes: tensor cores
(HMMA), `cp.async` copies of K and V (LDGSTS), `ex2.approx` (MUFU.EX2) and no local memory
(a spill at 255 registers would cost more than the pipelining gains).

Needs cuobjdump and nvdisasm, as tests/test_sass.py; skipped where they are not found.
"""

import re
from pathlib import Path

import pytest
from attention_programs import attention
from test_sass import LOCAL_MEMORY, pytestmark, sass_of_each  # noqa: F401

PIPELINE = "decompose,fuse,flash-attention,tile{attn=sync},to-cuda"


@pytest.mark.parametrize(
    ("shape", "causal"),
    [((1, 2, 4096, 128), False), ((1, 2, 4096, 128), True), ((1, 2, 2048, 64), False)],
    ids=["d128", "d128-causal", "d64"],
)
def test_attention_kernel_pipelines_on_tensor_cores_without_spills(
    shape: tuple[int, int, int, int], causal: bool, tmp_path: Path
) -> None:
    kernels = sass_of_each(attention(*shape, "bf16", causal=causal), PIPELINE, tmp_path)
    (code,) = [code for code in kernels.values() if "HMMA" in code]
    head_dim = shape[-1]
    # Per key tile and warp: 32 rows x 64 keys x D for S, 32 x D x 64 for P.V, m16n8k16 each.
    assert len(re.findall(r"\bHMMA\.16816\.F32\.BF16\b", code)) >= 2 * 2 * 8 * head_dim // 16
    assert "LDGSTS" in code
    assert "MUFU.EX2" in code
    assert "LDSM.16.MT88" in code  # ldmatrix.trans of V
    assert not LOCAL_MEMORY.search(code)
