"""The decode-attention schedule (`attn=decode`, passes/tile/attention/decode.py) runs on the
CPU emulation of CUDA (tests/cpu_cuda.py) and matches float64 on fresh random data: one query
and three per head, GQA ratios 1 and 4, key counts 37 and 300 (not multiples of the 64-key
tile), a boolean and an additive mask, causal masking aligned to the end of the keys, Dv ≠ D,
bf16 on tensor cores, f32 (and bf16 at D = 40) on CUDA cores with row tiles of 1 to 64 rows,
one split and several (partial states, then the merge kernel), batch > 1. The
loop-level rewrite itself is checked against the reference executor first.

Key-parallel warps (`akwarps`, decode_warps.py): 1, 2, 4 and auto over key counts that are not
multiples of the warps' 16-key tiles (37, 1000: a last round where some warps have a partial
tile and others none), a runtime number of valid keys (1, 37, all of a 200-key cache),
causal chunks (Sq > 1, up to the 16 rows of one m16 tile), GQA, Dv ≠ D and f16; the warps on
their own barriers (`akwarps_sync=warp`) and rings of 3 and 4 tiles (`aslots`). Needs g++
(C++20); no GPU.
"""

from __future__ import annotations

import numpy as np
import pytest
from attention_programs import decode_attention
from cpu_cuda import COMPILER, run_on_cpu
from test_sgemm_on_cpu import viewed
from xdsl.dialects import func, memref
from xdsl.dialects.builtin import MemRefType, ModuleOp, bf16
from xdsl.ir import BlockArgument, SSAValue
from xdsl.utils.exceptions import DiagnosticException

from tinyopt.backends.check import (
    device_inputs,
    errors_against_reference,
    from_storage,
    graph_function,
    relative_error,
)
from tinyopt.backends.loop_reference import run_loop_module
from tinyopt.backends.reference import random_inputs, run_reference
from tinyopt.compiler import apply_pipeline, lower, parse
from tinyopt.dialects import loop, tile
from tinyopt.passes.tile.attention.decode_plan import WARP_KEYS
from tinyopt.passes.tile.attention.decode_split import BALANCED

FUSED = "decompose,fuse,flash-attention"

CASES = {
    # id: (program, knobs, the split count the plan must show; None: any). One key is not
    # here: its softmax is 1 and `flash-attention` finds no reduction to fuse (other rules).
    "sq1_gqa4_b2_s300_bf16_auto": (decode_attention(2, 8, 2, 1, 300, 64), "", None),
    "sq1_gqa4_b2_s300_bf16_split3": (decode_attention(2, 8, 2, 1, 300, 64), "asplits=3", 3),
    "sq3_gqa4_s300_causal_split2": (
        decode_attention(1, 4, 1, 3, 300, 64, causal=True),
        "asplits=2",
        2,
    ),
    "sq1_mha_b2_s300_d128_dv64_bool_mask_split5": (
        decode_attention(2, 2, 2, 1, 300, 128, 64, mask=((2, 1, 1, 300), "i1")),
        "asplits=5",
        5,
    ),
    "sq3_gqa4_s37_additive_mask_causal": (
        decode_attention(1, 4, 1, 3, 37, 32, mask=((1, 4, 3, 37), "bf16"), causal=True),
        "",
        1,
    ),
    "sq3_gqa4_b2_s300_f32_split2": (
        decode_attention(2, 4, 1, 3, 300, 16, dtype="f32", causal=True),
        "asplits=2",
        2,
    ),
    # f32 on CUDA cores (decode_simt.py): row tiles of 1 (a warp's 32 lanes on one row, or four
    # rows of 16 where 128-key tiles do not fit), 4, 16 and 64 rows.
    "f32_sq1_mha_b2_s37_one_split": (decode_attention(2, 2, 2, 1, 37, 64, dtype="f32"), "", 1),
    "f32_sq1_mha_s300_d256_split2": (
        decode_attention(1, 2, 2, 1, 300, 256, dtype="f32"),
        "asplits=2",
        2,
    ),
    "f32_sq1_gqa4_s300_split3": (
        decode_attention(1, 8, 2, 1, 300, 64, dtype="f32"),
        "asplits=3",
        3,
    ),
    "f32_sq3_mha_s300_causal_split2": (
        decode_attention(1, 2, 2, 3, 300, 32, dtype="f32", causal=True),
        "asplits=2",
        2,
    ),
    "f32_sq3_gqa4_s37_additive_mask_causal": (
        decode_attention(1, 4, 1, 3, 37, 32, dtype="f32", mask=((1, 4, 3, 37), "f32"), causal=True),
        "",
        1,
    ),
    "f32_sq1_gqa4_b2_s300_dv48_bool_mask_split5": (
        decode_attention(2, 8, 2, 1, 300, 64, 48, "f32", mask=((2, 1, 1, 300), "i1")),
        "asplits=5",
        5,
    ),
    "f32_sq16_gqa4_s300_causal_split2": (
        decode_attention(1, 4, 1, 16, 300, 64, dtype="f32", causal=True),
        "asplits=2",
        2,
    ),
    # bf16 at a head dim the tensor cores refuse (40): the same CUDA-core tile, staged as f32.
    "sq1_gqa4_s300_d40_bf16_split2": (
        decode_attention(1, 8, 2, 1, 300, 40),
        "asplits=2",
        2,
    ),
}


