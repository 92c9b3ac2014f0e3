"""The machine code of the SIMT flash-attention kernel (`attn=simt`) at the Llama shape (f32,
D = 128, causal): K and V copied by `cp.async` in 16-byte pieces (LDGSTS.128), Q staged by
16-byte loads, every shared read of the key loop 16 bytes wide (LDS.128), a key loop of FFMAs
(measured: 8240 of 9335 instructions, 88%), `ex2.approx` (MUFU.EX2), the row maxima by
shuffles, and no local memory (224 registers, NVRTC for sm_90a).

Needs cuobjdump and nvdisasm, as tests/test_sass.py; skipped where they are not found.
"""

from pathlib import Path

from attention_programs import attention
from test_sass import LOCAL_MEMORY, hottest_loop, pytestmark, sass  # noqa: F401

PIPELINE = "decompose,fuse,flash-attention,tile{attn=simt},to-cuda"


def test_simt_attention_key_loop_is_ffma_over_16_byte_shared_reads(tmp_path: Path) -> None:
    code = sass(attention(1, 2, 2048, 128, "f32", causal=True), PIPELINE, tmp_path)
    body = hottest_loop(code)
    assert body.count("FFMA") / len(body) >= 0.85, (body.count("FFMA"), len(body))
    shared_reads = [op for op in body if op.startswith("LDS")]
    assert shared_reads.count("LDS.128") / len(shared_reads) >= 0.95
    assert "LDGSTS.E.BYPASS.128" in code
    assert "LDG.E.128" in code
    assert "MUFU.EX2" in body and "SHFL.BFLY" in body
    assert not LOCAL_MEMORY.search(code), LOCAL_MEMORY.search(code)
