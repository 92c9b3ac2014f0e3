"""The tile dialect: a loop kernel mapped onto the GPU's grid, blocks, warps and threads.

Inside a `tile.kernel`, `scf`, `arith`, `math` and `memref` ops do the rest; docs/ir.md lists
the ops and the memory spaces (0 global, 3 shared, 5 registers).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from xdsl.dialects.builtin import (
    ArrayAttr,
    BFloat16Type,
    DenseArrayBase,
    DictionaryAttr,
    Float8E4M3FNType,
    Float8E5M2Type,
    Float16Type,
    Float32Type,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    StringAttr,
    SymbolNameConstraint,
    UnitAttr,
    f32,
    i1,
    i32,
    i64,
)
from xdsl.dialects.arith import ConstantOp
from xdsl.dialects.utils import AbstractYieldOperation
from xdsl.ir import (
    Attribute,
    BlockArgument,
    Dialect,
    Operation,
    Region,
    SSAValue,
    TypeAttribute,
)
from xdsl.irdl import (
    AttrSizedOperandSegments,
    ParametrizedAttribute,
    irdl_attr_definition,
    ParsePropInAttrDict,
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.traits import (
    HasParent,
    IsolatedFromAbove,
    IsTerminator,
    NoTerminator,
    Pure,
    SymbolOpInterface,
)
from xdsl.utils.exceptions import VerifyException

from tinyopt.dialects.loop import (
    SCALAR_TYPES,
    format_types,
    parse_int64,
    print_signature_and_body,
)

DYNAMIC_SHARED_BYTES = 227 * 1024
"""Shared memory a block may use on sm_90 (dynamic, opted in)."""

GLOBAL, SHARED, REGISTERS = 0, 3, 5
"""Memory spaces (the NVVM numbering): device memory, shared memory, per-thread registers."""

DIMS = ("x", "y", "z")


def memory_space(t: MemRefType) -> int:
    """Returns the memory space number of a memref type (0 when none is given)."""
    space = t.memory_space
    return space.value.data if isinstance(space, IntegerAttr) else GLOBAL


def memref_in(shape: Sequence[int], element: Attribute, space: int) -> MemRefType:
    """Builds a memref type in the given memory space."""
    return MemRefType(element, shape, memory_space=IntegerAttr(space, i32))


def _triple(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, list(values))


@irdl_op_definition
class KernelOp(IRDLOperation):
    """A GPU kernel: launch shape (`grid`, `block`) and a body over its global buffers."""

    name = "tile.kernel"

    sym_name = prop_def(SymbolNameConstraint())
    grid = prop_def(DenseArrayBase)
    block = prop_def(DenseArrayBase)
    cluster = opt_prop_def(DenseArrayBase)
    """Blocks a thread-block cluster groups along x, y and z (sm_90: they run at once, on one
    GPC, and read each other's shared memory: `tile.cluster_vload`); none: no clusters."""
    body = region_def("single_block")

    traits = traits_def(SymbolOpInterface(), IsolatedFromAbove(), NoTerminator())

    def __init__(
        self,
        name: str,
        grid: Sequence[int],
        block: Sequence[int],
        body: Region,
        cluster: Sequence[int] | None = None,
    ) -> None:
        properties = {"sym_name": StringAttr(name), "grid": _triple(grid), "block": _triple(block)}
        if cluster is not None:
            properties["cluster"] = _triple(cluster)
        super().__init__(properties=properties, regions=[body])

    @property
    def grid_size(self) -> tuple[int, ...]:
        return tuple(self.grid.get_values())

    @property
    def block_size(self) -> tuple[int, ...]:
        return tuple(self.block.get_values())

    @property
    def cluster_size(self) -> tuple[int, ...] | None:
        return None if self.cluster is None else tuple(self.cluster.get_values())

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        printer.print_string(f" grid {list(self.grid_size)} block {list(self.block_size)} ")
        if self.cluster_size is not None:
            printer.print_string(f"cluster {list(self.cluster_size)} ")
        print_signature_and_body(printer, self)

    @classmethod
    def parse(cls, parser: Parser) -> KernelOp:
        name = parser.parse_symbol_name().data
        parser.parse_keyword("grid")
        square = parser.Delimiter.SQUARE
        grid = parser.parse_comma_separated_list(square, lambda: parse_int64(parser, "a grid size"))
        parser.parse_keyword("block")
        block = parser.parse_comma_separated_list(
            square, lambda: parse_int64(parser, "a block size")
        )
        cluster = None
        if parser.parse_optional_keyword("cluster"):
            cluster = parser.parse_comma_separated_list(
                square, lambda: parse_int64(parser, "a cluster size")
            )
        args = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_argument)
        attrs = parser.parse_optional_attr_dict_with_keyword()
        op = cls(name, grid, block, parser.parse_region(args), cluster)
        if attrs:
            op.attributes |= attrs.data
        return op

    def verify_(self) -> None:
        where = f"tile.kernel @{self.sym_name.data}"
        _check_launch_shape(where, self.grid_size, self.block_size)
        if self.cluster_size is not None:
            _check_cluster(where, self.grid_size, self.cluster_size)
        for arg in self.body.block.args:
            if arg.type in SCALAR_TYPES:  # a runtime scalar, passed by value
                continue
            if not isinstance(arg.type, MemRefType) or memory_space(arg.type) != GLOBAL:
                raise VerifyException(
                    f"{where}: arguments must be global memrefs or i32/i64 scalars, got {arg.type}"
                )
        args = self.body.block.args
        for spec in tensor_maps(self):
            if not 0 <= spec.arg < len(args):
                raise VerifyException(f"{where}: tensor map of argument {spec.arg}, which is none")
            t = args[spec.arg].type
            assert isinstance(t, MemRefType)
            spec.verify(where, t)
            for use in args[spec.arg].uses:
                if not isinstance(use.operation, TmaLoadOp | TmaStoreOp):
                    raise VerifyException(
                        f"{where}: argument {spec.arg} is passed as a tensor map, so only "
                        f"tile.tma_load and tile.tma_store may use it, not {use.operation.name}"
                    )


def _check_launch_shape(where: str, grid: Sequence[int], block: Sequence[int]) -> None:
    """Raises VerifyException unless grid and block are 3 positive sizes, at most 1024 threads."""
    for what, values in (("grid", grid), ("block", block)):
        if len(values) != 3 or any(v <= 0 for v in values):
            raise VerifyException(f"{where}: {what} must be 3 positive sizes, got {values}")
    threads = block[0] * block[1] * block[2]
    if threads > 1024:
        raise VerifyException(f"{where}: {threads} threads per block exceed the limit 1024")


def _enclosing_kernel(op: Operation) -> KernelOp | None:
    """The `tile.kernel` that holds `op`, or None outside one."""
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, KernelOp):
        parent = parent.parent_op()
    return parent


MAX_CLUSTER = 8
"""The most blocks a cluster may group without the non-portable opt-in (sm_90)."""


def _check_cluster(where: str, grid: Sequence[int], cluster: Sequence[int]) -> None:
    """Raises VerifyException unless the cluster is 3 positive sizes dividing the grid's, of at
    most MAX_CLUSTER blocks."""
    if len(cluster) != 3 or any(v <= 0 for v in cluster):
        raise VerifyException(f"{where}: cluster must be 3 positive sizes, got {list(cluster)}")
    if any(g % c for g, c in zip(grid, cluster, strict=True)):
        raise VerifyException(
            f"{where}: the grid {list(grid)} must be whole clusters of {list(cluster)}"
        )
    if math.prod(cluster) > MAX_CLUSTER:
        raise VerifyException(
            f"{where}: a cluster of {math.prod(cluster)} blocks exceeds the portable limit "
            f"{MAX_CLUSTER}"
        )


class _HardwareIndexOp(IRDLOperation):
    """Base of ops returning one coordinate of a hardware index (`x`, `y` or `z`)."""

    dim = prop_def(StringAttr)
    result = result_def(IndexType)
    traits = traits_def(Pure())

    def __init__(self, dim: str) -> None:
        super().__init__(properties={"dim": StringAttr(dim)}, result_types=[IndexType()])

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.dim.data}")
        printer.print_op_attributes(self.attributes)

    @classmethod
    def parse(cls, parser: Parser):
        dim = parser.parse_identifier()
        attrs = parser.parse_optional_attr_dict()
        op = cls(dim)
        op.attributes |= attrs
        return op

    def verify_(self) -> None:
        if self.dim.data not in DIMS:
            raise VerifyException(f"{self.name}: dimension must be x, y or z, got {self.dim.data}")


@irdl_op_definition
class BlockIdOp(_HardwareIndexOp):
    """The index of this thread's block in the grid (`blockIdx`)."""

    name = "tile.block_id"


@irdl_op_definition
class ThreadIdOp(_HardwareIndexOp):
    """The index of this thread in its block (`threadIdx`)."""

    name = "tile.thread_id"