@pytest.mark.parametrize(
    ("text", "knobs"),
    [
        (decode_attention(1, 4, 1, 3, 150, 16, 8, "f32", causal=True), "asplits=2"),
        (decode_attention(2, 4, 2, 1, 70, 16, mask=((2, 1, 1, 70), "i1")), "asplits=2"),
    ],
    ids=["sq3_mqa_causal_dv8", "sq1_gqa2_b2_bool_mask"],
)
def test_split_loop_ir_matches_reference(text: str, knobs: str) -> None:
    """The planned loop kernels (regrouped partial states, then the merge), run by the loop
    reference executor, equal float64 attention."""
    program = parse(text.replace("xbf16", "xf32"))
    module = apply_pipeline(program.clone(), f"{FUSED},plan{{{knobs}}}")
    inputs = random_inputs(program, seed=12)
    (actual,) = run_loop_module(module, graph_function(program).sym_name.data, *inputs)
    (exact,) = run_reference(program, *inputs)
    np.testing.assert_allclose(actual, exact, rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
@pytest.mark.parametrize("case", list(CASES))
def test_decode_kernels_match_float64_on_cpu(case: str) -> None:
    text, knobs, splits = CASES[case]
    planned = apply_pipeline(parse(text), f"{FUSED},plan{{{knobs}}}")
    plans = [k.attributes[tile.PLAN] for k in loop.kernels(planned)]
    assert {p.rule.data for p in plans} == {"attention_decode"}  # type: ignore[union-attr]
    shown = {p.values["asplits"] for p in plans}  # type: ignore[union-attr]
    assert len(shown) == 1 and (splits is None or shown == {splits}), shown
    assert len(plans) == (1 if shown == {1} else 2)
    program, module = lower(text, f"{FUSED},tile{{{knobs}}},to-cuda")
    graph = graph_function(program)
    inputs, arrays = device_inputs(graph, seed=sum(map(ord, case)))
    if len(inputs) == 4 and inputs[3].dtype == np.bool_:
        inputs[3][..., 0] = arrays[3][..., 0] = True  # a row that keeps no key averages v
    (result,) = run_program(module, arrays)
    (error,) = errors_against_reference(graph, [result], inputs)
    assert error < (1e-5 if "f32" in case else 1e-2), error


def run_program(module: ModuleOp, arrays: list[np.ndarray]) -> list[np.ndarray]:
    """Runs the host function's launches in order on the CPU, over the inputs and the
    buffers it allocates (NaN-filled); returns the arrays it returns."""
    (function,) = [op for op in module.ops if isinstance(op, func.FuncOp)]
    kernels = {op.sym_name.data: op for op in module.ops if isinstance(op, tile.CudaKernelOp)}
    held: dict[SSAValue, np.ndarray] = {}
    for op in function.body.block.ops:
        if isinstance(op, memref.AllocOp):
            t = op.memref.type
            assert isinstance(t, MemRefType)
            f32 = str(t.element_type) == "f32"
            held[op.memref] = np.full(
                t.get_shape(), np.nan if f32 else 0x7FC0, np.float32 if f32 else np.uint16
            )
        elif isinstance(op, loop.LaunchOp):
            sources = [viewed(a) for a in op.args]
            buffers = [
                _buffer(s, arrays, held).reshape(a.type.get_shape())  # type: ignore[attr-defined]
                for a, s in zip(op.args, sources, strict=True)
            ]
            outs = run_on_cpu(kernels[op.callee.string_value()], buffers)
            for s, out in zip(sources, outs, strict=True):
                if not isinstance(s, BlockArgument):
                    held[s] = out.reshape(held[s].shape)
    returned = function.body.block.last_op.operands  # type: ignore[union-attr]
    return [held[viewed(v)] for v in returned]


def _buffer(value: SSAValue, arrays: list[np.ndarray], held: dict) -> np.ndarray:
    if isinstance(value, BlockArgument):
        array = arrays[value.index]
        return array.view(np.uint16) if array.dtype == np.float16 else array
    return held[value]


WARP_CASES = {
    # id: (program, knobs besides akwarps). Blocks of W warps walk rounds of W 16-key tiles.
    # 1000 keys in one chunk: the last round has a partial tile (992..999) and, for W = 4, a
    # warp with none; in three chunks of 384 the last holds 232 keys (the rest score -inf).
    "sq1_gqa4_b2_s1000_split1": (decode_attention(2, 8, 2, 1, 1000, 64), "asplits=1"),
    "sq1_gqa4_b2_s1000_split3": (decode_attention(2, 8, 2, 1, 1000, 64), "asplits=3"),
    # 37 keys, causal rows of three queries x 4 heads: 3 tiles, so 4 warps leave one idle.
    "sq3_gqa4_s37_causal": (decode_attention(1, 4, 1, 3, 37, 32, causal=True), ""),
    # 16 rows (4 queries x 4 heads) fill the m16 tile: no row guard.
    "sq4_gqa4_s300_causal_split2": (
        decode_attention(1, 8, 2, 4, 300, 64, causal=True),
        "asplits=2",
    ),
    "sq1_gqa4_s300_d128_dv64_bool_mask_split2": (
        decode_attention(1, 8, 2, 1, 300, 128, 64, mask=((1, 1, 1, 300), "i1")),
        "asplits=2",
    ),
    "sq1_mha_s200_f16_additive_mask": (
        decode_attention(1, 2, 2, 1, 200, 32, dtype="f16", mask=((1, 2, 1, 200), "f16")),
        "",
    ),
    # 12 and 10 16-byte chunks a row: a tile's copies do not split evenly over 32 lanes.
    "sq1_gqa4_s130_d96_dv80_split1": (decode_attention(1, 8, 2, 1, 130, 96, 80), "asplits=1"),
}


def _sources(module: ModuleOp) -> list[str]:
    return [k.source.data for k in module.ops if isinstance(k, tile.CudaKernelOp)]


_LOWERED: dict[tuple[str, str], tuple[ModuleOp, ModuleOp]] = {}


def lowered(text: str, pipeline: str) -> tuple[ModuleOp, ModuleOp]:
    """`lower(text, pipeline)`, once a process: auto's test (akwarps=0) compares its kernels
    with those of the akwarps it chose, which that count's test lowered (one parallel worker
    runs a case's tests, in order: tests/conftest.py's `SHARING`)."""
    if (text, pipeline) not in _LOWERED:
        _LOWERED[text, pipeline] = lower(text, pipeline)
    return _LOWERED[text, pipeline]


def _warps_of(text: str, knobs: str) -> int:
    """The `akwarps` the plan shows on the partial kernel (and 1 on the merge, if any)."""
    planned = apply_pipeline(parse(text), f"{FUSED},plan{{{knobs}}}")
    plans = {
        k.sym_name.data: k.attributes[tile.PLAN].values  # type: ignore[union-attr]
        for k in loop.kernels(planned)
    }
    (partial,) = [p for name, p in plans.items() if name.endswith("_decode")]
    assert all(p["akwarps"] == 1 for name, p in plans.items() if name.endswith("_merge"))
    return partial["akwarps"]  # type: ignore[return-value]


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
@pytest.mark.parametrize("warps", [1, 2, 4, 0])
@pytest.mark.parametrize("case", list(WARP_CASES))
def test_key_parallel_warps_match_float64_on_cpu(case: str, warps: int) -> None:
    """Each warp of a block walks its share of the chunk's keys with its own (m, l, acc); the
    block merges them in shared memory before storing its partial state (0: auto)."""
    text, knobs = WARP_CASES[case]
    knobs = f"{knobs} akwarps={warps}".strip()
    shown = _warps_of(text, knobs)
    assert shown == warps or (warps == 0 and shown in (1, 2, 4, 8)), shown
    program, module = lowered(text, f"{FUSED},tile{{{knobs}}},to-cuda")
    if warps == 0 and shown in (1, 2, 4):
        # auto's kernels are those of the akwarps it shows, run on the CPU by that case.
        explicit = f"{WARP_CASES[case][1]} akwarps={shown}".strip()
        assert _sources(module) == _sources(lowered(text, f"{FUSED},tile{{{explicit}}},to-cuda")[1])
        return
    kernels = [k for k in module.ops if isinstance(k, tile.CudaKernelOp)]
    (partial,) = [k for k in kernels if k.sym_name.data.endswith("_decode")]
    if shown > 1:
        assert list(partial.block.get_values()) == [32 * shown, 1, 1]
    graph = graph_function(program)
    inputs, arrays = device_inputs(graph, seed=sum(map(ord, case)) + warps)
    if len(inputs) == 4 and inputs[3].dtype == np.bool_:
        inputs[3][..., 0] = arrays[3][..., 0] = True
    (result,) = run_program(module, arrays)
    if "f16" in case:  # run_program holds 16-bit floats as their bits
        result = result.view(np.float16)
    (error,) = errors_against_reference(graph, [result], inputs)
    assert error < 1e-2, error


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
@pytest.mark.parametrize(
    ("case", "knobs"),
    [
        ("sq3_gqa4_s37_causal", "akwarps=4 akwarps_sync=warp aslots=3"),
        ("sq4_gqa4_s300_causal_split2", "akwarps=2 akwarps_sync=warp aslots=4"),
        ("sq1_gqa4_b2_s1000_split1", "akwarps=8 aslots=3"),
    ],
)
def test_key_parallel_rings_match_float64_on_cpu(case: str, knobs: str) -> None:
    """`akwarps_sync=warp`: each warp waits at `__syncwarp` for its own copies (warps with no
    tile in the last round included), the block meeting only at the merge; `aslots`: rings of
    3 and 4 tiles per warp (a chunk of fewer rounds than slots included), with the block's
    barriers and with the warps'."""
    text, case_knobs = WARP_CASES[case]
    every = f"{case_knobs} {knobs}".strip()
    program, module = lower(text, f"{FUSED},tile{{{every}}},to-cuda")
    (partial,) = [s for s in _sources(module) if "cp.async.wait_group" in s]
    slots = int(knobs.partition("aslots=")[2] or 2)
    assert f"cp.async.wait_group {slots - 1};" in partial
    if "akwarps_sync=warp" in knobs:
        loop_body = partial[: partial.index("__syncwarp")]
        assert "__syncthreads" not in loop_body[loop_body.rindex("for (") :]  # round barrier
    graph = graph_function(program)
    inputs, arrays = device_inputs(graph, seed=sum(map(ord, case + knobs)))
    (result,) = run_program(module, arrays)
    (error,) = errors_against_reference(graph, [result], inputs)
    assert error < 1e-2, error


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
def test_eight_key_parallel_warps_on_cpu() -> None:
    """Eight warps (three merge rounds) over two chunks of a causal chunk of 2 queries."""
    text, knobs = decode_attention(1, 8, 2, 2, 200, 48, causal=True), "akwarps=8 asplits=2"
    assert _warps_of(text, knobs) == 8
    program, module = lower(text, f"{FUSED},tile{{{knobs}}},to-cuda")
    graph = graph_function(program)
    inputs, arrays = device_inputs(graph, seed=8)
    (result,) = run_program(module, arrays)
    (error,) = errors_against_reference(graph, [result], inputs)
    assert error < 1e-2, error


def test_auto_key_warps_fill_the_sms_and_respect_the_chunk() -> None:
    """Auto takes the most warps a block may have, 8, at the benchmark's shapes (one block of
    146 KiB an SM), 2 where the chunk has only 3 tiles of 16 keys (37 keys), 1 where the group
    has more rows than one m16 tile (Sq 8 x GQA 4) or the head dim is 256, and f32 never takes
    more."""
    assert _warps_of(decode_attention(1, 32, 8, 1, 4096, 128), "") == 8
    assert _warps_of(decode_attention(64, 32, 8, 1, 4096, 128), "") == 8
    assert _warps_of(decode_attention(1, 4, 1, 3, 37, 32, causal=True), "") == 2
    assert -(-37 // WARP_KEYS) == 3
    assert _warps_of(decode_attention(1, 32, 8, 8, 300, 128, causal=True), "") == 1
    assert _warps_of(decode_attention(1, 32, 8, 1, 4096, 256), "") == 1
    assert _warps_of(decode_attention(1, 32, 8, 1, 4096, 128, dtype="f32"), "") == 1


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
@pytest.mark.parametrize("swizzle", ["on", "off"])
@pytest.mark.parametrize(
    "case", ["sq1_gqa4_b2_s1000_split3", "sq1_gqa4_s300_d128_dv64_bool_mask_split2"]
)
def test_swizzled_and_padded_key_rings_match_float64_on_cpu(case: str, swizzle: str) -> None:
    """`aswizzle`: the key-parallel warps' K/V rings unpadded, each 16-byte chunk of a row at
    its chunk XOR the row's low three bits (the cp.async that fills it and the ldmatrix of K
    and of V transposed that read it), or padded by 16 bytes a row; both against float64, at
    head dims 64 and 128 (K) with 64 (V)."""
    text, knobs = WARP_CASES[case]
    every = f"{knobs} akwarps=4 aswizzle={swizzle}".strip()
    program, module = lower(text, f"{FUSED},tile{{{every}}},to-cuda")
    (partial,) = [s for s in _sources(module) if "cp.async.wait_group" in s]
    head_qk = 128 if "d128" in case else 64
    padded = f"[16][{head_qk + 8}]" in partial
    assert padded == (swizzle == "off") and (" ^ " in partial) == (swizzle == "on")
    graph = graph_function(program)
    inputs, arrays = device_inputs(graph, seed=sum(map(ord, case + swizzle)))
    if len(inputs) == 4 and inputs[3].dtype == np.bool_:
        inputs[3][..., 0] = arrays[3][..., 0] = True
    (result,) = run_program(module, arrays)
    (error,) = errors_against_reference(graph, [result], inputs)
    assert error < 1e-2, error


def test_auto_swizzles_only_head_dims_of_whole_chunk_groups() -> None:
    """auto stores the rings swizzled where both head dims are multiples of 64, else padded;
    `aswizzle=on` at other head dims is refused by name."""
    for text, expected in (
        (WARP_CASES["sq1_gqa4_b2_s1000_split1"][0], "on"),
        (WARP_CASES["sq1_gqa4_s130_d96_dv80_split1"][0], "off"),
    ):
        planned = apply_pipeline(parse(text), f"{FUSED},plan{{akwarps=2}}")
        (partial,) = [k for k in loop.kernels(planned) if k.sym_name.data.endswith("_decode")]
        assert partial.attributes[tile.PLAN].values["aswizzle"] == expected  # type: ignore[union-attr]
    text = WARP_CASES["sq1_gqa4_s130_d96_dv80_split1"][0]
    with pytest.raises(
        DiagnosticException, match="aswizzle=on needs head dims that are multiples of 64"
    ):
        apply_pipeline(parse(text), f"{FUSED},plan{{attn=decode akwarps=2 aswizzle=on}}")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (decode_attention(1, 32, 8, 8, 300, 128, causal=True), "at most 16 query rows"),
        (decode_attention(1, 32, 8, 1, 4096, 256), "head dims of at most 128"),
        (decode_attention(1, 32, 8, 1, 4096, 128, dtype="f32"), "tensor-core partial kernel"),
    ],
    ids=["32_rows", "d256", "f32"],
)
def test_key_parallel_warps_are_refused_where_they_do_not_fit(text: str, message: str) -> None:
    with pytest.raises(DiagnosticException, match=message):
        apply_pipeline(parse(text), f"{FUSED},plan{{attn=decode akwarps=4}}")


