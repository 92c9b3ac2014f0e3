"""Split-K as a loop-level rewrite: one contraction kernel becomes two loop kernels.

`K` is cut into `splits` chunks. The partial kernel is again a contraction whose batch
dimension is (batch × splits), each batch entry reducing one chunk. Two-pass
(`splitk_mode=twopass`): it writes raw partial sums to a workspace `[batch·splits, M, N]`,
and a fold kernel sums them with the contraction's combine region and runs the original
epilogue. Atomic (`split_k_atomic.py`): a zeroing kernel clears the output and the partial
kernel adds its sums into it. Both kernels are then scheduled by the ordinary rules.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import MemRefType, ModuleOp, UnitAttr, f32
from xdsl.ir import Operation, SSAValue
from xdsl.utils.exceptions import DiagnosticException

from tinyopt.dialects import loop
from tinyopt.passes.tile.gemm.contraction_match import Contraction, match_contraction
from tinyopt.passes.tile.emit import Emitter, Mapping
from tinyopt.passes.tile.gemm.split_k_atomic import atomic_refusal, atomic_store, zero_kernel

SEQUENTIAL = "tinyopt.sequential"
"""Kernel attribute asking the tile pass for one thread per point (the partial-sum fold)."""

SPLIT_PARTIAL = "tinyopt.split_k_partial"
"""Kernel attribute of a split's partial-sum kernel: its K is one chunk of the whole's, and a
rule that took the whole for its split takes it too (`wgmma_3xtf32.py`)."""


def chunk_elements(k_extent: int, splits: int, row: int = 1) -> int:
    """The K elements of each of `splits` chunks: whole `row`s (a TMA box's 128-byte row,
    `row_elements`) where that leaves no chunk empty, else ⌈K / splits⌉. The last chunk may
    reach past K; the partial kernel reads zeros there."""
    aligned = row * -(-k_extent // (row * splits))
    return aligned if aligned * (splits - 1) < k_extent else -(-k_extent // splits)


def row_elements(c: Contraction) -> int:
    """The K elements of a wgmma rule's TMA box row: 128 bytes of the narrowest operand, and
    at least 64 (the K step the rules' chunk check asks for, `wgmma_plan.plain_operands`)."""
    loads = [o for op in (*c.a_side, *c.b_side) for o in op.walk() if isinstance(o, memref.LoadOp)]
    widths = [load.memref.type.element_type.bitwidth for load in loads]  # type: ignore[attr-defined]
    return max(64, 1024 // min(widths)) if widths else 1


def split_kernel(
    module: ModuleOp, kernel: loop.KernelOp, splits: int, mode: str = "auto", aligned: bool = False
) -> tuple[loop.KernelOp, ...]:
    """Splits one contraction kernel of the module if its K spans more than one chunk;
    returns the kernels that replace it (partial-sum and fold, or zeroing and partial-sum
    kernels), or the kernel. `mode` `auto` takes atomic adds where the epilogue allows them
    (`atomic_refusal`), else two passes; `atomic` raises the diagnostic saying why not.
    `aligned`: chunks of whole 128-byte rows of K (`chunk_elements`), as the wgmma rules'
    TMA boxes need; else ⌈K / splits⌉."""
    c = match_contraction(kernel)
    if c is None or c.extents[3] < 2 * splits:
        return (kernel,)
    chunk = chunk_elements(c.extents[3], splits, row_elements(c) if aligned else 1)
    refusal = atomic_refusal(c)
    if mode == "atomic" and refusal is not None:
        raise DiagnosticException(
            f"tile: splitk_mode=atomic adds partial sums into the output, so kernel "
            f"@{kernel.sym_name.data} must store its sum unchanged to an f32 output; "
            f"{refusal} (use splitk_mode=twopass)"
        )
    if mode != "twopass" and refusal is None:
        zero, output = zero_kernel(kernel, c)
        partial = _partial_kernel(kernel, c, splits, chunk, [], atomic_store(c, splits))
        replace_kernels(module, kernel, [zero, partial], lambda args: ([], [[args[output]], args]))
        return zero, partial
    workspace_type = _workspace_type(c, splits)
    partial = _partial_kernel(kernel, c, splits, chunk, [workspace_type], _workspace_store)
    fold = _fold_kernel(kernel, c, splits)

    def with_workspace(args: list[SSAValue]) -> tuple[list[Operation], list[list[SSAValue]]]:
        workspace = memref.AllocOp([], [], workspace_type)
        return [workspace], [[*args, workspace.memref]] * 2

    replace_kernels(module, kernel, [partial, fold], with_workspace)
    return partial, fold


LaunchArgs = Callable[[list[SSAValue]], tuple[list[Operation], list[list[SSAValue]]]]
"""From a launch's arguments: host ops to insert before it, and each new kernel's arguments."""


def replace_kernels(
    module: ModuleOp, kernel: loop.KernelOp, kernels: list[loop.KernelOp], launch_args: LaunchArgs
) -> None:
    """Puts `kernels` in place of `kernel`, and their launches in place of each of its."""
    parent = kernel.parent_block()
    assert parent is not None
    parent.insert_ops_before(kernels, kernel)
    for launch in [o for o in module.walk() if isinstance(o, loop.LaunchOp)]:
        if launch.callee.root_reference.data == kernel.sym_name.data:
            block = launch.parent_block()
            assert block is not None
            host_ops, args = launch_args(list(launch.args))
            launches = [
                loop.LaunchOp(k.sym_name.data, a) for k, a in zip(kernels, args, strict=True)
            ]
            block.insert_ops_before([*host_ops, *launches], launch)
            block.erase_op(launch)
    parent.erase_op(kernel)


def derived_kernel(
    kernel: loop.KernelOp, name: str, extra: list[MemRefType]
) -> tuple[loop.KernelOp, Emitter, Mapping]:
    types = [a.type for a in kernel.body.block.args] + extra
    new = loop.KernelOp(name, types)
    mapping = dict(zip(kernel.body.block.args, new.body.block.args, strict=False))
    return new, Emitter(new.body.block), mapping


def _workspace_type(c: Contraction, splits: int) -> MemRefType:
    batch, m, n, _ = c.extents
    return MemRefType(f32, [batch * splits, m, n])


PartialStore = Callable[[Emitter, Mapping, loop.KernelOp, SSAValue, list[SSAValue]], None]
"""Emits where a partial sum goes: (emitter, old → new values, the partial kernel, the sum,
its point (b·S + s, m, n))."""


def _workspace_store(
    em: Emitter, mapping: Mapping, new: loop.KernelOp, value: SSAValue, point: list[SSAValue]
) -> None:
    em.op(memref.StoreOp.get(value, new.body.block.args[-1], point))


def _partial_kernel(
    kernel: loop.KernelOp,
    c: Contraction,
    splits: int,
    chunk: int,
    extra: list[MemRefType],
    store: PartialStore,
) -> loop.KernelOp:
    """Builds `parallel(b·S + s, m, n) { reduce(kk < chunk) { A(k) * B(k) }; store }`."""
    batch, m, n, k_extent = c.extents
    new, em, mapping = derived_kernel(kernel, f"{kernel.sym_name.data}_splitk", extra)
    new.attributes[SPLIT_PARTIAL] = UnitAttr()
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
        store(em, mapping, new, reduce.res[0], [bs, i, j])
    return new


def _fold_kernel(kernel: loop.KernelOp, c: Contraction, splits: int) -> loop.KernelOp:
    """Builds `parallel(b, m, n) { acc = reduce(s) { ws[b·S + s, m, n] }; epilogue(acc) }`."""
    new, em, mapping = derived_kernel(
        kernel, f"{kernel.sym_name.data}_reduce", [_workspace_type(c, splits)]
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
