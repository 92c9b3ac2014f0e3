"""The `fuse` pass: lower graph functions to one `loop.kernel` per GPU kernel plus a host function.

Fusion is compute-inline (Halide-style). The tensors that get a buffer (the roots) are the
function results, plus whatever a kernel cannot inline: a matmul not read at its consumer's own
index (with the elementwise epilogue chain above it), a reduction that cannot be hoisted to
its consumer's row level, a matmul operand that itself holds a reduction or matmul (stored
below its transposes and broadcasts when those sit on an elementwise producer, so the
contraction reads the producer's own layout through index maps), and any reduction or matmul
that two kernels would both compute. Identical graph ops are merged (CSE) first. Everything
else (elementwise ops, broadcasts, transposes, reshapes, slices, concats, splat constants) is
recomputed inside each kernel that reads it, unless recomputing it costs more than a round trip
through memory (`fuse_cost`: a chain of softmaxes would otherwise recompute each one per
reduction of every later one). A root that only splits the dims of a matmul's result
(`reshape(x @ w)`) is stored by the matmul's kernel through a collapsed view of its buffer.
See `fuse_kernel` for the kernel shapes, and docs/ir.md for the host function over memrefs
(non-splat constants become `memref.global`s). `fuse{debug=true}` prints every decision.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice

from xdsl.context import Context
from xdsl.dialects import func, memref
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    FunctionType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    StringAttr,
    TensorType,
    UnitAttr,
    UnregisteredOp,
    i64,
)
from xdsl.ir import Block, BlockArgument, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.transforms.common_subexpression_elimination import CommonSubexpressionElimination
from xdsl.utils.exceptions import DiagnosticException

from tinyopt.dialects import graph, loop
from tinyopt.dialects.runtime_scalar import ScalarBounds, bounds_attr, describe, runtime_scalars
from tinyopt.passes.graph_to_loop.decompose import DecomposePass
from tinyopt.passes.graph_to_loop.fuse_cost import recomputations
from tinyopt.passes.graph_to_loop.fuse_kernel import (
    KernelBuilder,
    Materialize,
    buffer_type,
    is_buffer_constant,
    shape_of,
)
from tinyopt.passes.graph_to_loop.fuse_log import FuseLog
from tinyopt.passes.graph_to_loop.fuse_scalar import ELEMENTWISE_OPS

_PRIMITIVES: tuple[type[Operation], ...] = (
    *ELEMENTWISE_OPS,
    *graph.REDUCE_OPS,
    *graph.SHAPE_OPS,
    *graph.DATA_MOVEMENT_OPS,
    graph.DynamicUpdateSliceOp,
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


def _check_signature(function: func.FuncOp) -> None:
    """Refuse a graph function whose arguments or results are not tensors that kernels can
    hold: static, non-empty shapes of an element type the graph dialect has; and one whose
    body is more than one block (branches)."""
    name = function.sym_name.data
    if len(function.body.blocks) != 1:
        raise DiagnosticException(
            f"fuse: @{name} has {len(function.body.blocks)} blocks: a graph function is one "
            "block of graph ops, without branches"
        )
    named = [
        *((f"argument {i}", t) for i, t in enumerate(function.function_type.inputs.data)),
        *((f"result {i}", t) for i, t in enumerate(function.function_type.outputs.data)),
    ]
    types = ", ".join(map(str, graph.DATA_TYPES))
    for what, type_ in named:
        if not isinstance(type_, TensorType):
            problem = "is not a tensor (a graph function takes and returns tensors only)"
        elif any(d < 0 for d in type_.get_shape()):
            problem = "has a dynamic dimension (graph tensors have static shapes)"
        elif 0 in type_.get_shape():
            problem = "has a dimension of size 0 (empty tensors are not supported)"
        elif type_.element_type not in graph.DATA_TYPES:
            problem = f"has an element type tinyopt does not compile (it has {types})"
        else:
            continue
        raise DiagnosticException(f"fuse: @{name} {what} of type {type_} {problem}")


def _check_in_place_updates(function: func.FuncOp) -> None:
    """Refuse a `graph.dynamic_update_slice` that cannot be written in place (docs/ir.md): its
    operand must be a function argument that nothing else reads, so no kernel can see the
    buffer before the write, and the function must return its result, the argument's buffer
    updated, so that the write is visible to the caller as well as to every later read."""
    returned = function.body.block.last_op
    assert isinstance(returned, func.ReturnOp)
    for op in function.body.block.ops:
        if not isinstance(op, graph.DynamicUpdateSliceOp):
            continue
        where = f"fuse: {op.name} in @{function.sym_name.data}"
        if not isinstance(op.x, BlockArgument):
            raise DiagnosticException(
                f"{where} updates a value computed in the graph; it writes in place, so its "
                "operand must be a function argument (the cache)"
            )
        if op.x.uses.get_length() != 1:
            raise DiagnosticException(
                f"{where} writes {describe(function, op.x)} in place, which another op also "
                "reads: it would see the buffer before or after the write depending on the "
                "kernel order; read the update's result instead"
            )
        if op.result not in returned.arguments:
            raise DiagnosticException(
                f"{where} writes {describe(function, op.x)} in place: return its result, the "
                "updated argument, so that the write is part of the function's results"
            )


def _reaches(
    value: SSAValue,
    roots: dict[SSAValue, None],
    kinds: tuple[type[Operation], ...] = (graph.ReduceOp, graph.MatmulOp),
) -> bool:
    """Return whether inlining `value` would reach an op of `kinds` (by default a reduction or
    a matmul: what a kernel computes at most once)."""
    seen: set[SSAValue] = set()
    stack = [value]
    while stack:
        value = stack.pop()
        op = value.owner
        if value in seen or value in roots or not isinstance(op, Operation):
            continue
        if isinstance(op, kinds):
            return True
        seen.add(value)
        stack.extend(op.operands)
    return False


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
        if any(_reaches(o, roots) for o in user.operands if o is not end):
            break
        value = end = user.results[0]
    return value


def _reassociation(shape: Sequence[int], coarse: Sequence[int]) -> list[list[int]] | None:
    """Return the groups of adjacent dims of `shape` whose extents multiply to each dim of
    `coarse` (the reassociation of a `memref.collapse_shape` from `shape` to `coarse`), or None
    if `shape` does not split `coarse` that way."""
    groups: list[list[int]] = []
    dim = 0
    for extent in coarse:
        if dim == len(shape):
            return None
        group, size = [dim], shape[dim]
        dim += 1
        while size < extent and dim < len(shape):
            group.append(dim)
            size *= shape[dim]
            dim += 1
        if size != extent:
            return None
        groups.append(group)
    if not groups or any(extent != 1 for extent in shape[dim:]):
        return None
    groups[-1].extend(range(dim, len(shape)))
    return groups


def _folded_store_shape(
    root: SSAValue, roots: dict[SSAValue, None], log: FuseLog
) -> tuple[int, ...] | None:
    """Return the shape the kernel of `root` iterates and stores when `root` reshapes a matmul's
    result (or its epilogue) by splitting its dims: the matmul's own, so that the GEMM keeps its
    loops and writes the root's buffer through a collapsed view, with no copy kernel. None
    keeps the root's shape (a reshape that only adds or drops unit dims is already indexed
    by the matmul's loops, docs/ir.md)."""
    source = root
    while isinstance(source.owner, graph.ReshapeOp) and (source is root or source not in roots):
        source = source.owner.x
    if source is root or source in roots or not _reaches(source, roots, (graph.MatmulOp,)):
        return None
    shape, coarse = shape_of(root), shape_of(source)
    if [d for d in shape if d != 1] == [d for d in coarse if d != 1]:
        return None
    if _reassociation(shape, coarse) is None:
        log.write(
            f"{log.describe(root)} of {log.describe(source)} is not folded into its kernel's "
            f"store: {list(coarse)} -> {list(shape)} merges dims, which the store could index "
            "only through arithmetic"
        )
        return None
    return coarse