VALID = """
func.func @f(%q: tensor<1x4x{sq}x64xbf16>, %k: tensor<1x2x{n}x64xbf16>, %v: tensor<1x2x{n}x64xbf16>,
             %L: tensor<i64>) -> tensor<1x4x{sq}x64xbf16> {{
  %o = graph.attention %q, %k, %v valid(%L : tensor<i64>) {{scale = 0.125 : f32, causal = {causal}}}
      : (tensor<1x4x{sq}x64xbf16>, tensor<1x2x{n}x64xbf16>, tensor<1x2x{n}x64xbf16>)
      -> tensor<1x4x{sq}x64xbf16>
  func.return %o : tensor<1x4x{sq}x64xbf16>
}}
"""
"""Attention over the first L of n cached keys (GQA: 4 query heads, 2 KV heads)."""


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
@pytest.mark.parametrize("warps", [1, 2, 4, 0])
@pytest.mark.parametrize(
    ("sq", "causal", "valid", "splits", "keys"),
    [
        (1, "false", 1, 2, 200),
        (1, "false", 37, 0, 200),
        (1, "false", 200, 3, 200),
        (3, "true", 17, 2, 200),
        (1, "false", 300, 5, 1000),
    ],
)
def test_key_parallel_warps_over_a_runtime_number_of_keys(
    sq: int, causal: str, valid: int, splits: int, keys: int, warps: int
) -> None:
    """One kernel for a cache of `keys` keys run with L valid keys (a mask computed from L):
    the blocks' chunks are cut from L at run time and their loops stop at L (with one valid
    key every warp but one, and every chunk but the first, has nothing to do; L = 300 of 1000
    over 4 chunks: two full chunks of 128 keys, a partial one, an empty one)."""
    from test_runtime_scalars import run_host_on_cpu

    text = VALID.format(sq=sq, causal=causal, n=keys)

    def at(akwarps: int) -> ModuleOp:
        knobs = f"attn=decode asplits={splits} akwarps={akwarps}"
        return lowered(text, f"{FUSED},tile{{{knobs}}},to-cuda")[1]

    module = at(warps)
    if warps == 0 and (shown := _warps_of(text, f"attn=decode asplits={splits}")) in (1, 2, 4):
        # auto's kernels are those of the akwarps it shows, run on the CPU by that case.
        assert _sources(module) == _sources(at(shown))
        return
    graph = next(iter(parse(text).ops))
    inputs, arrays = device_inputs(graph, seed=valid + warps)  # type: ignore[arg-type]
    inputs[3] = arrays[3] = np.array(valid, np.int64)
    (out,) = run_host_on_cpu(module, arrays)
    (ref,) = run_reference(parse(text), *inputs)
    assert relative_error(from_storage(out, bf16), ref) < 1e-2


