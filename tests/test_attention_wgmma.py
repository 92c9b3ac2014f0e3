"""The TMA + wgmma flash-attention schedule (`tile{attn=wgmma}`): NVRTC compiles every variant
and ptxas keeps it out of local memory (CI, no GPU needed); the variants up to 1000 keys match
the float64 reference on the CPU emulation (tests/cpu_wgmma.py: TMA, mbarriers, wgmma with A
in shared memory or registers); the kernels it cannot take get a diagnostic; on a GPU each
variant matches the float64 reference and fully masked rows give 0 (the checks of
tests/test_flash_attention_kernels.py).

The variants are those of tests/test_flash_attention_kernels.py (head dims 64 and 128, causal,
GQA, sequence lengths that are not multiples of the 128-row and 128-key tiles, bf16 and fp16,
a mask read from memory) and `HEAD_DIM_VARIANTS`: head dims from 32 to 256 that are not 64 or
128.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from attention_programs import attention, decode_attention
from conftest import requires_gpu
from cpu_cuda import COMPILER
from cpu_wgmma import error_on_cpu, run_program_on_cpu
from test_flash_attention_kernels import (
    VARIANTS,
    Variant,
    attention_kernel,
    check_fully_masked_rows,
    check_matches_float64,
)
from test_sass import CUOBJDUMP, HAS_NVDISASM, LOCAL_MEMORY, sass_of_each
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import DiagnosticException

from tinyopt.backends.check import (
    device_inputs,
    element_type,
    errors_against_reference,
    from_storage,
    graph_function,
    relative_error,
    tolerance,
)
from tinyopt.backends.reference import run_reference
from tinyopt.backends.cuda.runtime import compile_module
from tinyopt.compiler import apply_pipeline, lower, parse
from tinyopt.dialects import loop, tile
from tinyopt.passes.tile.attention.mma_sync import EXP2_CUBIC
from tinyopt.passes.tile.attention.wgmma import fma_tiles, keys_per_tile, tail_widths


def wgmma(variant: Variant) -> Variant:
    pipeline = variant.pipeline.replace("tile{attn=sync},", "tile{attn=wgmma},")
    return Variant(variant.id, variant.text, pipeline)


WGMMA_VARIANTS = [wgmma(v) for v in VARIANTS]

_WGMMA = "decompose,fuse,flash-attention,tile{attn=wgmma},to-cuda"
HEAD_DIM_VARIANTS = [
    Variant("d32-bf16-s130", attention(1, 2, 130, 32, "bf16"), _WGMMA),
    Variant("d48-f16-causal-s200", attention(1, 2, 200, 48, "f16", causal=True), _WGMMA),
    Variant("d80-bf16-gqa-s150", attention(2, 4, 150, 80, "bf16", kv_heads=2), _WGMMA),
    # The last 64-column chunk's tail holds the next head's columns here (heads side by side).
    Variant(
        "d96-bf16-gqa-causal-s200-heads-last",
        attention(1, 4, 200, 96, "bf16", causal=True, kv_heads=1, heads_last=True),
        _WGMMA,
    ),
    Variant("d112-bf16-causal-s300", attention(1, 2, 300, 112, "bf16", causal=True), _WGMMA),
    Variant("d160-f16-s100", attention(2, 1, 100, 160, "f16"), _WGMMA),
    Variant("d192-bf16-causal-s257", attention(1, 2, 257, 192, "bf16", causal=True), _WGMMA),
    Variant("d256-bf16-s150", attention(1, 3, 150, 256, "bf16"), _WGMMA),
    Variant("d256-bf16-causal-s2048", attention(1, 2, 2048, 256, "bf16", causal=True), _WGMMA),
]
"""Head dims other than 64 and 128 (multiples of 16 from 32 to 256): 64-column chunks whose
last one is partly past the head dim, 64-key tiles above D = 128."""


def _with(knobs: str) -> str:
    return f"decompose,fuse,flash-attention,tile{{attn=wgmma {knobs}}},to-cuda"


KNOB_VARIANTS = [
    Variant(
        "d64-bf16-causal-s1000-afma2",
        attention(2, 3, 1000, 64, "bf16", causal=True),
        _with("afma=2"),
    ),
    Variant("d128-f16-s777-afma4", attention(1, 4, 777, 128, "f16"), _with("afma=4")),
    Variant(
        "d64-bf16-causal-s1500-three-consumers",
        attention(2, 4, 1500, 64, "bf16", causal=True),
        _with("aconsumers=3"),
    ),
    Variant(
        "d32-bf16-s3000-three-consumers-afma3",
        attention(1, 8, 3000, 32, "bf16"),
        _with("aconsumers=3 afma=3 persistent=1"),
    ),
    # K and V past 16 MB: query tiles fastest, 131 persistent blocks over 11 query tiles.
    Variant(
        "d128-bf16-causal-s2048-persistent-prime",
        attention(4, 16, 2048, 128, "bf16", causal=True),
        _with("persistent=1"),
    ),
]
"""The opt-in knobs of the twenty-first session on the GPU (their CPU tests are below)."""

NOT_ON_CPU = {
    "d64-bf16-gqa-s4096",
    "d128-f16-causal-s4096",
    "d256-bf16-causal-s2048",
    "d48-f16-causal-s200",
    "d112-bf16-causal-s300",
    "d160-f16-s100",
}
"""Variants the CPU emulation leaves to NVRTC and the GPU: the long ones, and head dims whose
chunking another variant already covers on the CPU (48 as 32: one chunk partly used; 112 as 80
and 96; 160 as 192: three chunks, 64-key tiles)."""


WGMMA_HELPER = "tinyopt_wgmma_ra_"
"""What the wgmma schedule's CUDA calls (P·V with A in registers)."""


