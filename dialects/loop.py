"""The loop dialect: one `loop.kernel` per future GPU kernel, over memref buffers (docs/ir.md)."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    DenseArrayBase,
    FunctionType,
    IndexType,
    MemRefType,
    StringAttr,
    SymbolNameConstraint,
    SymbolRefAttr,
    IntegerType,
    i32,
    i64,
)
from xdsl.dialects.utils import AbstractYieldOperation
from xdsl.ir import Attribute, Block, Dialect, Operation, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    base,
    irdl_op_definition,
    prop_def,
    region_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import (
    HasParent,
    IsolatedFromAbove,
    IsTerminator,
    NoTerminator,
    RecursiveMemoryEffect,
    SymbolOpInterface,
    SymbolTable,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException


SCALAR_TYPES = (i32, i64)
"""Types of the runtime scalars kernels take by value (docs/ir.md)."""


def parse_int64(parser: Parser, what: str) -> int:
    """Parses an integer that the IR holds as an i64 (an extent, a launch size, a knob value),
    raising at it where it is outside [-2^63, 2^63 - 1] (xDSL's i64 attribute raised a Python
    ValueError beyond 64 bits and wrapped 2^63 to 2^64 - 1 into negatives)."""
    start = parser.pos
    value = parser.parse_integer(allow_boolean=False, context_msg=f" ({what})")
    if not -(2**63) <= value < 2**63:
        parser.raise_error(
            f"{what} {value} is out of range: it must fit a 64-bit signed integer",
            start,
            parser.pos,
        )
    return value


def _bounds(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, list(values))


def _print_index_space(printer: Printer, block: Block, extents: Sequence[int]) -> None:
    printer.print_string(" (")
    printer.print_list(block.args, lambda a: printer.print_block_argument(a, print_type=False))
    printer.print_string(") in [" + ", ".join(str(e) for e in extents) + "]")


def _parse_index_space(parser: Parser) -> tuple[list[Parser.Argument], list[int]]:
    names = parser.parse_comma_separated_list(
        parser.Delimiter.PAREN, lambda: parser.parse_argument(expect_type=False)
    )
    parser.parse_keyword("in")
    extents = parser.parse_comma_separated_list(
        parser.Delimiter.SQUARE, lambda: parse_int64(parser, "an extent")
    )
    if len(extents) != len(names):
        parser.raise_error(f"{len(names)} index variables but {len(extents)} extents")
    return [n.resolve(IndexType()) for n in names], extents


def print_signature_and_body(printer: Printer, op: Operation) -> None:
    """Prints `(%a: type, ...) attributes {...} { body }` for a kernel-like symbol op."""
    region = op.regions[0]
    printer.print_string("(")
    printer.print_list(region.block.args, printer.print_block_argument)
    printer.print_string(")")
    printer.print_op_attributes({k: v for k, v in op.attributes.items()}, print_keyword=True)
    printer.print_string(" ")
    printer.print_region(region, print_entry_block_args=False)


def format_types(types: Sequence[Attribute]) -> str:
    """Formats a list of types as MLIR writes them, e.g. `[f32, index]`."""
    return "[" + ", ".join(str(t) for t in types) + "]"


def _check_bounds(op: Operation, bounds: DenseArrayBase, block: Block) -> None:
    extents = bounds.get_values()
    if not extents:
        raise VerifyException(f"{op.name} needs at least one dimension")
    if any(e <= 0 for e in extents):
        raise VerifyException(f"{op.name} extents must be positive, got {list(extents)}")
    if len(block.args) != len(extents):
        raise VerifyException(
            f"{op.name} has {len(extents)} dimensions but its body has "
            f"{len(block.args)} index arguments"
        )
    if any(not isinstance(a.type, IndexType) for a in block.args):
        raise VerifyException(f"{op.name} body arguments must all be of type index")


@irdl_op_definition
class KernelOp(IRDLOperation):
    """A future GPU kernel: a symbol whose body block arguments are its memref buffers."""

    name = "loop.kernel"

    sym_name = prop_def(SymbolNameConstraint())
    body = region_def("single_block")

    traits = traits_def(SymbolOpInterface(), IsolatedFromAbove(), NoTerminator())

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        print_signature_and_body(printer, self)

    @classmethod
    def parse(cls, parser: Parser) -> KernelOp:
        name = parser.parse_symbol_name().data
        args = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_argument)
        attrs = parser.parse_optional_attr_dict_with_keyword()
        op = cls(name, [], parser.parse_region(args))
        if attrs:
            op.attributes |= attrs.data
        return op

    def __init__(self, name: str, arg_types: Sequence[Attribute], body: Region | None = None):
        super().__init__(
            properties={"sym_name": StringAttr(name)},
            regions=[body or Region(Block(arg_types=arg_types))],
        )

    @property
    def function_type(self) -> FunctionType:
        return FunctionType.from_lists([a.type for a in self.body.block.args], [])

    def verify_(self) -> None:
        from tinyopt.dialects.access_range import out_of_range

        for arg in self.body.block.args:
            if not isinstance(arg.type, MemRefType) and arg.type not in SCALAR_TYPES:
                raise VerifyException(
                    f"loop.kernel @{self.sym_name.data}: arguments must be memrefs (buffers) "
                    f"or i32/i64 (runtime scalars, passed by value), got {arg.type}"
                )
        if (problem := out_of_range(self)) is not None:
            raise VerifyException(f"loop.kernel @{self.sym_name.data}: {problem}")


@irdl_op_definition
class LaunchOp(IRDLOperation):
    """Runs a kernel (`loop.kernel`, `tile.kernel` or `tile.cuda_kernel`) on host buffers and
    runtime scalars."""

    name = "loop.launch"

    callee = prop_def(SymbolRefAttr)
    args = var_operand_def(base(MemRefType) | base(IntegerType))

    assembly_format = "$callee `(` $args `)` attr-dict `:` type($args)"

    def __init__(self, callee: str, args: Sequence[SSAValue | Operation]):
        super().__init__(properties={"callee": SymbolRefAttr(callee)}, operands=[args])

    def verify_(self) -> None:
        name = self.callee.string_value()
        kernel = SymbolTable.lookup_symbol(self, self.callee)
        if kernel is None or not kernel.name.endswith("kernel"):
            raise VerifyException(f"loop.launch: @{name} is no kernel of this module")
        if kernel.regions and kernel.regions[0].blocks:  # loop.kernel, tile.kernel
            wanted = [a.type for a in kernel.regions[0].block.args]
            given = [a.type for a in self.args]
            if given != wanted:
                raise VerifyException(
                    f"loop.launch: @{name} takes ({format_types(wanted)[1:-1]}), "
                    f"got ({format_types(given)[1:-1]})"
                )


@irdl_op_definition
class ParallelOp(IRDLOperation):
    """A loop nest whose iterations are independent; block arguments are the index variables."""

    name = "loop.parallel"

    bounds = prop_def(DenseArrayBase)
    body = region_def("single_block")

    traits = traits_def(RecursiveMemoryEffect(), NoTerminator())

    def print(self, printer: Printer) -> None:
        _print_index_space(printer, self.body.block, self.extents)
        printer.print_op_attributes(self.attributes, print_keyword=True)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False)

    @classmethod
    def parse(cls, parser: Parser) -> ParallelOp:
        ivs, extents = _parse_index_space(parser)
        attrs = parser.parse_optional_attr_dict_with_keyword()
        op = cls(extents, parser.parse_region(ivs))
        if attrs:
            op.attributes |= attrs.data
        return op

    def __init__(self, bounds: Sequence[int], body: Region | None = None):
        super().__init__(
            properties={"bounds": _bounds(bounds)},
            regions=[body or Region(Block(arg_types=[IndexType()] * len(bounds)))],
        )

    @property
    def extents(self) -> tuple[int, ...]:
        return tuple(self.bounds.get_values())

    def verify_(self) -> None:
        _check_bounds(self, self.bounds, self.body.block)


@irdl_op_definition
class ReduceOp(IRDLOperation):
    """A reduction over an index space with a monoid state: identity `init`, region `combine`."""

    name = "loop.reduce"

    bounds = prop_def(DenseArrayBase)
    init = var_operand_def()
    res = var_result_def()
    body = region_def("single_block")
    combine = region_def("single_block")

    traits = traits_def(RecursiveMemoryEffect())

    def print(self, printer: Printer) -> None:
        _print_index_space(printer, self.body.block, self.extents)
        printer.print_string(" init(")
        printer.print_list(self.init, printer.print_ssa_value)
        printer.print_string(" : ")
        printer.print_list(self.init.types, printer.print_attribute)
        printer.print_string(")")
        printer.print_op_attributes(self.attributes, print_keyword=True)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False)
        printer.print_string(" combine(")
        printer.print_list(
            self.combine.block.args, lambda a: printer.print_block_argument(a, print_type=False)
        )
        printer.print_string(") ")
        printer.print_region(self.combine, print_entry_block_args=False)

    @classmethod
    def parse(cls, parser: Parser) -> ReduceOp:
        ivs, extents = _parse_index_space(parser)
        parser.parse_keyword("init")
        parser.parse_punctuation("(")
        init = parser.parse_comma_separated_list(
            parser.Delimiter.NONE, parser.parse_unresolved_operand
        )
        parser.parse_punctuation(":")
        types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
        parser.parse_punctuation(")")
        if len(types) != len(init):
            parser.raise_error(f"loop.reduce has {len(init)} init values but {len(types)} types")
        init_values = [parser.resolve_operand(v, t) for v, t in zip(init, types)]
        attrs = parser.parse_optional_attr_dict_with_keyword()
        body = parser.parse_region(ivs)
        parser.parse_keyword("combine")
        names = parser.parse_comma_separated_list(
            parser.Delimiter.PAREN, lambda: parser.parse_argument(expect_type=False)
        )
        if len(names) != 2 * len(types):
            parser.raise_error(
                f"loop.reduce combine takes two states: {2 * len(types)} arguments, "
                f"got {len(names)}"
            )
        combine = parser.parse_region([n.resolve(t) for n, t in zip(names, types * 2)])
        op = cls(extents, init_values, body, combine)
        if attrs:
            op.attributes |= attrs.data
        return op

    def __init__(
        self,
        bounds: Sequence[int],
        init: Sequence[SSAValue | Operation],
        body: Region | None = None,
        combine: Region | None = None,
    ):
        state_types = [SSAValue.get(v).type for v in init]
        super().__init__(
            properties={"bounds": _bounds(bounds)},
            operands=[init],
            result_types=[state_types],
            regions=[
                body or Region(Block(arg_types=[IndexType()] * len(bounds))),
                combine or Region(Block(arg_types=state_types * 2)),
            ],
        )

    @property
    def extents(self) -> tuple[int, ...]:
        return tuple(self.bounds.get_values())

    def verify_(self) -> None:
        _check_bounds(self, self.bounds, self.body.block)
        state = [v.type for v in self.init]
        if [r.type for r in self.res] != state:
            raise VerifyException(
                f"loop.reduce results must have the types of its init values "
                f"{format_types(state)}, got {format_types([r.type for r in self.res])}"
            )
        comb_args = [a.type for a in self.combine.block.args]
        if comb_args != state * 2:
            raise VerifyException(
                f"loop.reduce combine region must take two states ({len(state) * 2} arguments "
                f"of types {format_types(state * 2)}), got {format_types(comb_args)}"
            )
        for region, what in ((self.body, "body"), (self.combine, "combine")):
            last = region.block.last_op
            if not isinstance(last, YieldOp):
                raise VerifyException(f"loop.reduce {what} must end with loop.yield")
            if [v.type for v in last.arguments] != state:
                raise VerifyException(
                    f"loop.reduce {what} must yield one state of types {format_types(state)}, "
                    f"got {format_types([v.type for v in last.arguments])}"
                )


@irdl_op_definition
class YieldOp(AbstractYieldOperation[Attribute]):
    """Ends a `loop.reduce` body (one mapped element) or combine region (a combined state)."""

    name = "loop.yield"
    traits = traits_def(IsTerminator(), HasParent(ReduceOp))


def kernels(module: Operation) -> list[KernelOp]:
    """Returns the loop kernels at the top level of a module."""
    return [op for op in module.regions[0].block.ops if isinstance(op, KernelOp)]


Loop = Dialect("loop", [KernelOp, LaunchOp, ParallelOp, ReduceOp, YieldOp], [])