BALANCED_CASES = {
    # id: (program, knobs). The grid's cut (`abalance=on`, decode_split.Balance): runs of C
    # 16-key tiles laid over the groups end to end, one run a block of 132.
    # 4 groups of 150 tiles, C = 5: runs cross every group's end at a different offset.
    "gqa2_b2_s2400_runs_cross_groups": (decode_attention(2, 4, 2, 1, 2400, 32), "akwarps=2"),
    # 192 groups of 5 tiles, C = 8: a block walks two or three groups.
    "gqa2_b96_s70_blocks_walk_groups": (decode_attention(96, 4, 2, 1, 70, 32), "akwarps=2"),
    "gqa2_b96_s70_warp_sync_3_slots": (
        decode_attention(96, 4, 2, 1, 70, 32),
        "akwarps=4 akwarps_sync=warp aslots=3",
    ),
    # Causal chunk of 3 queries with a boolean mask, Dv ≠ D, 8 warps (C = 16, the least).
    "sq3_gqa4_b3_s1000_causal_mask_dv48": (
        decode_attention(3, 8, 2, 3, 1000, 64, 48, mask=((3, 1, 3, 1000), "i1"), causal=True),
        "akwarps=8",
    ),
}


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
@pytest.mark.parametrize("case", list(BALANCED_CASES))
def test_balanced_split_matches_float64_on_cpu(case: str) -> None:
    """Each block walks the (group, slot) pairs its run spans, storing each pair's state; the
    merge combines the slots that hold keys (the others, unwritten, are NaN here)."""
    text, knobs = BALANCED_CASES[case]
    knobs += " abalance=on"
    planned = apply_pipeline(parse(text), f"{FUSED},plan{{{knobs}}}")
    kernels = list(loop.kernels(planned))
    assert [k.attributes[tile.PLAN].values["abalance"] for k in kernels] == ["on", "on"]  # type: ignore[union-attr]
    blocks = kernels[0].attributes[BALANCED].value.data  # type: ignore[union-attr]
    assert blocks % 132 == 0  # the SMs times the blocks one holds
    program, module = lower(text, f"{FUSED},tile{{{knobs}}},to-cuda")
    cuda = [k for k in module.ops if isinstance(k, tile.CudaKernelOp)]
    (partial,) = [k for k in cuda if k.sym_name.data.endswith("_decode")]
    assert list(partial.grid.get_values()) == [1, blocks, 1]
    graph = graph_function(program)
    inputs, arrays = device_inputs(graph, seed=sum(map(ord, case)))
    if len(inputs) == 4 and inputs[3].dtype == np.bool_:
        inputs[3][..., 0] = arrays[3][..., 0] = True
    (result,) = run_program(module, arrays)
    (error,) = errors_against_reference(graph, [result], inputs)
    assert error < 1e-2, error


