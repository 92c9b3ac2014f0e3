"""The `fuse` pass: lower graph functions to one `loop.kernel` per GPU kernel plus a host function.

Fusion is compute-inline (Halide-style). The tensors that get a buffer (the roots) are the
function results, plus whatever a kernel cannot inline: a matmul not read at its consumer's own
index (with the elementwise epilogue chain above it), a reduction that cannot be hoisted to
its consumer's row level, a matmul operand that itself holds a reduction or matmul (stored
below its transposes and broadcasts when those sit on an elementwise producer, so the
contraction reads the producer's own layout through index maps), and any reduction or matmul
that two kernels would both compute. Identical graph ops are merged (CSE) first. Everything
else (elementwise ops, broadcasts, transposes, reshapes, slices, concats, splat constants) is
recomputed inside each kernel that reads it. See `fuse_kernel` for the kernel shapes, and
docs/ir.md for the host function over memrefs (non-splat constants become `memref.global`s).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func, memref
from xdsl.dialects.builtin import (
    FunctionType,
    ModuleOp,
    StringAttr,
    TensorType,
    UnitAttr,
    UnregisteredOp,
)
from xdsl.ir import Block, BlockArgument, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.transforms.common_subexpression_elimination import CommonSubexpressionElimination
from xdsl.utils.exceptions import DiagnosticException

from tinyopt.dialects import graph, loop
from tinyopt.passes.graph_to_loop.decompose import DecomposePass
from tinyopt.passes.graph_to_loop.fuse_kernel import (
    KernelBuilder,
    Materialize,
    buffer_type,
    is_buffer_constant,
    shape_of,
)
from tinyopt.passes.graph_to_loop.fuse_scalar import ELEMENTWISE_OPS

_PRIMITIVES: tuple[type[Operation], ...] = (
    *ELEMENTWISE_OPS,
    *graph.REDUCE_OPS,
    *graph.SHAPE_OPS,
    *graph.DATA_MOVEMENT_OPS,
    graph.MatmulOp,
    graph.ConstantOp,
    graph.IotaOp,
    func.ReturnOp,
)


def _is_graph_function(op: Operation) -> bool:
    if not isinstance(op, func.FuncOp) or not op.body.blocks:
        return False
    types = (*op.function_type.inputs.data, *op.function_type.outputs.data)
    return any(isinstance(t, TensorType) for t in types)


def _reaches_heavy(value: SSAValue, roots: dict[SSAValue, None]) -> bool:
    """Return whether inlining `value` would reach a reduction or a matmul."""
    op = value.owner
    if value in roots or not isinstance(op, Operation):
        return False
    if isinstance(op, graph.ReduceOp | graph.MatmulOp):
        return True
    return any(_reaches_heavy(o, roots) for o in op.operands)


def _adds_or_drops_unit_dims(op: Operation) -> bool:
    """Return whether `op` is a reshape that only adds or drops size-1 dims."""
    if not isinstance(op, graph.ReshapeOp):
        return False
    return len({tuple(d for d in shape_of(v) if d != 1) for v in (op.x, op.result)}) == 1


def _with_epilogue(value: SSAValue, roots: dict[SSAValue, None]) -> SSAValue:
    """Extend a matmul to be materialized by the elementwise chain that only it feeds.

    The chain may pass through reshapes that only add or drop unit dims (a linear layer on
    `[1, s, d]` is a 2-D matmul reshaped back): the kernel still indexes the matmul by its own
    loop variables, so the residual add after it becomes its epilogue.
    """
    if not isinstance(value.owner, graph.MatmulOp):
        return value
    end = value
    while end.uses.get_length() == 1:
        user = next(iter(end.uses)).operation
        if _adds_or_drops_unit_dims(user) and user.results[0] not in roots:
            end = user.results[0]
            continue
        if not isinstance(user, ELEMENTWISE_OPS) or user.results[0] in roots:
            break
        if any(_reaches_heavy(o, roots) for o in user.operands if o is not end):
            break
        value = end = user.results[0]
    return value


def plan_kernels(function: func.FuncOp) -> list[KernelBuilder]:
    """Choose the roots of a graph function and build one kernel per root, in launch order."""
    for op in function.body.block.ops:
        if not isinstance(op, _PRIMITIVES):
            name = op.op_name.data if isinstance(op, UnregisteredOp) else op.name
            raise DiagnosticException(f"fuse: cannot lower '{name}'")
    name = function.sym_name.data
    position = {op.results[0]: i for i, op in enumerate(function.body.block.ops) if op.results}
    returned = function.body.block.last_op
    assert isinstance(returned, func.ReturnOp)
    roots = dict.fromkeys(returned.arguments)
    while True:
        order = sorted(roots, key=lambda v: position.get(v, -1))
        try:
            builders = [KernelBuilder(f"{name}_{i}", r, roots) for i, r in enumerate(order)]
            for builder in builders:
                builder.build()
        except Materialize as m:
            value = _with_epilogue(m.value, roots)
            assert value not in roots, f"fuse: {value} materialized twice"
            roots[value] = None
            continue
        computed: dict[SSAValue, int] = {}
        for builder in builders:
            for value in builder.fused:
                computed[value] = computed.get(value, 0) + 1
        shared = [v for v, n in computed.items() if n > 1]
        if not shared:
            return builders
        roots.update(dict.fromkeys(_with_epilogue(v, roots) for v in shared))


def _host_function(
    function: func.FuncOp, builders: Sequence[KernelBuilder], globals_: list[memref.GlobalOp]
) -> func.FuncOp:
    """Build the memref version of `function` that allocates outputs and launches kernels."""
    name = function.sym_name.data
    block = Block(arg_types=[buffer_type(a) for a in function.args])
    buffers: dict[SSAValue, SSAValue] = dict(zip(function.args, block.args))
    outputs: dict[SSAValue, SSAValue] = {}

    def source(value: SSAValue) -> SSAValue:
        """Return the host buffer a kernel reads for graph value `value`."""
        if isinstance(value, BlockArgument):
            return buffers[value]
        if is_buffer_constant(value):
            if value not in buffers:
                op = value.owner
                assert isinstance(op, graph.ConstantOp)
                symbol = f"{name}_cst{len(globals_)}"
                globals_.append(
                    memref.GlobalOp.get(
                        StringAttr(symbol), buffer_type(value), op.value, constant=UnitAttr()
                    )
                )
                get = memref.GetGlobalOp(symbol, buffer_type(value))
                block.add_op(get)
                buffers[value] = get.memref
            return buffers[value]
        return outputs[value]

    for builder in builders:
        inputs = [source(v) for v in builder.inputs]
        out_type = buffer_type(builder.root)
        out = memref.AllocOp.get(out_type.element_type, shape=out_type.get_shape())
        block.add_op(out)
        outputs[builder.root] = out.memref
        block.add_op(loop.LaunchOp(builder.kernel.sym_name.data, [*inputs, out.memref]))
    returned = function.body.block.last_op
    assert isinstance(returned, func.ReturnOp)
    block.add_op(func.ReturnOp(*(outputs[v] for v in returned.arguments)))
    result_types = [buffer_type(v) for v in returned.arguments]
    return func.FuncOp(
        name,
        FunctionType.from_lists(block.arg_types, result_types),
        Region(block),
        function.sym_visibility,
    )


@dataclass(frozen=True)
class FusePass(ModulePass):
    """Lower every graph `func.func` to `loop.kernel`s and a host function over memrefs."""

    name = "fuse"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Decompose composites if any are left, merge identical graph ops (a captured model
        spells `reshape(x)` once per linear layer reading x, which would otherwise give each
        its own copy of x), then fuse each graph function."""
        if any(isinstance(o, graph.COMPOSITE_OPS) for o in op.walk()):
            DecomposePass().apply(ctx, op)
        CommonSubexpressionElimination().apply(ctx, op)
        module_block = op.body.block
        for function in [f for f in module_block.ops if _is_graph_function(f)]:
            assert isinstance(function, func.FuncOp)
            builders = plan_kernels(function)
            globals_: list[memref.GlobalOp] = []
            host = _host_function(function, builders, globals_)
            for new_op in (*globals_, *(b.kernel for b in builders), host):
                module_block.insert_op_before(new_op, function)
            module_block.erase_op(function)
