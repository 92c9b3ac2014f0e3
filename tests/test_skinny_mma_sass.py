"""The machine code (SASS) of the tensor-core skinny rule (passes/tile/gemm/skinny_mma.py): the
products are HMMA (m16n8k16), the weights come in 128-bit global loads straight into the
fragment registers (every load before the last HMMA is 128 bits: the weights' LDG.E.128 with
their L2 evict-first policy, the activations' LDG.E.128.CONSTANT through the read-only path; no
LDSM: shared memory only sums the K warps' accumulators at the end), with no conversion between
the load and the HMMA (no F2FP before the last HMMA: the epilogue's rounding comes after), and
nothing goes to local memory, at one, two and eight 8-row activation tiles, with the default
plans (16 warps splitting K, stages=2, for one and two tiles). Needs cuobjdump and nvdisasm
(see test_sass.py).
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
    # (id, program): the decode linears' shapes at 8, 16 and 64 rows (each split over K).
    ("bf16_8x4096x4096", skinny(8, 4096, 4096, "bf16")),
    ("bf16_16x1024x4096_bias_gelu", skinny(16, 1024, 4096, "bf16", epilogue="bias_gelu")),
    ("f16_64x4096x4096", skinny(64, 4096, 4096, "f16")),
]


@pytest.mark.parametrize("text", [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_skinny_mma_loads_weights_in_128_bits_into_hmma_fragments(
    text: str, tmp_path: Path
) -> None:
    kernels = sass_of_each(text, tile_with("skinny_mma=on"), tmp_path)
    (code,) = [code for name, code in kernels.items() if not name.endswith("_reduce")]
    assert re.search(r"\bHMMA\.16816\.F32\b", code)
    last_hmma = max(m.start() for m in re.finditer(r"\bHMMA\b", code))
    # The operands' loads (all before the last product; the epilogue's bias loads come after).
    loads = set(re.findall(r"\bLDG\.E[.A-Z0-9]*", code[:last_hmma]))
    assert loads == {"LDG.E.128", "LDG.E.128.CONSTANT"}, loads
    assert not re.search(r"\bLDSM\b", code)
    assert not re.search(r"\bF2FP\b", code[:last_hmma]), "a conversion before the products"
    assert not LOCAL_MEMORY.search(code), "the skinny_mma kernel uses local memory"
