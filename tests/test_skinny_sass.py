"""The machine code (SASS) of the skinny-GEMM rule (passes/tile/gemm/skinny.py): the weights
are read in 128-bit global loads (LDG.E.128), nothing goes to local memory at the 128
registers a thread the rule allows, the `[N, K]` lanes are summed by shuffles (no barrier),
and each kernel does its products as FFMA. Needs cuobjdump and nvdisasm (see test_sass.py).
"""

import re
from pathlib import Path

import pytest
from programs import skinny, tile_with
from test_sass import CUOBJDUMP, HAS_NVDISASM, LOCAL_MEMORY, sass_of_each

pytestmark = pytest.mark.skipif(
    CUOBJDUMP is None or not HAS_NVDISASM, reason="cuobjdump or nvdisasm not found"
)

CASES = [
    # (id, program, knobs, 128-bit weight loads (one K-loop iteration) at least, lanes summed
    # by shuffles: the `[N, K]` layout). Two bf16 rows of [N, K] weights go to tensor cores
    # under `skinny_mma=auto` (test_skinny_mma_sass.py); `off` keeps them on this rule.
    ("gemv_bf16_nk_2x1024x2048", skinny(2, 1024, 2048, "bf16"), "skinny_mma=off", 8, True),
    ("f32_nk_16x1024x2048_bias_gelu", skinny(16, 1024, 2048, epilogue="bias_gelu"), "", 2, True),
    ("bf16_kn_8x2048x1024", skinny(8, 2048, 1024, "bf16", "kn"), "", 4, False),
]


@pytest.mark.parametrize(
    ("text", "knobs", "loads", "shuffles"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_skinny_streams_weights_in_128_bit_loads_without_local_memory(
    text: str, knobs: str, loads: int, shuffles: bool, tmp_path: Path
) -> None:
    kernels = sass_of_each(text, tile_with(knobs), tmp_path)
    # A split's fold (`_reduce`, one thread per point) reads the partial sums, not weights.
    (code,) = [code for name, code in kernels.items() if not name.endswith("_reduce")]
    assert len(re.findall(r"\bLDG\.E\.128", code)) >= loads
    assert not LOCAL_MEMORY.search(code), "the skinny kernel uses local memory"
    assert re.search(r"\bFFMA\b", code)
    if shuffles:
        assert re.search(r"\bSHFL\.BFLY\b", code) and not re.search(r"\bBAR\b", code)


def test_row_gemv_with_cache_2_issues_every_weight_load_before_its_products(
    tmp_path: Path,
) -> None:
    """`cache=2` on the row rule's GEMV (Llama-3 8B's down projection, K = 14336, on 512
    threads: 3.5 vectors a thread, the last guarded): all eight 128-bit loads of the thread's x
    and weight vectors come before its first FFMA, so they are in flight together, where the
    default interleaves them with the products a pair at a time; nothing goes to local
    memory."""
    knobs = tile_with("cache=2 threads=512")
    kernels = sass_of_each(skinny(1, 4096, 14336, "bf16"), knobs, tmp_path)
    (code,) = kernels.values()
    ops = re.findall(r"\b(LDG\.E\.128|FFMA)\b", code)
    assert ops.index("FFMA") == ops.count("LDG.E.128") == 8, ops
    assert not LOCAL_MEMORY.search(code)