def plan_kernels(function: func.FuncOp, log: FuseLog | None = None) -> list[KernelBuilder]:
    """Choose the roots of a graph function and build one kernel per root, in launch order.

    A root is added for each value a kernel cannot inline (`Materialize`), then for each
    reduction or matmul two kernels would compute, then for the value whose recomputation
    costs each kernel the most over its round trip through memory (`fuse_cost`), rebuilding
    after each round every kernel that a new root may change (`_build`) until none asks for
    more.
    """
    for op in function.body.block.ops:
        if not isinstance(op, _PRIMITIVES):
            name = op.op_name.data if isinstance(op, UnregisteredOp) else op.name
            raise DiagnosticException(f"fuse: cannot lower '{name}'")
    log = FuseLog(function, enabled=False) if log is None else log
    name = function.sym_name.data
    position = {op.results[0]: i for i, op in enumerate(function.body.block.ops) if op.results}
    returned = function.body.block.last_op
    assert isinstance(returned, func.ReturnOp)
    roots = dict.fromkeys(returned.arguments)
    built: dict[SSAValue, _Built] = {}
    while True:
        order = sorted(roots, key=lambda v: position.get(v, -1))
        builders = []
        try:
            for i, root in enumerate(order):
                store_shape = _folded_store_shape(root, roots, log)
                builders.append(_build(f"{name}_{i}", root, roots, store_shape, built))
        except Materialize as m:
            value = _with_epilogue(m.value, roots)
            if value in roots:  # a buffer would not change the kernel: planning would not end
                raise DiagnosticException(
                    f"fuse: the kernel of {log.describe(root)} asks for a buffer of "
                    f"{log.describe(value)}, which has one already ({m.reason})"
                ) from m
            epilogue = (
                f" (with its epilogue up to {log.describe(value)})" if value is not m.value else ""
            )
            log.buffer(m.value, f"{m.reason}, in the kernel of {log.describe(root)}{epilogue}")
            roots[value] = None
            continue
        computed: dict[SSAValue, int] = {}
        for builder in builders:
            for value in builder.fused:
                computed[value] = computed.get(value, 0) + 1
        shared = [v for v, n in computed.items() if n > 1]
        for value in shared:
            log.buffer(value, f"{computed[value]} kernels would compute it")
        roots.update(dict.fromkeys(_with_epilogue(v, roots) for v in shared))
        if shared:
            continue
        recomputed = False
        for builder in builders:
            costly = [r for r in recomputations(builder) if r.materialize]
            if costly:
                worst = max(costly, key=lambda r: r.extra_ops)
                log.recompute(worst, builder.root)
                roots[worst.value] = None
                recomputed = True
        if not recomputed:
            log.kernels(builders)
            return builders


