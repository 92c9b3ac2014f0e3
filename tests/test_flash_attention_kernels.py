"""The tensor-core flash-attention kernels: NVRTC compiles every variant (CI, no GPU needed);
on a GPU each one matches the float64 reference.

Variants: head dims 64 and 128, causal or not, GQA, sequence lengths that are not multiples of
the 128-row and 64-key tiles (77, 200, 1000) and long ones (4096: many pipelined key tiles),
bf16 and fp16, batch and heads in the grid (the output stored as [B, H, S, D] directly, or as
[B, S, H·D] with the transposing copy folded into the store), and a mask read from memory (with
a fully masked row).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from attention_programs import attention, attention_spelled_out
from conftest import requires_gpu

from tinyopt.backends.check import (
    device_inputs,
    errors_against_reference,
    from_storage,
    graph_function,
    relative_error,
    to_storage,
)
from tinyopt.backends.cuda.runtime import compile_module
from tinyopt.backends.reference import run_reference
from tinyopt.compiler import lower
from tinyopt.dialects import tile

PIPELINE = "decompose,fuse,flash-attention,tile{attn=sync},to-cuda"


@dataclass(frozen=True)
class Variant:
    id: str
    text: str
    pipeline: str = PIPELINE


VARIANTS = [
    Variant("d64-bf16", attention(2, 4, 128, 64, "bf16")),
    Variant("d128-bf16-causal-s1000", attention(1, 2, 1000, 128, "bf16", causal=True)),
    Variant("d64-f16-gqa-causal-s77", attention(1, 4, 77, 64, "f16", causal=True, kv_heads=2)),
    Variant("d128-f16-s200", attention(1, 3, 200, 128, "f16")),
    Variant("d64-bf16-gqa-s4096", attention(1, 4, 4096, 64, "bf16", kv_heads=1)),
    Variant("d128-f16-causal-s4096", attention(2, 1, 4096, 128, "f16", causal=True)),
    Variant(
        "d128-bf16-gqa-causal-s200-heads-last",
        attention(1, 4, 200, 128, "bf16", causal=True, kv_heads=2, heads_last=True),
    ),
    Variant("d64-f16-s77-b2-heads-last", attention(2, 3, 77, 64, "f16", heads_last=True)),
    Variant(
        "mask-input-bf16-s100",
        attention_spelled_out(2, 100, 64, "bf16", scale=0.125),
        "fuse,flash-attention,tile{attn=sync},to-cuda",
    ),
]


def attention_kernel(module, helper: str = "tinyopt_mma_") -> tile.CudaKernelOp:
    """Returns the one kernel of a lowered module whose CUDA calls `helper` (by default the
    mma.sync schedule's)."""
    (kernel,) = [
        op for op in module.ops if isinstance(op, tile.CudaKernelOp) and helper in op.source.data
    ]
    return kernel


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.id)
def test_attention_kernel_compiles_for_sm90a(variant: Variant) -> None:
    _, module = lower(variant.text, variant.pipeline)
    kernel = attention_kernel(module)
    source = kernel.source.data
    pieces = ["tinyopt_ldmatrix_x4_trans", "tinyopt_pack_", "__shfl_xor_sync"]
    pieces += ["tinyopt_exp2_approx", "tinyopt_cp_async_16", "cp.async.wait_group 0"]
    for piece in pieces:
        assert piece in source, piece
    compiled = compile_module(module, arch="sm_90a")
    assert kernel.sym_name.data in compiled.kernels


@pytest.mark.parametrize("knobs", ["arows=16", "arows=16 awarps=8", "awarps=8"])
def test_attention_kernel_shapes_compile_for_sm90a(knobs: str) -> None:
    """Rows per warp and warps per block: 64, 128 and 256 query rows per block."""
    text = attention(1, 2, 300, 64, "bf16", causal=True)
    _, module = lower(text, f"decompose,fuse,flash-attention,tile{{attn=sync {knobs}}},to-cuda")
    kernel = attention_kernel(module)
    warps = 8 if "awarps=8" in knobs else 4
    rows = (16 if "arows=16" in knobs else 32) * warps
    assert list(kernel.block.get_values()) == [32 * warps, 1, 1]
    assert list(kernel.grid.get_values()) == [-(-300 // rows), 2, 1]
    compiled = compile_module(module, arch="sm_90a")
    assert kernel.sym_name.data in compiled.kernels


def test_attn_none_leaves_the_kernel_to_the_generic_rules() -> None:
    _, module = lower(
        attention(1, 2, 64, 64, "bf16"), "decompose,fuse,flash-attention,tile{attn=none},to-cuda"
    )
    assert not any(
        "tinyopt_mma_" in op.source.data for op in module.ops if isinstance(op, tile.CudaKernelOp)
    )


# ------------------------------------------------------------------------------ GPU


@requires_gpu
@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.id)
def test_attention_matches_float64(variant: Variant) -> None:
    check_matches_float64(variant, "tinyopt_mma_")


def check_matches_float64(variant: Variant, helper: str) -> None:
    """Runs a variant (whose attention kernel calls `helper`) on random inputs against the
    float64 reference."""
    program, module = lower(variant.text, variant.pipeline)
    attention_kernel(module, helper)
    graph = graph_function(program)
    inputs, arrays = device_inputs(graph, seed=5)
    if len(inputs) == 4:  # the mask input: causal, with -inf (no fully masked row here)
        s = inputs[3].shape[0]
        inputs[3] = np.where(np.arange(s)[None, :] > np.arange(s)[:, None], -np.inf, 0.0)
        arrays[3] = to_storage(inputs[3], graph.function_type.inputs.data[3].element_type)
    out = compile_module(module).function(graph.sym_name.data)(*arrays)
    (error,) = errors_against_reference(graph, [out], inputs)
    assert error < 1e-2, error


@requires_gpu
@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_fully_masked_rows_give_zero_and_large_logits_stay_finite(dtype: str) -> None:
    check_fully_masked_rows(dtype, "sync", "tinyopt_mma_")


def check_fully_masked_rows(dtype: str, attn: str, helper: str) -> None:
    """Rows 3 and 99 mask every key (−inf): their output is 0, not NaN; logits reach ~1e4. The
    attention kernel (schedule `attn`) calls `helper`."""
    text = attention_spelled_out(2, 100, 64, dtype, scale=4e2)
    program, module = lower(text, f"fuse,flash-attention,tile{{attn={attn}}},to-cuda")
    attention_kernel(module, helper)
    graph = graph_function(program)
    inputs, arrays = device_inputs(graph, seed=6)
    q, k, v, _ = inputs
    mask = np.zeros((100, 100))
    mask[[3, 99], :] = -np.inf
    element = graph.function_type.inputs.data[0].element_type
    arrays[3] = to_storage(mask, element)
    out = from_storage(compile_module(module).function("attention")(*arrays), element)
    (ref,) = run_reference(graph, q, k, v, mask)
    assert np.isfinite(out).all()
    assert (out[:, [3, 99]] == 0).all()
    keep = [r for r in range(100) if r not in (3, 99)]
    assert relative_error(out[:, keep], ref[:, keep]) < 2e-2