@irdl_op_definition
class WarpUniformOp(IRDLOperation):
    """`value` as lane 0 of the warp holds it (`__shfl_sync(full mask, value, 0)`), for a value
    the same in every lane that the CUDA compiler cannot prove so, such as the warpgroup
    `threadIdx.x / 128`. A branch on the result is then warp-uniform to ptxas: the values under
    it stay in uniform registers and no convergence barrier is set before the warpgroup's
    `.sync.aligned` instructions (wgmma), as there is under a branch on `threadIdx.x / 128`."""

    name = "tile.warp_uniform"

    value = operand_def(IndexType)
    result = result_def(IndexType)

    assembly_format = "$value attr-dict"

    def __init__(self, value: SSAValue) -> None:
        super().__init__(operands=[value], result_types=[IndexType()])


@irdl_op_definition
class AllocOp(IRDLOperation):
    """A shared-memory buffer (space 3) for the block or a register array (space 5) per thread."""

    name = "tile.alloc"

    result = result_def(MemRefType)
    dynamic = opt_prop_def(UnitAttr)
    """Shared memory carved from the kernel's dynamic shared memory (1024-byte aligned), so a
    block may use more than the 48 KiB that static declarations allow."""

    assembly_format = "(`dynamic` $dynamic^)? attr-dict `:` type($result)"

    def __init__(self, t: MemRefType, dynamic: bool = False) -> None:
        super().__init__(result_types=[t], properties={"dynamic": UnitAttr()} if dynamic else {})

    def verify_(self) -> None:
        t = self.result.type
        assert isinstance(t, MemRefType)
        if memory_space(t) not in (SHARED, REGISTERS):
            raise VerifyException(
                f"tile.alloc: memory space must be 3 (shared) or 5 (registers), got {t}"
            )
        if self.dynamic is not None and memory_space(t) != SHARED:
            raise VerifyException(f"tile.alloc: only shared memory can be dynamic, got {t}")


@irdl_op_definition
class BarrierOp(IRDLOperation):
    """Waits until every thread of the block arrives; orders shared-memory accesses."""

    name = "tile.barrier"
    assembly_format = "attr-dict"


@irdl_op_definition
class WarpBarrierOp(IRDLOperation):
    """Waits until every lane of the thread's warp arrives; orders the warp's shared-memory
    accesses (`__syncwarp()`, all 32 lanes): a barrier for data only the warp writes and
    reads, e.g. its own cp.async copies."""

    name = "tile.warp_barrier"
    assembly_format = "attr-dict"


@irdl_op_definition
class NamedBarrierOp(IRDLOperation):
    """Waits until `threads` threads (whole warps) arrive at hardware barrier `barrier` (1..15;
    0 is the block's `__syncthreads`): `bar.sync barrier, threads`, a barrier for part of the
    block, e.g. one warpgroup, that orders its shared-memory accesses. With `arrive`, the
    threads count themselves in and go on without waiting (`bar.arrive`): one group of warps
    lets another, waiting at the barrier, proceed."""

    name = "tile.named_barrier"

    barrier = operand_def(IndexType)
    threads = prop_def(IntegerAttr)
    arrive = opt_prop_def(UnitAttr)

    assembly_format = "$barrier `,` $threads (`arrive` $arrive^)? attr-dict"

    def __init__(self, barrier: SSAValue, threads: int, arrive: bool = False) -> None:
        properties: dict[str, Attribute] = {"threads": IntegerAttr(threads, i64)}
        if arrive:
            properties["arrive"] = UnitAttr()
        super().__init__(operands=[barrier], properties=properties)

    def verify_(self) -> None:
        _check_barrier_threads(self)


def _check_barrier_threads(op: NamedBarrierOp | NamedBarrierAnyOp) -> None:
    """A named barrier's thread count is whole warps."""
    threads = op.threads.value.data
    if threads <= 0 or threads % 32:
        raise VerifyException(
            f"{op.name}: threads must be a positive multiple of 32, got {threads}"
        )


@irdl_op_definition
class NamedBarrierAnyOp(IRDLOperation):
    """`tile.named_barrier` that also reduces a predicate: every thread that meets at barrier
    `barrier` gets whether `predicate` held in any of the `threads` threads (`bar.red.or.pred`),
    a decision the same in all of them."""

    name = "tile.named_barrier_any"

    barrier = operand_def(IndexType)
    predicate = operand_def(i1)
    threads = prop_def(IntegerAttr)
    result = result_def(i1)

    assembly_format = "$barrier `,` $threads `,` $predicate attr-dict"

    def __init__(self, barrier: SSAValue, threads: int, predicate: SSAValue) -> None:
        super().__init__(
            operands=[barrier, predicate],
            properties={"threads": IntegerAttr(threads, i64)},
            result_types=[i1],
        )

    def verify_(self) -> None:
        _check_barrier_threads(self)


@irdl_op_definition
class VectorLoadOp(IRDLOperation):
    """Loads `n` consecutive elements along the last dimension in one aligned access. With
    `evict_first` (a 128-bit load from global memory) the load's L2 lines are the first the
    cache evicts (an `L2::evict_first` cache policy): for data no other block reads again."""

    name = "tile.vload"

    memref = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    evict_first = opt_prop_def(UnitAttr)
    lanes = var_result_def()

    assembly_format = (
        "$memref `[` $indices `]` (`evict_first` $evict_first^)? attr-dict `:` type($memref) "
        "`->` type($lanes)"
    )

    def __init__(
        self, memref: SSAValue, indices: Sequence[SSAValue], width: int, evict_first: bool = False
    ) -> None:
        t = memref.type
        assert isinstance(t, MemRefType)
        super().__init__(
            operands=[memref, indices],
            properties={"evict_first": UnitAttr()} if evict_first else {},
            result_types=[[t.element_type] * width],
        )

    def verify_(self) -> None:
        _check_vector_access(self, self.memref, self.indices, [r.type for r in self.lanes])
        t = self.memref.type
        assert isinstance(t, MemRefType)
        bits = len(self.lanes) * _element_bits(t.element_type)
        if self.evict_first is not None and (memory_space(t) != GLOBAL or bits != 128):
            raise VerifyException(
                f"tile.vload: evict_first needs a 128-bit load from global memory, got {bits} "
                f"bits from {t}"
            )


@irdl_op_definition
class ClusterVectorLoadOp(IRDLOperation):
    """Loads 4 consecutive f32 elements of a dynamic shared-memory buffer as the block of rank
    `rank` in the thread-block cluster holds them (its copy of the buffer, at the same offset):
    `mapa.shared::cluster` then `ld.shared::cluster.v4.f32`. The kernel must be launched in
    clusters (`tile.kernel ... cluster [...]`) and the other block must have written the
    elements before a `tile.cluster_sync` that this thread passed."""

    name = "tile.cluster_vload"

    memref = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    rank = operand_def(IndexType)
    lanes = var_result_def()

    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    assembly_format = (
        "$memref `[` $indices `]` `of` $rank attr-dict `:` type($memref) `->` type($lanes)"
    )

    def __init__(self, memref: SSAValue, indices: Sequence[SSAValue], rank: SSAValue) -> None:
        super().__init__(operands=[memref, indices, rank], result_types=[[f32] * 4])

    def verify_(self) -> None:
        _check_vector_access(self, self.memref, self.indices, [r.type for r in self.lanes])
        t = self.memref.type
        assert isinstance(t, MemRefType)
        if memory_space(t) != SHARED or t.element_type != f32 or len(self.lanes) != 4:
            raise VerifyException(
                f"tile.cluster_vload: loads 4 f32 elements of shared memory, got "
                f"{len(self.lanes)} of {t}"
            )
        owner = self.memref.owner
        if not isinstance(owner, AllocOp) or owner.dynamic is None:
            raise VerifyException(
                "tile.cluster_vload: reads a dynamic tile.alloc (at one offset in every block)"
            )
        kernel = _enclosing_kernel(self)
        if kernel is None:
            return
        cluster = kernel.cluster_size
        if cluster is None:
            raise VerifyException(
                f"tile.cluster_vload: reads another block's shared memory, so kernel "
                f"@{kernel.sym_name.data} must be launched in clusters (cluster [x, y, z])"
            )
        rank = self.rank.owner
        if isinstance(rank, ConstantOp) and isinstance(value := rank.value, IntegerAttr):
            blocks = math.prod(cluster)
            if not 0 <= value.value.data < blocks:
                plural = "s" if blocks > 1 else ""
                raise VerifyException(
                    f"tile.cluster_vload: rank {value.value.data} is not a block of kernel "
                    f"@{kernel.sym_name.data}'s clusters of {blocks} block{plural}"
                )


@irdl_op_definition
class ClusterSyncOp(IRDLOperation):
    """Waits until every thread of every block of the thread-block cluster arrives; orders
    their shared-memory writes before it to their reads after it (`barrier.cluster.arrive.release`,
    `barrier.cluster.wait.acquire`). A block that others read must not exit before they
    pass a later one."""

    name = "tile.cluster_sync"
    assembly_format = "attr-dict"


@irdl_op_definition
class VectorStoreOp(IRDLOperation):
    """Stores `n` values to consecutive elements along the last dimension in one access."""

    name = "tile.vstore"

    lanes = var_operand_def()
    memref = operand_def(MemRefType)
    indices = var_operand_def(IndexType)

    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    assembly_format = (
        "`(` $lanes `:` type($lanes) `)` `,` $memref `[` $indices `]` attr-dict `:` type($memref)"
    )

    def __init__(
        self, lanes: Sequence[SSAValue], memref: SSAValue, indices: Sequence[SSAValue]
    ) -> None:
        super().__init__(operands=[lanes, memref, indices])

    def verify_(self) -> None:
        _check_vector_access(self, self.memref, self.indices, [v.type for v in self.lanes])


