"""The SIMT flash-attention kernel (`attn=simt`, passes/tile/attention/simt.py) runs on the CPU
emulation of CUDA (tests/cpu_cuda.py) and matches float64 with fresh random data: causal and
not, query and key counts that are not multiples of the tiles (1, 37, 130; Sq = Skv = 1 is
not fused), Sq < Skv with the causal diagonal aligned to the end of the keys, GQA 4:1, an
additive and a boolean mask, head dims 64, 128, 80 and 96, Dv ≠ D, several plans (64 and 128
rows, 32-key tiles, 128 threads), bf16 at a head dim the tensor-core rules refuse (40), and
the output stored as [B, S, H·D]. Needs g++ (C++20); no GPU.
"""

from __future__ import annotations

import numpy as np
import pytest
from attention_programs import attention as heads_last_attention
from cpu_cuda import COMPILER
from test_attention_forms import attention
from test_attention_masks import keys_off, random_mask, run_one_launch_on_cpu

from tinyopt.backends.reference import random_inputs, run_reference
from tinyopt.compiler import apply_pipeline, parse
from tinyopt.dialects import loop

pytestmark = pytest.mark.skipif(COMPILER is None, reason="g++ not found")

PIPELINE = "decompose,fuse,flash-attention,tile{{attn=simt{knobs}}},to-cuda"

CASES = {
    # (B, H, KV, Sq, Skv, D, Dv), causal, mask (shape, element type) and its maker, knobs
    "causal-s130-d64-gqa4": (dict(shape=(1, 4, 1, 130, 130, 64, 64), causal=True), None, ""),
    "s37-d128": (dict(shape=(2, 1, 1, 37, 37, 128, 128)), None, ""),
    "causal-s37-d80-bm64-bn32-t128": (
        dict(shape=(1, 2, 2, 37, 37, 80, 80), causal=True),
        None,
        " bm=64 bn=32 threads=128",
    ),
    "decode-sq1-skv37-gqa4": (dict(shape=(1, 4, 1, 1, 37, 64, 64), causal=True), None, ""),
    "chunk-causal-sq37-skv130-dv48": (
        dict(shape=(1, 2, 1, 37, 130, 64, 48), causal=True),
        None,
        "",
    ),
    "additive-mask-causal-s70-d96": (
        dict(shape=(1, 2, 1, 70, 70, 96, 96), causal=True, mask=((1, 2, 70, 70), "f32")),
        None,
        " bm=64",
    ),
    "bool-key-mask-sq37-skv130-dv80": (
        dict(shape=(2, 2, 1, 37, 130, 64, 80), mask=((2, 1, 1, 130), "i1")),
        keys_off(70),
        "",
    ),
    "bool-random-mask-causal-s37": (
        dict(shape=(1, 1, 1, 37, 37, 64, 64), causal=True, mask=((1, 1, 37, 37), "i1")),
        random_mask,
        " bm=64",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_simt_attention_matches_float64_on_cpu(case: str) -> None:
    spec, make_mask, knobs = CASES[case]
    text = attention(**spec)
    inputs = random_inputs(parse(text), seed=len(case))
    if make_mask is not None:
        make_mask(inputs[3])
    out = run_one_launch_on_cpu(text, PIPELINE.format(knobs=knobs), inputs)
    (exact,) = run_reference(parse(text), *inputs)
    out = out.reshape(exact.shape)  # a mask over the batch merges (B, H) in the kernel
    assert np.isfinite(out).all()
    error = float(np.abs(out - exact).max() / np.abs(exact).max())
    assert error < 2e-6, error


def test_bf16_head_dim_the_tensor_cores_refuse_runs_on_simt_on_cpu() -> None:
    """bf16 at D = 40 (not a multiple of 16): `attn=auto` plans it on this rule, staged as
    f32 through registers (no cp.async of bf16 into f32 tiles)."""
    text = attention(dict(shape=(1, 2, 1, 70, 70, 40, 40), causal=True)["shape"], "bf16", True)
    module = apply_pipeline(parse(text), "decompose,fuse,flash-attention,plan")
    (kernel,) = [op for op in module.walk() if isinstance(op, loop.KernelOp)]
    assert "attention_simt" in str(kernel.attributes["plan"])
    inputs = random_inputs(parse(text), seed=5)
    out = run_one_launch_on_cpu(text, PIPELINE.format(knobs=""), inputs)
    (exact,) = run_reference(parse(text), *inputs)
    assert float(np.abs(out - exact).max() / np.abs(exact).max()) < 2e-2


def test_heads_stored_side_by_side_on_cpu() -> None:
    """The output stored as [B, S, H·D] (the copy folded into the store: row stride H·D, column
    offset h·D), GPT-2's layout, with a partial query tile."""
    text = heads_last_attention(2, 3, 37, 64, "f32", heads_last=True)
    inputs = random_inputs(parse(text), seed=9)
    out = run_one_launch_on_cpu(text, PIPELINE.format(knobs=""), inputs)
    (exact,) = run_reference(parse(text), *inputs)
    assert float(np.abs(out.reshape(exact.shape) - exact).max() / np.abs(exact).max()) < 2e-6
