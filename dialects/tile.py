"""The tile dialect: a loop kernel mapped onto the GPU's grid, blocks, warps and threads.

Control flow inside a `tile.kernel` is `scf.for` / `scf.if`; scalar code is `arith` / `math`;
buffer accesses are `memref.load` / `memref.store` on the kernel's global buffers (memory
space 0), on `tile.alloc`ed shared memory (space 3) or on register arrays (space 5). The ops
here add what a GPU schedule needs beyond that: hardware indices, barriers, vector accesses and
cross-thread reductions that carry the combine region (the monoid) they apply.
After `to-cuda`, each kernel is a `tile.cuda_kernel` holding its CUDA C source.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    BFloat16Type,
    DenseArrayBase,
    Float16Type,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    StringAttr,
    SymbolNameConstraint,
    UnitAttr,
    f32,
    i32,
    i64,
)
from xdsl.dialects.utils import AbstractYieldOperation
from xdsl.ir import Attribute, Block, Dialect, Operation, Region, SSAValue, TypeAttribute
from xdsl.irdl import (
    AttrSizedOperandSegments,
    ParsePropInAttrDict,
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser
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

from tinyopt.dialects.loop import format_types, print_signature_and_body

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
    body = region_def("single_block")

    traits = traits_def(SymbolOpInterface(), IsolatedFromAbove(), NoTerminator())

    def __init__(self, name: str, grid: Sequence[int], block: Sequence[int], body: Region) -> None:
        super().__init__(
            properties={
                "sym_name": StringAttr(name),
                "grid": _triple(grid),
                "block": _triple(block),
            },
            regions=[body],
        )

    @property
    def grid_size(self) -> tuple[int, ...]:
        return tuple(self.grid.get_values())

    @property
    def block_size(self) -> tuple[int, ...]:
        return tuple(self.block.get_values())

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        printer.print_string(f" grid {list(self.grid_size)} block {list(self.block_size)} ")
        print_signature_and_body(printer, self)

    @classmethod
    def parse(cls, parser: Parser) -> KernelOp:
        name = parser.parse_symbol_name().data
        parser.parse_keyword("grid")
        grid = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_integer)
        parser.parse_keyword("block")
        block = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_integer)
        args = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_argument)
        attrs = parser.parse_optional_attr_dict_with_keyword()
        op = cls(name, grid, block, parser.parse_region(args))
        if attrs:
            op.attributes |= attrs.data
        return op

    def verify_(self) -> None:
        where = f"tile.kernel @{self.sym_name.data}"
        for what, values in (("grid", self.grid_size), ("block", self.block_size)):
            if len(values) != 3 or any(v <= 0 for v in values):
                raise VerifyException(f"{where}: {what} must be 3 positive sizes, got {values}")
        threads = self.block_size[0] * self.block_size[1] * self.block_size[2]
        if threads > 1024:
            raise VerifyException(f"{where}: {threads} threads per block exceed the limit 1024")
        for arg in self.body.block.args:
            if not isinstance(arg.type, MemRefType) or memory_space(arg.type) != GLOBAL:
                raise VerifyException(f"{where}: arguments must be global memrefs, got {arg.type}")


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
class AllocOp(IRDLOperation):
    """A shared-memory buffer (space 3) for the block or a register array (space 5) per thread."""

    name = "tile.alloc"

    result = result_def(MemRefType)
    assembly_format = "attr-dict `:` type($result)"

    def __init__(self, t: MemRefType) -> None:
        super().__init__(result_types=[t])

    def verify_(self) -> None:
        t = self.result.type
        assert isinstance(t, MemRefType)
        if memory_space(t) not in (SHARED, REGISTERS):
            raise VerifyException(
                f"tile.alloc: memory space must be 3 (shared) or 5 (registers), got {t}"
            )


@irdl_op_definition
class BarrierOp(IRDLOperation):
    """Waits until every thread of the block arrives; orders shared-memory accesses."""

    name = "tile.barrier"
    assembly_format = "attr-dict"


@irdl_op_definition
class VectorLoadOp(IRDLOperation):
    """Loads `n` consecutive elements along the last dimension in one aligned access."""

    name = "tile.vload"

    memref = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    lanes = var_result_def()

    assembly_format = "$memref `[` $indices `]` attr-dict `:` type($memref) `->` type($lanes)"

    def __init__(self, memref: SSAValue, indices: Sequence[SSAValue], width: int) -> None:
        t = memref.type
        assert isinstance(t, MemRefType)
        super().__init__(operands=[memref, indices], result_types=[[t.element_type] * width])

    def verify_(self) -> None:
        _check_vector_access(self, self.memref, self.indices, [r.type for r in self.lanes])


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
    if len(indices) != t.get_num_dims():
        raise VerifyException(
            f"{op.name}: {len(indices)} indices for a rank-{t.get_num_dims()} buffer"
        )
    bits = width * _element_bits(t.element_type)
    if bits > 128:
        raise VerifyException(f"{op.name}: {bits}-bit access is wider than 128 bits")
    if t.get_shape()[-1] % width:
        raise VerifyException(
            f"{op.name}: last dimension {t.get_shape()[-1]} is not a multiple of the width {width}"
        )


def _element_bits(t: Attribute) -> int:
    width = getattr(t, "bitwidth", None)
    if isinstance(t, IntegerType):
        return t.width.data
    if isinstance(width, int):
        return width
    raise VerifyException(f"unsupported element type {t}")


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
    """Combines the state of each lane of a warp (or `width`-lane group) by XOR shuffles.

    Every lane receives the combined state.
    """

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
    """Combines the state of every thread of the block (warp shuffles, then shared memory).

    Every thread receives the combined state.
    """

    name = "tile.block_reduce"


@irdl_op_definition
class YieldOp(AbstractYieldOperation[Attribute]):
    """Ends the combine region of a cross-thread reduction."""

    name = "tile.yield"
    traits = traits_def(IsTerminator(), HasParent(WarpReduceOp, BlockReduceOp))


@irdl_op_definition
class CudaKernelOp(IRDLOperation):
    """One kernel printed as CUDA C: its translation unit and its launch shape."""

    name = "tile.cuda_kernel"

    sym_name = prop_def(SymbolNameConstraint())
    grid = prop_def(DenseArrayBase)
    block = prop_def(DenseArrayBase)
    smem = prop_def(IntegerAttr)
    source = prop_def(StringAttr)

    traits = traits_def(SymbolOpInterface())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$sym_name attr-dict"

    def __init__(
        self, name: str, grid: Sequence[int], block: Sequence[int], smem: int, source: str
    ) -> None:
        super().__init__(
            properties={
                "sym_name": StringAttr(name),
                "grid": _triple(grid),
                "block": _triple(block),
                "smem": IntegerAttr(smem, i64),
                "source": StringAttr(source),
            }
        )


LDMATRIX_REGISTERS = 4
"""`tile.ldmatrix` loads four 8×8 b16 matrices (`.x4`): one 32-bit register of each per lane."""

MMA_A, MMA_B, MMA_C = 4, 2, 4
"""Registers per lane of an m16n8k16 `mma.sync`: A (b16 pairs), B (b16 pairs), C/D (f32)."""


@irdl_op_definition
class LdMatrixOp(IRDLOperation):
    """Loads four 8×8 matrices of 16-bit elements from shared memory across a warp (`ldmatrix`).

    Each lane gives the address of one matrix row (lanes 0-7 the rows of matrix 0, 8-15 of
    matrix 1, ...): the element at `indices`, which starts 8 consecutive elements (16 bytes).
    Result r of lane l holds row l/4, columns 2(l%4) and 2(l%4)+1 of matrix r, packed low
    first; with `trans`, those of the transposed matrix (a column-major load).
    """

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
        if len(self.indices) != t.get_num_dims():
            raise VerifyException(
                f"tile.ldmatrix: {len(self.indices)} indices for a rank-{t.get_num_dims()} buffer"
            )
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
    """One warp-wide m16n8k16 tensor-core product `D = A·B + C` (`mma.sync`, A row, B col).

    Each lane holds 4 i32 of A and 2 i32 of B (pairs of `element`, as `tile.ldmatrix` loads
    them) and 4 f32 of C; D has C's layout: rows l/4 and l/4+8, columns 2(l%4) and 2(l%4)+1.
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
        if not isinstance(self.element, Float16Type | BFloat16Type):
            raise VerifyException(
                f"tile.mma_sync: element type must be f16 or bf16, got {self.element}"
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


def new_block_region(arg_types: Sequence[Attribute]) -> Region:
    """Returns a region with one empty block taking arguments of the given types."""
    return Region(Block(arg_types=arg_types))


Tile = Dialect(
    "tile",
    [
        KernelOp,
        BlockIdOp,
        ThreadIdOp,
        AllocOp,
        BarrierOp,
        VectorLoadOp,
        VectorStoreOp,
        WarpReduceOp,
        BlockReduceOp,
        YieldOp,
        CudaKernelOp,
        LdMatrixOp,
        MmaSyncOp,
    ],
    [],
)