@irdl_op_definition
class VectorAtomicAddOp(IRDLOperation):
    """Adds `n` f32 values to consecutive elements of global memory along the last dimension
    in one atomic access (`red.global.add.v{n}.f32`, sm_90): the vector form of a
    `memref.atomic_rmw addf` whose result is unused."""

    name = "tile.vatomic_add"

    lanes = var_operand_def(f32)
    memref = operand_def(MemRefType)
    indices = var_operand_def(IndexType)

    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    assembly_format = "`(` $lanes `)` `,` $memref `[` $indices `]` attr-dict `:` type($memref)"

    def __init__(
        self, lanes: Sequence[SSAValue], memref: SSAValue, indices: Sequence[SSAValue]
    ) -> None:
        super().__init__(operands=[lanes, memref, indices])

    def verify_(self) -> None:
        _check_global(self, self.memref, "buffer")
        if len(self.lanes) not in (2, 4):
            raise VerifyException(f"tile.vatomic_add: width must be 2 or 4, got {len(self.lanes)}")
        _check_vector_access(self, self.memref, self.indices, [v.type for v in self.lanes])


def _check_global(op: Operation, buffer: SSAValue, what: str) -> MemRefType:
    """Returns the memref type of `buffer`, raising VerifyException unless it is global."""
    t = buffer.type
    assert isinstance(t, MemRefType)
    if memory_space(t) != GLOBAL:
        raise VerifyException(f"{op.name}: the {what} must be global memory, got {t}")
    return t


def _check_indices(
    op: Operation,
    indices: Sequence[SSAValue],
    t: MemRefType,
    what: str = "indices",
    of: str = "buffer",
) -> None:
    """Raises VerifyException unless there is one index (`what`) per dimension of `t`."""
    if len(indices) != t.get_num_dims():
        raise VerifyException(
            f"{op.name}: {len(indices)} {what} for a rank-{t.get_num_dims()} {of}"
        )


def _check_vector_access(
    op: Operation, memref: SSAValue, indices: Sequence[SSAValue], lane_types: list[Attribute]
) -> None:
    t = memref.type
    assert isinstance(t, MemRefType)
    width = len(lane_types)
    if width not in (1, 2, 4, 8, 16):
        raise VerifyException(f"{op.name}: width must be 1, 2, 4, 8 or 16, got {width}")
    if any(lt != t.element_type for lt in lane_types):
        raise VerifyException(f"{op.name}: lanes must have the element type {t.element_type}")
    _check_indices(op, indices, t)
    bits = width * _element_bits(t.element_type)
    if bits > 128:
        raise VerifyException(f"{op.name}: {bits}-bit access is wider than 128 bits")
    if t.get_shape()[-1] % width:
        raise VerifyException(
            f"{op.name}: last dimension {t.get_shape()[-1]} is not a multiple of the width {width}"
        )


def _element_bits(t: Attribute) -> int:
    width = getattr(t, "bitwidth", None)
    if not isinstance(width, int):
        raise VerifyException(f"unsupported element type {t}")
    return width