@pytest.mark.parametrize(
    "text",
    [decode_attention(2, 4, 2, 1, 200, 16), decode_attention(2, 4, 2, 1, 40, 16)],
    ids=["runs_of_4_over_groups_of_13_tiles", "runs_of_4_over_groups_of_3_tiles"],
)
def test_balanced_split_loop_ir_matches_reference(text: str) -> None:
    """The balanced loop kernels, (group, slot) pairs with their runs' keys and the merge of
    each group's filled slots, run by the loop reference executor, equal float64 attention:
    runs of 4 tiles (the least, two warps of two slots) crossing the ends of groups of 13
    tiles at every offset, and spanning two groups of 3."""
    program = parse(text)
    module = apply_pipeline(program.clone(), f"{FUSED},plan{{akwarps=2 abalance=on}}")
    inputs = random_inputs(program, seed=4)
    (actual,) = run_loop_module(module, graph_function(program).sym_name.data, *inputs)
    (exact,) = run_reference(program, *inputs)
    assert relative_error(np.asarray(actual, np.float64), exact) < 1e-2


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
@pytest.mark.parametrize("valid", [1, 37, 999])
def test_balanced_split_over_a_runtime_number_of_keys(valid: int) -> None:
    """The runs are cut from L at run time: one valid key (one block, the rest idle), 37, and
    999 of a 1000-key cache."""
    from test_runtime_scalars import run_host_on_cpu

    text = VALID.format(sq=1, causal="false", n=1000)
    knobs = "attn=decode akwarps=4 abalance=on"
    module = apply_pipeline(parse(text), f"{FUSED},tile{{{knobs}}},to-cuda")
    graph = next(iter(parse(text).ops))
    inputs, arrays = device_inputs(graph, seed=valid)  # type: ignore[arg-type]
    inputs[3] = arrays[3] = np.array(valid, np.int64)
    (out,) = run_host_on_cpu(module, arrays)
    (ref,) = run_reference(parse(text), *inputs)
    assert relative_error(from_storage(out, bf16), ref) < 1e-2


