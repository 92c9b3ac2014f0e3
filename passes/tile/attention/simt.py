"""Schedule rule for flash-attention kernels on CUDA cores (FP32 SIMT), FA2 style.

Taken for the kernels the `flash-attention` rewrite builds whose q, k and v are f32, and for
f16/bf16 ones the tensor-core rules refuse (head dims that are not multiples of 16); the
default for f32 attention (`attn=auto`), or asked for by `attn=simt`. A block owns `bm` query
rows of one batch index and walks the keys in tiles of `bn`: Q resident in shared memory, K
and V tiles copied into shared memory by `cp.async` (16-byte copies; each copy in flight during
one compute phase), S = Q·Kᵀ and O += P·V as per-thread register tiles of FMAs over 16-byte
shared reads, the online softmax in registers (in base 2, the scale folded into one FFMA, each
row's max across its lanes by shuffles), P through shared memory. With a causal mask the key
tiles past the block's last row are never loaded and only diagonal tiles are masked. All
arithmetic is f32. simt_plan.py gives the thread layout, simt_emit.py the schedule;
docs/flash_attention.md (`attn=simt`) the resources. Where at most 64 query rows read each K/V
head the decode rule takes the kernel first, splits its keys and runs this emitter on each
(group, chunk) block with a row tile of the group's rows (decode_simt.py).
"""

from __future__ import annotations

from math import prod

from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    IntegerAttr,
    ModuleOp,
    i64,
)
from xdsl.pattern_rewriter import PatternRewriter

from tinyopt.dialects import loop
from tinyopt.passes.tile.attention.attention_match import Attention, match_attention
from tinyopt.passes.tile.attention.key_limit import kernel_scalar_bounds, key_limit
from tinyopt.passes.tile.attention.simt_emit import SimtAttentionEmitter
from tinyopt.passes.tile.attention.simt_plan import (
    Geometry,
    SimtAttentionPlan,
    auto_plan,
    refusal,
)
from tinyopt.passes.tile.kernel import new_kernel, replace_kernel
from tinyopt.passes.tile.knobs import Knobs
from tinyopt.passes.tile.rule import Rule

TWO_BLOCK_ACCUMULATORS = 48
"""Most accumulators a thread (O and one tile's scores) that leave room in 128 registers for
the shared-memory operands of the FMAs: where shared memory allows two blocks per SM, the
kernel asks for two (`__launch_bounds__(threads, 2)`)."""

ELEMENTS = (Float32Type, Float16Type, BFloat16Type)
"""The element types of q, k and v the rule takes (staged as f32 in shared memory)."""


def _geometry(a: Attention, plan: SimtAttentionPlan) -> Geometry:
    return Geometry(plan, a.qk.extents[0], a.nest.extents[-1])


class AttentionSimt(Rule[Attention, SimtAttentionPlan]):
    """Schedules a flash-attention kernel on CUDA cores, in f32."""

    name = "attention_simt"
    reads = "attn bm=64,128 bn=32,64 threads=128,256"
    plan_type = SimtAttentionPlan
    selector = ("attn", "simt")

    def match(self, kernel: loop.KernelOp) -> Attention | str:
        a = match_attention(kernel, ELEMENTS)
        return a or "not a flash-attention kernel (the flash-attention rewrite's form)"

    def plan(self, kernel: loop.KernelOp, a: Attention, knobs: Knobs) -> SimtAttentionPlan | str:
        *_, s_q, head_v = a.nest.extents
        knobbed = (knobs.bm, knobs.bn, knobs.threads)
        plan = auto_plan(knobbed, a.qk.extents[0], head_v, s_q, self.target)
        return refusal(_geometry(a, plan), self.target) or plan

    def check(self, kernel: loop.KernelOp, a: Attention, plan: SimtAttentionPlan) -> str | None:
        return refusal(_geometry(a, plan), self.target)

    def emit(
        self,
        kernel: loop.KernelOp,
        a: Attention,
        plan: SimtAttentionPlan,
        rewriter: PatternRewriter,
    ) -> None:
        *batch, s_q, _ = a.nest.extents
        grid = (-(-s_q // plan.bm), prod(batch), 1)
        new, em, mapping = new_kernel(kernel, grid, (plan.threads, 1, 1))
        geometry = _geometry(a, plan)
        if geometry.blocks_per_sm >= 2 and geometry.accumulators <= TWO_BLOCK_ACCUMULATORS:
            # Two blocks per SM: 128 registers a thread at 256 threads (64 accumulators, at
            # bm = 128 and D = 64, spill 48 bytes under that cap; ptxas takes 192 without it).
            new.attributes["tile.min_blocks"] = IntegerAttr(2, i64)
        module = kernel.get_toplevel_object()
        assert isinstance(module, ModuleOp)
        limit = key_limit(a, kernel_scalar_bounds(module, kernel))
        SimtAttentionEmitter(em, a, mapping, _geometry(a, plan), limit).emit()
        replace_kernel(rewriter, kernel, new)