class _CrossThreadReduceOp(IRDLOperation):
    """Base of reductions of a tuple state across threads, folding with `combine`."""

    state = var_operand_def()
    res = var_result_def()
    combine = region_def("single_block")

    def __init__(self, state: Sequence[SSAValue], combine: Region) -> None:
        super().__init__(
            operands=[state], result_types=[[v.type for v in state]], regions=[combine]
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list(self.state, printer.print_ssa_value)
        printer.print_string(" : ")
        printer.print_list(self.state.types, printer.print_attribute)
        printer.print_op_attributes(self.attributes, print_keyword=True)
        printer.print_string(" combine(")
        printer.print_list(
            self.combine.block.args, lambda a: printer.print_block_argument(a, print_type=False)
        )
        printer.print_string(") ")
        printer.print_region(self.combine, print_entry_block_args=False)

    @classmethod
    def parse(cls, parser: Parser):
        names = parser.parse_comma_separated_list(
            parser.Delimiter.NONE, parser.parse_unresolved_operand
        )
        parser.parse_punctuation(":")
        types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
        if len(types) != len(names):
            parser.raise_error(f"{cls.name} has {len(names)} values but {len(types)} types")
        attrs = parser.parse_optional_attr_dict_with_keyword()
        parser.parse_keyword("combine")
        args = parser.parse_comma_separated_list(
            parser.Delimiter.PAREN, lambda: parser.parse_argument(expect_type=False)
        )
        if len(args) != 2 * len(types):
            parser.raise_error(f"{cls.name}: combine takes two states ({2 * len(types)} values)")
        region = parser.parse_region([a.resolve(t) for a, t in zip(args, types * 2)])
        op = cls([parser.resolve_operand(n, t) for n, t in zip(names, types)], region)
        if attrs:
            op.attributes |= attrs.data
        return op

    def verify_(self) -> None:
        state = list(self.state.types)
        args = [a.type for a in self.combine.block.args]
        if args != state * 2:
            raise VerifyException(
                f"{self.name}: combine must take two states ({len(state) * 2} arguments of "
                f"types {format_types(state * 2)}), got {format_types(args)}"
            )
        last = self.combine.block.last_op
        if not isinstance(last, YieldOp):
            raise VerifyException(f"{self.name}: combine must end with tile.yield")
        if list(last.arguments.types) != state:
            raise VerifyException(
                f"{self.name}: combine must yield one state of types {format_types(state)}, "
                f"got {format_types(list(last.arguments.types))}"
            )


@irdl_op_definition
class WarpReduceOp(_CrossThreadReduceOp):
    """Combines the state of each lane of a warp (or `width`-lane group) by XOR shuffles;
    every lane receives the combined state."""

    name = "tile.warp_reduce"

    def __init__(self, state: Sequence[SSAValue], combine: Region, width: int = 32) -> None:
        super().__init__(state, combine)
        self.attributes["width"] = IntegerAttr(width, i64)

    @property
    def width(self) -> int:
        attr = self.attributes.get("width")
        return attr.value.data if isinstance(attr, IntegerAttr) else 32


@irdl_op_definition
class BlockReduceOp(_CrossThreadReduceOp):
    """Combines the state of every thread of the block (warp shuffles, then shared memory);
    every thread receives the combined state."""

    name = "tile.block_reduce"


@irdl_op_definition
class YieldOp(AbstractYieldOperation[Attribute]):
    """Ends the combine region of a cross-thread reduction."""

    name = "tile.yield"
    traits = traits_def(IsTerminator(), HasParent(WarpReduceOp, BlockReduceOp))


@irdl_op_definition
class CudaKernelOp(IRDLOperation):
    """One kernel printed as CUDA C: its translation unit, its launch shape and whether the
    runtime launches it with programmatic stream serialization (`pdl`, docs/ir.md)."""

    name = "tile.cuda_kernel"

    sym_name = prop_def(SymbolNameConstraint())
    grid = prop_def(DenseArrayBase)
    block = prop_def(DenseArrayBase)
    smem = prop_def(IntegerAttr)
    source = prop_def(StringAttr)
    pdl = opt_prop_def(UnitAttr)

    traits = traits_def(SymbolOpInterface())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$sym_name attr-dict"

    def __init__(
        self,
        name: str,
        grid: Sequence[int],
        block: Sequence[int],
        smem: int,
        source: str,
        pdl: bool = False,
    ) -> None:
        super().__init__(
            properties={
                "sym_name": StringAttr(name),
                "grid": _triple(grid),
                "block": _triple(block),
                "smem": IntegerAttr(smem, i64),
                "source": StringAttr(source),
                "pdl": UnitAttr() if pdl else None,
            }
        )

    def verify_(self) -> None:
        where = f"tile.cuda_kernel @{self.sym_name.data}"
        _check_launch_shape(where, self.grid.get_values(), self.block.get_values())
        if not 0 <= self.smem.value.data <= DYNAMIC_SHARED_BYTES:
            raise VerifyException(
                f"{where}: smem must be 0 to {DYNAMIC_SHARED_BYTES} bytes (the dynamic shared "
                f"memory a block may use), got {self.smem.value.data}"
            )
        if f" {self.sym_name.data}(" not in self.source.data:
            raise VerifyException(f"{where}: its source defines no kernel {self.sym_name.data}")
        tensor_maps(self)


LDMATRIX_REGISTERS = 4
"""`tile.ldmatrix` loads four 8×8 b16 matrices (`.x4`): one 32-bit register of each per lane."""

MMA_A, MMA_B, MMA_C = 4, 2, 4
"""Registers per lane of an m16n8k16 `mma.sync`: A (b16 pairs), B (b16 pairs), C/D (f32); the
same counts for the tf32 m16n8k8 (one tf32 per register)."""


@irdl_op_definition
class LdMatrixOp(IRDLOperation):
    """Loads four 8×8 matrices of 16-bit elements from shared memory across a warp (`ldmatrix`);
    docs/ir.md gives the lane layout."""

    name = "tile.ldmatrix"

    memref = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    trans = opt_prop_def(UnitAttr)
    res = var_result_def(i32)

    assembly_format = (
        "$memref `[` $indices `]` (`trans` $trans^)? attr-dict `:` type($memref) `->` type($res)"
    )

    def __init__(self, memref: SSAValue, indices: Sequence[SSAValue], trans: bool) -> None:
        super().__init__(
            operands=[memref, indices],
            properties={"trans": UnitAttr()} if trans else {},
            result_types=[[i32] * LDMATRIX_REGISTERS],
        )

    def verify_(self) -> None:
        t = self.memref.type
        assert isinstance(t, MemRefType)
        if memory_space(t) != SHARED:
            raise VerifyException(f"tile.ldmatrix: the buffer must be in shared memory, got {t}")
        if not isinstance(t.element_type, Float16Type | BFloat16Type):
            raise VerifyException(
                f"tile.ldmatrix: the buffer must hold f16 or bf16, got {t.element_type}"
            )
        _check_indices(self, self.indices, t)
        if t.get_shape()[-1] % 8:
            raise VerifyException(
                f"tile.ldmatrix: rows must start 16-byte aligned, but the last dimension "
                f"{t.get_shape()[-1]} is not a multiple of 8"
            )
        if len(self.res) != LDMATRIX_REGISTERS:
            raise VerifyException(
                f"tile.ldmatrix: must return {LDMATRIX_REGISTERS} i32 registers (.x4), "
                f"got {len(self.res)}"
            )


@irdl_op_definition
class MmaSyncOp(IRDLOperation):
    """One warp-wide m16n8k16 tensor-core product `D = A·B + C` (`mma.sync`; docs/ir.md).

    With `element` f32 the product is the m16n8k8 on TF32 inputs: A and B registers hold the
    bits of TF32 values (`tile.to_tf32`, then `arith.bitcast`); A lane l holds (row l/4,
    k l%4), (row + 8, k), (row, k + 4), (row + 8, k + 4); B (k l%4, column l/4), (k + 4,
    column).
    """

    name = "tile.mma_sync"

    a = var_operand_def(i32)
    b = var_operand_def(i32)
    c = var_operand_def(f32)
    element = prop_def(TypeAttribute)
    res = var_result_def(f32)

    traits = traits_def(Pure())
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    assembly_format = (
        "`a` `[` $a `]` `b` `[` $b `]` `c` `[` $c `]` attr-dict `:` $element `->` type($res)"
    )

    def __init__(
        self,
        element: Attribute,
        a: Sequence[SSAValue],
        b: Sequence[SSAValue],
        c: Sequence[SSAValue],
    ) -> None:
        super().__init__(
            operands=[a, b, c],
            properties={"element": element},
            result_types=[[f32] * MMA_C],
        )

    def verify_(self) -> None:
        if not isinstance(self.element, Float16Type | BFloat16Type) and self.element != f32:
            raise VerifyException(
                f"tile.mma_sync: element type must be f16, bf16 or f32 (TF32), got {self.element}"
            )
        for what, values, count in (
            ("A", self.a, MMA_A),
            ("B", self.b, MMA_B),
            ("C", self.c, MMA_C),
            ("D", self.res, MMA_C),
        ):
            if len(values) != count:
                raise VerifyException(
                    f"tile.mma_sync: {what} must be {count} registers per lane, got {len(values)}"
                )


@irdl_op_definition
class ToTf32Op(IRDLOperation):
    """Rounds an f32 to TF32 (10 mantissa bits, to nearest, ties away from zero:
    `cvt.rna.tf32.f32`), kept in an f32 whose low 13 mantissa bits are zero: what a TF32
    `tile.mma_sync` operand register holds."""

    name = "tile.to_tf32"
    input = operand_def(f32)
    result = result_def(f32)
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict"

    def __init__(self, value: SSAValue) -> None:
        super().__init__(operands=[value], result_types=[f32])


@irdl_op_definition
class PackOp(IRDLOperation):
    """Rounds two f32 to `element` (f16 or bf16, to nearest even) and packs them into one i32,
    `lo` in the low half: a register pair of an `mma.sync` A or B operand built in registers
    (flash attention's probabilities reused as the A operand of P·V). Two values of `element`
    itself are packed as they are (loaded halves, no conversion: the skinny tensor-core rule)."""

    name = "tile.pack"

    lo = operand_def()
    hi = operand_def()
    element = prop_def(TypeAttribute)
    result = result_def(i32)

    traits = traits_def(Pure())
    assembly_format = "$lo `,` $hi attr-dict `:` type($lo) `,` type($hi) `to` $element"

    def __init__(self, lo: SSAValue, hi: SSAValue, element: Attribute) -> None:
        super().__init__(operands=[lo, hi], properties={"element": element}, result_types=[i32])

    def verify_(self) -> None:
        if not isinstance(self.element, Float16Type | BFloat16Type):
            raise VerifyException(
                f"tile.pack: element type must be f16 or bf16, got {self.element}"
            )
        if self.lo.type != self.hi.type or self.lo.type not in (f32, self.element):
            raise VerifyException(
                f"tile.pack: packs two f32 or two {self.element}, got {self.lo.type} and "
                f"{self.hi.type}"
            )


TENSOR_MAPS = "tile.tensor_maps"
"""`tile.kernel` attribute: the arguments the kernel receives as TMA tensor maps (a list of
`{arg, box, swizzle}` dictionaries, with `l2_promotion` where it is not 0); the runtime encodes
a map for each of them."""

SWIZZLES = (0, 32, 64, 128)
"""TMA / wgmma shared-memory swizzle widths in bytes (0: none)."""

L2_PROMOTIONS = (0, 64, 128, 256)
"""TMA L2 promotion sizes in bytes (0: none): the L2 fills a copy's misses in aligned pieces
of this size, whatever part of them the copy's box covers."""


@dataclass(frozen=True)
class TensorMapArg:
    """One kernel argument passed as a tensor map: the box (in the memref's dimension order,
    outermost first) that one `tile.tma_load` copies, the shared-memory swizzle width and the
    L2 promotion size (`L2_PROMOTIONS`)."""

    arg: int
    box: tuple[int, ...]
    swizzle: int
    l2_promotion: int = 0

    def to_attr(self) -> DictionaryAttr:
        entries: dict[str, Attribute] = {
            "arg": IntegerAttr(self.arg, i64),
            "box": DenseArrayBase.from_list(i64, list(self.box)),
            "swizzle": IntegerAttr(self.swizzle, i64),
        }
        if self.l2_promotion:
            entries["l2_promotion"] = IntegerAttr(self.l2_promotion, i64)
        return DictionaryAttr(entries)

    @staticmethod
    def from_attr(attr: Attribute) -> TensorMapArg:
        if not isinstance(attr, DictionaryAttr):
            raise VerifyException(f"{TENSOR_MAPS} entries must be dictionaries, got {attr}")
        arg, box, swizzle = (attr.data.get(k) for k in ("arg", "box", "swizzle"))
        promotion = attr.data.get("l2_promotion", IntegerAttr(0, i64))
        if not (
            isinstance(arg, IntegerAttr)
            and isinstance(box, DenseArrayBase)
            and isinstance(swizzle, IntegerAttr)
            and isinstance(promotion, IntegerAttr)
        ):
            raise VerifyException(
                f"{TENSOR_MAPS} entries need arg (integer), box (array<i64>) and swizzle "
                f"(integer), and l2_promotion (integer) if any, got {attr}"
            )
        return TensorMapArg(
            arg.value.data, tuple(box.get_values()), swizzle.value.data, promotion.value.data
        )

    def verify(self, where: str, t: MemRefType) -> None:
        """Raises VerifyException when the box or swizzle is not one TMA can copy."""
        if len(self.box) != t.get_num_dims():
            raise VerifyException(
                f"{where}: tensor map box {list(self.box)} of argument {self.arg} must have "
                f"one size per dimension of {t}"
            )
        if any(not 1 <= b <= 256 for b in self.box):
            raise VerifyException(f"{where}: tensor map box sizes must be in [1, 256]")
        if self.swizzle not in SWIZZLES:
            raise VerifyException(f"{where}: swizzle must be one of {SWIZZLES} bytes")
        if self.l2_promotion not in L2_PROMOTIONS:
            raise VerifyException(f"{where}: l2_promotion must be one of {L2_PROMOTIONS} bytes")
        inner = self.box[-1] * _element_bits(t.element_type) // 8
        if self.swizzle and inner > self.swizzle:
            raise VerifyException(
                f"{where}: the box's inner extent ({inner} bytes) exceeds the {self.swizzle}-byte "
                "swizzle span"
            )
        if inner % 16:
            raise VerifyException(
                f"{where}: the box's inner extent ({inner} bytes) is not a multiple of 16 bytes"
            )


def tensor_maps(kernel: Operation) -> list[TensorMapArg]:
    """Returns the tensor-map arguments a `tile.kernel` (or `tile.cuda_kernel`) declares."""
    attr = kernel.attributes.get(TENSOR_MAPS)
    if attr is None:
        return []
    if not isinstance(attr, ArrayAttr):
        raise VerifyException(f"{TENSOR_MAPS} must be an array, got {attr}")
    return [TensorMapArg.from_attr(a) for a in attr.data]


def set_tensor_maps(kernel: Operation, specs: Sequence[TensorMapArg]) -> None:
    """Records which arguments of a kernel are passed as tensor maps."""
    kernel.attributes[TENSOR_MAPS] = ArrayAttr([s.to_attr() for s in specs])


KnobValue = int | str


def _parse_knob(parser: AttrParser, values: dict[str, KnobValue]) -> None:
    """Parses one `name = 128` or `name = "ld"` into `values`."""
    name = parser.parse_identifier(context_msg=" (a knob name)")
    parser.parse_punctuation("=")
    value = parser.parse_optional_str_literal()
    if value is None:
        value = parse_int64(parser, "a knob value")
    if name in values:
        parser.raise_error(f"knob {name} is given twice")
    values[name] = value


def _print_knobs(printer: Printer, knobs: DictionaryAttr, first: bool) -> None:
    """Prints `name = value` for each knob, each after a comma unless it is `first`."""
    for name, value in knobs.data.items():
        printer.print_string(f"{'' if first else ', '}{name} = ")
        if isinstance(value, IntegerAttr):
            printer.print_string(str(value.value.data))
        else:
            printer.print_string_literal(value.data)  # type: ignore[attr-defined]
        first = False


def _knob_dictionary(values: dict[str, KnobValue]) -> DictionaryAttr:
    return DictionaryAttr(
        {k: IntegerAttr(v, i64) if isinstance(v, int) else StringAttr(v) for k, v in values.items()}
    )


class _KnobValues:
    """What `#tile.plan` and `#tile.knobs` share: a `knobs` dictionary of ints and strings
    (declared by each attribute: a field here would become the first parameter of both)."""

    name: ClassVar[str]

    @property
    def values(self) -> dict[str, KnobValue]:
        """The knobs by name, as ints and strings."""
        return {
            k: v.value.data if isinstance(v, IntegerAttr) else v.data  # type: ignore[attr-defined]
            for k, v in self.knobs.data.items()  # type: ignore[attr-defined]
        }

    def verify(self) -> None:
        for name, value in self.knobs.data.items():  # type: ignore[attr-defined]
            if not isinstance(value, IntegerAttr | StringAttr):
                raise VerifyException(f"{self.name}: knob {name} must be an integer or a string")


@irdl_attr_definition
class PlanAttr(_KnobValues, ParametrizedAttribute):
    """A kernel's schedule: the rule that emits it and every knob that rule reads, resolved.

    Printed `#tile.plan<contraction, bm = 128, copy = "ld", ...>`; `plan` attaches it to each
    `loop.kernel`, `tile` emits from it and copies it onto the `tile.kernel` for reading.
    """

    name = "tile.plan"

    rule: StringAttr
    knobs: DictionaryAttr

    def __init__(self, rule: str, values: dict[str, KnobValue]) -> None:
        super().__init__(StringAttr(rule), _knob_dictionary(values))

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        parser.parse_punctuation("<")
        rule = parser.parse_identifier(context_msg=" (a schedule rule name)")
        values: dict[str, KnobValue] = {}
        while parser.parse_optional_punctuation(",") is not None:
            _parse_knob(parser, values)
        parser.parse_punctuation(">")
        return (StringAttr(rule), _knob_dictionary(values))

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f"<{self.rule.data}")
        _print_knobs(printer, self.knobs, first=False)
        printer.print_string(">")