_LOWERED: dict[str, tuple[ModuleOp, ModuleOp]] = {}


def lowered(variant: Variant) -> tuple[ModuleOp, ModuleOp]:
    """`lower`'s program and module of a variant, once a process: its compile test and its CPU
    test share them (one parallel worker runs both, tests/conftest.py's `SHARING`)."""
    if variant.id not in _LOWERED:
        _LOWERED[variant.id] = lower(variant.text, variant.pipeline)
    return _LOWERED[variant.id]


@pytest.mark.parametrize(
    "variant", WGMMA_VARIANTS + HEAD_DIM_VARIANTS + KNOB_VARIANTS, ids=lambda v: v.id
)
def test_wgmma_attention_compiles_for_sm90a(variant: Variant) -> None:
    _, module = lowered(variant)
    kernel = attention_kernel(module, WGMMA_HELPER)
    source = kernel.source.data
    for piece in ["tinyopt_tma_load_", "setmaxnreg", "tinyopt_pack_", "tinyopt_exp2_approx"]:
        assert piece in source, piece
    warpgroups = 4 if "aconsumers=3" in variant.pipeline else 3
    assert list(kernel.block.get_values()) == [128 * warpgroups, 1, 1]
    compiled = compile_module(module, arch="sm_90a")
    assert kernel.sym_name.data in compiled.kernels


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
@pytest.mark.parametrize(
    "variant",
    [v for v in WGMMA_VARIANTS + HEAD_DIM_VARIANTS if v.id not in NOT_ON_CPU],
    ids=lambda v: v.id,
)
def test_wgmma_attention_matches_float64_on_cpu(variant: Variant) -> None:
    program, module = lowered(variant)
    attention_kernel(module, WGMMA_HELPER)  # the wgmma schedule took it
    error, tolerance = error_on_cpu(
        variant.text, variant.pipeline, seed=1, lowered=(program, module)
    )
    assert error <= tolerance, (error, tolerance)


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
@pytest.mark.parametrize(
    "variant",
    [v for v in WGMMA_VARIANTS if v.id == "d128-bf16-causal-s1000"],
    ids=lambda v: v.id,
)
def test_wgmma_attention_without_overlap_matches_float64_on_cpu(variant: Variant) -> None:
    pipeline = variant.pipeline.replace("attn=wgmma", "attn=wgmma aoverlap=off")
    lowered = lower(variant.text, pipeline)
    attention_kernel(lowered[1], WGMMA_HELPER)
    error, tolerance = error_on_cpu(variant.text, pipeline, seed=2, lowered=lowered)
    assert error <= tolerance, (error, tolerance)


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
@pytest.mark.parametrize(
    ("text", "knobs"),
    [
        (attention(1, 4, 300, 64, "bf16", causal=True, kv_heads=2), "sms=3"),
        (attention(2, 2, 200, 128, "f16"), "sms=3"),
        (attention(1, 3, 300, 96, "bf16", causal=True), "sms=2 aoverlap=off"),
        (attention(1, 3, 300, 192, "bf16", causal=True), "sms=4 apingpong=off"),
        (attention(1, 4, 400, 64, "bf16", causal=True, kv_heads=2), "sms=3 akeys=192"),
        (attention(1, 4, 300, 64, "bf16", causal=True, kv_heads=2), "sms=3 aqslots=1"),
    ],
    ids=[
        "d64-causal-gqa",
        "d128-f16",
        "d96-causal-no-overlap",
        "d192-causal-no-pingpong",
        "d64-causal-192-keys",
        "d64-causal-one-q-slot",
    ],
)
def test_persistent_blocks_walk_several_items_on_cpu(text: str, knobs: str) -> None:
    """Planned for 2-4 SMs, each block takes 2-4 (query tile, head) items of different key
    tile counts (causal): the K/V rings, the Q slots and their barriers (two slots by
    default, item k in slot k % 2; one with `aqslots=1`) and the warpgroups' turns carry on
    from one item to the next."""
    pipeline = f"decompose,fuse,flash-attention,tile{{attn=wgmma {knobs}}},to-cuda"
    lowered = lower(text, pipeline)
    kernel = attention_kernel(lowered[1], WGMMA_HELPER)
    blocks = int(knobs.split()[0].removeprefix("sms="))
    assert list(kernel.grid.get_values()) == [blocks, 1, 1]
    error, tolerance = error_on_cpu(text, pipeline, seed=3, lowered=lowered)
    assert error <= tolerance, (error, tolerance)


