"""The skinny-GEMM rule's split over K: one skinny contraction kernel becomes a partial-sum
kernel and a fold, deterministically (no atomics).

The partial kernel is again a skinny contraction, `parallel(b·S + s, m?, n) { reduce(kk <
K/S) { A(k) · B(k) }; ws[b·S + s, m?, n] = sum }` with k = s·(K/S) + kk, whose batch loop runs
over the S chunks of every batch entry; the fold, `parallel(b?, m?, n) { sum of ws[b·S + s, m?,
n] over s in order; epilogue }`, applies the kernel's epilogue (bias, activation, residual)
once, to the whole sum. Both are planned in turn: the partial kernel by the skinny rule (marked
`PARTIAL`, so it is not split again), the fold one thread per point (`split_k.SEQUENTIAL`).
"""

from __future__ import annotations

from xdsl.dialects import memref
from xdsl.dialects.builtin import MemRefType, ModuleOp, UnitAttr, f32
from xdsl.ir import Operation, SSAValue

from tinyopt.dialects import loop
from tinyopt.passes.tile.gemm.skinny_match import SkinnyContraction
from tinyopt.passes.tile.gemm.split_k import SEQUENTIAL, derived_kernel, replace_kernels

PARTIAL = "tinyopt.skinny_partial"
"""Loop-kernel attribute of a skinny split's partial-sum kernel: its K is one chunk already."""

SPLIT_IN_A_PLAN = (
    "splits is decided when the kernel is planned (the split puts two kernels in its place): "
    "set splitk as an option of plan or tile, not in a plan"
)
"""Why the skinny rules refuse a written plan whose `splits` is not 1."""


def split_skinny(
    module: ModuleOp, kernel: loop.KernelOp, c: SkinnyContraction, splits: int
) -> list[loop.KernelOp]:
    """Puts the partial-sum kernel and the fold of `c` cut into `splits` K chunks (which must
    divide K) in `kernel`'s place, with a workspace allocated before their launches."""
    workspace_type = _workspace_type(c, splits)
    partial = _partial_kernel(kernel, c, splits, workspace_type)
    fold = _fold_kernel(kernel, c, splits, workspace_type)

    def with_workspace(args: list[SSAValue]) -> tuple[list[Operation], list[list[SSAValue]]]:
        workspace = memref.AllocOp([], [], workspace_type)
        return [workspace], [[*args, workspace.memref]] * 2

    replace_kernels(module, kernel, [partial, fold], with_workspace)
    return [partial, fold]


def _workspace_type(c: SkinnyContraction, splits: int) -> MemRefType:
    batch, m, n, _ = c.extents
    return MemRefType(f32, [batch * splits, *([m] if c.m_iv is not None else []), n])


def _partial_kernel(
    kernel: loop.KernelOp, c: SkinnyContraction, splits: int, workspace_type: MemRefType
) -> loop.KernelOp:
    batch, _, _, k_extent = c.extents
    chunk = k_extent // splits
    assert chunk * splits == k_extent, "the split must divide K"
    new, em, mapping = derived_kernel(kernel, f"{kernel.sym_name.data}_splitk", [workspace_type])
    new.attributes[PARTIAL] = UnitAttr()
    rows = list(c.nest.extents)[1:] if c.batch_iv is not None else list(c.nest.extents)
    nest = loop.ParallelOp([batch * splits, *rows])
    em.op(nest)
    with em.into(nest.body.block):
        bs, *others = nest.body.block.args
        old = [iv for iv in (c.m_iv, c.n_iv) if iv is not None]
        mapping.update(zip(old, others, strict=True))
        for op in c.prologue:
            em.op(op.clone(value_mapper=mapping))
        init = mapping.get(c.reduce.init[0], c.reduce.init[0])
        reduce = loop.ReduceOp([chunk], [init], combine=c.reduce.combine.clone())
        reduce.attributes["tinyopt.contraction"] = c.reduce.attributes["tinyopt.contraction"]
        em.op(reduce)
        with em.into(reduce.body.block):
            (kk,) = reduce.body.block.args
            # The batch and chunk indices are computed in the K loop, so that nothing but
            # constants comes before it (the contraction shape).
            if c.batch_iv is not None:
                mapping[c.batch_iv] = em.div(bs, splits)
            side_map = dict(mapping)
            side_map[c.k_iv] = em.add(em.mul(em.rem(bs, splits), chunk), kk)
            for op in (*c.a_side, *c.b_side):
                em.op(op.clone(value_mapper=side_map))
            product = c.product.clone(value_mapper=side_map)
            em.op(product)
            em.op(loop.YieldOp(product.results[0]))
        point = [bs, *others]
        em.op(memref.StoreOp.get(reduce.res[0], new.body.block.args[-1], point))
    return new


def _fold_kernel(
    kernel: loop.KernelOp, c: SkinnyContraction, splits: int, workspace_type: MemRefType
) -> loop.KernelOp:
    new, em, mapping = derived_kernel(kernel, f"{kernel.sym_name.data}_reduce", [workspace_type])
    new.attributes[SEQUENTIAL] = c.reduce.attributes["tinyopt.contraction"]
    workspace = new.body.block.args[-1]
    nest = loop.ParallelOp(c.nest.extents)
    em.op(nest)
    with em.into(nest.body.block):
        mapping.update(zip(c.nest.body.block.args, nest.body.block.args, strict=True))
        for op in c.prologue:
            em.op(op.clone(value_mapper=mapping))
        init = mapping.get(c.reduce.init[0], c.reduce.init[0])
        reduce = loop.ReduceOp([splits], [init], combine=c.reduce.combine.clone())
        em.op(reduce)
        with em.into(reduce.body.block):
            (s,) = reduce.body.block.args
            batch = mapping[c.batch_iv] if c.batch_iv is not None else None
            first = em.add(em.mul(batch, splits), s) if batch is not None else s
            rest = [mapping[iv] for iv in (c.m_iv, c.n_iv) if iv is not None]
            em.op(loop.YieldOp(em.value(memref.LoadOp.get(workspace, [first, *rest]))))
        mapping[c.reduce.res[0]] = reduce.res[0]
        for op in c.epilogue:
            em.op(op.clone(value_mapper=mapping))
    return new