@irdl_attr_definition
class KnobsAttr(_KnobValues, ParametrizedAttribute):
    """Knob settings for one kernel (`#tile.knobs<bm = 64, mma = "wgmma">`): the tuned knobs
    `apply-tuned` writes; `plan` takes them where its own options leave a knob at its default."""

    name = "tile.knobs"

    knobs: DictionaryAttr

    def __init__(self, values: dict[str, KnobValue]) -> None:
        super().__init__(_knob_dictionary(values))

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        parser.parse_punctuation("<")
        values: dict[str, KnobValue] = {}
        if parser.parse_optional_punctuation(">") is None:
            parser.parse_comma_separated_list(
                parser.Delimiter.NONE, lambda: _parse_knob(parser, values)
            )
            parser.parse_punctuation(">")
        return (_knob_dictionary(values),)

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string("<")
        _print_knobs(printer, self.knobs, first=True)
        printer.print_string(">")


PLAN = "plan"
"""The `loop.kernel` / `tile.kernel` attribute holding its `#tile.plan`."""

REFUSALS = "refusals"
"""The `loop.kernel` attribute `plan{why=1}` adds: each rule tried before the kernel's own and
why it refused the kernel, as `"rule: reason"` strings."""

TUNED = "tuned"
"""The `loop.kernel` attribute holding the `#tile.knobs` that `apply-tuned` found for it."""


def _check_shared_index(op: Operation, buffer: SSAValue, indices: Sequence[SSAValue]) -> None:
    t = buffer.type
    assert isinstance(t, MemRefType)
    if memory_space(t) != SHARED:
        raise VerifyException(f"{op.name}: {t} must be in shared memory")
    _check_indices(op, indices, t)


def _check_barrier(op: Operation, bars: SSAValue, index: SSAValue) -> None:
    t = bars.type
    assert isinstance(t, MemRefType)
    if t.element_type != i64 or t.get_num_dims() != 1:
        raise VerifyException(f"{op.name}: barriers must be a 1-D shared i64 buffer, got {t}")
    _check_shared_index(op, bars, [index])


class _BarrierOp(IRDLOperation):
    """Base of ops on one mbarrier: element `index` of a 1-D shared i64 buffer."""

    bars = operand_def(MemRefType)
    index = operand_def(IndexType)

    def verify_(self) -> None:
        _check_barrier(self, self.bars, self.index)


@irdl_op_definition
class MbarrierInitOp(_BarrierOp):
    """Initializes an mbarrier to expect `count` arrivals per phase (`mbarrier.init`)."""

    name = "tile.mbarrier_init"
    count = prop_def(IntegerAttr)
    assembly_format = "$bars `[` $index `]` `count` $count attr-dict `:` type($bars)"

    def __init__(self, bars: SSAValue, index: SSAValue, count: int) -> None:
        super().__init__(operands=[bars, index], properties={"count": IntegerAttr(count, i64)})


@irdl_op_definition
class MbarrierArriveExpectTxOp(_BarrierOp):
    """Arrives on an mbarrier and adds `bytes` to the transaction count the phase waits for
    (`mbarrier.arrive.expect_tx`): the bytes of the TMA copies that complete on it."""

    name = "tile.mbarrier_arrive_expect_tx"
    bytes = prop_def(IntegerAttr)
    assembly_format = "$bars `[` $index `]` `bytes` $bytes attr-dict `:` type($bars)"

    def __init__(self, bars: SSAValue, index: SSAValue, nbytes: int) -> None:
        super().__init__(operands=[bars, index], properties={"bytes": IntegerAttr(nbytes, i64)})


@irdl_op_definition
class MbarrierArriveOp(_BarrierOp):
    """Arrives on an mbarrier (`mbarrier.arrive`)."""

    name = "tile.mbarrier_arrive"
    assembly_format = "$bars `[` $index `]` attr-dict `:` type($bars)"

    def __init__(self, bars: SSAValue, index: SSAValue) -> None:
        super().__init__(operands=[bars, index])


@irdl_op_definition
class MbarrierArriveClusterOp(IRDLOperation):
    """Arrives on the mbarrier at the same shared-memory offset in the block of cluster rank
    `rank` (`mapa.shared::cluster`, then `mbarrier.arrive.shared::cluster`): this block's own
    for its own rank. The kernel must be launched in clusters and the other block's mbarrier
    initialized before a `tile.cluster_sync` that this thread passed."""

    name = "tile.mbarrier_arrive_cluster"
    bars = operand_def(MemRefType)
    index = operand_def(IndexType)
    rank = operand_def(IndexType)
    assembly_format = "$bars `[` $index `]` `of` $rank attr-dict `:` type($bars)"

    def __init__(self, bars: SSAValue, index: SSAValue, rank: SSAValue) -> None:
        super().__init__(operands=[bars, index, rank])

    def verify_(self) -> None:
        _check_barrier(self, self.bars, self.index)


@irdl_op_definition
class MbarrierWaitOp(IRDLOperation):
    """Waits until the mbarrier phase of parity `parity % 2` has completed (a loop on
    `mbarrier.try_wait.parity`); the phase before a fresh barrier's first counts as complete."""

    name = "tile.mbarrier_wait"
    bars = operand_def(MemRefType)
    index = operand_def(IndexType)
    parity = operand_def(IndexType)
    assembly_format = "$bars `[` $index `]` `,` $parity attr-dict `:` type($bars)"

    def __init__(self, bars: SSAValue, index: SSAValue, parity: SSAValue) -> None:
        super().__init__(operands=[bars, index, parity])

    def verify_(self) -> None:
        _check_barrier(self, self.bars, self.index)


@irdl_op_definition
class ThreadFenceOp(IRDLOperation):
    """Orders this thread's earlier memory accesses before its later ones for every thread of
    the GPU (`__threadfence()`, `fence.acq_rel.gpu`)."""

    name = "tile.threadfence"
    assembly_format = "attr-dict"