@dataclass
class _Built:
    """A kernel built in an earlier round of `plan_kernels`, and what its build asked."""

    builder: KernelBuilder
    store_shape: tuple[int, ...] | None
    asked: set[SSAValue]
    """The values the build asked whether they are roots (`_Asking`)."""
    roots: int
    """How many roots there were when it was built."""


class _Asking:
    """The roots, recording each value a kernel's build asks about: a build that asked about
    none of the roots added since gives the same kernel again (it inlines everything else)."""

    def __init__(self, roots: dict[SSAValue, None]):
        self.roots = roots
        self.asked: set[SSAValue] = set()

    def __contains__(self, value: object) -> bool:
        self.asked.add(value)  # type: ignore[arg-type]
        return value in self.roots


def _build(
    name: str,
    root: SSAValue,
    roots: dict[SSAValue, None],
    store_shape: tuple[int, ...] | None,
    built: dict[SSAValue, _Built],
) -> KernelBuilder:
    """The kernel of `root` (named `name`): the one an earlier round built, where the store
    shape is the same and its build asked about none of the roots added since (kernels are
    rebuilt after every new root, and most do not see it: ResNet-50's fusion built 1821
    kernels for its 104), else a new build; raises `Materialize` as `KernelBuilder.build`."""
    earlier = built.get(root)
    if (
        earlier is not None
        and earlier.store_shape == store_shape
        and not earlier.asked.intersection(islice(roots, earlier.roots, None))
    ):
        earlier.builder.kernel.sym_name = StringAttr(name)
        return earlier.builder
    asking = _Asking(roots)
    builder = KernelBuilder(name, root, asking, store_shape)
    builder.build()
    built[root] = _Built(builder, store_shape, asking.asked, len(roots))
    return builder


