"""The last key a decode kernel's rows can see (passes/tile/attention/key_limit.py): proven from
the score's expression, it follows the runtime number of valid keys L exactly for decompose's
masks (one query; a causal chunk of queries aligned to the end of the valid keys), and no bound
comes from a mask read from memory or a scalar whose bounds are unknown. The split kernel
carries the block's runtime key count (`tinyopt.key_count`) and its loop-level form still
equals float64 attention at every L, over chunks cut at run time."""

from __future__ import annotations

import numpy as np
import pytest
from attention_programs import decode_attention

from tinyopt.backends.check import graph_function
from tinyopt.backends.loop_reference import run_loop_module
from tinyopt.backends.reference import random_inputs, run_reference
from tinyopt.compiler import apply_pipeline, parse
from tinyopt.dialects import loop
from tinyopt.passes.tile.attention.decode_match import match_decode_attention
from tinyopt.passes.tile.attention.decode_split import KEY_COUNT
from tinyopt.passes.tile.attention.key_limit import KeyLimit, kernel_scalar_bounds, key_limit

FUSED = "decompose,fuse,flash-attention"


def cache(sq: int, capacity: int, causal: bool, head: int = 32, bounds: str = "") -> str:
    """bf16 attention of `sq` queries (4 query heads, 2 KV heads) over the first L of
    `capacity` cached keys; `bounds` is an optional `{tinyopt.bounds = ...}` on L."""
    q = f"tensor<1x4x{sq}x{head}xbf16>"
    kv = f"tensor<1x2x{capacity}x{head}xbf16>"
    flag = "true" if causal else "false"
    return f"""
func.func @f(%q: {q}, %k: {kv}, %v: {kv}, %L: tensor<i64> {bounds}) -> {q} {{
  %o = graph.attention %q, %k, %v valid(%L : tensor<i64>) {{scale = 0.17 : f32, causal = {flag}}}
      : ({q}, {kv}, {kv}) -> {q}
  func.return %o : {q}
}}
"""


def attention_kernel(module) -> loop.KernelOp:  # noqa: ANN001 (a ModuleOp)
    (kernel,) = [
        op
        for op in module.ops
        if isinstance(op, loop.KernelOp) and "tinyopt.flash_attention" in str(op)
    ]
    return kernel


def limit_of(text: str) -> KeyLimit | None:
    module = apply_pipeline(parse(text), FUSED)
    kernel = attention_kernel(module)
    a = match_decode_attention(kernel)
    assert not isinstance(a, str), a
    return key_limit(a, kernel_scalar_bounds(module, kernel))


def seen(limit: KeyLimit, value: int) -> int:
    """The keys the bound lets a row see at L = value (the formula decode_split emits)."""
    ((_, coefficient),) = limit.scalars
    return (limit.offset + coefficient * value) // limit.slope + 1


@pytest.mark.parametrize(("sq", "causal"), [(1, False), (1, True), (3, True), (3, False)])
def test_the_bound_is_the_number_of_valid_keys(sq: int, causal: bool) -> None:
    """Every row sees keys j < L (causal: the last query of the chunk sees up to L − 1), so
    the bound over all rows is exactly L at every L the argument may take."""
    limit = limit_of(cache(sq, 50, causal))
    assert limit is not None and limit.slope == 1
    for value in range(sq, 51):
        assert seen(limit, value) == value


def test_a_mask_read_from_memory_gives_no_bound() -> None:
    text = decode_attention(1, 4, 2, 1, 40, 32, mask=((1, 1, 1, 40), "i1"))
    assert limit_of(text) is None


def test_a_scalar_without_bounds_gives_no_bound() -> None:
    module = apply_pipeline(parse(cache(1, 50, False)), FUSED)
    kernel = attention_kernel(module)
    a = match_decode_attention(kernel)
    assert not isinstance(a, str)
    assert key_limit(a, {}) is None


def test_a_float_window_past_exact_integers_gives_no_bound() -> None:
    """With L up to 2^25, sitofp(L + j) is not exact in f32: no bound is claimed."""
    text = cache(1, 50, False, bounds="{tinyopt.bounds = array<i64: 1, 33554432>}")
    module = apply_pipeline(parse(text), FUSED)
    kernel = attention_kernel(module)
    a = match_decode_attention(kernel)
    assert not isinstance(a, str)
    bounds = kernel_scalar_bounds(module, kernel)
    assert max(hi for _, hi in bounds.values()) == 50  # decompose's bound intersects
    wide = {position: (1, 1 << 25) for position in bounds}
    assert key_limit(a, wide) is None


@pytest.mark.parametrize(("sq", "causal"), [(1, False), (3, True)])
def test_runtime_chunks_match_float64_at_every_length(sq: int, causal: bool) -> None:
    """The planned kernels (3 splits of a 150-key cache, chunks of whole 64-key tiles cut from
    L at run time), run by the loop reference executor, equal float64 attention for L from 1
    (every chunk but the first empty) to the capacity."""
    program = parse(cache(sq, 150, causal, head=8).replace("xbf16", "xf32"))
    module = apply_pipeline(program.clone(), f"{FUSED},plan{{attn=decode asplits=3}}")
    counted = [op for op in module.walk() if KEY_COUNT in op.attributes]
    assert len(counted) == 1
    inputs = random_inputs(program, seed=3)
    name = graph_function(program).sym_name.data
    for value in (sq, 65, 150):
        inputs[3] = np.array(value, np.int64)
        (actual,) = run_loop_module(module, name, *inputs)
        (exact,) = run_reference(program, *inputs)
        np.testing.assert_allclose(actual, exact, rtol=1e-5, atol=1e-6)


def test_runtime_split_steps_follow_the_plan_at_doubling_lengths() -> None:
    """At batch 1 (8 groups) and a 32768-key capacity, the split count for a step's L is the
    plan's own pick at the next doubling of 64 keys, never more than the grid's: the kernel
    planned for 4096 keys cuts 4096 valid keys of the larger cache the same way."""
    from tinyopt.passes.tile.attention.decode_plan import (
        MERGE_COST_PER_SPLIT,
        auto_splits,
        resident_blocks,
        runtime_splits,
    )
    from tinyopt.passes.tile.target import Target

    target, resident = Target(), resident_blocks(4, 128, 128, 8)
    planned = auto_splits(8, 32768, resident, target, 8)
    steps = runtime_splits(8, 32768, resident, target, 8, MERGE_COST_PER_SPLIT, planned)
    assert steps[-1] == (32768, planned)
    assert all(count <= planned for _, count in steps)
    assert all(64 * (1 << k.bit_length() - 7) == k or k == 32768 for k, _ in steps)
    at_4096 = next(count for most, count in steps if most >= 4096)
    assert at_4096 == auto_splits(8, 4096, resident, target, 8)
    capped = runtime_splits(8, 32768, resident, target, 8, MERGE_COST_PER_SPLIT, 3)
    assert max(count for _, count in capped) == 3