class _FlagOp(IRDLOperation):
    """A 32-bit flag in global memory, `flags[index]`, one thread's handshake with other blocks."""

    flags = operand_def(MemRefType)
    index = operand_def(IndexType)
    assembly_format = "$flags `[` $index `]` attr-dict `:` type($flags)"

    def __init__(self, flags: SSAValue, index: SSAValue) -> None:
        super().__init__(operands=[flags, index])

    def verify_(self) -> None:
        t = self.flags.type
        assert isinstance(t, MemRefType)
        if t.element_type != i32 or memory_space(t) != GLOBAL or len(t.get_shape()) != 1:
            raise VerifyException(f"{self.name} takes a 1-D global memref of i32 flags, got {t}")


@irdl_op_definition
class FlagSetOp(_FlagOp):
    """Sets the flag to 1 with release semantics at GPU scope (`st.release.gpu`, docs/ir.md)."""

    name = "tile.flag_set"


@irdl_op_definition
class FlagWaitOp(_FlagOp):
    """Spins until the flag is non-zero, read with acquire semantics (`ld.acquire.gpu`)."""

    name = "tile.flag_wait"


@irdl_op_definition
class FenceProxyAsyncOp(IRDLOperation):
    """Makes this thread's shared-memory writes (mbarrier init included) visible to the async
    proxy: TMA and wgmma (`fence.proxy.async.shared::cta`)."""

    name = "tile.fence_proxy_async"
    assembly_format = "attr-dict"


@irdl_op_definition
class FenceMbarrierInitOp(IRDLOperation):
    """Makes this thread's mbarrier inits visible to the other blocks of the cluster, whose
    arrivals and multicast copies may complete on them after the next `tile.cluster_sync`
    (`fence.mbarrier_init.release.cluster`)."""

    name = "tile.fence_mbarrier_init"
    assembly_format = "attr-dict"


def _tensor_map_of(op: Operation, buffer: SSAValue, what: str) -> TensorMapArg:
    """Returns the tensor map of `buffer`, the `what` of a TMA copy `op`: an argument of the
    enclosing `tile.kernel` listed in its `TENSOR_MAPS` (VerifyException otherwise)."""
    kernel = _enclosing_kernel(op)
    if kernel is None or not isinstance(buffer, BlockArgument):
        raise VerifyException(f"{op.name}: the {what} must be an argument of a tile.kernel")
    for spec in tensor_maps(kernel):
        if spec.arg == buffer.index:
            return spec
    raise VerifyException(
        f"{op.name}: argument {buffer.index} is not passed as a tensor map "
        f"(list it in {TENSOR_MAPS})"
    )


@irdl_op_definition
class TmaLoadOp(IRDLOperation):
    """Copies the tensor-map box whose first element is `src[coords]` into shared memory at
    `dst[indices]` (`cp.async.bulk.tensor`), completing its bytes on mbarrier `bars[bar]`;
    `src` is a tensor-map argument, zeros are read outside it, the map swizzles the box. With
    `evict_first` the copy's L2 lines are the first its cache evicts (an `L2::evict_first`
    cache policy): for data no other block reads again. With `multicast` (a mask of cluster
    ranks) the box lands at the same shared-memory offset in each of those blocks of the
    thread-block cluster and completes its bytes on the mbarrier at the same offset in each
    (`.multicast::cluster`): one read of L2 for several blocks."""

    name = "tile.tma_load"

    src = operand_def(MemRefType)
    coords = var_operand_def(IndexType)
    dst = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    bars = operand_def(MemRefType)
    bar = operand_def(IndexType)
    evict_first = opt_prop_def(UnitAttr)
    multicast = opt_prop_def(IntegerAttr)

    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    assembly_format = (
        "$src `[` $coords `]` `->` $dst `[` $indices `]` `,` $bars `[` $bar `]` "
        "(`evict_first` $evict_first^)? (`multicast` $multicast^)? attr-dict `:` type($src) "
        "`->` type($dst) `,` type($bars)"
    )

    def __init__(
        self,
        src: SSAValue,
        coords: Sequence[SSAValue],
        dst: SSAValue,
        indices: Sequence[SSAValue],
        bars: SSAValue,
        bar: SSAValue,
        evict_first: bool = False,
        multicast: int = 0,
    ) -> None:
        properties: dict[str, Attribute] = {"evict_first": UnitAttr()} if evict_first else {}
        if multicast:
            properties["multicast"] = IntegerAttr(multicast, i64)
        super().__init__(operands=[src, coords, dst, indices, bars, bar], properties=properties)

    @property
    def cta_mask(self) -> int:
        """The cluster ranks whose shared memory the box lands in (`multicast`); 0: this
        block's only."""
        return 0 if self.multicast is None else self.multicast.value.data

    def spec(self) -> TensorMapArg:
        """Returns the tensor map of the source argument (VerifyException when it has none)."""
        return _tensor_map_of(self, self.src, "source")

    def verify_(self) -> None:
        src, dst = _check_global(self, self.src, "source"), self.dst.type
        assert isinstance(dst, MemRefType)
        _check_indices(self, self.coords, src, "coordinates", "tensor")
        if len(self.coords) > 5:
            raise VerifyException("tile.tma_load: tensor maps have at most 5 dimensions")
        if src.element_type != dst.element_type:
            raise VerifyException(
                f"tile.tma_load: element types differ: {src.element_type} -> {dst.element_type}"
            )
        _check_shared_index(self, self.dst, self.indices)
        _check_barrier(self, self.bars, self.bar)
        if self.multicast is not None and not 0 < self.cta_mask < 1 << MAX_CLUSTER:
            raise VerifyException(
                f"tile.tma_load: multicast is a mask of cluster ranks (1 to {MAX_CLUSTER} bits), "
                f"got {self.cta_mask}"
            )
        self.spec()


@irdl_op_definition
class TmaStoreOp(IRDLOperation):
    """Copies a box of shared memory at `src[indices]` to the tensor-map argument `dst` at
    `dst[coords]` (`cp.async.bulk.tensor`, shared to global): the map gives the box and how
    the shared tile is swizzled; elements of the box outside the tensor are not written.

    The copy is asynchronous and reads shared memory after it is issued: the writes it copies
    must be made visible to it first (`tile.fence_proxy_async` by each writing thread, then a
    barrier), it belongs to the next `tile.bulk_commit` group of the issuing thread, and the
    tile may be written again only after a `tile.bulk_wait` with `read` retires that group.
    """

    name = "tile.tma_store"

    src = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    dst = operand_def(MemRefType)
    coords = var_operand_def(IndexType)

    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    assembly_format = (
        "$src `[` $indices `]` `->` $dst `[` $coords `]` attr-dict `:` type($src) `->` type($dst)"
    )

    def __init__(
        self,
        src: SSAValue,
        indices: Sequence[SSAValue],
        dst: SSAValue,
        coords: Sequence[SSAValue],
    ) -> None:
        super().__init__(operands=[src, indices, dst, coords])

    def verify_(self) -> None:
        dst = _check_global(self, self.dst, "destination")
        _check_indices(self, self.coords, dst, "coordinates", "tensor")
        if len(self.coords) > 5:
            raise VerifyException("tile.tma_store: tensor maps have at most 5 dimensions")
        src = self.src.type
        assert isinstance(src, MemRefType)
        if src.element_type != dst.element_type:
            raise VerifyException(
                f"tile.tma_store: element types differ: {src.element_type} -> {dst.element_type}"
            )
        _check_shared_index(self, self.src, self.indices)
        _tensor_map_of(self, self.dst, "destination")


@irdl_op_definition
class BulkCommitOp(IRDLOperation):
    """Closes this thread's pending `tile.tma_store` copies into one bulk async-group
    (`cp.async.bulk.commit_group`)."""

    name = "tile.bulk_commit"
    assembly_format = "attr-dict"


@irdl_op_definition
class BulkWaitOp(IRDLOperation):
    """Waits until none of this thread's committed bulk async-groups is in flight
    (`cp.async.bulk.wait_group 0`); with `read`, only until they have read their shared
    memory (`.read`), which may then be written again."""

    name = "tile.bulk_wait"
    read = opt_prop_def(UnitAttr)
    assembly_format = "(`read` $read^)? attr-dict"

    def __init__(self, read: bool) -> None:
        super().__init__(properties={"read": UnitAttr()} if read else {})


CP_ASYNC_BYTES = (4, 8, 16)
"""The sizes one `cp.async` copies (16 bytes bypass L1: `.cg`; 4 and 8 go through it: `.ca`)."""


