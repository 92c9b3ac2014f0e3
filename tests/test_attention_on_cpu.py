"""The tensor-core flash-attention kernels run on a CPU emulation of CUDA (tests/cpu_cuda.py)
and match the float64 reference: the cp.async pipeline over several key tiles, two m16 tiles
per warp, a causal mask (tiles skipped, reversed query tiles, the mask on diagonal tiles only),
the scale folded into the exponent, GQA, a partial last tile, fp16, the [B, H, S, D] output
stored directly or transposed to [B, S, H·D], and a mask input with fully masked rows
(exactly 0) and logits of ~1e4. The wgmma schedule runs with its TMA copies and tensor-core
products faked, to check where its epilogue stores. Needs g++ (C++20); no GPU.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from attention_programs import attention, attention_spelled_out
from cpu_cuda import COMPILER, run_on_cpu
from test_wgmma_epilogue_on_cpu import OTHER_ASM, TENSOR_MAP
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, StringAttr, bf16
from xdsl.ir import BlockArgument

from tinyopt.backends.check import (
    device_inputs,
    errors_against_reference,
    from_storage,
    graph_function,
    relative_error,
    to_storage,
)
from tinyopt.backends.reference import run_reference
from tinyopt.compiler import lower
from tinyopt.dialects import loop, tile

pytestmark = pytest.mark.skipif(COMPILER is None, reason="g++ not found")

PIPELINE = "decompose,fuse,flash-attention,tile{{attn=sync{knobs}}},to-cuda"
MASKED = "fuse,flash-attention,tile{attn=sync},to-cuda"


@pytest.mark.parametrize(
    ("text", "knobs"),
    [
        (attention(2, 1, 200, 128, "bf16", causal=True), ""),
        (attention(1, 2, 130, 64, "f16", causal=True, kv_heads=1), ""),
        (attention(1, 1, 200, 64, "bf16", causal=True), " arows=16 awarps=8"),
        (attention(2, 2, 130, 64, "bf16", causal=True, kv_heads=1, heads_last=True), ""),
    ],
    ids=[
        "d128-bf16-causal-s200-b2",
        "d64-f16-gqa-causal-s130",
        "d64-16-rows-8-warps",
        "d64-bf16-gqa-causal-s130-b2-heads-last",
    ],
)
def test_attention_kernel_matches_float64_on_cpu(text: str, knobs: str) -> None:
    program, module = lower(text, PIPELINE.format(knobs=knobs))
    graph = graph_function(program)
    inputs, arrays = device_inputs(graph, seed=4)
    result = _run(module, arrays)
    (error,) = errors_against_reference(graph, [result], inputs)
    assert error < 1e-2, error


def test_fully_masked_rows_give_zero_and_large_logits_stay_finite_on_cpu() -> None:
    """A mask input (read on every tile) with rows 3 and 99 all −inf, logits of ~1e4."""
    program, module = lower(attention_spelled_out(2, 100, 64, "bf16", scale=4e2), MASKED)
    graph = graph_function(program)
    inputs, arrays = device_inputs(graph, seed=6)
    mask = np.zeros((100, 100))
    mask[[3, 99], :] = -np.inf
    inputs[3], arrays[3] = mask, to_storage(mask, bf16)
    out = from_storage(_run(module, arrays), bf16)
    (ref,) = run_reference(graph, *inputs)
    assert np.isfinite(out).all()
    assert (out[:, [3, 99]] == 0).all()
    keep = [r for r in range(100) if r not in (3, 99)]
    assert relative_error(out[:, keep], ref[:, keep]) < 2e-2


def _run(module: ModuleOp, arrays: list[np.ndarray]) -> np.ndarray:
    """Runs a program of one launch of one kernel on the CPU; returns its output buffer."""
    (kernel,) = [op for op in module.ops if isinstance(op, tile.CudaKernelOp)]
    (function,) = [op for op in module.ops if isinstance(op, func.FuncOp)]
    (launch,) = [op for op in function.walk() if isinstance(op, loop.LaunchOp)]
    (output,) = [a for a in launch.args if not isinstance(a, BlockArgument)]
    # fp16 travels as its bits, like bf16
    storage = [a.view(np.uint16) for a in arrays]
    out = np.zeros(output.type.get_shape(), np.uint16)  # type: ignore[attr-defined]
    buffers = [out if a is output else storage[a.index] for a in launch.args]
    result = run_on_cpu(kernel, buffers)[list(launch.args).index(output)]
    return result.view(arrays[0].dtype)


FAKE_WGMMA = r"""
#define __shared__ static
template <typename... T> static inline void cpu_cuda_ignore(T...) {}
#define tinyopt_mbarrier_init cpu_cuda_ignore
#define tinyopt_mbarrier_arrive cpu_cuda_ignore
#define tinyopt_mbarrier_arrive_expect_tx cpu_cuda_ignore
#define tinyopt_mbarrier_wait cpu_cuda_ignore
#define tinyopt_tma_load_3d cpu_cuda_ignore
#define tinyopt_tma_load_4d cpu_cuda_ignore
static inline unsigned long long tinyopt_wgmma_desc(const void*, unsigned, unsigned) { return 0; }
template <int H, typename... A>
static inline void cpu_cuda_wgmma(float (&d)[H], A...) {
    int t = threadIdx.x % 128;
    for (int i = 0; i < H; ++i)
        d[i] += (float)((t * 131 + i * 31 + blockIdx.x * 977 + blockIdx.y * 1553 + H) % 1021)
                / 1021 - 0.5f;
}
template <int H, typename... A>
static inline void cpu_cuda_wgmma_set(float (&d)[H], A... a) {
    for (int i = 0; i < H; ++i) d[i] = 0.0f;
    cpu_cuda_wgmma(d, a...);
}
"""
"""Stand-ins for the wgmma schedule's copies, barriers and products: every wgmma (S = Q·Kᵀ and
P·V alike) adds to each accumulator a value of the block, the thread and the register; a `_set`
wgmma (scale-d 0: the first product of S = Q·Kᵀ, over accumulators never initialized) writes it
in place of the accumulator's value, as the hardware does."""


