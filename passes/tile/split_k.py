"""Split-K, two-pass, as a loop-level rewrite: one contraction kernel becomes two loop kernels.

`K` is cut into `splits` chunks. The first kernel is again a contraction — its batch dimension
is (batch × splits), each batch entry reducing one chunk — and writes raw partial sums to a
workspace `[batch·splits, M, N]`. The second folds the partials with the contraction's own
combine region and runs the original epilogue. The host function allocates the workspace and
launches both. Both kernels are then scheduled by the ordinary rules (the partial kernel by the
contraction rule), which is the point: more blocks for shapes whose output alone cannot fill
the GPU, with no new schedule code.
"""

from __future__ import annotations

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import MemRefType, ModuleOp, f32

from tinyopt.dialects import loop
from tinyopt.passes.tile.contraction import Contraction, match_contraction
from tinyopt.passes.tile.emit import Emitter, Mapping

SEQUENTIAL = "tinyopt.sequential"
"""Kernel attribute asking the tile pass for one thread per point (the partial-sum fold)."""


def split_kernel(module: ModuleOp, kernel: loop.KernelOp, splits: int) -> tuple[loop.KernelOp, ...]:
    """Splits one contraction kernel of the module if its K spans more than one chunk;
    returns the kernels that replace it (the partial-sum and fold kernels), or the kernel."""
    c = match_contraction(kernel)
    if c is None or c.extents[3] < 2 * splits:
        return (kernel,)
    partial, fold = _partial_kernel(kernel, c, splits), _fold_kernel(kernel, c, splits)
    workspace_type = partial.body.block.args[-1].type
    parent = kernel.parent_block()
    assert parent is not None
    parent.insert_ops_before([partial, fold], kernel)
    for launch in [o for o in module.walk() if isinstance(o, loop.LaunchOp)]:
        if launch.callee.root_reference.data == kernel.sym_name.data:
            block = launch.parent_block()
            assert block is not None
            workspace = memref.AllocOp([], [], workspace_type)
            args = [*launch.args, workspace.memref]
            block.insert_ops_before(
                [
                    workspace,
                    loop.LaunchOp(partial.sym_name.data, args),
                    loop.LaunchOp(fold.sym_name.data, args),
                ],
                launch,
            )
            block.erase_op(launch)
    parent.erase_op(kernel)
    return partial, fold


def _new_kernel(
    kernel: loop.KernelOp, name: str, workspace: MemRefType
) -> tuple[loop.KernelOp, Emitter, Mapping]:
    types = [a.type for a in kernel.body.block.args] + [workspace]
    new = loop.KernelOp(name, types)
    mapping = dict(zip(kernel.body.block.args, new.body.block.args, strict=False))
    return new, Emitter(new.body.block), mapping


def _workspace_type(c: Contraction, splits: int) -> MemRefType:
    batch, m, n, _ = c.extents
    return MemRefType(f32, [batch * splits, m, n])


def _partial_kernel(kernel: loop.KernelOp, c: Contraction, splits: int) -> loop.KernelOp:
    """Builds `parallel(b·S + s, m, n) { reduce(kk < chunk) { A(k) * B(k) }; store ws }`."""
    batch, m, n, k_extent = c.extents
    chunk = -(-k_extent // splits)
    new, em, mapping = _new_kernel(
        kernel, f"{kernel.sym_name.data}_splitk", _workspace_type(c, splits)
    )
    workspace = new.body.block.args[-1]
    nest = loop.ParallelOp([batch * splits, m, n])
    em.op(nest)
    with em.into(nest.body.block):
        bs, i, j = nest.body.block.args
        mapping[c.m_iv], mapping[c.n_iv] = i, j
        for op in c.prologue:
            em.op(op.clone(value_mapper=mapping))
        init = mapping.get(c.reduce.init[0], c.reduce.init[0])
        reduce = loop.ReduceOp([chunk], [init], combine=c.reduce.combine.clone())
        reduce.attributes["tinyopt.contraction"] = c.reduce.attributes["tinyopt.contraction"]
        em.op(reduce)
        with em.into(reduce.body.block):
            (kk,) = reduce.body.block.args
            # The batch and split indices are computed here, not above the reduction, so the
            # partial kernel keeps the contraction shape (nothing before the reduce but constants).
            if len(c.nest.extents) == 3:
                mapping[c.nest.body.block.args[0]] = em.div(bs, splits)
            start = em.add(em.mul(em.rem(bs, splits), chunk), kk)
            exact = chunk * splits == k_extent
            k = start
            if not exact:
                # Reads stay in bounds by clamping k; out-of-range products become zero below.
                k = em.value(arith.MinSIOp(start, em.index(k_extent - 1)))
            side_map = dict(mapping) | {c.reduce.body.block.args[0]: k}
            for op in c.a_side:
                em.op(op.clone(value_mapper=side_map))
            a = side_map[c.a_value]
            if not exact:
                a = em.value(arith.SelectOp(em.less(start, k_extent), a, em.f32(0.0)))
            for op in c.b_side:
                if not op.results or op.results[0] not in side_map:
                    em.op(op.clone(value_mapper=side_map))
            product = c.product.clone(value_mapper={c.a_value: a, c.b_value: side_map[c.b_value]})
            em.op(product)
            em.op(loop.YieldOp(product.results[0]))
        em.op(memref.StoreOp.get(reduce.res[0], workspace, [bs, i, j]))
    return new


def _fold_kernel(kernel: loop.KernelOp, c: Contraction, splits: int) -> loop.KernelOp:
    """Builds `parallel(b, m, n) { acc = reduce(s) { ws[b·S + s, m, n] }; epilogue(acc) }`."""
    new, em, mapping = _new_kernel(
        kernel, f"{kernel.sym_name.data}_reduce", _workspace_type(c, splits)
    )
    new.attributes[SEQUENTIAL] = c.reduce.attributes["tinyopt.contraction"]
    workspace = new.body.block.args[-1]
    nest = loop.ParallelOp(c.nest.extents)
    em.op(nest)
    with em.into(nest.body.block):
        mapping.update(zip(c.nest.body.block.args, nest.body.block.args, strict=True))
        batch = nest.body.block.args[0] if len(c.nest.extents) == 3 else None
        for op in c.prologue:
            em.op(op.clone(value_mapper=mapping))
        init = mapping.get(c.reduce.init[0], c.reduce.init[0])
        reduce = loop.ReduceOp([splits], [init], combine=c.reduce.combine.clone())
        em.op(reduce)
        with em.into(reduce.body.block):
            (s,) = reduce.body.block.args
            row = em.add(em.mul(batch, splits), s) if batch is not None else s
            part = em.value(memref.LoadOp.get(workspace, [row, mapping[c.m_iv], mapping[c.n_iv]]))
            em.op(loop.YieldOp(part))
        mapping[c.reduce.res[0]] = reduce.res[0]
        for op in c.epilogue:
            em.op(op.clone(value_mapper=mapping))
    return new