@irdl_op_definition
class CpAsyncOp(IRDLOperation):
    """Copies `width` consecutive elements along the last dimension from global `src[src_indices]`
    to shared `dst[dst_indices]` without going through registers (`cp.async`); with `valid`
    false nothing is read and the destination is filled with zeros (source size 0).

    The copy is asynchronous: it belongs to the next `tile.cp_async_commit` group of this
    thread, and its data may be read after a `tile.cp_async_wait` that retires that group
    and a barrier (other threads' copies).
    """

    name = "tile.cp_async"

    src = operand_def(MemRefType)
    src_indices = var_operand_def(IndexType)
    dst = operand_def(MemRefType)
    dst_indices = var_operand_def(IndexType)
    valid = opt_operand_def(IntegerType(1))
    width = prop_def(IntegerAttr)

    irdl_options = (AttrSizedOperandSegments(as_property=True), ParsePropInAttrDict())
    assembly_format = (
        "$src `[` $src_indices `]` `->` $dst `[` $dst_indices `]` (`if` $valid^)? attr-dict "
        "`:` type($src) `->` type($dst)"
    )

    def __init__(
        self,
        src: SSAValue,
        src_indices: Sequence[SSAValue],
        dst: SSAValue,
        dst_indices: Sequence[SSAValue],
        width: int,
        valid: SSAValue | None = None,
    ) -> None:
        super().__init__(
            operands=[src, src_indices, dst, dst_indices, [valid] if valid else []],
            properties={"width": IntegerAttr(width, i64)},
        )

    @property
    def bytes(self) -> int:
        t = self.src.type
        assert isinstance(t, MemRefType)
        return self.width.value.data * _element_bits(t.element_type) // 8

    def verify_(self) -> None:
        src, dst = _check_global(self, self.src, "source"), self.dst.type
        assert isinstance(dst, MemRefType)
        _check_indices(self, self.src_indices, src, of="source")
        _check_shared_index(self, self.dst, self.dst_indices)
        if src.element_type != dst.element_type:
            raise VerifyException(
                f"tile.cp_async: element types differ: {src.element_type} -> {dst.element_type}"
            )
        if self.bytes not in CP_ASYNC_BYTES:
            raise VerifyException(
                f"tile.cp_async: copies 4, 8 or 16 bytes, got {self.width.value.data} "
                f"x {src.element_type}"
            )
        width = self.width.value.data
        for what, t in (("source", src), ("destination", dst)):
            if t.get_shape()[-1] % width:
                raise VerifyException(
                    f"tile.cp_async: the {what}'s last dimension {t.get_shape()[-1]} is not a "
                    f"multiple of the width {width} (copies must be aligned)"
                )


@irdl_op_definition
class PrefetchL2Op(IRDLOperation):
    """Asks L2 to fetch the line holding global `src[indices]` (`prefetch.global.L2`), or with
    `bytes` the contiguous range of that many bytes starting there (`cp.async.bulk.prefetch.L2`,
    sm_90: one instruction the TMA unit carries out; the start and the size 16-byte aligned).
    No data comes back to the thread and no register is written: it costs one issue slot, and
    it is safe before the kernel's `tile.grid_dependency_wait`, L2 being coherent."""

    name = "tile.prefetch_l2"

    src = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    bytes = opt_prop_def(IntegerAttr)

    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$src `[` $indices `]` attr-dict `:` type($src)"

    def __init__(
        self, src: SSAValue, indices: Sequence[SSAValue], bytes: int | None = None
    ) -> None:
        properties = {} if bytes is None else {"bytes": IntegerAttr(bytes, i64)}
        super().__init__(operands=[src, indices], properties=properties)

    def verify_(self) -> None:
        t = _check_global(self, self.src, "buffer")
        _check_indices(self, self.indices, t)
        if self.bytes is not None and (self.bytes.value.data <= 0 or self.bytes.value.data % 16):
            raise VerifyException(
                f"tile.prefetch_l2: bytes must be a positive multiple of 16, "
                f"got {self.bytes.value.data}"
            )


@irdl_op_definition
class GridDependencyWaitOp(IRDLOperation):
    """Where a kernel launched with programmatic dependent launch (`to-cuda{pdl=1}`) waits for
    the kernel before it to finish and its writes to be visible (`griddepcontrol.wait`), then
    lets the next kernel launch. Only index arithmetic and `tile.prefetch_l2` may come before
    it (the printer checks); it sits in the kernel's body, not in a loop or a branch. A kernel
    without one waits at its first statement; printed without `pdl` it is nothing."""

    name = "tile.grid_dependency_wait"

    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "attr-dict"

    def verify_(self) -> None:
        if not isinstance(self.parent_op(), KernelOp):
            raise VerifyException(
                "tile.grid_dependency_wait must be in the body of its tile.kernel, "
                "not nested in another op"
            )


@irdl_op_definition
class CpAsyncCommitOp(IRDLOperation):
    """Closes this thread's pending `tile.cp_async` copies into one group (`commit_group`)."""

    name = "tile.cp_async_commit"
    assembly_format = "attr-dict"


@irdl_op_definition
class CpAsyncWaitOp(IRDLOperation):
    """Waits until at most `pending` of this thread's committed groups are still in flight
    (`cp.async.wait_group`)."""

    name = "tile.cp_async_wait"
    pending = prop_def(IntegerAttr)
    assembly_format = "$pending attr-dict"

    def __init__(self, pending: int) -> None:
        super().__init__(properties={"pending": IntegerAttr(pending, i64)})

    def verify_(self) -> None:
        if not 0 <= self.pending.value.data <= 7:
            raise VerifyException(
                f"tile.cp_async_wait: pending must be in [0, 7], got {self.pending.value.data}"
            )


WGMMA_M, WGMMA_K = 64, 16
"""A 16-bit `wgmma.mma_async` is m64nNk16: 64 rows per warpgroup, K steps of 16."""

WGMMA_K_TF32 = 8
"""A TF32 `wgmma.mma_async` (f32 operands in shared memory read as TF32) is m64nNk8."""


WGMMA_K_FP8 = 32
"""K per `tile.wgmma` of 8-bit float operands (32 bytes of K, as for every operand type)."""


def wgmma_k(element: Attribute) -> int:
    """K per `tile.wgmma` of operands of `element`: 16 for f16/bf16, 8 for f32 (TF32), 32 for
    8-bit floats."""
    if isinstance(element, Float8E4M3FNType | Float8E5M2Type):
        return WGMMA_K_FP8
    return WGMMA_K_TF32 if element == f32 else WGMMA_K


WGMMA_N = (8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256)
"""The N sizes the rule may use (multiples of 8 up to 256; of 16 from 128 on, as for .f32)."""


@irdl_op_definition
class WgmmaOp(IRDLOperation):
    """One warpgroup-wide `wgmma.mma_async.m64nNk16` with fp32 accumulators: acc += A·B;
    with f32 operands `m64nNk8` reading them as TF32 (B K-major only), K-steps of 8.

    A (64×16) starts at `a[a_indices]`, B (16×N) at `b[b_indices]`, both in 128-byte
    swizzled shared memory described by matrix descriptors. A is K-major (`a_mn_major`
    absent: `a_sbo` is the byte distance between its 8-row groups) or, of 16-bit types,
    M-major (`a_mn_major`: its 64 rows one 128-byte swizzle row of each K, `a_sbo` between
    8-row groups of K, `a_lbo` between 64-row chunks of M); B is K-major (`b_mn_major`
    absent: `b_sbo` between 8-row groups of N) or N-major (`b_mn_major`: `b_lbo` between
    64-column chunks of N, `b_sbo` between 8-row groups of K). `acc` holds the N/2 fp32
    accumulators of each thread in the PTX layout: element r of thread t is row
    16(t/32 % 4) + t%32/4 + 8(r/2 % 2), column 8(r/4) + 2(t%4) + r%2. The op is
    asynchronous: see `tile.wgmma_commit` / `wgmma_wait`.
    """

    name = "tile.wgmma"

    acc = operand_def(MemRefType)
    a = operand_def(MemRefType)
    a_indices = var_operand_def(IndexType)
    b = operand_def(MemRefType)
    b_indices = var_operand_def(IndexType)
    n = prop_def(IntegerAttr)
    a_sbo = prop_def(IntegerAttr)
    b_lbo = prop_def(IntegerAttr)
    b_sbo = prop_def(IntegerAttr)
    b_mn_major = opt_prop_def(UnitAttr)
    a_mn_major = opt_prop_def(UnitAttr)
    a_lbo = opt_prop_def(IntegerAttr)
    """With `a_mn_major`: the byte distance between A's 64-row chunks of M."""
    overwrite = opt_prop_def(UnitAttr)
    """acc = A·B (wgmma's scale-d 0) instead of acc += A·B."""

    irdl_options = (AttrSizedOperandSegments(as_property=True), ParsePropInAttrDict())
    assembly_format = (
        "$acc `,` $a `[` $a_indices `]` (`a_mn_major` $a_mn_major^)? `,` $b `[` $b_indices `]` "
        "(`mn_major` $b_mn_major^)? (`overwrite` $overwrite^)? attr-dict `:` type($acc) `,` "
        "type($a) `,` type($b)"
    )

    def __init__(
        self,
        acc: SSAValue,
        a: SSAValue,
        a_indices: Sequence[SSAValue],
        b: SSAValue,
        b_indices: Sequence[SSAValue],
        n: int,
        a_sbo: int,
        b_lbo: int,
        b_sbo: int,
        b_mn_major: bool,
        overwrite: bool = False,
        a_lbo: int | None = None,
    ) -> None:
        """`a_lbo` given: A is M-major, its 64-row chunks of M that many bytes apart."""
        props = _wgmma_properties(b_mn_major, n=n, a_sbo=a_sbo, b_lbo=b_lbo, b_sbo=b_sbo)
        props["overwrite"] = UnitAttr() if overwrite else None
        if a_lbo is not None:
            props["a_mn_major"] = UnitAttr()
            props["a_lbo"] = IntegerAttr(a_lbo, i64)
        super().__init__(operands=[acc, a, a_indices, b, b_indices], properties=props)

    @property
    def element(self) -> Attribute:
        t = self.a.type
        assert isinstance(t, MemRefType)
        return t.element_type

    def verify_(self) -> None:
        _check_wgmma(self, ("a_sbo", "b_lbo", "b_sbo"))
        _check_shared_index(self, self.a, self.a_indices)
        b = self.b.type
        assert isinstance(b, MemRefType)
        types = Float16Type | BFloat16Type | Float32Type | Float8E4M3FNType | Float8E5M2Type
        if not isinstance(self.element, types) or b.element_type != self.element:
            raise VerifyException(
                f"tile.wgmma: A and B must both hold f16, both bf16, both f32 (read as TF32), "
                f"both f8E4M3FN or both f8E5M2, got {self.element} and {b.element_type}"
            )
        if self.element.bitwidth in (8, 32) and self.b_mn_major is not None:  # type: ignore[attr-defined]
            raise VerifyException(
                f"tile.wgmma: a product of {self.element} operands takes B K-major only"
            )
        if (self.a_mn_major is None) != (self.a_lbo is None):
            raise VerifyException("tile.wgmma: an M-major A (a_mn_major) needs a_lbo, and only it")
        if self.a_mn_major is not None:
            if self.element.bitwidth != 16:  # type: ignore[attr-defined]
                raise VerifyException(
                    f"tile.wgmma: a product of {self.element} operands takes A K-major only"
                )
            _check_wgmma(self, ("a_lbo",))