def _host_function(
    function: func.FuncOp,
    builders: Sequence[KernelBuilder],
    globals_: list[memref.GlobalOp],
    scalars: dict[BlockArgument, ScalarBounds],
) -> func.FuncOp:
    """Build the memref version of `function` that allocates outputs and launches kernels.

    A runtime scalar is an `i32`/`i64` argument carrying its bounds (`tinyopt.bounds`); a
    dynamic update slice allocates nothing: its kernel writes the operand's buffer, which the
    function returns as the result."""
    name = function.sym_name.data
    block = Block(
        arg_types=[
            _tensor_type(a).element_type if a in scalars else buffer_type(a) for a in function.args
        ]
    )
    for arg, host_arg in zip(function.args, block.args):
        if arg in scalars:
            host_arg.name_hint = arg.name_hint
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
        update = builder.root.owner
        if isinstance(update, graph.DynamicUpdateSliceOp):
            outputs[builder.root] = buffers[update.x]
            block.add_op(loop.LaunchOp(builder.kernel.sym_name.data, [*inputs, buffers[update.x]]))
            continue
        out_type = buffer_type(builder.root)
        out = memref.AllocOp.get(out_type.element_type, shape=out_type.get_shape())
        block.add_op(out)
        outputs[builder.root] = out.memref
        stored = _store_view(block, out.memref, builder.store_shape)
        block.add_op(loop.LaunchOp(builder.kernel.sym_name.data, [*inputs, stored]))
    returned = function.body.block.last_op
    assert isinstance(returned, func.ReturnOp)
    block.add_op(func.ReturnOp(*(outputs[v] for v in returned.arguments)))
    result_types = [buffer_type(v) for v in returned.arguments]
    host = func.FuncOp(
        name,
        FunctionType.from_lists(block.arg_types, result_types),
        Region(block),
        function.sym_visibility,
    )
    if scalars:
        host.arg_attrs = ArrayAttr(
            [bounds_attr(scalars[a]) if a in scalars else DictionaryAttr({}) for a in function.args]
        )
    return host


def _tensor_type(value: SSAValue) -> TensorType:
    assert isinstance(value.type, TensorType)
    return value.type


def _store_view(block: Block, buffer: SSAValue, shape: tuple[int, ...]) -> SSAValue:
    """Return `buffer`, or a `memref.collapse_shape` view of it with `shape` (a kernel that
    stores a reshape of its matmul's result in the matmul's own shape)."""
    type_ = buffer.type
    assert isinstance(type_, MemRefType)
    if type_.get_shape() == shape:
        return buffer
    groups = _reassociation(type_.get_shape(), shape)
    assert groups is not None
    view = memref.CollapseShapeOp(
        operands=[buffer],
        result_types=[MemRefType(type_.element_type, shape)],
        properties={
            "reassociation": ArrayAttr(
                [ArrayAttr([IntegerAttr(d, i64) for d in g]) for g in groups]
            )
        },
    )
    block.add_op(view)
    return view.result


def _check_new_symbols(
    function: func.FuncOp, new_ops: Sequence[Operation], taken: dict[str, Operation]
) -> None:
    """Refuse a kernel or constant of `function` named as another symbol of the module (a
    function `@f_0` beside `@f`, whose first kernel is `@f_0`), then record the new names."""
    name = function.sym_name.data
    for new_op in new_ops:
        symbol = new_op.sym_name.data  # pyright: ignore[reportAttributeAccessIssue]
        other = taken.get(symbol)
        if other is not None and other is not function:
            what = "kernel" if isinstance(new_op, loop.KernelOp) else "constant"
            raise DiagnosticException(
                f"fuse: the {what} @{symbol} of @{name} has the name of another symbol of the "
                f"module ({other.name} @{symbol}): rename @{name} or @{symbol} (the kernels of "
                f"@{name} are named @{name}_0, @{name}_1, ... and its constants @{name}_cst0, ...)"
            )
        taken[symbol] = new_op


@dataclass(frozen=True)
class FusePass(ModulePass):
    """Lower every graph `func.func` to `loop.kernel`s and a host function over memrefs;
    `debug=true` prints each fusion decision to stderr."""

    name = "fuse"

    debug: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Decompose composites if any are left, merge identical graph ops (a captured model
        spells `reshape(x)` once per linear layer reading x, which would otherwise give each
        its own copy of x), then fuse each graph function."""
        if any(isinstance(o, graph.COMPOSITE_OPS) for o in op.walk()):
            DecomposePass().apply(ctx, op)
        CommonSubexpressionElimination().apply(ctx, op)
        module_block = op.body.block
        taken = {
            o.sym_name.data: o
            for o in module_block.ops
            if isinstance(getattr(o, "sym_name", None), StringAttr)
        }
        for function in [f for f in module_block.ops if _is_graph_function(f)]:
            assert isinstance(function, func.FuncOp)
            _check_signature(function)
            try:
                scalars = runtime_scalars(function)
            except DiagnosticException as exc:
                raise DiagnosticException(f"fuse: {exc}") from None
            _check_in_place_updates(function)
            builders = plan_kernels(function, FuseLog(function, self.debug))
            globals_: list[memref.GlobalOp] = []
            host = _host_function(function, builders, globals_, scalars)
            _check_new_symbols(function, [*globals_, *(b.kernel for b in builders)], taken)
            for new_op in (*globals_, *(b.kernel for b in builders), host):
                module_block.insert_op_before(new_op, function)
            module_block.erase_op(function)