FORMS = {
    "gqa": decode_attention(1, 4, 2, 200, 200, 64),
    "chunk-causal-mqa": decode_attention(1, 4, 1, 150, 400, 64, causal=True),
    "bool-key-mask": decode_attention(2, 2, 2, 130, 300, 64, mask=((2, 1, 1, 300), "i1")),
    "float-mask-causal": decode_attention(
        2, 2, 1, 200, 200, 64, causal=True, mask=((1, 2, 200, 200), "bf16")
    ),
    "value-head-dim-of-its-own": decode_attention(1, 2, 2, 200, 300, 128, 64),
    "runtime-length": decode_attention(1, 4, 2, 200, 512, 64, valid=True),
    "runtime-length-causal": decode_attention(1, 4, 2, 200, 512, 64, causal=True, valid=True),
}
"""The forms of `graph.attention` (GQA, Sq ≠ Skv with the causal diagonal aligned to the end of
the keys, boolean and additive masks, a value head dim of its own, a runtime count of valid
keys), each with more than 64 query rows per K/V head: prefill, not decode."""


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
@pytest.mark.parametrize("form", FORMS, ids=list(FORMS))
def test_wgmma_takes_every_attention_form_on_cpu(form: str) -> None:
    """`attn=auto` plans each form on this schedule, and it matches float64 (CPU emulation)."""
    text = FORMS[form]
    pipeline = "decompose,fuse,flash-attention,tile,to-cuda"
    lowered = lower(text, pipeline)
    attention_kernel(lowered[1], WGMMA_HELPER)
    error, tolerance = error_on_cpu(text, pipeline, seed=4, lowered=lowered)
    assert error <= tolerance, (error, tolerance)


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
@pytest.mark.parametrize(
    ("attn", "causal", "valid"),
    [
        ("auto", False, 200),
        ("auto", True, 383),
        ("auto", False, 1024),
        ("sync", True, 200),
        ("sync", False, 383),
        ("simt", False, 200),
        ("simt", True, 383),
    ],
)
def test_a_chunk_stops_at_the_runtime_count_of_valid_keys(
    attn: str, causal: bool, valid: int
) -> None:
    """A chunk of 200 queries against a cache of 1024 keys holding L valid ones: the key loop
    (of each wgmma item, each `attn=sync` block, each f32 `attn=simt` block) stops at the last
    tile holding a key some row may see (`key_limit.py`), so keys and values past it are never
    read. Poisoned with NaN past the last 192-key tile, the output still matches float64 on the
    clean inputs; the whole loop would carry the NaN through P·V (0 · NaN)."""
    dtype = "f32" if attn == "simt" else "bf16"
    text = decode_attention(1, 4, 2, 200, 1024, 64, dtype=dtype, causal=causal, valid=True)
    pipeline = f"decompose,fuse,flash-attention,tile{{attn={attn}}},to-cuda"
    program, module = lower(text, pipeline)
    if attn == "auto":
        attention_kernel(module, WGMMA_HELPER)
    graph = graph_function(program)
    inputs, arrays = device_inputs(graph, seed=7, scalars={3: valid})
    past = -(-valid // 192) * 192
    for side in (1, 2):  # k and v, [1, 2, 1024, 64]: f32, or bf16 bits
        arrays[side] = arrays[side].copy()
        arrays[side][:, :, past:, :] = np.nan if dtype == "f32" else 0x7FC0
    (result,) = run_program_on_cpu(module, arrays)
    (error,) = errors_against_reference(graph, [result], inputs)
    assert error <= tolerance(graph), error


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
@pytest.mark.parametrize("attn", ["auto", "sync", "simt"])
def test_a_causal_chunk_stops_each_query_tile_at_its_own_last_key(attn: str) -> None:
    """A prefill into an empty cache (256 queries, L = 256 of 1024 keys, causal): query row i
    sees keys ≤ i, so the first query tile (128 rows, or fewer per block) stops at its own
    last key, within the first 192 keys, not at L for every tile. With the keys and values past
    192 poisoned with NaN, that tile's rows still match float64 on the clean inputs (a later
    tile's need those keys, so only the first tile is checked)."""
    dtype = "f32" if attn == "simt" else "bf16"
    text = decode_attention(1, 4, 2, 256, 1024, 64, dtype=dtype, causal=True, valid=True)
    program, module = lower(text, f"decompose,fuse,flash-attention,tile{{attn={attn}}},to-cuda")
    graph = graph_function(program)
    inputs, arrays = device_inputs(graph, seed=8, scalars={3: 256})
    for side in (1, 2):  # k and v, [1, 2, 1024, 64]: f32, or bf16 bits
        arrays[side] = arrays[side].copy()
        arrays[side][:, :, 192:, :] = np.nan if dtype == "f32" else 0x7FC0
    (result,) = run_program_on_cpu(module, arrays)
    (out_type,) = graph.function_type.outputs.data
    out = from_storage(result, element_type(out_type))
    (exact,) = run_reference(graph, *inputs)
    error = relative_error(out[:, :, :128], exact[:, :, :128])
    assert error <= tolerance(graph), error


@pytest.mark.parametrize(
    ("text", "knobs", "message"),
    [
        (
            decode_attention(2, 8, 2, 1, 1000, 64),
            "attn=wgmma",
            "attn=wgmma cannot run kernel @decode_2, a flash-attention kernel that no attention "
            "rule takes (attention_wgmma: ",
        ),
        (
            attention(1, 2, 128, 72, "bf16"),
            "attn=sync",
            "(attention: head dims must be multiples of 16 up to 256)",
        ),
        (
            attention(1, 2, 128, 64, "bf16"),
            "attn=decode",
            "(attention_decode: 128 query rows share each key and value",
        ),
    ],
    ids=["decode-on-wgmma", "head-dim-72-on-sync", "prefill-on-decode"],
)
def test_an_attention_schedule_asked_for_refuses_what_it_cannot_run(
    text: str, knobs: str, message: str
) -> None:
    """An `attn` setting whose rules cannot take an attention kernel is an error naming why
    (the kernel would otherwise run on the naive generic rules, unasked); `attn=none` asks for
    those, and `auto` picks the schedule that fits."""
    with pytest.raises(DiagnosticException, match=re.escape(message)):
        lower(text, f"decompose,fuse,flash-attention,tile{{{knobs}}},to-cuda")
    lower(text, "decompose,fuse,flash-attention,tile{attn=none},to-cuda")
    lower(text, "decompose,fuse,flash-attention,tile,to-cuda")


@pytest.mark.parametrize("valid", [False, True])
def test_decode_forms_plan_the_decode_schedule(valid: bool) -> None:
    """A decode step (one query row per head, 4 per K/V head; with or without a runtime key
    count) is planned on `attention_decode` (split-KV), and its plan names it."""
    text = decode_attention(2, 8, 2, 1, 1000, 64, valid=valid)
    module = apply_pipeline(parse(text), "decompose,fuse,flash-attention,plan")
    (plan, *_) = [str(k.attributes[tile.PLAN]) for k in loop.kernels(module)]
    assert plan.startswith("#tile.plan<attention_decode")


@pytest.mark.parametrize(
    ("s", "d", "causal", "blocks"),
    [
        (4096, 64, False, 132),
        (8192, 64, True, 64 * 40),
        (4096, 128, True, 131),
        (4096, 192, True, 32 * 40),
        (1024, 64, True, 132),
    ],
    ids=[
        "non-causal",
        "causal-19-rounds-43-tiles",
        "causal-10-rounds-32-tiles",
        "causal-10-rounds-64-tiles",
        "causal-2-rounds",
    ],
)
def test_persistent_auto_by_rounds_and_tiles(s: int, d: int, causal: bool, blocks: int) -> None:
    """`persistent=auto`: one block per SM for a non-causal kernel, for a causal one whose
    items fill at most 8 rounds of the 132 SMs, and for one whose longest item runs at most 32
    key tiles (D 128: 128 keys a tile, 4096 keys; 131 blocks, prime to its 32 query tiles);
    one block per item past both (40 heads × 64 query tiles of 43 tiles of 192 keys at D 64;
    × 32 query tiles of 64 tiles of 64 keys at D 192)."""
    text = attention(1, 40, s, d, "bf16", causal=causal)
    _, module = lower(text, "decompose,fuse,flash-attention,tile{attn=wgmma},to-cuda")
    kernel = attention_kernel(module, WGMMA_HELPER)
    assert list(kernel.grid.get_values()) == [blocks, 1, 1]


@pytest.mark.parametrize(
    ("b", "h", "s", "causal", "blocks"),
    [
        (8, 32, 2048, True, 131),  # 16 query tiles: 132 shares a factor 4 with them
        (2, 32, 8192, True, 131),  # 64 query tiles
        (2, 30, 1920, True, 131),  # 15 query tiles: 132 shares a factor 3
        (8, 32, 2048, False, 132),  # items of one length: every SM
        (1, 40, 1024, True, 132),  # K and V fit in L2: heads first, rounds of one length
        (1, 2, 4096, True, 64),  # fewer items than SMs: one block each
    ],
)
def test_persistent_causal_blocks_are_prime_to_the_query_tiles(
    b: int, h: int, s: int, causal: bool, blocks: int
) -> None:
    """Persistent causal blocks walking query tiles fastest take every query tile in turn:
    their count is the largest up to the SMs that shares no factor with the query tiles."""
    text = attention(b, h, s, 64, "bf16", causal=causal)
    _, module = lower(text, "decompose,fuse,flash-attention,tile{persistent=1},to-cuda")
    kernel = attention_kernel(module, WGMMA_HELPER)
    assert list(kernel.grid.get_values()) == [blocks, 1, 1]


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
@pytest.mark.parametrize(
    ("text", "knobs"),
    [
        (attention(1, 2, 300, 64, "bf16", causal=True), "sms=1"),
        (attention(2, 3, 200, 32, "bf16"), "persistent=0"),
        (decode_attention(1, 4, 2, 200, 512, 64, causal=True, valid=True), ""),
    ],
    ids=["d64-causal-one-block-walks-all", "d32-block-per-item", "gqa-chunk-at-runtime-length"],
)
def test_three_consumer_warpgroups_match_float64_on_cpu(text: str, knobs: str) -> None:
    """`aconsumers=3`: items of 192 query rows (S 300: a partial second item), four
    warpgroups of 128 threads, 128 keys a tile at D ≤ 64 (S, P and O in 128 of 160 registers)."""
    pipeline = f"decompose,fuse,flash-attention,tile{{attn=wgmma aconsumers=3 {knobs}}},to-cuda"
    lowered = lower(text, pipeline)
    kernel = attention_kernel(lowered[1], WGMMA_HELPER)
    assert list(kernel.block.get_values()) == [512, 1, 1]
    error, tolerance = error_on_cpu(text, pipeline, seed=6, lowered=lowered)
    assert error <= tolerance, (error, tolerance)


@pytest.mark.parametrize(
    ("s", "bm", "keys", "causal", "widths"),
    [
        # 128-row items over 192-key tiles: the last tiles hold 64, 128 or 192 keys, of which
        # the first warpgroup's rows see 64 fewer (0: it passes the tile)
        (2048, 128, 192, True, (0, 64, 128)),
        (2048, 128, 192, False, (128,)),  # 2048 = 10·192 + 128
        (2304, 128, 192, False, ()),  # whole tiles
        (2048, 128, 128, True, (64,)),  # D 128: the first warpgroup sees half the last tile
        (2048, 192, 128, True, (0, 64)),  # three consumers: 192-row items
        # keys past the last 16 (1000 = 5·192 + 40): the widths 48, 64, 112 and 128 are more
        # than two, so they are rounded to 64 keys
        (1000, 128, 192, True, (0, 64, 128)),
        (1000, 128, 192, False, (48,)),
        (100, 128, 192, True, ()),  # one tile an item: kept whole
    ],
)
def test_tail_widths(s: int, bm: int, keys: int, causal: bool, widths: tuple[int, ...]) -> None:
    assert tail_widths(s, s, bm, keys, causal) == widths


SCORE_WGMMA = r"tinyopt_wgmma_m64n(\d+)k16_b?f16_k\("
"""The helper of an S = Q·Kᵀ wgmma (B, the K tile, K-major) in the CUDA, by its N."""


def _score_widths(text: str, knobs: str) -> set[int]:
    """The N of the S = Q·Kᵀ wgmmas (K-major B) in the kernel's CUDA."""
    pipeline = f"decompose,fuse,flash-attention,tile{{attn=wgmma {knobs}}},to-cuda"
    source = attention_kernel(lower(text, pipeline)[1], WGMMA_HELPER).source.data
    return {int(n) for n in re.findall(SCORE_WGMMA, source)}


def test_atail_narrows_the_last_key_tile_and_off_keeps_it_whole() -> None:
    text = attention(1, 2, 2048, 64, "bf16", causal=True)
    assert _score_widths(text, "") == {64, 128, 192}
    assert _score_widths(text, "atail=on") == {64, 128, 192}
    assert _score_widths(text, "atail=off") == {192}


def test_atail_on_refuses_keys_that_end_at_a_runtime_bound() -> None:
    text = decode_attention(1, 4, 2, 200, 512, 64, causal=True, valid=True)
    assert _score_widths(text, "") == {192}  # auto: the widths are not known, no narrowing
    with pytest.raises(DiagnosticException, match="atail=on narrows an item's last key tile"):
        _score_widths(text, "atail=on")


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
@pytest.mark.parametrize(
    ("text", "knobs"),
    [
        # 6 items of 128 rows on 3 blocks: last tiles of 64, 128 and 192 keys, 60 rows in the
        # last query tile (its second warpgroup passes it)
        (attention(1, 2, 700, 64, "bf16", causal=True), "sms=3"),
        (attention(1, 3, 400, 64, "bf16", causal=True, kv_heads=1), "aoverlap=off"),
        (attention(1, 2, 250, 48, "bf16", causal=True), "aconsumers=3 sms=1"),  # two pass
    ],
    ids=["d64-causal-persistent", "gqa-no-overlap", "three-consumers"],
)
def test_narrowed_tiles_and_passed_rows_match_float64_on_cpu(text: str, knobs: str) -> None:
    """An item's last key tile computed only as wide as its keys (`atail`, on by default): S's
    accumulators and columns, P's fragments and P·V's K steps of that width. And in the last
    query tile, a consumer warpgroup whose 64 rows lie past the queries only waits for and
    releases each K and V slot (and takes its ping-pong turns) while the others compute, so
    persistent blocks walk on with the rings' phases and the turns in step. In the overlapped
    loop with ping-pong turns, without the overlap, and with three consumers (overlapped, no
    turns). A narrowed tile without a causal mask: the d80 variant above (150 = 128 + 22)."""
    pipeline = f"decompose,fuse,flash-attention,tile{{attn=wgmma {knobs}}},to-cuda"
    lowered = lower(text, pipeline)
    source = attention_kernel(lowered[1], WGMMA_HELPER).source.data
    assert len(set(re.findall(SCORE_WGMMA, source))) > 1
    error, tolerance = error_on_cpu(text, pipeline, seed=9, lowered=lowered)
    assert error <= tolerance, (error, tolerance)


@pytest.mark.parametrize(
    ("text", "consumers"),
    [
        # 2816 items of 192 rows in 22 rounds of 132 SMs against 4096 of 128 in 32: three
        (attention(8, 32, 2048, 64, "bf16"), 3),
        (attention(4, 32, 4096, 48, "f16"), 3),
        # 352 items in 3 rounds against 512 in 4 (12% more rows a block): two
        (attention(2, 8, 4096, 64, "bf16"), 2),
        # causal, head dim 32, head dim 128, a mask: two at any number of items
        (attention(8, 32, 2048, 64, "bf16", causal=True), 2),
        (attention(8, 32, 2048, 32, "bf16"), 2),
        (attention(8, 32, 2048, 128, "bf16"), 2),
        (decode_attention(8, 32, 32, 2048, 2048, 64, mask=((1, 1, 2048, 2048), "i1")), 2),
    ],
    ids=["d64-22-rounds", "d48", "d64-3-rounds", "causal", "d32", "d128", "masked"],
)
def test_auto_consumers_by_rounds_of_items(text: str, consumers: int) -> None:
    """`aconsumers=auto` takes three consumer warpgroups where the rounds of their 192-row
    items cost less than `THREE_CONSUMER_GAIN` times two's, for non-causal, unmasked kernels of
    head dims 48 to 64 (`auto_consumers`)."""
    module = apply_pipeline(parse(text), "decompose,fuse,flash-attention,plan")
    plans = [k.attributes[tile.PLAN] for k in loop.kernels(module)]
    (plan,) = [p for p in plans if p.rule.data == "attention_wgmma"]  # type: ignore[attr-defined]
    assert plan.values["consumers"] == consumers  # type: ignore[attr-defined]


@pytest.mark.skipif(CUOBJDUMP is None or not HAS_NVDISASM, reason="cuobjdump or nvdisasm not found")
@pytest.mark.parametrize("d", [64, 128])
def test_three_consumer_warpgroups_have_no_spills(d: int, tmp_path: Path) -> None:
    """At 160 registers a consumer thread, the auto key tile (128 keys at D = 64, 64 at D = 128)
    compiles without local memory, each product one group of HGMMAs (no ping-pong turns)."""
    pipeline = "decompose,fuse,flash-attention,tile{attn=wgmma aconsumers=3 atail=off},to-cuda"
    text = attention(1, 2, 4096, d, "bf16", causal=True)
    (code,) = [c for c in sass_of_each(text, pipeline, tmp_path).values() if "HGMMA" in c]
    hgmma = [line for line in code.splitlines() if "HGMMA" in line]
    assert all(f"HGMMA.64x{128 if d == 64 else 64}x16" in h for h in hgmma if "tnspB" not in h)
    assert sum("gsb0" in h for h in hgmma) == 4
    assert "BAR.ARV" not in code
    assert not LOCAL_MEMORY.search(code)


def test_the_exp2_cubic_is_within_its_error_on_every_fraction() -> None:
    """`EXP2_CUBIC` in f32 Horner form, as the kernel evaluates it, against 2^f in float64:
    at most 7.5e-5 relative error over [0, 1), and just below 1 at 0 (so the bits of a result
    scaled by 2^-126 stay those of a positive number)."""
    f = np.linspace(0.0, 1.0, 100001, endpoint=False, dtype=np.float32)
    *rest, last = (np.float32(c) for c in EXP2_CUBIC)
    p = np.full_like(f, last)
    for c in reversed(rest):
        p = p * f + c
    assert np.max(np.abs(p.astype(np.float64) / 2.0 ** f.astype(np.float64) - 1)) <= 7.5e-5
    assert 0.99 < EXP2_CUBIC[0] < 1


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
@pytest.mark.parametrize(("d", "causal", "fma"), [(64, True, 2), (128, False, 4)])
def test_exp2_on_fma_matches_float64_on_cpu(d: int, causal: bool, fma: int) -> None:
    """`afma`: some of P's exponentials by the cubic on the FMA units, the rest on MUFU; the
    masked keys (S 300: a partial last tile, and the causal diagonal) still weigh exactly 0."""
    text = attention(1, 2, 300, d, "bf16", causal=causal)
    pipeline = f"decompose,fuse,flash-attention,tile{{attn=wgmma afma={fma}}},to-cuda"
    error, tolerance = error_on_cpu(text, pipeline, seed=5)
    assert error <= tolerance, (error, tolerance)


@pytest.mark.skipif(CUOBJDUMP is None or not HAS_NVDISASM, reason="cuobjdump or nvdisasm not found")
def test_exp2_on_fma_moves_exponentials_off_mufu(tmp_path: Path) -> None:
    """With `afma=k` at D = 64 (192 keys: 24 n8 tiles), each softmax (the first tile's and the
    key loop's) takes 4 exponentials a thread per FMA tile off MUFU, 3k tiles: 24k MUFU.EX2
    fewer. The HGMMA groups (one scoreboard each) and the absence of local memory stay."""
    text = attention(1, 2, 4096, 64, "bf16")
    counts = {}
    for fma in (0, 2, 4):
        knobs = f"attn=wgmma afma={fma} atail=off"  # 4096 = 21·192 + 64: whole tiles counted
        pipeline = f"decompose,fuse,flash-attention,tile{{{knobs}}},to-cuda"
        (code,) = [
            c for c in sass_of_each(text, pipeline, tmp_path / str(fma)).values() if "HGMMA" in c
        ]
        counts[fma] = len(re.findall(r"\bMUFU\.EX2\b", code))
        assert sum("gsb0" in line for line in code.splitlines() if "HGMMA" in line) == 4
        assert not LOCAL_MEMORY.search(code)
    for fma in (2, 4):
        assert counts[0] - counts[fma] == 2 * 4 * len(fma_tiles(fma, 192))


@pytest.mark.skipif(CUOBJDUMP is None or not HAS_NVDISASM, reason="cuobjdump or nvdisasm not found")
@pytest.mark.parametrize(
    ("d", "causal", "overlap"),
    [
        (128, False, "on"),
        (128, True, "on"),
        (64, False, "on"),
        (128, False, "off"),
        (96, True, "on"),
        (256, False, "on"),
    ],
)
def test_wgmma_attention_sass_has_hgmma_tma_and_no_spills(
    d: int, causal: bool, overlap: str, tmp_path: Path
) -> None:
    text = attention(1, 2, 4096, d, "bf16", causal=causal)
    knobs = f"attn=wgmma aoverlap={overlap} atail=off"  # whole tiles (narrowed: the test below)
    pipeline = f"decompose,fuse,flash-attention,tile{{{knobs}}},to-cuda"
    (code,) = [c for c in sass_of_each(text, pipeline, tmp_path).values() if "HGMMA" in c]
    hgmma = re.findall(r"\bHGMMA\.64x\d+x16\.F32\.BF16\b[^;]*;", code)
    # Per key tile of `keys` and consumer warpgroup: D/16 m64n{keys}k16 for S, keys/16
    # m64nDk16 for P·V, in one loop (off); overlapped, the first tile's S and the last tile's
    # P·V are outside it. Each group of products ends in one HGMMA that carries the scoreboard
    # (gsb0): had ptxas serialized them (C7513), every HGMMA would.
    keys = keys_per_tile(d, d)  # 192 at D = 64: 96 + 48 + 32 S, P and O registers, no spill
    loops = 2 if overlap == "on" else 1
    assert len(hgmma) == loops * (d // 16 + keys // 16)
    scores = [h for h in hgmma if "tnspB" not in h]  # P·V reads V N-major (transposed B)
    assert len(scores) == loops * d // 16
    assert all(h.startswith(f"HGMMA.64x{keys}x16") for h in scores)
    assert sum("gsb0" in h for h in hgmma) == 2 * loops
    assert ("WARPGROUP.DEPBAR.LE gsb0, 0x1" in code) == (overlap == "on")
    # apingpong=auto, on with the overlap: the warpgroups' turns are named barriers.
    assert ("BAR.ARV" in code) == (overlap == "on")
    assert "UTMALDG" in code
    assert "MUFU.EX2" in code
    assert not LOCAL_MEMORY.search(code)


def test_narrowed_last_key_tiles_have_no_spills(tmp_path: Path) -> None:
    """D = 64 under a causal mask (`atail` by default): the last key tiles of 64 and 128 keys
    are S wgmmas of those widths beside the 192-key ones, in groups of one scoreboard each:
    the first tile's S, the loop's S and P·V, each narrowed step's S and P·V, and the last P·V
    at each width above 0 (a tile of 0 keys, which the first warpgroup passes, issues only the
    previous tile's P·V): 4 + (1 + 2·2) + 2, with no local memory."""
    text = attention(1, 2, 4096, 64, "bf16", causal=True)
    pipeline = "decompose,fuse,flash-attention,tile{attn=wgmma},to-cuda"
    (code,) = [c for c in sass_of_each(text, pipeline, tmp_path).values() if "HGMMA" in c]
    hgmma = re.findall(r"\bHGMMA\.64x(\d+)x16\.F32\.BF16\b([^;]*);", code)
    assert {int(n) for n, rest in hgmma if "tnspB" not in rest} == {64, 128, 192}
    assert sum("gsb0" in rest for _, rest in hgmma) == 11
    assert not LOCAL_MEMORY.search(code)


@pytest.mark.skipif(CUOBJDUMP is None or not HAS_NVDISASM, reason="cuobjdump or nvdisasm not found")
@pytest.mark.parametrize("causal", [False, True], ids=["rows_passed", "causal_narrowed"])
def test_consumer_branches_are_warp_uniform(causal: bool, tmp_path: Path) -> None:
    """The consumers' branches on their warpgroup (which rows an item gives it: passed rows at
    S = 2048 in 192-row items, per-warpgroup narrowed widths under a causal mask) are on a
    warp-uniform index (`tile.warp_uniform`), so ptxas sets no WARPSYNC before the wgmmas under
    them. On `threadIdx.x / 128` it set one in the key loop and kept the mbarriers' addresses
    out of uniform registers: D 64 S 2048 non-causal ran 0.91x cuDNN against 1.00x
    (H100, 2026-12-07, benchmarks/RESULTS.md forty-fifth session)."""
    text = attention(1, 2, 2048, 64, "bf16", causal=causal)
    pipeline = "decompose,fuse,flash-attention,tile{attn=wgmma},to-cuda"
    (code,) = [c for c in sass_of_each(text, pipeline, tmp_path).values() if "HGMMA" in c]
    assert "SHFL.IDX" in code
    assert "WARPSYNC" not in code
    assert not LOCAL_MEMORY.search(code)


@pytest.mark.parametrize(
    ("text", "knobs", "message"),
    [
        (
            attention(1, 2, 128, 64, "bf16").replace("%k", "%q").replace(", %q: ", ", %unused: "),
            "",
            "needs q, k and v in three different buffers",
        ),
        (
            attention(1, 2, 128, 128, "bf16"),
            "akeys=192",
            "akeys=192 at head dim 128 holds 208 registers of S, P and O a thread, more than 176",
        ),
        (
            attention(1, 2, 128, 160, "bf16"),
            "akeys=128",
            "akeys=128 at head dims 160/160 needs 245760 bytes of shared memory",
        ),
        (
            attention(1, 2, 128, 64, "bf16"),
            "aconsumers=3 akeys=192",
            "akeys=192 at head dim 64 holds 176 registers of S, P and O a thread, more than 128 "
            "with 3 consumer warpgroups",
        ),
        (
            attention(1, 2, 128, 64, "bf16"),
            "aconsumers=3 apingpong=on",
            "apingpong=on takes turns between two consumer warpgroups",
        ),
    ],
    ids=["q-is-k", "keys-registers", "keys-shared-memory", "three-consumers-keys", "three-ping"],
)
def test_wgmma_attention_refuses_what_it_cannot_take(text: str, knobs: str, message: str) -> None:
    with pytest.raises(DiagnosticException, match=re.escape(message)):
        lower(text, f"decompose,fuse,flash-attention,tile{{attn=wgmma {knobs}}},to-cuda")


# ------------------------------------------------------------------------------ GPU


NARROWED_ON_GPU = [
    Variant("d64-causal-s1980", attention(2, 4, 1980, 64, "bf16", causal=True), _with("")),
    Variant("d64-s1000-two-consumers", attention(1, 8, 1000, 64, "f16"), _with("aconsumers=2")),
    Variant(
        "d48-causal-s1000-three",
        attention(1, 4, 1000, 48, "bf16", causal=True),
        _with("aconsumers=3"),
    ),
    Variant(
        "d64-causal-s700-no-overlap",
        attention(1, 4, 700, 64, "bf16", causal=True),
        _with("aoverlap=off"),
    ),
]
"""Narrowed last key tiles and warpgroups passing rows past the queries (`atail`), on the GPU:
causal and not, two and three consumers, without the overlap."""


@requires_gpu
@pytest.mark.parametrize(
    "variant",
    WGMMA_VARIANTS + HEAD_DIM_VARIANTS + KNOB_VARIANTS + NARROWED_ON_GPU,
    ids=lambda v: v.id,
)
def test_wgmma_attention_matches_float64(variant: Variant) -> None:
    check_matches_float64(variant, WGMMA_HELPER)


@requires_gpu
@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_wgmma_attention_fully_masked_rows_give_zero(dtype: str) -> None:
    check_fully_masked_rows(dtype, "wgmma", WGMMA_HELPER)


def test_auto_falls_back_to_mma_sync_where_tma_cannot_copy() -> None:
    """K given as [bh, d, s] (its rows are not the keys): attn=wgmma names the limit, attn=auto
    (the default) schedules the kernel with mma.sync."""
    x, kt = "tensor<2x128x64xbf16>", "tensor<2x64x128xbf16>"
    sc = "tensor<2x128x128xbf16>"
    text = f"""func.func @attention(%q: {x}, %kt: {kt}, %v: {x}) -> {x} {{
  %s = graph.matmul %q, %kt : ({x}, {kt}) -> {sc}
  %c = graph.constant dense<0.125> : {sc}
  %scaled = graph.mul %s, %c : {sc}
  %p = graph.softmax %scaled {{dim = 2 : i64}} : {sc}
  %y = graph.matmul %p, %v : ({sc}, {x}) -> {x}
  func.return %y : {x}
}}"""
    with pytest.raises(DiagnosticException, match="needs k's last index to be its head-dim"):
        lower(text, "fuse,flash-attention,tile{attn=wgmma},to-cuda")
    _, module = lower(text, "fuse,flash-attention,tile,to-cuda")
    sources = [op.source.data for op in module.ops if isinstance(op, tile.CudaKernelOp)]
    assert any("tinyopt_mma_" in s for s in sources)
    assert not any("tinyopt_wgmma" in s for s in sources)


def test_two_q_slots_where_they_fit() -> None:
    """`aqslots=auto` gives a persistent grid two Q slots where they fit in shared memory (D
    128: 64 + 128 KiB of K/V rings), one where they do not (D 256: 128 + 128 KiB) and one to a
    block per item; `aqslots=2` that does not fit is refused by name."""
    pipeline = "decompose,fuse,flash-attention,tile{attn=wgmma %s}"

    def q_slots(d: int, knobs: str = "") -> int:
        planned = str(lower(attention(1, 2, 300, d, "bf16"), pipeline % knobs)[1])
        return int(re.search(r"q_slots = (\d)", planned)[1])

    assert (q_slots(128), q_slots(256), q_slots(128, "persistent=0")) == (2, 1, 1)
    message = "aqslots=2 at head dims 256/256 with akeys=64 needs 262144 bytes of shared memory"
    with pytest.raises(DiagnosticException, match=re.escape(message)):
        lower(attention(1, 2, 300, 256, "bf16"), pipeline % "aqslots=2")