@pytest.mark.parametrize(
    ("text", "knobs", "message"),
    [
        (decode_attention(1, 32, 8, 1, 4096, 128), "abalance=on asplits=4", "asplits=0"),
        (decode_attention(1, 32, 8, 1, 4096, 128, dtype="f32"), "abalance=on", "key-parallel"),
        (decode_attention(1, 32, 8, 1, 4096, 128), "abalance=on akwarps=1", "key-parallel"),
    ],
    ids=["asplits", "f32", "one_warp"],
)
def test_balanced_split_is_refused_without_key_warps_or_with_a_split_count(
    text: str, knobs: str, message: str
) -> None:
    with pytest.raises(DiagnosticException, match=message):
        apply_pipeline(parse(text), f"{FUSED},plan{{attn=decode {knobs}}}")


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
def test_one_cached_key_with_a_runtime_count_lowers_and_matches() -> None:
    """One cached key and a runtime count L (batch 2, two queries): `flash-attention` finds no
    key reduction to fuse, so the scores' contraction kernel takes %L as an i64 argument, which
    `collapse_dims` crashed on (found by a random sweep, 2026-12-05); it lowers and matches."""
    from test_runtime_scalars import run_host_on_cpu

    text = decode_attention(2, 1, 1, 2, 1, 16, valid=True)
    module = apply_pipeline(parse(text), f"{FUSED},tile,to-cuda")
    graph = next(iter(parse(text).ops))
    inputs, arrays = device_inputs(graph, seed=1, scalars={3: 1})  # type: ignore[arg-type]
    (out,) = run_host_on_cpu(module, arrays)
    (ref,) = run_reference(parse(text), *inputs)
    assert relative_error(from_storage(out, bf16), ref) < 1e-2