def _run_wgmma_faked(text: str) -> np.ndarray:
    """Runs the attention kernel of `text` on `attn=wgmma` with the stand-ins above; returns
    its output (bf16 as float; NaN where nothing was stored)."""
    _, module = lower(text, "decompose,fuse,flash-attention,tile{attn=wgmma},to-cuda")
    (kernel,) = [op for op in module.ops if isinstance(op, tile.CudaKernelOp)]
    source = kernel.source.data
    maps = TENSOR_MAP.findall(source)
    source = re.sub(r"tinyopt_wgmma_m64n\d+k16_\w+_set\(", "cpu_cuda_wgmma_set(", source)
    source = re.sub(
        r"tinyopt_wgmma_(ra_)?m64n\d+k16_\w+\(", "cpu_cuda_wgmma(", TENSOR_MAP.sub("", source)
    )
    fake = kernel.clone()
    fake.properties["source"] = StringAttr(OTHER_ASM.sub("", source))
    prelude = FAKE_WGMMA + "".join(f"static int {name};\n" for name in maps)
    (function,) = [op for op in module.ops if isinstance(op, func.FuncOp)]
    (launch,) = [op for op in function.walk() if isinstance(op, loop.LaunchOp)]
    poisoned = np.full(launch.args[-1].type.get_shape(), 0x7FC0, np.uint16)  # type: ignore[attr-defined]
    return from_storage(run_on_cpu(fake, [poisoned], prelude)[0], bf16)


def test_wgmma_attention_stores_heads_side_by_side_where_the_copy_would_on_cpu() -> None:
    """The wgmma schedule writing [B, S, H·D] (the copy folded into its store: row stride H·D,
    column offset h·D) puts each element where the [B, H, S, D] kernel's goes once transposed:
    batch 2, 2 heads sharing one KV head, D = 128, causal, S = 200 (a partial query tile)."""
    shape = dict(b=2, h=2, s=200, d=128, dtype="bf16", causal=True, kv_heads=1)
    plain = _run_wgmma_faked(attention(**shape)).reshape(2, 2, 200, 128)  # stored as [B·H, S, D]
    merged = _run_wgmma_faked(attention(**shape, heads_last=True))
    assert not np.isnan(plain).any() and not np.isnan(merged).any()
    assert not np.array_equal(plain[0, 0], plain[0, 1]) and not np.array_equal(plain[0], plain[1])
    np.testing.assert_array_equal(merged, plain.transpose(0, 2, 1, 3).reshape(2, 200, 256))
