"""Schedule rule for f32 contractions on tensor cores in TF32 (`mma=tf32`, opt-in only).

The schedule of `mma_sync.py` with the m16n8k8 TF32 `mma.sync`, for contractions whose operand
sides read f32. The sides are evaluated in f32 (any fused prologue too) and rounded to TF32
once as they are staged (`cvt.rna.tf32.f32`), not at each fragment read; each fragment element
is then one 32-bit shared-memory read, and the products accumulate in f32. TF32 rounds each
input to about 3 decimal digits (tests/test_tf32.py), so it is never a default.

Shared rows are padded so that a warp's fragment reads are conflict-free: lane l reads
(row l/4, k l%4) of a K-major tile (row stride BK + 4: the 8 rows fall 4 banks apart) and
(k l%4, column l/4) of a `[BK][outer]` one (stride outer + 8: the 4 k rows fall 8 banks apart).
"""

from __future__ import annotations

from dataclasses import replace

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import f32, i32
from xdsl.ir import SSAValue
from xdsl.pattern_rewriter import PatternRewriter

from tinyopt.dialects import loop, tile
from tinyopt.passes.tile.gemm.contraction_match import Contraction, match_contraction, operand_types
from tinyopt.passes.tile.target import Target
from tinyopt.passes.tile.kernel import new_kernel, replace_kernel
from tinyopt.passes.tile.knobs import Knobs
from tinyopt.passes.tile.rule import Rule
from tinyopt.passes.tile.gemm.mma_sync import (
    WARP,
    MmaEmitter,
    MmaTiles,
    _Side,
    block_and_warp_tiles,
    sums_products,
)

TF32_K = 8
"""K per TF32 `mma.sync` (m16n8k8)."""

K_MAJOR_PAD, OUTER_MAJOR_PAD = 4, 8
"""Shared-row padding in f32 elements for `[outer][BK]` and `[BK][outer]` tiles."""


def _fail(message: str) -> str:
    return f"mma=tf32 {message}"


def tf32_tile_refusal(tiles: MmaTiles, target: Target) -> str | None:
    """Why the mma.sync tiling cannot run on TF32's K step and the f32 tiles' shared memory."""
    bm, bn, bk = tiles.bm, tiles.bn, tiles.bk
    if bk % TF32_K:
        return _fail(f"needs bk to be a multiple of {TF32_K} (the mma K step), got bk={bk}")
    if tiles.stages not in (1, 2):
        return _fail(f"stages its K loop once or twice (stages 1 or 2), got {tiles.stages}")
    shared = sum(
        4 * max(size * (bk + K_MAJOR_PAD), bk * (size + OUTER_MAJOR_PAD)) for size in (bm, bn)
    )
    if shared > target.static_shared:
        return _fail(
            f"with bm={bm} bn={bn} bk={bk} needs {shared} bytes of shared memory, more than the "
            f"{target.static_shared} a block may declare statically"
        )
    return None


class Tf32Rule(Rule[Contraction, MmaTiles]):
    """Tiles an f32 contraction over blocks, warps and TF32 tensor-core fragments (opt-in:
    `mma=auto` never takes it, since TF32 rounds the operands)."""

    name = "tf32"
    reads = "bm=0,64,128 bn=0,64,128 bk=0,16,32 vec stages splitk"
    plan_type = MmaTiles
    selector = ("mma", "tf32")
    by_auto = False

    def match(self, kernel: loop.KernelOp) -> Contraction | str:
        return match_contraction(kernel) or "not a contraction"

    def plan(self, kernel: loop.KernelOp, c: Contraction, knobs: Knobs) -> MmaTiles | str:
        types = operand_types(c)
        if types != ["f32"] or not sums_products(c):
            return _fail(
                f"applies to sums of products of f32 operands; kernel @{kernel.sym_name.data} "
                f"reads {' and '.join(types)} (f16/bf16 take mma=sync or mma=wgmma)"
            )
        batch, m, n, _ = c.extents
        t = block_and_warp_tiles(knobs, batch, m, n, self.target.sms)
        return tf32_tile_refusal(t, self.target) or replace(
            t, vec=knobs.vec or 4, stages=knobs.stages or 2
        )

    def check(self, kernel: loop.KernelOp, c: Contraction, plan: MmaTiles) -> str | None:
        return tf32_tile_refusal(plan, self.target)

    def emit(
        self, kernel: loop.KernelOp, c: Contraction, t: MmaTiles, rewriter: PatternRewriter
    ) -> None:
        batch, m, n, _ = c.extents
        new, em, mapping = new_kernel(
            kernel, (-(-n // t.bn), -(-m // t.bm), batch), (t.threads, 1, 1)
        )
        _Tf32Emitter(em, c, t, f32, mapping).emit()
        replace_kernel(rewriter, kernel, new)


class _Tf32Emitter(MmaEmitter):
    """The `mma_sync.py` schedule with f32 tiles and m16n8k8 TF32 fragments."""

    k_step = TF32_K

    def _shape(self, size: int, k_major: bool) -> list[int]:
        bk = self.t.bk
        return [size, bk + K_MAJOR_PAD] if k_major else [bk, size + OUTER_MAJOR_PAD]

    def _narrow(self, value: SSAValue) -> SSAValue:
        """Rounds a staged value to TF32 once, not at each of its fragment reads."""
        return self.em.value(tile.ToTf32Op(value))

    def _fragments(self, side: _Side, outer: SSAValue, kk: SSAValue, a: bool) -> list[SSAValue]:
        """Reads a 16(outer)×8(k) block at (outer, kk) (staged as TF32): for A the mma's
        a0..a3 of that m16 tile; for B b0, b1 of the n8 tile at `outer` and of the next one."""
        em = self.em
        lane = em.rem(self.tid, WARP)
        group, in_group = em.div(lane, 4), em.rem(lane, 4)
        if a:
            places = [(0, 0), (8, 0), (0, 4), (8, 4)]
        else:
            places = [(0, 0), (0, 4), (8, 0), (8, 4)]
        values = []
        for outer_offset, k_offset in places:
            o = em.add(em.add(outer, outer_offset), group)
            k = em.add(em.add(kk, k_offset), in_group)
            assert side.smem is not None
            index = [o, k] if side.k_major else [k, o]
            value = em.value(memref.LoadOp.get(side.smem, index))
            values.append(em.value(arith.BitcastOp(value, i32)))
        return values
