"""The machine code of the decode-attention kernels (`attn=decode`) at the benchmark's batch-1
shape (GQA 32/8, 4096 keys, D = 128): in bf16, tensor cores (HMMA), K and V copied by 16-byte
`cp.async` (LDGSTS.128) with the next tile's copies in flight; in f32, CUDA cores (FFMA) with
the same 16-byte copies and 16-byte shared reads; no local memory in either kernel (the
partial one, nor the merge).

Needs cuobjdump and nvdisasm, as tests/test_sass.py; skipped where they are not found.
"""

import re
from pathlib import Path

from attention_programs import decode_attention
from test_sass import LOCAL_MEMORY, pytestmark, sass_of_each  # noqa: F401

PIPELINE = "decompose,fuse,flash-attention,tile,to-cuda"


def test_decode_attention_copies_16_bytes_on_tensor_cores_without_spills(tmp_path: Path) -> None:
    kernels = sass_of_each(decode_attention(1, 32, 8, 1, 4096, 128), PIPELINE, tmp_path)
    assert set(kernels) == {"decode_2_decode", "decode_2_merge"}
    code = kernels["decode_2_decode"]
    # Per 64-key tile, one warp: S is 64 keys x D = 128 (8 k-steps x 8 n-tiles), P.V 4 x 16.
    assert len(re.findall(r"\bHMMA\.16816\.F32\.BF16\b", code)) >= 128
    # 64 rows of K and of V, 16 chunks of 16 bytes each, over 32 threads: 64 copies per tile,
    # issued before the loop and inside it for the next tile.
    assert len(re.findall(r"\bLDGSTS\.E\.BYPASS\.128\b", code)) == 128
    assert not re.search(r"\bLDGSTS\.E(\.BYPASS)?\.(32|64)\b", code)
    assert "MUFU.EX2" in code
    for code in kernels.values():
        assert not LOCAL_MEMORY.search(code)


def test_f32_decode_attention_copies_16_bytes_on_cuda_cores_without_spills(
    tmp_path: Path,
) -> None:
    """f32 (decode_simt.py): the 4 query heads of a KV head in one 64-thread block, K and V
    tiles of 64 keys copied by 16-byte `cp.async` (64 × 128 floats over 64 threads: 32 copies
    a thread per tile, before the loop and inside it), scores and P·V by FFMA."""
    text = decode_attention(1, 32, 8, 1, 4096, 128, dtype="f32")
    kernels = sass_of_each(text, PIPELINE, tmp_path)
    assert set(kernels) == {"decode_2_decode", "decode_2_merge"}
    code = kernels["decode_2_decode"]
    assert re.search(r"\bLDGSTS\.E\.BYPASS\.128\b|\bLDG\.E\.128\b", code)
    assert not re.search(r"\bLDGSTS\.E(\.BYPASS)?\.(32|64)\b", code)
    assert "LDS.128" in code
    assert len(re.findall(r"\bFFMA\b", code)) >= 128
    assert "MUFU.EX2" in code
    for code in kernels.values():
        assert not LOCAL_MEMORY.search(code)


def test_f32_decode_attention_of_one_row_at_d256_has_no_local_memory(tmp_path: Path) -> None:
    """One query row at D = 256 (four rows of 16 lanes, 64 copies a thread per tile: with one
    warp, 128 each, ptxas spilled)."""
    text = decode_attention(1, 8, 8, 1, 4096, 256, dtype="f32")
    for code in sass_of_each(text, PIPELINE, tmp_path).values():
        assert not LOCAL_MEMORY.search(code)
