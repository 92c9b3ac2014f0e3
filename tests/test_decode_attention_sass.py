"""The machine code of the decode-attention kernels (`attn=decode`) at the benchmark's batch-1
shape (GQA 32/8, 4096 keys, D = 128): in bf16, tensor cores (HMMA), K and V copied by 16-byte
`cp.async` (LDGSTS.128) with the next tile's copies in flight; in f32, CUDA cores (FFMA) with
the same 16-byte copies and 16-byte shared reads; no local memory in either kernel (the
partial one, nor the merge).

The bf16 partial kernel is checked with one warp per 16 rows (`akwarps=1`) and with the
key-parallel warps auto takes there (`akwarps=4`: four warps per block, 16-key tiles, registers
within the 168 that three such blocks an SM leave each thread).

Needs cuobjdump and nvdisasm, as tests/test_sass.py; skipped where they are not found.
"""

import re
from pathlib import Path

from attention_programs import decode_attention
from test_sass import LOCAL_MEMORY, cuobjdump, pytestmark, sass_of_each  # noqa: F401

from tinyopt.backends.cuda.cache import cached_compile
from tinyopt.compiler import lower
from tinyopt.dialects import tile

PIPELINE = "decompose,fuse,flash-attention,tile,to-cuda"
ONE_WARP = "decompose,fuse,flash-attention,tile{akwarps=1},to-cuda"


def test_decode_attention_copies_16_bytes_on_tensor_cores_without_spills(tmp_path: Path) -> None:
    kernels = sass_of_each(decode_attention(1, 32, 8, 1, 4096, 128), ONE_WARP, tmp_path)
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


def test_key_parallel_warps_copy_16_bytes_within_their_registers(tmp_path: Path) -> None:
    """akwarps=4 (auto took it at this shape until run 2 of the seventh session measured 8
    faster): each warp's 16-key tile is 16 HMMA for S (8 k-steps x 2
    n-tiles) and 16 for P.V (16 n-tiles of D); 16 rows of K and V, 16 chunks of 16 bytes
    each, over the warp's 32 lanes: 16 copies per tile, for the first two rounds before the
    loop and the tile two rounds ahead inside it. No local memory, and at most 168 registers
    (`__launch_bounds__(128, 3)`: three blocks of four warps an SM)."""
    text = decode_attention(1, 32, 8, 1, 4096, 128)
    pipeline = PIPELINE.replace("tile,", "tile{akwarps=4},")
    kernels = sass_of_each(text, pipeline, tmp_path)
    code = kernels["decode_2_decode"]
    assert len(re.findall(r"\bHMMA\.16816\.F32\.BF16\b", code)) == 32
    assert len(re.findall(r"\bLDGSTS\.E\.BYPASS\.128\b", code)) == 48
    assert not re.search(r"\bLDGSTS\.E(\.BYPASS)?\.(32|64)\b", code)
    assert "MUFU.EX2" in code
    for code in kernels.values():
        assert not LOCAL_MEMORY.search(code)
    _, module = lower(text, pipeline)
    (partial,) = [
        k
        for k in module.ops
        if isinstance(k, tile.CudaKernelOp) and k.sym_name.data == "decode_2_decode"
    ]
    assert list(partial.block.get_values()) == [128, 1, 1]
    assert "__launch_bounds__(128, 3)" in partial.source.data
    cubin = cached_compile(partial.source.data, partial.sym_name.data)
    usage = cuobjdump(cubin, "--dump-resource-usage", tmp_path)
    registers = int(re.search(r"REG:(\d+)", usage).group(1))  # type: ignore[union-attr]
    assert registers <= 168, registers


def test_key_parallel_warps_have_no_local_memory_at_other_shapes(tmp_path: Path) -> None:
    """Two and eight warps at D = 128, a causal chunk of 16 rows (4 queries x GQA 4), D = 64
    (auto: two warps), Dv = 64, and rings of three and four tiles: no spills."""
    for text, knobs in [
        (decode_attention(1, 32, 8, 1, 4096, 128), "akwarps=2"),
        (decode_attention(1, 32, 8, 1, 4096, 128), "akwarps=8"),
        (decode_attention(1, 32, 8, 4, 4096, 128, causal=True), "akwarps=4"),
        (decode_attention(8, 32, 8, 1, 4096, 64), ""),
        (decode_attention(1, 32, 8, 1, 4096, 128, 64), ""),
        (decode_attention(1, 32, 8, 1, 4096, 128), "akwarps=8 aslots=3 akwarps_sync=warp"),
        (decode_attention(1, 32, 8, 1, 4096, 128), "akwarps=4 aslots=4"),
    ]:
        pipeline = f"decompose,fuse,flash-attention,tile{{{knobs}}},to-cuda"
        for code in sass_of_each(text, pipeline, tmp_path).values():
            assert not LOCAL_MEMORY.search(code), knobs


def test_warps_on_their_own_rings_drop_the_rounds_block_barriers(tmp_path: Path) -> None:
    """`akwarps_sync=warp` at eight warps: the two block barriers of each round are gone (the
    merge's stay), the copies are still 16-byte `cp.async`, no local memory."""
    text = decode_attention(1, 32, 8, 1, 4096, 128)
    counts = {}
    for sync in ("block", "warp"):
        pipeline = f"decompose,fuse,flash-attention,tile{{akwarps=8 akwarps_sync={sync}}},to-cuda"
        code = sass_of_each(text, pipeline, tmp_path)["decode_2_decode"]
        assert not LOCAL_MEMORY.search(code), sync
        assert re.search(r"\bLDGSTS\.E\.BYPASS\.128\b", code), sync
        counts[sync] = len(re.findall(r"\bBAR\.SYNC", code))
    assert counts["warp"] == counts["block"] - 2, counts


RUNTIME_L = """
func.func @f(%q: tensor<1x32x1x128xbf16>, %k: tensor<1x8x32768x128xbf16>,
             %v: tensor<1x8x32768x128xbf16>, %L: tensor<i64>) -> tensor<1x32x1x128xbf16> {
  %o = graph.attention %q, %k, %v valid(%L : tensor<i64>) {scale = 0.088 : f32}
      : (tensor<1x32x1x128xbf16>, tensor<1x8x32768x128xbf16>, tensor<1x8x32768x128xbf16>)
      -> tensor<1x32x1x128xbf16>
  func.return %o : tensor<1x32x1x128xbf16>
}
"""
"""Decode attention over the first L of a 32768-key cache (the benchmark's capacity)."""


def test_runtime_chunks_keep_the_16_byte_copies(tmp_path: Path) -> None:
    """The chunks cut from L at run time (a split count picked by a chain of selects, a
    dynamic start and count) leave the K and V rows a plain load of index arithmetic, so they
    are still copied by 16-byte `cp.async` (a regression once staged them through registers
    with 16-byte loads); eight key-parallel warps, no local memory."""
    kernels = sass_of_each(RUNTIME_L, PIPELINE, tmp_path)
    (partial,) = [code for name, code in kernels.items() if name.endswith("_decode")]
    assert len(re.findall(r"\bLDGSTS\.E\.BYPASS\.128\b", partial)) == 48
    assert len(re.findall(r"\bHMMA\.16816\.F32\.BF16\b", partial)) == 32
    for code in kernels.values():
        assert not LOCAL_MEMORY.search(code)