def _wgmma_properties(b_mn_major: bool, **sizes: int) -> dict[str, Attribute | None]:
    """The properties of `tile.wgmma` / `tile.wgmma_reg_a`: `sizes` in order, then `b_mn_major`."""
    props: dict[str, Attribute | None] = {k: IntegerAttr(v, i64) for k, v in sizes.items()}
    return props | {"b_mn_major": UnitAttr() if b_mn_major else None}


def _check_wgmma(op: WgmmaOp | WgmmaRegisterAOp, offsets: Sequence[str]) -> None:
    """Checks what `tile.wgmma` and `tile.wgmma_reg_a` share: N, the accumulators, B's index
    and the descriptors' byte offsets."""
    acc = op.acc.type
    assert isinstance(acc, MemRefType)
    n = op.n.value.data
    if n not in WGMMA_N:
        raise VerifyException(f"{op.name}: N must be one of {WGMMA_N}, got {n}")
    if memory_space(acc) != REGISTERS or acc.element_type != f32:
        raise VerifyException(f"{op.name}: the accumulator must be f32 registers, got {acc}")
    if acc.get_shape() != (n // 2,):
        raise VerifyException(
            f"{op.name}: m64n{n} needs {n // 2} accumulators per thread, got {acc}"
        )
    _check_shared_index(op, op.b, op.b_indices)
    for what in offsets:
        value = getattr(op, what).value.data
        if value <= 0 or value % 16 or value >= 1 << 18:
            raise VerifyException(
                f"{op.name}: {what} must be a positive multiple of 16 below 2^18, got {value}"
            )


@irdl_op_definition
class WgmmaRegisterAOp(IRDLOperation):
    """`wgmma.mma_async.m64nNk16` with A in registers: acc += A·B (`overwrite`: acc = A·B).

    Each thread gives A as four i32 registers of two packed f16/bf16 values (`tile.pack`) in
    the `mma.sync` m16n8k16 A-fragment layout of its warp's 16 rows (warp w of the warpgroup
    holds rows 16w..16w+15): register 0 row lane/4, columns 2(lane%4) (+1); register 1 eight
    rows down; registers 2 and 3 the same eight columns on. So an m64nN accumulator of
    `tile.wgmma`, rounded and packed pairwise, is the A operand of the next product (flash
    attention's P·V). With an f32 B the product is TF32 `m64nNk8` (B K-major): each register
    holds one TF32 value's bits, register 0 at row lane/4, K lane%4, register 1 eight rows
    down, registers 2 and 3 four K on (the 3xTF32 GEMM's weights, `wgmma_tf32_split.py`).
    B and `acc` are as in `tile.wgmma`.
    """

    name = "tile.wgmma_reg_a"

    acc = operand_def(MemRefType)
    a = var_operand_def(i32)
    b = operand_def(MemRefType)
    b_indices = var_operand_def(IndexType)
    n = prop_def(IntegerAttr)
    b_lbo = prop_def(IntegerAttr)
    b_sbo = prop_def(IntegerAttr)
    b_mn_major = opt_prop_def(UnitAttr)
    overwrite = opt_prop_def(UnitAttr)
    """acc = A·B (wgmma's scale-d 0) instead of acc += A·B."""

    irdl_options = (AttrSizedOperandSegments(as_property=True), ParsePropInAttrDict())
    assembly_format = (
        "$acc `,` `{` $a `}` `,` $b `[` $b_indices `]` (`mn_major` $b_mn_major^)? "
        "(`overwrite` $overwrite^)? attr-dict `:` type($acc) `,` type($b)"
    )

    def __init__(
        self,
        acc: SSAValue,
        a: Sequence[SSAValue],
        b: SSAValue,
        b_indices: Sequence[SSAValue],
        n: int,
        b_lbo: int,
        b_sbo: int,
        b_mn_major: bool,
        overwrite: bool = False,
    ) -> None:
        props = _wgmma_properties(b_mn_major, n=n, b_lbo=b_lbo, b_sbo=b_sbo)
        props["overwrite"] = UnitAttr() if overwrite else None
        super().__init__(operands=[acc, a, b, b_indices], properties=props)

    @property
    def element(self) -> Attribute:
        t = self.b.type
        assert isinstance(t, MemRefType)
        return t.element_type

    def verify_(self) -> None:
        _check_wgmma(self, ("b_lbo", "b_sbo"))
        if len(self.a) != 4:
            raise VerifyException(
                f"tile.wgmma_reg_a: A is 4 packed registers per thread, got {len(self.a)}"
            )
        if not isinstance(self.element, Float16Type | BFloat16Type | Float32Type):
            raise VerifyException(
                f"tile.wgmma_reg_a: B must hold f16, bf16 or f32 (TF32), got {self.element}"
            )
        if self.element == f32 and self.b_mn_major is not None:
            raise VerifyException("tile.wgmma_reg_a: a TF32 product takes B K-major only")


@irdl_op_definition
class WgmmaFenceOp(IRDLOperation):
    """Orders register accesses before the warpgroup's next wgmma (`wgmma.fence`)."""

    name = "tile.wgmma_fence"
    assembly_format = "attr-dict"


@irdl_op_definition
class WgmmaCommitOp(IRDLOperation):
    """Commits the warpgroup's issued wgmma ops as one group (`wgmma.commit_group`)."""

    name = "tile.wgmma_commit"
    assembly_format = "attr-dict"


@irdl_op_definition
class WgmmaWaitOp(IRDLOperation):
    """Waits until at most `pending` committed wgmma groups are in flight (`wgmma.wait_group`)."""

    name = "tile.wgmma_wait"
    pending = prop_def(IntegerAttr)
    assembly_format = "$pending attr-dict"

    def __init__(self, pending: int) -> None:
        super().__init__(properties={"pending": IntegerAttr(pending, i64)})


@irdl_op_definition
class SetMaxNRegOp(IRDLOperation):
    """Raises (`inc`) or lowers the warpgroup's register budget to `count` (`setmaxnreg`)."""

    name = "tile.setmaxnreg"
    count = prop_def(IntegerAttr)
    inc = opt_prop_def(UnitAttr)
    assembly_format = "(`inc` $inc^)? $count attr-dict"

    def __init__(self, count: int, inc: bool) -> None:
        super().__init__(
            properties={"count": IntegerAttr(count, i64), "inc": UnitAttr() if inc else None}
        )

    def verify_(self) -> None:
        count = self.count.value.data
        if not 24 <= count <= 256 or count % 8:
            raise VerifyException(
                f"tile.setmaxnreg: count must be a multiple of 8 in [24, 256], got {count}"
            )


Tile = Dialect(
    "tile",
    [
        KernelOp,
        ClusterVectorLoadOp,
        ClusterSyncOp,
        BlockIdOp,
        ThreadIdOp,
        WarpUniformOp,
        AllocOp,
        BarrierOp,
        WarpBarrierOp,
        NamedBarrierOp,
        NamedBarrierAnyOp,
        VectorLoadOp,
        VectorStoreOp,
        WarpReduceOp,
        BlockReduceOp,
        YieldOp,
        CudaKernelOp,
        LdMatrixOp,
        MmaSyncOp,
        PackOp,
        ToTf32Op,
        VectorAtomicAddOp,
        MbarrierInitOp,
        MbarrierArriveExpectTxOp,
        MbarrierArriveOp,
        MbarrierArriveClusterOp,
        MbarrierWaitOp,
        FenceProxyAsyncOp,
        FenceMbarrierInitOp,
        ThreadFenceOp,
        FlagSetOp,
        FlagWaitOp,
        TmaLoadOp,
        TmaStoreOp,
        BulkCommitOp,
        BulkWaitOp,
        CpAsyncOp,
        PrefetchL2Op,
        GridDependencyWaitOp,
        CpAsyncCommitOp,
        CpAsyncWaitOp,
        WgmmaOp,
        WgmmaRegisterAOp,
        WgmmaFenceOp,
        WgmmaCommitOp,
        WgmmaWaitOp,
        SetMaxNRegOp,
    ],
    [PlanAttr, KnobsAttr],
)
