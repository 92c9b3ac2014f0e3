"""Capture a `torch.nn.Module` into a graph-dialect `func.func` (needs the `torch` extra).

README.md ("From PyTorch") lists the ops covered. `torch.export.export` is used rather than
`torch.fx.symbolic_trace` because it hands over a normalized program: one ATen op per node,
parameters and buffers lifted to placeholders with a signature naming them, and every node's
static shape and dtype in `node.meta["val"]` (needed to make broadcasting and type promotion
explicit). The function's arguments are the module's inputs, then its weights in the order of
export's signature: parameters, buffers, then tensor constants created in `forward`, then the
integer tensors torch computed at capture from constants alone (`_Translator.folded`). Torch
is imported lazily, so tinyopt itself works without it.
"""

from __future__ import annotations

import contextlib
import gc
import io
import itertools
import logging
import math
import sys
import traceback
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    AnyFloat,
    ModuleOp,
    TensorType,
    bf16,
    f8E4M3FN,
    f8E5M2,
    f16,
    f32,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.utils.exceptions import VerifyException

from tinyopt.dialects import graph
from tinyopt.dialects.graph import FP8_SCALE_BLOCK
from tinyopt.frontends.torch_decompositions import decompose_unsupported

if TYPE_CHECKING:
    import torch
    from torch.export import ExportedProgram
    from torch.fx import Node


class FrontendError(Exception):
    """A module the frontend cannot capture; the message names the op and the node."""


@dataclass
class Capture:
    """A captured module: the graph-dialect program and the weights its trailing arguments take."""

    module: ModuleOp
    """A `builtin.module` holding one `func.func`."""
    weights: dict[str, torch.Tensor]
    """Parameters, buffers and constants by their state-dict name, in argument order."""

    @property
    def function(self) -> func.FuncOp:
        """The captured `func.func`."""
        op = self.module.body.block.first_op
        assert isinstance(op, func.FuncOp)
        return op

    def arguments(self, *inputs: torch.Tensor) -> list[np.ndarray]:
        """Return the function's arguments as numpy arrays: `inputs`, then the weights."""
        return [_to_numpy(t) for t in (*inputs, *self.weights.values())]


def _to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """Return a tensor's values as numpy (bf16 and FP8 as float32, which holds them exactly)."""
    import torch

    tensor = tensor.detach().cpu()
    held = (torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2)
    return (tensor.float() if tensor.dtype in held else tensor).numpy()


def capture(
    module: torch.nn.Module, *example_inputs: torch.Tensor, name: str = "forward"
) -> Capture:
    """Capture `module` called on `example_inputs` as a graph-dialect function `@name`.

    Raises `FrontendError` for an op, dtype or argument kind the graph dialect cannot express.
    """
    import torch

    if not isinstance(module, torch.nn.Module):
        raise FrontendError(
            f"capture takes a torch.nn.Module, got {type(module).__name__} (wrap a function in "
            "a module whose forward calls it)"
        )
    for path, sub in module.named_modules():
        batch_norm = isinstance(sub, torch.nn.modules.batchnorm._BatchNorm)
        if batch_norm and sub.training and sub.track_running_stats:  # else batch statistics
            raise FrontendError(
                f"{type(sub).__name__} {path or type(module).__name__} is in training mode (batch "
                "statistics, running statistics updated): tinyopt captures inference, call "
                "module.eval()"
            )
    with _collector_paused():
        try:
            with warnings.catch_warnings(), _symbolic_shapes_quiet():
                # nn.LSTM/GRU's weight list, which export flags
                warnings.filterwarnings("ignore", "The tensor attributes .* during export")
                program = torch.export.export(module, tuple(example_inputs))
                program = _constant_masks_as_ids(program, example_inputs)
            if _mutates(program):
                _refuse_overlapping_writes(program)
                with warnings.catch_warnings():  # torch's own use of a deprecated pytree API
                    warnings.filterwarnings("ignore", "`isinstance.*LeafSpec", FutureWarning)
                    program = program.run_decompositions({})  # in-place ops made functional
        except FrontendError:
            raise
        except Exception as exc:  # torch raises many exception types for untraceable code
            raise FrontendError(
                f"torch.export cannot trace {type(module).__name__}: {_export_error(exc)}"
            ) from exc
        original = program
        program, decomposed = decompose_unsupported(program, _supported)
        return _Translator(program, name, original if decomposed else None).run()


def _constant_masks_as_ids(
    program: ExportedProgram, example_inputs: Sequence[torch.Tensor]
) -> ExportedProgram:
    """Return `program` with each boolean mask index known at capture (`x[:, self.mask]` of a
    buffer or constant, or a mask computed from those alone) replaced by the integer ids of its
    True positions (`nonzero`, one tensor per masked dim, new buffers named `_mask_ids_*`), and
    exported again: the result, a gather, then has the static shape the mask's count of True
    gives, where torch.export leaves it a symbol of the values. The mask is read at capture: a
    buffer changed after it still selects the positions it held then (the shape depends on it).
    A mask that selects nothing is refused (tinyopt has no empty tensors); a mask computed from
    the inputs is left for `run`'s error."""
    import torch
    from torch.fx.node import map_arg

    if not any(_shape_of_values(n) and _is_mask_index(n) for n in program.graph.nodes):
        return program
    module = program.module()
    values: dict[Node, torch.Tensor | None] = {}

    def value(node: Any) -> torch.Tensor | None:
        """The node's value where buffers and constants alone give it (no parameter)."""
        if node not in values:
            found = None
            if node.op == "get_attr":
                attr = module
                for atom in node.target.split("."):
                    attr = getattr(attr, atom)
                found = None if isinstance(attr, torch.nn.Parameter) else attr
            elif node.op == "call_function":
                inputs = {a: value(a) for a in node.all_input_nodes}
                if all(v is not None for v in inputs.values()):
                    args = map_arg(node.args, lambda a: inputs[a])
                    kwargs = map_arg(node.kwargs, lambda a: inputs[a])
                    found = node.target(*args, **kwargs)
            values[node] = found
        return values[node]

    rewritten = False
    for node in list(module.graph.nodes):
        if not _is_mask_index(node):
            continue
        indices: list[Any] = []
        for arg in node.args[1]:
            mask = value(arg) if arg is not None and _dtype(arg) == "bool" else None
            if mask is None:
                indices.append(arg)
                continue
            if not mask.any():
                raise FrontendError(
                    f"indexing with a constant boolean mask that is all False: the result has "
                    f"no element, and tinyopt has no empty tensors (node {node.name}"
                    f"{_source(node)})"
                )
            with module.graph.inserting_before(node):
                for k, ids in enumerate(mask.nonzero(as_tuple=True)):
                    name = f"_mask_ids_{node.name}_dim{k}"
                    module.register_buffer(name, ids, persistent=False)
                    indices.append(module.graph.get_attr(name))
            rewritten = True
        node.args = (node.args[0], indices, *node.args[2:])
    if not rewritten:
        return program
    module.recompile()
    return torch.export.export(module, tuple(example_inputs))


def _is_mask_index(node: Node) -> bool:
    """Whether a node is `aten.index` with a boolean mask among its indices."""
    return (
        node.op == "call_function"
        and _op_name(node.target) == "aten.index"
        and any(a is not None and _dtype(a) == "bool" for a in node.args[1])
    )


def _shape_of_values(node: Node) -> bool:
    """Whether a node's (first) tensor result has a dim torch.export could not fix: a symbol
    standing for a size known only from the values."""
    import torch

    val = node.meta.get("val")
    if isinstance(val, list | tuple):
        val = val[0] if val else None
    return isinstance(val, torch.Tensor) and any(not isinstance(d, int) for d in val.shape)


@contextmanager
def _symbolic_shapes_quiet() -> Iterator[None]:
    """Keep torch from printing the graph traced so far on stderr when a trace fails (its
    shape logger's warning, and export's own print of the partial graph; the error says what
    failed, and where). What else the trace prints on stderr is passed on once it succeeds."""
    logger = logging.getLogger("torch.fx.experimental.symbolic_shapes")
    level = logger.level
    logger.setLevel(logging.ERROR)
    printed = io.StringIO()
    try:
        with contextlib.redirect_stderr(printed):
            yield
        sys.stderr.write(printed.getvalue())
    finally:
        logger.setLevel(level)


def _export_error(exc: Exception) -> str:
    """torch.export's error in brief: its first line, and the user's line that raised it
    where torch names one (its message goes on with debugging advice)."""
    lines = str(exc).strip().splitlines()
    brief = lines[0] if lines else type(exc).__name__
    marker = "The following call raised this error:"
    if marker in lines:
        at = lines[lines.index(marker) + 1 : lines.index(marker) + 3]
        brief += f" (at {' '.join(line.strip() for line in at).strip()})"
    frames = [frame.name for frame in traceback.extract_tb(exc.__traceback__)]
    if "_detect_is_causal_mask" in frames:  # nn.Transformer* comparing a mask with a causal one
        brief += (
            "; torch's transformer layers read a float mask's values to tell whether it is "
            "causal: pass is_causal=True (tgt_is_causal=True to nn.Transformer) with it"
        )
    return brief


def _supported(target: Any) -> bool:
    """Whether a call target has a handler (or is one of the ops left out)."""
    name = _op_name(target)
    return name in _HANDLERS or name in _SKIPPED


def _mutates(program: ExportedProgram) -> bool:
    """Whether the program writes a tensor in place (`x[:, 0] = 0`, `masked_fill_`) by an op
    with no handler: those become functional ops (`select_scatter`, `masked_fill`) by a second
    trace, which the other programs are spared (`detach_` is handled as it is)."""
    return any(
        node.op == "call_function"
        and getattr(getattr(node.target, "_schema", None), "is_mutable", False)
        and _op_name(node.target) not in _HANDLERS
        for node in program.graph.nodes
    )


OVERLAP_CHECKED_ELEMENTS = 2**22
"""Largest in-place write whose addresses `_refuse_overlapping_writes` compares one by one
(a larger one overlapping its operand's address range at all is refused)."""


def _refuse_overlapping_writes(program: ExportedProgram) -> None:
    """Refuse an in-place op that reads, through another view of the tensor it writes, an
    element it writes at another position (`y[..., 1:] += y[..., :-1]`): eager torch's result
    depends on the order it writes in (here a running sum; it refuses the 1-D form itself),
    while the functional program `run_decompositions` makes of it reads every element before
    any write. Reading the very elements written, in place (`y.add_(y)`, `y.mul_(y[:, :1])`
    where that column is not written), is the same either way."""
    import torch
    from torch.fx import Node
    from torch.multiprocessing.reductions import StorageWeakRef

    def addresses(value: torch.Tensor, shape: Sequence[int]) -> np.ndarray:
        view = np.full(shape, value.storage_offset(), np.int64)
        rank = len(shape)
        for dim, (size, stride) in enumerate(zip(value.shape, value.stride(), strict=True)):
            along = [1] * rank
            along[rank - value.dim() + dim] = size
            view = view + (np.arange(size, dtype=np.int64) * stride).reshape(along)
        return view

    for node in program.graph.nodes:
        schema = getattr(node.target, "_schema", None)
        if node.op != "call_function" or not getattr(schema, "is_mutable", False):
            continue
        written = node.args[0].meta.get("val") if isinstance(node.args[0], Node) else None
        if not isinstance(written, torch.Tensor) or written.numel() == 0:
            continue
        storage = StorageWeakRef(written.untyped_storage()).cdata
        for arg in [*node.args[1:], *node.kwargs.values()]:
            read = arg.meta.get("val") if isinstance(arg, Node) else None
            if not isinstance(read, torch.Tensor) or read.numel() == 0:
                continue
            if StorageWeakRef(read.untyped_storage()).cdata != storage:
                continue
            same = (
                read.shape == written.shape
                and read.stride() == written.stride()
                and read.storage_offset() == written.storage_offset()
            )
            if same:
                continue
            shape = tuple(written.shape)
            try:
                broadcast = tuple(torch.broadcast_shapes(read.shape, written.shape)) == shape
            except RuntimeError:
                broadcast = False
            if broadcast and written.numel() <= OVERLAP_CHECKED_ELEMENTS:
                w, r = addresses(written, shape), addresses(read, shape)
                if not (np.isin(r, w) & (r != w)).any():
                    continue
            raise FrontendError(
                f"{_op_name(node.target)} writes a tensor in place while reading another view "
                "of it that overlaps the elements written (eager torch sees its own earlier "
                "writes, a captured program would not): clone() the operand it reads first "
                f"(node {node.name}{_source(node)})"
            )


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Keeps Python's cyclic garbage collector from running during a capture (it is turned
    back on after, where it was on).

    A capture allocates much and frees little: the first `torch.export` of a process imports
    torch._dynamo and what it needs (about 1200 modules), and the trace builds the graph. The
    full collections this triggers each walk every live object, torch's included, and free next
    to nothing: three of them, 0.15-0.2 s each, were a third of the cold capture of
    bench_llama's block on the 2-core VM (1.5 -> 1.05 s of CPU, 2026-12-03). The garbage a
    capture does leave (a few MB) goes at the collector's next run."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


_DTYPES: dict[str, Attribute] = {
    "float32": f32,
    "float16": f16,
    "bfloat16": bf16,
    "float8_e4m3fn": f8E4M3FN,
    "float8_e5m2": f8E5M2,
    "bool": graph.BOOL,
}
_ID_DTYPES = {"int64": i64, "int32": i32}
"""Integer dtypes: of module inputs (embedding ids, padding masks) as they are; computed
integer tensors (`arange`, a mask's `long()`) are carried in f32, exact while their values
stay within `EXACT_INTEGERS` (`translate` checks a bound on each)."""
EXACT_INTEGERS = 2**24
"""Every integer of magnitude up to this is exact in f32."""


def _source(node: Node) -> str:
    """Return where the user's code created `node`, or '': its last stack frame outside
    torch's own package (an op of `nn.Conv1d` is at the user's `self.conv(x)`, not in torch)."""
    import os

    import torch

    trace = (node.meta.get("stack_trace") or "").strip().splitlines()
    frames = [line.strip() for line in trace if line.strip().startswith("File ")]
    torch_dir = f'"{os.path.dirname(torch.__file__)}{os.sep}'
    users = [f for f in frames if not f.removeprefix("File ").startswith(torch_dir)]
    return f", at {(users or frames)[-1]}" if frames else ""


def _op_name(target: Any) -> str:
    """Return a readable name of a call target: `aten.topk`, `operator.getitem`, …."""
    packet = getattr(target, "_overloadpacket", None)
    if packet is not None:
        return f"{target.namespace}.{packet.__name__}"
    return f"{getattr(target, '__module__', None) or '?'}.{getattr(target, '__name__', target)}"


class _Translator:
    """Translates one exported program node by node into a block of graph ops."""

    def __init__(
        self, program: ExportedProgram, name: str, original: ExportedProgram | None = None
    ):
        self.program = program
        self.name = name
        self.origins = {n.name: n for n in original.graph.nodes} if original else {}
        """The nodes of the program as exported, where `program` is torch's decomposition of
        it: an error in a decomposed op cites the source line of the op it came from."""
        self.ops: list[Operation] = []
        self.values: dict[Node, SSAValue | list[SSAValue | None]] = {}
        self.bounds: dict[Node, float] = {}
        """A bound on the magnitude of each computed integer tensor."""
        self.block = Block()
        self.weights: dict[str, torch.Tensor] = {}
        self.constants: dict[Node, torch.Tensor | None] = {}
        """The value of each node computed from constants alone (`constant_value`), or None."""
        self.emitted_by: dict[Operation, Node] = {}
        """The node each op was translated from (`_refuse_empty_tensors` names it)."""

    # ----------------------------------------------------------------------------- helpers

    def fail(self, node: Node, message: str) -> FrontendError:
        """Build a FrontendError about `node` (callers `raise` it), at the user's line of the
        op it comes from, naming that op where `node` is part of torch's decomposition of it."""
        origin = self.origin(node)
        within = ""
        if _op_name(origin.target) != _op_name(node.target):
            within = f", in torch's decomposition of {_op_name(origin.target)}"
        return FrontendError(f"{message} (node {node.name}{_source(origin)}){within}")

    def origin(self, node: Node) -> Node:
        """The exported node `node` was decomposed from (the first of its `from_node` chain,
        followed to the exported program), or `node` itself."""
        sources = node.meta.get("from_node") or []
        while sources and getattr(sources[0], "from_node", None):
            sources = sources[0].from_node
        found = self.origins.get(sources[0].name) if sources else None
        return found if found is not None else node

    def tensor_type(self, node: Node) -> TensorType[AnyFloat]:
        """Return the graph tensor type of a node's (single tensor) result.

        Integer inputs keep their type; computed integer tensors are f32 (see `_ID_DTYPES`).
        """
        import torch

        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            raise self.fail(node, f"{_op_name(node.target)} does not produce one tensor")
        dtype = str(val.dtype).removeprefix("torch.")
        shape = [int(d) for d in val.shape]
        if dtype in _ID_DTYPES:
            return TensorType(_ID_DTYPES[dtype] if node.op == "placeholder" else f32, shape)
        if dtype not in _DTYPES:
            raise self.fail(
                node,
                f"dtype {val.dtype} is not supported (graph tensors are f32, f16, bf16 or "
                "bool, and int32 or int64 inputs)",
            )
        return TensorType(_DTYPES[dtype], shape)  # pyright: ignore[reportArgumentType]

    def result(self, out: Node, node: Node) -> SSAValue:
        """Return a returned tensor: a computed integer, carried in f32, converted back to its
        integer type (exact: its bound was checked)."""
        value = self.value(out, node)
        dtype = _dtype(out)
        if dtype in _ID_DTYPES and _type(value).element_type == f32:
            value = self.emit(graph.CastOp(value, _ID_DTYPES[dtype]))
        return value

    def bound(self, arg: Any) -> float:
        """Return a bound on the magnitude of an integer-valued argument (inf if unknown)."""
        from torch.fx import Node

        if isinstance(arg, bool | int | float):
            return abs(arg)
        if isinstance(arg, list | tuple):
            return max((self.bound(a) for a in arg), default=0)
        if not isinstance(arg, Node):
            return math.inf
        if _dtype(arg) == "bool":
            return 1
        if arg.op == "placeholder" and arg not in self.bounds:
            value = self.constant_value(arg)  # a constant the module made (`torch.tensor(2)`)
            if value is not None and not value.is_floating_point():
                return float(value.abs().max()) if value.numel() else 0.0
        return self.bounds.get(arg, math.inf)

    def emit(self, op: Operation) -> SSAValue:
        """Append `op` and return its result. A reduction over no dims (of a 0-d tensor, which
        torch reduces over its "dim 0" as over one element) is its operand itself, a sum or mean
        plus +0.0 as torch's, which start at +0.0 (−0.0 sums to +0.0): the graph dialect's
        reductions take at least one dim."""
        if isinstance(op, graph.ReduceOp) and not op.dim_list:
            x = op.x
            op.erase()
            summed = isinstance(op, graph.ReduceSumOp | graph.ReduceMeanOp)
            if summed and _type(x).element_type in graph.FLOAT_TYPES:
                return self.emit(graph.AddOp(x, self.scalar(0.0, _type(x))))
            return x
        self.ops.append(op)
        return op.results[0]

    def value(self, arg: Any, node: Node) -> SSAValue:
        """Return the SSA value of a node argument that must be a tensor."""
        from torch.fx import Node

        value = self.values.get(arg) if isinstance(arg, Node) else None
        if not isinstance(value, SSAValue):
            raise self.fail(node, f"{_op_name(node.target)}: expected a tensor operand, got {arg}")
        return value

    def cast(self, x: SSAValue, element_type: Attribute) -> SSAValue:
        """Return `x` converted to `element_type` (itself when it already is); an integer
        input becomes a mask through f32."""
        source = _type(x).element_type
        if source == element_type:
            return x
        if element_type == graph.BOOL and source not in graph.FLOAT_TYPES:
            x = self.emit(graph.CastOp(x, f32))
        return self.emit(graph.CastOp(x, element_type))

    def reshape(self, x: SSAValue, shape: Sequence[int]) -> SSAValue:
        """Return `x` reshaped to `shape` (itself when the shape is already that)."""
        if _type(x).get_shape() == tuple(shape):
            return x
        return self.emit(graph.ReshapeOp(x, shape))

    def broadcast(self, x: SSAValue, shape: Sequence[int]) -> SSAValue:
        """Return `x` broadcast to `shape` (itself when the shape is already that)."""
        if _type(x).get_shape() == tuple(shape):
            return x
        return self.emit(graph.BroadcastOp(x, shape))

    def operand_like(self, arg: Any, like: TensorType[AnyFloat], node: Node) -> SSAValue:
        """Return a tensor or Python number argument cast and broadcast to `like`."""
        if isinstance(arg, bool | int | float):
            return self.scalar(float(arg), like)
        x = self.cast(self.value(arg, node), like.element_type)
        return self.broadcast(x, like.get_shape())

    def scalar(self, value: float, like: TensorType[AnyFloat]) -> SSAValue:
        """Return `value` broadcast to `like`: a one-element constant and a broadcast, so the
        IR holds one number, not one per element of the activation (a mask's is cast)."""
        if like.element_type == graph.BOOL:
            number = self.scalar(float(value), TensorType(f32, like.get_shape()))
            return self.cast(number, graph.BOOL)
        try:
            number = graph.ConstantOp.scalar(value, like)
        except OverflowError:  # handlers' errors name the op (`translate`)
            raise ValueError(
                f"the number {value:g} is past the range of {like.element_type}, the type this "
                "op computes in (numbers are held in the tensor's type)"
            ) from None
        return self.broadcast(self.emit(number), like.get_shape())

    def constant_value(self, node: Node) -> torch.Tensor | None:
        """Return the value of a node computed from no input, parameter or buffer (from
        `arange`, `full`, numbers and the tensors `forward` makes), evaluated by torch on the
        CPU as eager runs it; None where it depends on one."""
        from torch.export.graph_signature import InputKind
        from torch.fx import Node
        from torch.fx.node import map_arg

        if node in self.constants:
            return self.constants[node]
        value = None
        if node.op == "placeholder":
            for spec in self.program.graph_signature.input_specs:
                if spec.arg.name == node.name and spec.kind == InputKind.CONSTANT_TENSOR:
                    value = self.program.constants[spec.target]  # type: ignore[index]
        elif node.op == "call_function":
            sources = [a for a in node.all_input_nodes if isinstance(a, Node)]
            values = {a: self.constant_value(a) for a in sources}
            if all(v is not None for v in values.values()):
                args = map_arg(node.args, lambda a: values[a])
                kwargs = map_arg(node.kwargs, lambda a: values[a])
                value = node.target(*args, **kwargs)  # pyright: ignore[reportCallIssue]
        self.constants[node] = value
        return value

    def folded(self, node: Node, value: torch.Tensor) -> SSAValue:
        """Return a constant integer tensor torch computed (`constant_value`) as one more
        trailing argument, in f32 like every computed integer, with its bound."""
        bound = float(value.abs().max()) if value.numel() else 0.0
        if bound > EXACT_INTEGERS:
            raise self.fail(node, f"a constant integer tensor up to {bound:.0f} (past 2^24)")
        self.bounds[node] = bound
        return self.folded_floats(node, value)

    def folded_floats(self, node: Node, value: torch.Tensor, role: str = "") -> SSAValue:
        """Return a tensor the capture computed for `node` from its arguments alone (a
        constant, resampling weights: one of them by `role`) as one more trailing argument,
        in f32."""
        import torch

        suffix = f".{role}" if role else ""
        self.weights[f"_folded.{node.name}{suffix}"] = value.to(torch.float32)
        arg = self.block.insert_arg(TensorType(f32, list(value.shape)), len(self.block.args))
        arg.name_hint = node.name + suffix.replace(".", "_")
        return arg

    def float_like(self, node: Node, args: Sequence[Any]) -> TensorType[AnyFloat]:
        """Return the float type, of `node`'s shape, that torch computes `args` in: their
        promoted dtype if it is a float, else f32 (integers and masks)."""
        import torch
        from torch.fx import Node

        dtypes = [a.meta["val"].dtype for a in args if isinstance(a, Node)]
        promoted = dtypes[0]
        for dtype in dtypes[1:]:
            promoted = torch.promote_types(promoted, dtype)
        element = _DTYPES.get(str(promoted).removeprefix("torch."), f32)
        if element == graph.BOOL:
            element = f32
        shape = [int(d) for d in node.meta["val"].shape]
        return TensorType(element, shape)  # pyright: ignore[reportArgumentType]

    # --------------------------------------------------------------------------------- run

    def run(self) -> Capture:
        """Translate the whole program and return the capture."""
        from torch.export.graph_signature import InputKind, OutputKind
        from torch.fx import Node

        signature = self.program.graph_signature
        for node in self.program.graph.nodes:  # name unsupported ops before dtype problems
            if node.op != "call_function":
                continue
            if _shape_of_values(node):
                raise self.fail(
                    node,
                    f"{_op_name(node.target)} gives a result whose shape depends on the values "
                    "(a boolean mask index computed from the inputs, torch.where(cond), "
                    "nonzero): tinyopt's shapes are static (a constant mask is taken)",
                )
            if _dtype(node).startswith("complex"):  # torch.polar, torch.complex, fft
                name = _op_name(node.target)
                called = f" (torch.{name[5:]})" if name.startswith("aten.") else ""
                raise self.fail(
                    node,
                    f"{name}{called} gives a {_dtype(node)} tensor: complex outputs are not "
                    "supported (tinyopt's tensors are real)",
                )
            if not _supported(node.target):
                raise self.fail(node, f"cannot capture {_op_name(node.target)}")
        placeholders = {n.name: n for n in self.program.graph.nodes if n.op == "placeholder"}
        inputs: list[Node] = []
        weights = self.weights
        weight_nodes: list[Node] = []
        tensors = {**self.program.constants, **self.program.state_dict}
        kinds: dict[Node, InputKind] = {}
        for spec in signature.input_specs:
            node = placeholders[spec.arg.name]
            kinds[node] = spec.kind
            if spec.kind == InputKind.USER_INPUT:
                inputs.append(node)
            elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
                assert spec.target is not None
                weights[spec.target] = tensors[spec.target]
                weight_nodes.append(node)
            else:
                raise self.fail(node, f"input of kind {spec.kind.name} is not supported")
        block = self.block = Block(
            arg_types=[self.tensor_type(n) for n in (*inputs, *weight_nodes)]
        )
        for node, arg in zip((*inputs, *weight_nodes), block.args, strict=True):
            arg.name_hint = node.name
            self.values[node] = arg
            shape = list(_type(arg).get_shape())
            if 0 in shape:
                what = (
                    "input"
                    if node in inputs
                    else _PLACEHOLDER_KINDS.get(
                        kinds[node].name, "constant tensor the module makes"
                    )
                )
                raise self.fail(
                    node,
                    f"{what} {node.name} is an empty tensor of shape {shape} (a dim of size 0): "
                    "tinyopt's tensors have no empty dims",
                )
        self.bounds.update(_bounds_of_looked_up_inputs(self.program, inputs))

        results: list[SSAValue] = []
        for node in self.program.graph.nodes:
            if node.op == "call_function":
                self.translate(node)
            elif node.op == "output":
                # by position: a written input returned as it is is two outputs of one node
                written = (OutputKind.PARAMETER_MUTATION, OutputKind.BUFFER_MUTATION)
                outs = zip(node.args[0], signature.output_specs, strict=True)
                for position, (out, spec) in enumerate(outs):
                    if not isinstance(out, Node):  # a None or a number the module returns
                        hint = (
                            " (nn.MultiheadAttention's weights with need_weights=False, say: "
                            "take its [0])"
                            if out is None
                            else ""
                        )
                        raise self.fail(
                            node,
                            f"the module returns {out!r}, not a tensor, as its output "
                            f"{position}{hint}: tinyopt's functions return only tensors",
                        )
                    if spec.kind in written and _op_name(out.target) == "aten.embedding_renorm":
                        continue  # torch's in-place renorm of the table (`_embedding_renorm`)
                    if spec.kind == OutputKind.USER_INPUT_MUTATION:
                        raise self.fail(
                            node,
                            "the module mutates a buffer or returns a non-tensor: it writes its "
                            f"input {spec.target} in place (tinyopt's functions do not write "
                            "their arguments: clone it first)",
                        )
                    if spec.kind != OutputKind.USER_OUTPUT:
                        raise self.fail(node, "the module mutates a buffer or returns a non-tensor")
                    results.append(self.result(out, node))
        block.add_ops([*self.ops, func.ReturnOp(*results)])
        for op in reversed(self.ops):  # what only a folded node read (graph ops are pure)
            if not any(r.uses for r in op.results):
                block.erase_op(op)
        self._refuse_empty_tensors()
        function = func.FuncOp(
            self.name, ([a.type for a in block.args], [r.type for r in results]), Region(block)
        )
        module = ModuleOp([function])
        try:
            module.verify()
        except VerifyException as exc:
            raise FrontendError(f"captured IR does not verify: {exc}") from exc
        return Capture(module, weights)

    def _refuse_empty_tensors(self) -> None:
        """Raise a FrontendError naming the op, and its source line, of the first empty tensor
        (a dim of size 0) the captured function computes: tinyopt's tensors have none (the
        graph dialect refuses them; an empty input is refused before translating). An empty
        tensor no kept op reads (a part of `cat` with no elements, `x[:, :0]` of one) is
        left out before, as torch's result holds nothing of it."""
        for op in self.block.ops:
            node = self.emitted_by.get(op)
            for value in (*op.operands, *op.results):
                shape = list(value.type.get_shape()) if isinstance(value.type, TensorType) else []
                if node is None or 0 not in shape:
                    continue
                empty = _empty_shapes(node.meta.get("val"))
                how = (
                    f"gives an empty tensor of shape {empty[0]}"
                    if empty
                    else f"computes through an empty tensor of shape {shape} ({op.name})"
                )
                raise self.fail(
                    node,
                    f"{_op_name(node.target)} {how} (a dim of size 0): tinyopt's tensors have "
                    "no empty dims",
                )

    def _check_shapes(self, node: Node, value: SSAValue | list[SSAValue | None]) -> None:
        """Raise a FrontendError where a handler's result does not have the shape torch gives
        the node: a translation bug caught at capture rather than a wrong-shaped result."""
        import torch

        vals = node.meta.get("val")
        vals = vals if isinstance(vals, list | tuple) else [vals]
        values = value if isinstance(value, list) else [value]
        if _recurrent_states(node):
            # torch 2.11's export gives an LSTM's states an extra unit dim ([L, 1, B, H]); the
            # handler builds them as torch's module returns them, [L·directions, B, H]
            values = values[:1] if isinstance(value, list) else []
        for got, val in zip(values, vals, strict=False):
            if isinstance(got, SSAValue) and isinstance(val, torch.Tensor):
                shape = tuple(int(d) for d in val.shape)
                if _type(got).get_shape() != shape:
                    raise self.fail(
                        node,
                        f"internal error: {_op_name(node.target)} captured with shape "
                        f"{list(_type(got).get_shape())} where torch's is {list(shape)}",
                    )

    def translate(self, node: Node) -> None:
        """Translate one call node, recording its result value (a list for a split)."""
        name = _op_name(node.target)
        if name in _SKIPPED or (name == "_operator.getitem" and not node.users):
            return  # export picks every part of a tuple, used or not
        start = len(self.ops)
        try:
            value = _HANDLERS[name](self, node)
        except _UNEXPECTED as exc:
            # a handler meeting arguments it does not expect: an error naming the op, never a
            # traceback of the frontend
            empty = _empty_shape(node)
            if empty is not None:
                raise self.fail(
                    node,
                    f"{name} of an empty tensor of shape {empty} (a dim of size 0): tinyopt's "
                    "tensors have no empty dims",
                ) from exc
            raise self.fail(
                node, f"{name} with these arguments: {type(exc).__name__}: {exc}"
            ) from exc
        self.emitted_by.update((op, node) for op in self.ops[start:])
        if isinstance(value, SSAValue) and isinstance(value.owner, Operation):
            value.name_hint = value.name_hint or node.name
        self._check_shapes(node, value)
        self.values[node] = value
        integers = _integer_results(node, value)  # topk's indices, not its values
        computed = any(
            isinstance(v, SSAValue) and _type(v).element_type == f32 for v in integers
        )  # else integer inputs, only moved, or a result not computed (a pooling's indices)
        if integers:  # bounded integers in their own type (argmax's) too
            try:
                bound = self.bounds[node] if node in self.bounds else _integer_bound(self, node)
            except _UNEXPECTED as exc:
                raise self.fail(
                    node, f"{name}'s integer bound: {type(exc).__name__}: {exc}"
                ) from exc
            bound = math.inf if math.isnan(bound) else bound  # never passed as exact
            if bound < math.inf or computed:
                self.bounds[node] = bound
            if computed and bound > EXACT_INTEGERS:
                reason = "unbounded" if bound == math.inf else f"up to {bound:.0f}"
                raise self.fail(
                    node,
                    f"{name} computes integers {reason}; tinyopt computes integer tensors in "
                    f"f32, exact only up to 2^24 (inputs may be any int32/int64)",
                )


_PLACEHOLDER_KINDS = {"PARAMETER": "parameter", "BUFFER": "buffer"}
"""How an error names a weight by its `InputKind` (else a constant tensor the module makes)."""


_UNEXPECTED = (
    TypeError, ValueError, KeyError, IndexError, AttributeError, AssertionError, ArithmeticError,
)  # fmt: skip
"""What a handler raises on arguments it does not expect (`translate` names the op)."""


def _empty_shape(node: Node) -> list[int] | None:
    """The shape of the first empty tensor (a dim of size 0) among `node`'s tensor arguments
    and results, or None."""
    from torch.fx.node import map_arg

    found: list[list[int]] = []

    def visit(arg: Node) -> Node:
        found.extend(_empty_shapes(arg.meta.get("val")))
        return arg

    map_arg((node.args, node.kwargs), visit)
    found.extend(_empty_shapes(node.meta.get("val")))
    return found[0] if found else None


def _empty_shapes(val: Any) -> list[list[int]]:
    """The shapes with a dim of size 0 among a node's value (a tensor or a tuple of them)."""
    vals = val if isinstance(val, list | tuple) else [val]
    return [list(v.shape) for v in vals if hasattr(v, "shape") and 0 in v.shape]


def _type(x: SSAValue) -> TensorType[AnyFloat]:
    assert isinstance(x.type, TensorType)
    return x.type  # pyright: ignore[reportUnknownVariableType]


def _dtype(node: Node) -> str:
    """Return the dtype name of a node's tensor result, or of its first one ('' if none)."""
    val = node.meta.get("val") if hasattr(node, "meta") else None
    if isinstance(val, list | tuple) and val:
        val = val[0]
    dtype = getattr(val, "dtype", None)
    return str(dtype).removeprefix("torch.") if dtype is not None else ""


def _integer_results(node: Node, value: SSAValue | list[SSAValue | None]) -> list[SSAValue | None]:
    """The values translated for a node's integer results (topk's indices, not its values)."""
    val = node.meta.get("val")
    vals = val if isinstance(val, list | tuple) else [val]
    values = value if isinstance(value, list) else [value]
    return [
        v
        for v, meta in zip(values, vals)
        if str(getattr(meta, "dtype", "")).removeprefix("torch.") in _ID_DTYPES
    ]


Handler = Callable[[_Translator, "Node"], "SSAValue | list[SSAValue | None]"]
_HANDLERS: dict[str, Handler] = {}
_SKIPPED = ("aten._assert_tensor_metadata",)
"""Ops without a value (export's checks), left out of the capture."""


def _handles(*names: str) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        for name in names:
            _HANDLERS[f"aten.{name}"] = handler
        return handler

    return register


def _arg(node: Node, index: int, keyword: str, default: Any = None) -> Any:
    """Return a node argument given by position or keyword."""
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(keyword, default)


def _dims(dims: Any, rank: int) -> list[int]:
    """Normalize a dim, a list of dims or None (all dims) to non-negative ints; a 0-d tensor
    has none (torch takes dim 0 or -1 of it as the tensor itself)."""
    if dims is None or dims == [] or rank == 0:
        return list(range(rank))
    return [d % rank for d in (dims if isinstance(dims, list | tuple) else [dims])]


def _one_element(t: _Translator, x: SSAValue) -> SSAValue:
    """A 0-d tensor as the one-element 1-d tensor torch takes it for along its dim 0 (or -1),
    for an op along a dim (softmax, gather, kthvalue, scatter, index_select); any other tensor
    itself. The handler reshapes its result back to torch's shape (`_torch_shape`)."""
    return t.reshape(x, [1]) if not _type(x).get_shape() else x


def _torch_shape(t: _Translator, node: Node, x: SSAValue, result: int = 0) -> SSAValue:
    """`x` reshaped to the shape torch gives `node`'s result `result` (its 0-d results, after
    `_one_element`)."""
    val = node.meta["val"]
    val = val[result] if isinstance(val, list | tuple) else val
    return t.reshape(x, [int(d) for d in val.shape])


# ------------------------------------------------------------------------- elementwise ops

_UNARY: dict[str, type[graph.UnaryOp]] = {
    "neg": graph.NegOp,
    "abs": graph.AbsOp,
    "exp": graph.ExpOp,
    "log": graph.LogOp,
    "sqrt": graph.SqrtOp,
    "rsqrt": graph.RsqrtOp,
    "reciprocal": graph.ReciprocalOp,
    "tanh": graph.TanhOp,
    "sigmoid": graph.SigmoidOp,
    "special_expit": graph.SigmoidOp,
    "relu": graph.ReluOp,
    "silu": graph.SiluOp,
    "erf": graph.ErfOp,
    "special_erf": graph.ErfOp,
    "cos": graph.CosOp,
    "sin": graph.SinOp,
    "log1p": graph.Log1pOp,
    "expm1": graph.Expm1Op,
    "floor": graph.FloorOp,
    "ceil": graph.CeilOp,
    "round": graph.RoundOp,
    "trunc": graph.TruncOp,
    "fix": graph.TruncOp,
}


@_handles(*_UNARY)
def _unary(t: _Translator, node: Node) -> SSAValue:
    out = t.tensor_type(node)
    decimals = _arg(node, 1, "decimals", 0)
    if decimals:
        return _rounded_to_decimals(t, node, int(decimals))
    x = t.operand_like(node.args[0], out, node)
    result = t.emit(_UNARY[node.target._overloadpacket.__name__](x))  # pyright: ignore
    if isinstance(result.owner, graph.ReluOp):  # torch's relu keeps a −0.0 (`_kept_zero`)
        return _kept_zero(t, x, t.scalar(0.0, out), result)
    return result


def _kept_zero(t: _Translator, x: SSAValue, bound: SSAValue, bounded: SSAValue) -> SSAValue:
    """`bounded` (max or min of x and a bound, relu) but x itself where x equals the bound:
    torch's clamp and relu keep x unless it is past the bound, so −0.0 clamped below at +0.0
    stays −0.0 (at any size, its vectorized loops too), where the IEEE maximum of the graph's
    `max` / `relu` gives +0.0. NaN still comes out NaN (equal to nothing)."""
    if _type(x).element_type not in graph.FLOAT_TYPES:
        return bounded
    return t.emit(graph.SelectOp(t.emit(graph.CompareOp(x, bound, "eq")), x, bounded))


def _rounded_to_decimals(t: _Translator, node: Node, decimals: int) -> SSAValue:
    """`round(x, decimals=d)` as torch computes it, in f32 for f16/bf16: `round(x · 10^d) /
    10^d`, or `round(x / 10^-d) · 10^-d` for d < 0 (halves to even)."""
    out = t.tensor_type(node)
    x = t.cast(t.value(node.args[0], node), _work_type(out).element_type)
    scale = t.scalar(float(10 ** abs(decimals)), _type(x))
    if decimals > 0:
        rounded = t.emit(graph.RoundOp(t.emit(graph.MulOp(x, scale))))
        return t.cast(t.emit(graph.DivOp(rounded, scale)), out.element_type)
    rounded = t.emit(graph.RoundOp(t.emit(graph.DivOp(x, scale))))
    return t.cast(t.emit(graph.MulOp(rounded, scale)), out.element_type)


@_handles("gelu")
def _gelu(t: _Translator, node: Node) -> SSAValue:
    out = t.tensor_type(node)
    x = t.operand_like(node.args[0], out, node)
    approximate = _arg(node, 1, "approximate", "none")
    if approximate == "none":
        return t.emit(graph.GeluOp(x))
    if approximate == "tanh":
        return t.emit(graph.GeluTanhOp(x))
    raise t.fail(node, f"aten.gelu with approximate={approximate!r}")


_BINARY: dict[str, type[graph.BinaryOp]] = {
    "add": graph.AddOp,
    "sub": graph.SubOp,
    "rsub": graph.SubOp,
    "mul": graph.MulOp,
    "div": graph.DivOp,
    "pow": graph.PowOp,
    "maximum": graph.MaxOp,
    "minimum": graph.MinOp,
    "atan2": graph.Atan2Op,
    "arctan2": graph.Atan2Op,
    "fmod": graph.FmodOp,
    "remainder": graph.RemainderOp,
    "copysign": graph.CopySignOp,
}


@_handles(*_BINARY)
def _binary(t: _Translator, node: Node) -> SSAValue:
    name = node.target._overloadpacket.__name__  # pyright: ignore
    out = t.tensor_type(node)
    mode = node.kwargs.get("rounding_mode")
    if mode is not None and not (
        mode in ("trunc", "floor") and out.element_type in graph.FLOAT_TYPES
    ):
        raise t.fail(node, f"aten.div with rounding_mode={mode!r} on {_dtype(node)}")
    work = _mask_work_type(out)
    lhs = t.operand_like(node.args[0], work, node)
    exponent = node.args[1]
    if name == "pow" and type(exponent) in (int, float) and exponent in (0.5, -0.5):
        # torch computes a number exponent of ±0.5 as sqrt and rsqrt (on the CPU and CUDA),
        # not as pow: NaN at -inf, ∓0 and -inf at -0 (pow gives +inf or +0 there)
        root = graph.SqrtOp(lhs) if exponent > 0 else graph.RsqrtOp(lhs)
        return t.cast(t.emit(root), out.element_type)
    rhs = t.operand_like(node.args[1], work, node)
    if name == "rsub":  # other - alpha · input
        lhs, rhs = rhs, lhs
    alpha = _arg(node, 2, "alpha", 1)  # positional in the .Scalar overloads (`rsub(x, 3.0, 2)`)
    if alpha != 1:
        rhs = t.emit(graph.MulOp(rhs, t.scalar(float(alpha), work)))
    if mode is not None:
        return _rounded_quotient(t, lhs, rhs, mode)
    return t.cast(t.emit(_BINARY[name](lhs, rhs)), out.element_type)


def _mask_work_type(out: TensorType[AnyFloat]) -> TensorType[AnyFloat]:
    """The type arithmetic computes `out` in: f32 for a mask (of masks, `+` and `max` are or,
    `*` and `min` and: on their 0 and 1, any nonzero result true), `out` itself otherwise."""
    return TensorType(f32, out.get_shape()) if out.element_type == graph.BOOL else out


@_handles("floor_divide")
def _floor_divide(t: _Translator, node: Node) -> SSAValue:
    out = t.tensor_type(node)
    if out.element_type not in graph.FLOAT_TYPES:
        raise t.fail(node, f"aten.floor_divide of {_dtype(node)}")
    lhs, rhs = (t.operand_like(x, out, node) for x in node.args[:2])
    return _rounded_quotient(t, lhs, rhs, "floor")


def _rounded_quotient(t: _Translator, a: SSAValue, b: SSAValue, mode: str) -> SSAValue:
    """`trunc(a / b)`, or torch's `div_floor` for `floor`: q = (a - fmod(a, b)) / b, one less
    where the remainder's sign differs from b's, then floor(q) rounded up where q is more
    than half past it (exact where `floor(a / b)` would take a quotient that rounded up to an
    integer); `a / b` where b is 0, and a zero with a / b's sign where q is 0."""
    quotient = t.emit(graph.DivOp(a, b))
    if mode == "trunc":
        return t.emit(graph.TruncOp(quotient))
    like = _type(a)

    def flag(x: SSAValue, y: SSAValue, predicate: str) -> SSAValue:
        return t.cast(t.emit(graph.CompareOp(x, y, predicate)), like.element_type)

    zero = t.scalar(0.0, like)
    rest = t.emit(graph.FmodOp(a, b))
    q = t.emit(graph.DivOp(t.emit(graph.SubOp(a, rest)), b))
    signs_differ = t.emit(graph.CompareOp(flag(b, zero, "lt"), flag(rest, zero, "lt"), "ne"))
    step = t.emit(graph.MulOp(t.cast(signs_differ, like.element_type), flag(rest, zero, "ne")))
    q = t.emit(graph.SubOp(q, step))
    floored = t.emit(graph.FloorOp(q))
    rounded = t.emit(
        graph.AddOp(floored, flag(t.emit(graph.SubOp(q, floored)), t.scalar(0.5, like), "gt"))
    )
    signed_zero = t.emit(graph.MulOp(quotient, zero))
    result = t.emit(graph.SelectOp(t.emit(graph.CompareOp(q, zero, "ne")), rounded, signed_zero))
    return t.emit(graph.SelectOp(t.emit(graph.CompareOp(b, zero, "eq")), quotient, result))


@_handles("square")
def _square(t: _Translator, node: Node) -> SSAValue:
    x = t.operand_like(node.args[0], t.tensor_type(node), node)
    return t.emit(graph.MulOp(x, x))


# ---------------------------------------------------------- activations, log-space, norms

LEAKY_RELU_SLOPE = 0.01
"""`leaky_relu`'s default negative_slope."""


def _work_type(out: TensorType[AnyFloat]) -> TensorType[AnyFloat]:
    """The type a composite op computes in: f32 for f16/bf16 results (torch's accumulation
    type), the result's own type otherwise."""
    if out.element_type in (f16, bf16):
        return TensorType(f32, out.get_shape())
    return out


@_handles("sgn")
def _sgn(t: _Translator, node: Node) -> SSAValue:
    """`sgn` of a real tensor is its sign."""
    return _sign(t, node)


@_handles("frac")
def _frac(t: _Translator, node: Node) -> SSAValue:
    """`x - trunc(x)` (exact), torch's."""
    out = t.tensor_type(node)
    x = t.operand_like(node.args[0], out, node)
    return t.emit(graph.SubOp(x, t.emit(graph.TruncOp(x))))


@_handles("lerp")
def _lerp(t: _Translator, node: Node) -> SSAValue:
    """`w < 0.5 ? a + w (b - a) : b - (b - a)(1 - w)`, torch's two-sided form (exact at w = 0
    and w = 1)."""
    out = t.tensor_type(node)
    work = _work_type(out)
    a, b, w = (t.operand_like(x, work, node) for x in node.args[:3])
    return t.cast(_lerped(t, a, b, w), out.element_type)


def _lerped(t: _Translator, a: SSAValue, b: SSAValue, w: SSAValue | float) -> SSAValue:
    """torch's two-sided lerp: `a + w (b - a)` where |w| < 0.5, else `b - (b - a)(1 - w)`
    (the two differ where an end is infinite, and in rounding); a weight known at capture (a
    number) picks its side here, a tensor one per element."""
    gap = t.emit(graph.SubOp(b, a))
    like = _type(gap)
    if not isinstance(w, SSAValue):
        if abs(w) < 0.5:
            return t.emit(graph.AddOp(a, t.emit(graph.MulOp(gap, t.scalar(w, like)))))
        return t.emit(graph.SubOp(b, t.emit(graph.MulOp(gap, t.scalar(1.0 - w, like)))))
    near_a = t.emit(graph.AddOp(a, t.emit(graph.MulOp(w, gap))))
    rest = t.emit(graph.SubOp(t.scalar(1.0, like), w))
    near_b = t.emit(graph.SubOp(b, t.emit(graph.MulOp(gap, rest))))
    low = t.emit(graph.CompareOp(t.emit(graph.AbsOp(w)), t.scalar(0.5, like), "lt"))
    return t.emit(graph.SelectOp(low, near_a, near_b))


@_handles("addcmul", "addcdiv")
def _add_scaled_product(t: _Translator, node: Node) -> SSAValue:
    """`x + value · t1 · t2` (addcmul) or `x + value · t1 / t2` (addcdiv)."""
    out = t.tensor_type(node)
    x, t1, t2 = (t.operand_like(v, out, node) for v in node.args[:3])
    divide = node.target._overloadpacket.__name__ == "addcdiv"  # pyright: ignore
    term = t.emit((graph.DivOp if divide else graph.MulOp)(t1, t2))
    value = float(_arg(node, 3, "value", 1))
    if value != 1.0:
        term = t.emit(graph.MulOp(t.scalar(value, out), term))
    return t.emit(graph.AddOp(x, term))


_TRIGONOMETRIC = {
    "tan": "tan", "atan": "atan", "arctan": "atan", "asin": "asin", "arcsin": "asin",
    "acos": "acos", "arccos": "acos",
}  # fmt: skip
"""Each trigonometric op's name, aliases to the name they alias."""


@_handles(*_TRIGONOMETRIC)
def _trigonometric(t: _Translator, node: Node) -> SSAValue:
    """tan as `sin / cos`; atan, asin and acos through `atan2`: `atan2(x, 1)`,
    `atan2(x, sqrt((1 - x)(1 + x)))` and `atan2(sqrt((1 - x)(1 + x)), x)` (NaN past ±1, as
    torch); in f32 for f16/bf16."""
    out = t.tensor_type(node)
    work = _work_type(out)
    x = t.operand_like(node.args[0], work, node)
    name = _TRIGONOMETRIC[node.target._overloadpacket.__name__]  # pyright: ignore
    one = t.scalar(1.0, work)
    if name == "tan":
        result = t.emit(graph.DivOp(t.emit(graph.SinOp(x)), t.emit(graph.CosOp(x))))
    elif name == "atan":
        result = t.emit(graph.Atan2Op(x, one))
    else:
        side = t.emit(graph.MulOp(t.emit(graph.SubOp(one, x)), t.emit(graph.AddOp(one, x))))
        side = t.emit(graph.SqrtOp(side))
        pair = (x, side) if name == "asin" else (side, x)
        result = t.emit(graph.Atan2Op(*pair))
    return t.cast(result, out.element_type)


@_handles("sinh", "cosh")
def _hyperbolic(t: _Translator, node: Node) -> SSAValue:
    """`cosh = e^(x - ln 2) + e^(-x - ln 2)`; `sinh` the difference, or `(expm1(x) -
    expm1(-x)) / 2` below |x| = 1 (no cancellation); halves taken in the exponent so the
    results overflow where torch's do; in f32 for f16/bf16."""
    out = t.tensor_type(node)
    work = _work_type(out)
    x = t.operand_like(node.args[0], work, node)
    negated = t.emit(graph.NegOp(x))
    half = t.scalar(math.log(2.0), work)
    up, down = (t.emit(graph.ExpOp(t.emit(graph.SubOp(v, half)))) for v in (x, negated))
    if node.target._overloadpacket.__name__ == "cosh":  # pyright: ignore
        return t.cast(t.emit(graph.AddOp(up, down)), out.element_type)
    wide = t.emit(graph.SubOp(up, down))
    small = t.emit(graph.SubOp(t.emit(graph.Expm1Op(x)), t.emit(graph.Expm1Op(negated))))
    small = t.emit(graph.MulOp(small, t.scalar(0.5, work)))
    near_zero = t.emit(graph.CompareOp(t.emit(graph.AbsOp(x)), t.scalar(1.0, work), "lt"))
    return t.cast(t.emit(graph.SelectOp(near_zero, small, wide)), out.element_type)


_LARGE_ARGUMENT = 2.0**26
"""Past it, asinh(x) and acosh(x) are log(x) + ln 2 to f32's precision (the terms left out are
below 1/(4x²)), and x² would overflow before the argument does."""


@_handles("asinh", "arcsinh", "acosh", "arccosh", "atanh", "arctanh")
def _inverse_hyperbolic(t: _Translator, node: Node) -> SSAValue:
    """Through log1p, without cancellation: asinh(x) = copysign(log1p(a + a²/(1 + √(1 + a²))),
    x) for a = |x|, acosh(x) = log1p(y + √y·√(x + 1)) for y = x - 1 (NaN below 1), atanh(x) =
    log1p(2x/(1 - x))/2 (±inf at ±1, NaN past); asinh and acosh past `_LARGE_ARGUMENT` as
    log(x) + ln 2. −0 keeps its sign, NaN stays NaN; in f32 for f16/bf16."""
    out = t.tensor_type(node)
    work = _work_type(out)
    x = t.operand_like(node.args[0], work, node)
    name = node.target._overloadpacket.__name__.removeprefix("arc")  # pyright: ignore
    name = {"sinh": "asinh", "cosh": "acosh", "tanh": "atanh"}.get(name, name)
    one = t.scalar(1.0, work)

    def add(a: SSAValue, b: SSAValue) -> SSAValue:
        return t.emit(graph.AddOp(a, b))

    def mul(a: SSAValue, b: SSAValue) -> SSAValue:
        return t.emit(graph.MulOp(a, b))

    if name == "atanh":
        ratio = t.emit(graph.DivOp(add(x, x), t.emit(graph.SubOp(one, x))))
        result = mul(t.emit(graph.Log1pOp(ratio)), t.scalar(0.5, work))
        return t.cast(result, out.element_type)
    a = t.emit(graph.AbsOp(x)) if name == "asinh" else x
    if name == "asinh":
        square = mul(a, a)
        near = add(a, t.emit(graph.DivOp(square, add(one, t.emit(graph.SqrtOp(add(one, square)))))))
    else:
        y = t.emit(graph.SubOp(x, one))  # √y NaN below 1 (√(y(x + 1)) is not, below -1)
        near = add(y, mul(t.emit(graph.SqrtOp(y)), t.emit(graph.SqrtOp(add(x, one)))))
    far = add(t.emit(graph.LogOp(a)), t.scalar(math.log(2.0), work))
    large = t.emit(graph.CompareOp(a, t.scalar(_LARGE_ARGUMENT, work), "gt"))
    result = t.emit(graph.SelectOp(large, far, t.emit(graph.Log1pOp(near))))
    if name == "asinh":
        result = t.emit(graph.CopySignOp(result, x))
    return t.cast(result, out.element_type)


@_handles("logaddexp")
def _logaddexp(t: _Translator, node: Node) -> SSAValue:
    """`m + log1p(exp(-|a - b|))` with m the larger, and a itself where both are the same
    infinity (torch's rule); in f32 for f16/bf16."""
    out = t.tensor_type(node)
    work = _work_type(out)
    a, b = (t.operand_like(v, work, node) for v in node.args[:2])
    top = t.emit(graph.MaxOp(a, b))
    gap = t.emit(graph.NegOp(t.emit(graph.AbsOp(t.emit(graph.SubOp(a, b))))))
    smooth = t.emit(graph.AddOp(top, t.emit(graph.Log1pOp(t.emit(graph.ExpOp(gap))))))
    infinite = t.emit(graph.CompareOp(t.emit(graph.AbsOp(a)), t.scalar(math.inf, work), "eq"))
    same = t.emit(graph.CompareOp(a, b, "eq"))
    both = t.emit(graph.MulOp(t.cast(infinite, work.element_type), t.cast(same, work.element_type)))
    both = t.emit(graph.CompareOp(both, t.scalar(0.0, work), "ne"))
    return t.cast(t.emit(graph.SelectOp(both, a, smooth)), out.element_type)


@_handles("xlogy", "special_xlogy")
def _xlogy(t: _Translator, node: Node) -> SSAValue:
    """`x · log(y)`, 0 where x is 0 and NaN where y is NaN (torch's rule)."""
    out = t.tensor_type(node)
    work = _work_type(out)
    x, y = (t.operand_like(v, work, node) for v in node.args[:2])
    product = t.emit(graph.MulOp(x, t.emit(graph.LogOp(y))))
    zero = t.scalar(0.0, work)
    result = t.emit(graph.SelectOp(t.emit(graph.CompareOp(x, zero, "eq")), zero, product))
    nan = t.emit(graph.CompareOp(y, y, "ne"))
    return t.cast(t.emit(graph.SelectOp(nan, y, result)), out.element_type)


@_handles("heaviside")
def _heaviside(t: _Translator, node: Node) -> SSAValue:
    """`x == 0 ? values : (x > 0)`, torch's (NaN gives 0)."""
    out = t.tensor_type(node)
    x, values = (t.operand_like(v, out, node) for v in node.args[:2])
    above = t.cast(t.emit(graph.CompareOp(x, t.scalar(0.0, out), "gt")), out.element_type)
    zero = t.emit(graph.CompareOp(x, t.scalar(0.0, out), "eq"))
    return t.emit(graph.SelectOp(zero, values, above))


@_handles("hypot")
def _hypot(t: _Translator, node: Node) -> SSAValue:
    """`m · sqrt(1 + (s / m)²)` with m and s the larger and smaller magnitude, so no square
    overflows where the result does not; 0 where both are 0 and inf where either is infinite,
    the other NaN or not (C's hypot, as torch's); in f32 for f16/bf16."""
    out = t.tensor_type(node)
    work = _work_type(out)
    a, b = (t.emit(graph.AbsOp(t.operand_like(v, work, node))) for v in node.args[:2])
    large, small = t.emit(graph.MaxOp(a, b)), t.emit(graph.MinOp(a, b))
    ratio = t.emit(graph.DivOp(small, large))
    root = t.emit(
        graph.SqrtOp(t.emit(graph.AddOp(t.scalar(1.0, work), t.emit(graph.MulOp(ratio, ratio)))))
    )
    zero, inf = t.scalar(0.0, work), t.scalar(math.inf, work)
    result = t.emit(graph.MulOp(large, root))
    result = t.emit(graph.SelectOp(t.emit(graph.CompareOp(large, zero, "eq")), zero, result))
    for x in (a, b):
        result = t.emit(graph.SelectOp(t.emit(graph.CompareOp(x, inf, "eq")), inf, result))
    return t.cast(result, out.element_type)


@_handles("rrelu")
def _rrelu(t: _Translator, node: Node) -> SSAValue:
    """In eval mode, a leaky relu with the mean of the two slopes; training (random slopes) is
    refused."""
    if _arg(node, 3, "training", False):
        raise t.fail(node, "aten.rrelu in training mode (random slopes)")
    out = t.tensor_type(node)
    x = t.operand_like(node.args[0], out, node)
    lower, upper = float(_arg(node, 1, "lower", 1 / 8)), float(_arg(node, 2, "upper", 1 / 3))
    positive = t.emit(graph.CompareOp(x, t.scalar(0.0, out), "ge"))
    scaled = t.emit(graph.MulOp(x, t.scalar((lower + upper) / 2, out)))
    return t.emit(graph.SelectOp(positive, x, scaled))


@_handles("leaky_relu")
def _leaky_relu(t: _Translator, node: Node) -> SSAValue:
    """`x > 0 ? x : x * negative_slope` (NaN stays NaN), as torch computes it."""
    out = t.tensor_type(node)
    x = t.operand_like(node.args[0], out, node)
    slope = t.scalar(float(_arg(node, 1, "negative_slope", LEAKY_RELU_SLOPE)), out)
    positive = t.emit(graph.CompareOp(x, t.scalar(0.0, out), "gt"))
    return t.emit(graph.SelectOp(positive, x, t.emit(graph.MulOp(x, slope))))


SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946
"""`selu`'s constants (torch's, from Klambauer et al.)."""


@_handles("elu", "selu", "celu")
def _elu(t: _Translator, node: Node) -> SSAValue:
    """`x > 0 ? x · scale : expm1(x · input_scale) · alpha · scale`, torch's elu; selu is elu
    with its fixed alpha and scale, celu(x, alpha) elu with input_scale 1 / alpha."""
    out = t.tensor_type(node)
    x = t.operand_like(node.args[0], out, node)
    name = node.target._overloadpacket.__name__  # pyright: ignore
    if name == "selu":
        alpha, scale, input_scale = SELU_ALPHA, SELU_SCALE, 1.0
    elif name == "celu":
        alpha = float(_arg(node, 1, "alpha", 1.0))
        if alpha == 0.0:
            raise t.fail(node, "aten.celu with alpha=0")
        scale, input_scale = 1.0, 1.0 / alpha
    else:
        alpha = float(_arg(node, 1, "alpha", 1.0))
        scale = float(_arg(node, 2, "scale", 1.0))
        input_scale = float(_arg(node, 3, "input_scale", 1.0))
    negative = x
    if input_scale != 1.0:
        negative = t.emit(graph.MulOp(x, t.scalar(input_scale, out)))
    negative = t.emit(graph.MulOp(t.emit(graph.Expm1Op(negative)), t.scalar(alpha * scale, out)))
    positive = x if scale == 1.0 else t.emit(graph.MulOp(x, t.scalar(scale, out)))
    above = t.emit(graph.CompareOp(x, t.scalar(0.0, out), "gt"))
    return t.emit(graph.SelectOp(above, positive, negative))


SOFTPLUS_THRESHOLD = 20.0
"""`softplus`'s default threshold: past it (x · beta) the result is x."""


@_handles("softplus")
def _softplus(t: _Translator, node: Node) -> SSAValue:
    """`x · beta > threshold ? x : log1p(exp(x · beta)) / beta`, torch's softplus."""
    out = t.tensor_type(node)
    x = t.operand_like(node.args[0], out, node)
    beta = float(_arg(node, 1, "beta", 1.0))
    threshold = float(_arg(node, 2, "threshold", SOFTPLUS_THRESHOLD))
    scaled = x if beta == 1.0 else t.emit(graph.MulOp(x, t.scalar(beta, out)))
    smooth = t.emit(graph.Log1pOp(t.emit(graph.ExpOp(scaled))))
    if beta != 1.0:
        smooth = t.emit(graph.DivOp(smooth, t.scalar(beta, out)))
    linear = t.emit(graph.CompareOp(scaled, t.scalar(threshold, out), "gt"))
    return t.emit(graph.SelectOp(linear, x, smooth))


@_handles("mish")
def _mish(t: _Translator, node: Node) -> SSAValue:
    """`x · tanh(log1p(exp(x)))`, torch's mish (no threshold: exp overflows to inf, whose
    log1p and tanh give x)."""
    out = t.tensor_type(node)
    x = t.operand_like(node.args[0], out, node)
    smooth = t.emit(graph.Log1pOp(t.emit(graph.ExpOp(x))))
    return t.emit(graph.MulOp(x, t.emit(graph.TanhOp(smooth))))


@_handles("hardsigmoid", "hardswish")
def _hard_sigmoid(t: _Translator, node: Node) -> SSAValue:
    """`min(max(x + 3, 0), 6) / 6`, and for hardswish `x * min(max(x + 3, 0), 6) / 6`: torch's
    formulas, in its order."""
    out = t.tensor_type(node)
    x = t.operand_like(node.args[0], out, node)
    shifted = t.emit(graph.AddOp(x, t.scalar(3.0, out)))
    low = t.emit(graph.MaxOp(shifted, t.scalar(0.0, out)))
    clamped = t.emit(graph.MinOp(low, t.scalar(6.0, out)))
    if node.target._overloadpacket.__name__ == "hardswish":  # pyright: ignore
        clamped = t.emit(graph.MulOp(x, clamped))
    return t.emit(graph.DivOp(clamped, t.scalar(6.0, out)))


@_handles("glu")
def _glu(t: _Translator, node: Node) -> SSAValue:
    """`a · sigmoid(b)` with a and b the halves of x along the dim (the last by default)."""
    out = t.tensor_type(node)
    x = t.cast(t.value(node.args[0], node), out.element_type)
    dim = _dims(_arg(node, 1, "dim", -1), out.get_num_dims())[0]
    half = out.get_shape()[dim]
    a, b = (t.emit(graph.SliceOp(x, dim, start, half, 1)) for start in (0, half))
    return t.emit(graph.MulOp(a, t.emit(graph.SigmoidOp(b))))


@_handles("prelu", "_prelu_kernel")
def _prelu(t: _Translator, node: Node) -> SSAValue:
    """`x > 0 ? x : weight · x` (NaN stays NaN), the weight one number or one per channel
    (dim 1)."""
    out = t.tensor_type(node)
    x = t.operand_like(node.args[0], out, node)
    weight = t.cast(t.value(node.args[1], node), out.element_type)
    shape = out.get_shape()
    if math.prod(_type(weight).get_shape()) == 1 or len(shape) < 2:
        weight = t.broadcast(t.reshape(weight, [1] * len(shape)), shape)
    else:
        weight = _per_channel(t, node.args[1], node, shape, out.element_type)
    positive = t.emit(graph.CompareOp(x, t.scalar(0.0, out), "gt"))
    return t.emit(graph.SelectOp(positive, x, t.emit(graph.MulOp(weight, x))))


@_handles("log_sigmoid")
def _log_sigmoid(t: _Translator, node: Node) -> SSAValue:
    """`min(x, 0) - log1p(exp(-|x|))`, torch's form (no overflow at either end)."""
    out = t.tensor_type(node)
    x = t.operand_like(node.args[0], out, node)
    tail = t.emit(graph.Log1pOp(t.emit(graph.ExpOp(t.emit(graph.NegOp(t.emit(graph.AbsOp(x))))))))
    return t.emit(graph.SubOp(t.emit(graph.MinOp(x, t.scalar(0.0, out))), tail))


@_handles("threshold")
def _threshold(t: _Translator, node: Node) -> SSAValue:
    """`x <= threshold ? value : x` (NaN stays NaN)."""
    out = t.tensor_type(node)
    x = t.operand_like(node.args[0], out, node)
    below = t.emit(graph.CompareOp(x, t.scalar(float(node.args[1]), out), "le"))
    return t.emit(graph.SelectOp(below, t.scalar(float(node.args[2]), out), x))


SHRINK_LAMBDA = 0.5
"""`hardshrink`'s and `softshrink`'s default lambd."""


@_handles("hardshrink", "softshrink")
def _shrink(t: _Translator, node: Node) -> SSAValue:
    """hardshrink: `-lambd <= x <= lambd ? 0 : x`; softshrink: `x > lambd ? x - lambd : x <
    -lambd ? x + lambd : x · 0` (NaN stays NaN in both), torch's forms."""
    out = t.tensor_type(node)
    x = t.operand_like(node.args[0], out, node)
    lambd = float(_arg(node, 1, "lambd", SHRINK_LAMBDA))
    high, low = t.scalar(lambd, out), t.scalar(-lambd, out)
    zero = t.scalar(0.0, out)
    if node.target._overloadpacket.__name__ == "hardshrink":  # pyright: ignore
        inside = t.emit(
            graph.MulOp(
                t.cast(t.emit(graph.CompareOp(x, low, "ge")), out.element_type),
                t.cast(t.emit(graph.CompareOp(x, high, "le")), out.element_type),
            )
        )
        inside = t.emit(graph.CompareOp(inside, zero, "ne"))
        return t.emit(graph.SelectOp(inside, zero, x))
    above = t.emit(graph.CompareOp(x, high, "gt"))
    below = t.emit(graph.CompareOp(x, low, "lt"))
    middle = t.emit(
        graph.SelectOp(below, t.emit(graph.AddOp(x, high)), t.emit(graph.MulOp(x, zero)))
    )
    return t.emit(graph.SelectOp(above, t.emit(graph.SubOp(x, high)), middle))


_LOG_BASES = {"log2": 2.0, "log10": 10.0}


@_handles("log2", "log10", "exp2")
def _other_base(t: _Translator, node: Node) -> SSAValue:
    """`log(x) / log(base)` and `exp(x · log(2))` in f32 (for f16/bf16 too): within a few f32
    roundings of CUDA's `log2f`/`log10f`/`exp2f` (for exp2, |x| · 2^-24 more relative error,
    1e-6 at |x| = 17)."""
    out = t.tensor_type(node)
    work = _work_type(out)  # the constant in f32: ln 2 in bf16 is 0.2% off, amplified by exp
    x = t.operand_like(node.args[0], work, node)
    name = node.target._overloadpacket.__name__  # pyright: ignore
    if name == "exp2":
        result = t.emit(graph.ExpOp(t.emit(graph.MulOp(x, t.scalar(math.log(2.0), work)))))
    else:
        base = t.scalar(1.0 / math.log(_LOG_BASES[name]), work)
        result = t.emit(graph.MulOp(t.emit(graph.LogOp(x)), base))
    return t.cast(result, out.element_type)


@_handles("log_softmax", "_log_softmax")
def _log_softmax(t: _Translator, node: Node) -> SSAValue:
    """`s - log(sum(exp(s)))` with `s = x - max(x)` along the dim, in f32 for f16/bf16 results
    (a row of -inf gives NaN, as torch)."""
    out = t.tensor_type(node)
    work = _work_type(out)
    shape = out.get_shape()
    x = t.cast(t.value(node.args[0], node), work.element_type)
    dim = _dims(node.args[1], len(shape))
    top = t.broadcast(t.emit(graph.ReduceMaxOp(x, dim, keepdim=True)), shape)
    shifted = t.emit(graph.SubOp(x, top))
    total = t.emit(graph.ReduceSumOp(t.emit(graph.ExpOp(shifted)), dim, keepdim=True))
    result = t.emit(graph.SubOp(shifted, t.broadcast(t.emit(graph.LogOp(total)), shape)))
    return t.cast(result, out.element_type)


@_handles("logsumexp")
def _logsumexp(t: _Translator, node: Node) -> SSAValue:
    """`m + log(sum(exp(x - m)))` over the dims, with m the maximum where it is finite and 0
    where it is infinite (torch's rule: all -inf gives -inf, a +inf gives +inf), in f32 for
    f16/bf16 results."""
    out = t.tensor_type(node)
    x = t.value(node.args[0], node)
    shape = _type(x).get_shape()
    x = t.cast(x, _work_type(out).element_type)
    dims = _dims(_arg(node, 1, "dim"), len(shape))
    top = t.emit(graph.ReduceMaxOp(x, dims, keepdim=True))
    kept = _type(top)
    infinite = t.emit(graph.CompareOp(t.emit(graph.AbsOp(top)), t.scalar(math.inf, kept), "eq"))
    finite_top = t.emit(graph.SelectOp(infinite, t.scalar(0.0, kept), top))
    shifted = t.emit(graph.SubOp(x, t.broadcast(finite_top, shape)))
    total = t.emit(graph.ReduceSumOp(t.emit(graph.ExpOp(shifted)), dims, keepdim=True))
    result = t.emit(graph.AddOp(t.emit(graph.LogOp(total)), finite_top))
    return t.cast(t.reshape(result, out.get_shape()), out.element_type)


@_handles("sign")
def _sign(t: _Translator, node: Node) -> SSAValue:
    """`(x > 0) - (x < 0)`, as torch computes it: 0 where x is NaN (numpy's gives NaN;
    integers as the f32 they are carried in: exact)."""
    out = t.tensor_type(node)
    if out.element_type == graph.BOOL:
        raise t.fail(node, "aten.sign of bool")
    x = t.operand_like(node.args[0], out, node)
    zero = t.scalar(0.0, out)
    above, below = (
        t.cast(t.emit(graph.CompareOp(x, zero, predicate)), out.element_type)
        for predicate in ("gt", "lt")
    )
    return t.emit(graph.SubOp(above, below))


@_handles("fmax", "fmin")
def _fmax(t: _Translator, node: Node) -> SSAValue:
    """torch.fmax/fmin: max/min where neither operand is NaN, else the one that is not (NaN only
    where both are), where maximum/minimum give NaN if either is."""
    out = t.tensor_type(node)
    work = _mask_work_type(out)
    a = t.operand_like(node.args[0], work, node)
    b = t.operand_like(node.args[1], work, node)
    name = node.target._overloadpacket.__name__  # pyright: ignore
    result = t.emit((graph.MaxOp if name == "fmax" else graph.MinOp)(a, b))
    if out.element_type in graph.FLOAT_TYPES:
        a_nan, b_nan = (t.emit(graph.CompareOp(v, v, "ne")) for v in (a, b))
        result = t.emit(graph.SelectOp(a_nan, b, t.emit(graph.SelectOp(b_nan, a, result))))
    return t.cast(result, out.element_type)


@_handles("signbit")
def _signbit(t: _Translator, node: Node) -> SSAValue:
    """A mask of the values whose sign bit is set: 1 with x's sign below 0 (so -0.0 and a NaN
    of negative sign are in it, as torch's)."""
    x = t.value(node.args[0], node)
    if _type(x).element_type not in graph.FLOAT_TYPES:
        return t.emit(graph.CompareOp(x, t.scalar(0.0, _type(x)), "lt"))
    signed = t.emit(graph.CopySignOp(t.scalar(1.0, _type(x)), x))
    return t.emit(graph.CompareOp(signed, t.scalar(0.0, _type(x)), "lt"))


@_handles("isnan")
def _isnan(t: _Translator, node: Node) -> SSAValue:
    """`x != x`: a mask."""
    x = t.value(node.args[0], node)
    if _type(x).element_type not in graph.FLOAT_TYPES:
        return t.scalar(0.0, t.tensor_type(node))  # integers and masks are never NaN
    return t.emit(graph.CompareOp(x, x, "ne"))


@_handles("isinf", "isposinf", "isneginf", "isfinite")
def _isinf(t: _Translator, node: Node) -> SSAValue:
    """Masks of infinite values (`|x| == inf`, or `x == ±inf`) and of finite ones (`x − x ==
    0`: infinities and NaN give NaN)."""
    out = t.tensor_type(node)
    x = t.value(node.args[0], node)
    name = node.target._overloadpacket.__name__  # pyright: ignore
    if _type(x).element_type not in graph.FLOAT_TYPES:  # integers and masks are finite
        return t.scalar(1.0 if name == "isfinite" else 0.0, out)
    if name == "isfinite":
        zero = t.scalar(0.0, _type(x))
        return t.emit(graph.CompareOp(t.emit(graph.SubOp(x, x)), zero, "eq"))
    value = -math.inf if name == "isneginf" else math.inf
    subject = t.emit(graph.AbsOp(x)) if name == "isinf" else x
    return t.emit(graph.CompareOp(subject, t.scalar(value, _type(x)), "eq"))


FREXP_EXPONENT_BOUND = 148
"""The largest exponent magnitude `torch.frexp` gives an f32 (or f16/bf16) value: 2^-149, the
smallest subnormal, is 0.5 · 2^-148; below 2^128 every value is under 1 · 2^128."""

_HALVINGS = (64, 32, 16, 8, 4, 2, 1)
"""Binary steps of a power of two: greedily, any exponent to 127 is a sum of them."""
_DOUBLINGS = (64, *_HALVINGS)
"""The same with 64 twice: any exponent to 191, past the 149 a subnormal needs."""


def _power_of_two(t: _Translator, k: SSAValue) -> SSAValue:
    """`2^k` for an f32 tensor of integers k in [-149, 127], exact (a subnormal too): a product
    of the constant powers 2^±64 … 2^±1 that |k|'s binary steps take, where a `pow` on the GPU
    is accurate only to an ulp or so and `ldexp`/`frexp` must not round."""
    like = _type(k)
    negative = t.emit(graph.CompareOp(k, t.scalar(0.0, like), "lt"))
    remaining = t.emit(graph.AbsOp(k))
    power = t.scalar(1.0, like)
    for step in _DOUBLINGS:
        take = t.emit(graph.CompareOp(remaining, t.scalar(float(step), like), "ge"))
        factor = t.emit(
            graph.SelectOp(negative, t.scalar(2.0**-step, like), t.scalar(2.0**step, like))
        )
        power = t.emit(graph.SelectOp(take, t.emit(graph.MulOp(power, factor)), power))
        remaining = t.emit(
            graph.SelectOp(
                take, t.emit(graph.SubOp(remaining, t.scalar(float(step), like))), remaining
            )
        )
    return power


def _significand(t: _Translator, x: SSAValue) -> tuple[SSAValue, SSAValue, SSAValue]:
    """`|x| = s · 2^e` with s in [1, 2) for finite nonzero f32 x, and the mask of those x:
    |x| scaled down by 2^64 … 2^1 while it is at least that, then up by 2^64, 2^64, 2^32 … 2^1
    while it stays below 2 (a subnormal needs up to 2^149), each step a multiplication by a
    power of two, exact. s and e are meaningless where the mask is False (0, ±inf, NaN)."""
    like = _type(x)
    scaled = t.emit(graph.AbsOp(x))
    ordinary = t.emit(  # 0 < |x| < inf; NaN compares False
        graph.CompareOp(
            t.emit(
                graph.SelectOp(
                    t.emit(graph.CompareOp(scaled, t.scalar(math.inf, like), "lt")),
                    scaled,
                    t.scalar(0.0, like),
                )
            ),
            t.scalar(0.0, like),
            "gt",
        )
    )
    exponent = t.scalar(0.0, like)

    def step(take: SSAValue, factor: float, change: float) -> None:
        nonlocal scaled, exponent
        scaled = t.emit(
            graph.SelectOp(take, t.emit(graph.MulOp(scaled, t.scalar(factor, like))), scaled)
        )
        moved = t.emit(graph.AddOp(exponent, t.scalar(change, like)))
        exponent = t.emit(graph.SelectOp(take, moved, exponent))

    for size in _HALVINGS:
        step(t.emit(graph.CompareOp(scaled, t.scalar(2.0**size, like), "ge")), 2.0**-size, size)
    for size in _DOUBLINGS:
        below = t.emit(graph.CompareOp(scaled, t.scalar(2.0 ** (1 - size), like), "lt"))
        step(below, 2.0**size, -size)
    return scaled, exponent, ordinary


@_handles("frexp")
def _frexp(t: _Translator, node: Node) -> list[SSAValue | None]:
    """`x = m · 2^e` with |m| in [0.5, 1) and an int32 e, as torch's (C's) frexp: m and e from
    `_significand` (m = ±s/2, e + 1), exact at any magnitude (subnormals too); 0, ±inf and NaN
    give themselves and e = 0. In f32 for f16/bf16 (whose m has their own bits, cast back
    exactly); e is an integer of magnitude at most `FREXP_EXPONENT_BOUND`."""
    x = t.cast(t.value(node.args[0], node), f32)
    like = _type(x)
    scaled, exponent, ordinary = _significand(t, x)
    half = t.emit(graph.CopySignOp(t.emit(graph.MulOp(scaled, t.scalar(0.5, like))), x))
    mantissa = t.emit(graph.SelectOp(ordinary, half, x))
    shifted = t.emit(graph.AddOp(exponent, t.scalar(1.0, like)))
    exponent = t.emit(graph.SelectOp(ordinary, shifted, t.scalar(0.0, like)))
    return [t.cast(mantissa, _DTYPES[_dtype(node)]), exponent]  # the mantissa's dtype


LDEXP_SPLIT = (-60, 1)
"""The range of the first of `ldexp`'s two scalings of a significand in [1, 2): exact there
(the result normal), and it leaves the second a power of two f32 holds (2^-149 to 2^127)."""


@_handles("ldexp")
def _ldexp(t: _Translator, node: Node) -> SSAValue:
    """`x · 2^e`. With integer exponents torch's CPU kernel rounds the exact product once
    (`ldexp(2^100, -160)` is 2^-60, not 2^100 · 0 from an underflowed 2^-160): x = s · 2^k
    (`_significand`, exact), then s · 2^p with p = k + e clamped to [-209, 128] (below it the
    result rounds to 0, above it is inf) as (s · 2^a) · 2^(p − a), a = p clamped to
    `LDEXP_SPLIT`: the first exact, the second rounding once; 0, ±inf and NaN stay themselves.
    Float exponents are torch's `x · pow(2, e)`. Computed in f32 (for f16/bf16 then rounded
    once to their type, where f32 holds their whole range)."""
    out = t.tensor_type(node)
    work = TensorType(f32, out.get_shape())
    x = t.operand_like(node.args[0], work, node)
    if _dtype(node.args[1]) not in _ID_DTYPES:
        power = t.emit(graph.PowOp(t.scalar(2.0, work), t.operand_like(node.args[1], work, node)))
        # torch's pow(2, e) is e's dtype: a f16/bf16 e's power is rounded to it before the product
        power = t.cast(t.cast(power, _DTYPES[_dtype(node.args[1])]), f32)
        return t.cast(t.emit(graph.MulOp(x, power)), out.element_type)
    e = t.operand_like(node.args[1], work, node)
    scaled, exponent, ordinary = _significand(t, x)
    total = t.emit(graph.AddOp(exponent, e))
    total = t.emit(
        graph.MinOp(t.emit(graph.MaxOp(total, t.scalar(-209.0, work))), t.scalar(128.0, work))
    )
    low, high = LDEXP_SPLIT
    first = t.emit(
        graph.MinOp(
            t.emit(graph.MaxOp(total, t.scalar(float(low), work))), t.scalar(float(high), work)
        )
    )
    second = t.emit(graph.SubOp(total, first))
    exact = t.emit(graph.MulOp(scaled, _power_of_two(t, first)))
    result = t.emit(graph.CopySignOp(t.emit(graph.MulOp(exact, _power_of_two(t, second))), x))
    return t.cast(t.emit(graph.SelectOp(ordinary, result, x)), out.element_type)


@_handles("linalg_vector_norm", "linalg_norm")
def _vector_norm(t: _Translator, node: Node) -> SSAValue:
    """A vector norm over the dims (all by default), in f32 for f16/bf16 results: the 2-norm
    `sqrt(sum(x * x))` (also `linalg.norm`'s default and Frobenius norms), the 1-norm
    `sum(|x|)`, the ∞-norms `max(|x|)` / `min(|x|)` and any other order p (`_norm`); `linalg.norm`'s
    matrix norms (`_matrix_norm`) but the Frobenius norm, which is the 2-norm over both dims."""
    name = node.target._overloadpacket.__name__  # pyright: ignore
    given_order = _arg(node, 1, "ord")
    order = 2 if given_order is None or given_order == "fro" else given_order
    out = t.tensor_type(node)
    x = t.value(node.args[0], node)
    rank = _type(x).get_num_dims()
    x = t.cast(x, _work_type(out).element_type)
    given = _arg(node, 2, "dim")
    dims = _dims(given, rank)
    keepdim = bool(_arg(node, 3, "keepdim", False))
    if name == "linalg_norm":
        # `linalg.norm(A, ord)` of a 2-D A without dims is a matrix norm, as over two dims
        matrix = (isinstance(given, list | tuple) and len(given) == 2) or (
            given is None and given_order is not None and rank == 2
        )
        if matrix and given_order not in (None, "fro"):
            norm = _matrix_norm(t, node, x, dims, order)
            return t.cast(t.reshape(norm, out.get_shape()), out.element_type)
    if isinstance(order, str):
        raise t.fail(node, f"aten.{name} with ord={order} of a vector")
    return t.cast(_norm(t, x, dims, keepdim, float(order)), out.element_type)


def _matrix_norm(t: _Translator, node: Node, x: SSAValue, dims: list[int], order: Any) -> SSAValue:
    """An induced matrix norm over `dims` (rows, columns), both kept: the largest (ord=1) or
    smallest (-1) column sum of |x|, the largest (inf) or smallest (-inf) row sum. The
    spectral (±2) and nuclear norms take singular values, which tinyopt does not compute."""
    if order not in (1, -1, math.inf, -math.inf):
        raise t.fail(
            node,
            f"aten.linalg_norm of a matrix with ord={order} (singular values; 'fro', 1, -1, "
            "inf and -inf are taken)",
        )
    rows, columns = dims
    summed, folded = (rows, columns) if abs(order) == 1 else (columns, rows)
    sums = t.emit(graph.ReduceSumOp(t.emit(graph.AbsOp(x)), [summed], True))
    fold = graph.ReduceMaxOp if order > 0 else graph.ReduceMinOp
    return t.emit(fold(sums, [folded], True))


def _norm(t: _Translator, x: SSAValue, dims: list[int], keepdim: bool, order: float) -> SSAValue:
    """The order-`order` vector norm of `x` over `dims`: `sqrt(Σ x²)` (2), `Σ |x|` (1),
    `max |x|` / `min |x|` (±inf), the count of nonzeros (0), else `(Σ |x|^p)^(1/p)` (as torch,
    negative p too: a zero element makes the sum infinite and the norm 0)."""
    if order == 2:
        return t.emit(
            graph.SqrtOp(t.emit(graph.ReduceSumOp(t.emit(graph.MulOp(x, x)), dims, keepdim)))
        )
    if order == 0:
        nonzero = t.emit(graph.CompareOp(x, t.scalar(0.0, _type(x)), "ne"))
        return t.emit(graph.ReduceSumOp(t.cast(nonzero, _type(x).element_type), dims, keepdim))
    magnitude = t.emit(graph.AbsOp(x))
    folds = {1: graph.ReduceSumOp, math.inf: graph.ReduceMaxOp, -math.inf: graph.ReduceMinOp}
    if order in folds:
        return t.emit(folds[order](magnitude, dims, keepdim))
    powered = t.emit(graph.PowOp(magnitude, t.scalar(order, _type(magnitude))))
    total = t.emit(graph.ReduceSumOp(powered, dims, keepdim))
    return t.emit(graph.PowOp(total, t.scalar(1.0 / order, _type(total))))


@_handles("stack")
def _stack(t: _Translator, node: Node) -> SSAValue:
    """Each tensor given a dim of 1 at `dim`, then `cat` along it."""
    out = t.tensor_type(node)
    shape = list(out.get_shape())
    dim = _dims(_arg(node, 1, "dim", 0), len(shape))[0]
    shape[dim] = 1
    element = _moved_element_type(t, node, node.args[0])
    parts = [t.reshape(t.cast(t.value(a, node), element), shape) for a in node.args[0]]
    return parts[0] if len(parts) == 1 else t.emit(graph.ConcatOp(parts, dim))


@_handles("max", "min")
def _max_min(t: _Translator, node: Node) -> SSAValue | list[SSAValue | None]:
    """`max(a, b)` / `min(a, b)` elementwise, of all elements (`max(x)`), or over a dim with
    the first index of each extreme (`max(x, dim)`: values and indices, NaN the extreme as in
    torch)."""
    name = node.target._overloadpacket.__name__  # pyright: ignore
    overload = node.target._overloadname  # pyright: ignore
    if overload == "dim":
        x = t.value(node.args[0], node)
        dim, keepdim = _arg(node, 1, "dim"), bool(_arg(node, 2, "keepdim", False))
        indices = _arg_extreme(t, node, x, dim, keepdim, smallest=name == "min")
        indices = _torch_shape(t, node, indices, 1)  # a 0-d x's: 0-d, keepdim or not
        element = _type(x).element_type
        x = t.cast(x, f32) if element not in graph.FLOAT_TYPES else x
        reduce = graph.ReduceMaxOp if name == "max" else graph.ReduceMinOp
        values = t.emit(reduce(x, _dims(dim, _type(x).get_num_dims()), keepdim))
        return [t.cast(values, element) if element == graph.BOOL else values, indices]
    out = t.tensor_type(node)
    work = _mask_work_type(out)
    if overload == "other":
        a, b = (t.operand_like(x, work, node) for x in node.args[:2])
        return t.cast(
            t.emit((graph.MaxOp if name == "max" else graph.MinOp)(a, b)), out.element_type
        )
    x = t.cast(t.value(node.args[0], node), work.element_type)
    dims = list(range(_type(x).get_num_dims()))
    reduce = graph.ReduceMaxOp if name == "max" else graph.ReduceMinOp
    return t.cast(t.emit(reduce(x, dims, keepdim=False)), out.element_type)


# ------------------------------------------------------------------- padding and copies


def _constant_block(t: _Translator, x: SSAValue, dim: int, size: int, value: float) -> SSAValue:
    """A tensor of `value` shaped as `x` but `size` long along `dim` (one number, broadcast)."""
    shape = list(_type(x).get_shape())
    shape[dim] = size
    return t.scalar(value, TensorType(_type(x).element_type, shape))


@_handles("pad", "constant_pad_nd")
def _pad(t: _Translator, node: Node) -> SSAValue:
    """Padding of the last dims, (before, after) pairs from the last dim backwards: a concat
    around x of the value's blocks (`constant`), of x's edge broadcast (`replicate`), of x's
    rows next to the edge in reverse (`reflect`) or of its rows at the other end
    (`circular`); a negative amount crops (a slice)."""
    name = node.target._overloadpacket.__name__  # pyright: ignore
    mode = _arg(node, 2, "mode", "constant") if name == "pad" else "constant"
    if mode not in _PAD_MODES:
        raise t.fail(node, f"aten.pad with mode={mode!r}")
    value = _arg(node, 3, "value", None) if name == "pad" else _arg(node, 2, "value", 0)
    value = _stored(node, value)
    out = t.tensor_type(node)
    x = t.cast(t.value(node.args[0], node), out.element_type)
    amounts, rank = list(node.args[1]), out.get_num_dims()
    for i in range(len(amounts) // 2):
        dim, (before, after) = rank - 1 - i, amounts[2 * i : 2 * i + 2]
        if mode != "constant" and (before < 0 or after < 0):
            raise t.fail(node, f"aten.pad with mode={mode!r} and a negative amount")

        def block(kept: SSAValue, size: int, first: bool, dim: int = dim) -> SSAValue:
            return _pad_block(t, kept, dim, size, first, mode, value)

        x = _pad_or_crop(t, x, dim, before, after, block)
    return x


def _pad_or_crop(
    t: _Translator,
    x: SSAValue,
    dim: int,
    before: int,
    after: int,
    block: Callable[[SSAValue, int, bool], SSAValue],
) -> SSAValue:
    """`x` along `dim` with `before` and `after` elements cut off where negative, then
    `block(x, size, first)` concatenated before and after it where positive."""
    extent = _type(x).get_shape()[dim]
    start, end = max(-before, 0), extent - max(-after, 0)
    if (start, end) != (0, extent):
        x = t.emit(graph.SliceOp(x, dim, start, end - start, 1))
    parts = [
        *([block(x, before, True)] if before > 0 else []),
        x,
        *([block(x, after, False)] if after > 0 else []),
    ]
    return x if len(parts) == 1 else t.emit(graph.ConcatOp(parts, dim))


_PAD_MODES = ("constant", "replicate", "reflect", "circular")


def _pad_block(
    t: _Translator, x: SSAValue, dim: int, size: int, before: bool, mode: str, value: Any
) -> SSAValue:
    """The `size` elements `mode` puts before (or after) x along `dim`."""
    extent = _type(x).get_shape()[dim]
    if mode == "constant":
        return _constant_block(t, x, dim, size, float(0 if value is None else value))  # -0.0 too
    if mode == "replicate":
        edge = t.emit(graph.SliceOp(x, dim, 0 if before else extent - 1, 1, 1))
        shape = list(_type(x).get_shape())
        shape[dim] = size
        return t.broadcast(edge, shape)
    if mode == "circular":
        return t.emit(graph.SliceOp(x, dim, extent - size if before else 0, size, 1))
    # reflect: the rows next to the edge (the edge itself left out), nearest row outermost
    mirrored = t.emit(graph.SliceOp(x, dim, 1 if before else extent - 1 - size, size, 1))
    return _reversed(t, mirrored, dim)


def _reversed(t: _Translator, x: SSAValue, dim: int) -> SSAValue:
    """`x` with `dim` in reverse order: its rows taken by the index expression `n - 1 - i`
    (integers kept in their type, which a gather does not take, by `_reversed_by_slices`)."""
    extent = _type(x).get_shape()[dim]
    if extent == 1:
        return x
    if _type(x).element_type in graph.ID_TYPES:
        reversed_ = _reversed_by_slices(t, x, dim)
        if reversed_ is not None:
            return reversed_
        x = t.cast(x, f32)  # exact where bounded (`translate` checks the result's bound)
    index = TensorType(f32, [extent])
    last = t.scalar(float(extent - 1), index)
    return _take(t, x, dim, t.cast(t.emit(graph.SubOp(last, t.emit(graph.IotaOp(index, 0)))), i64))


REVERSED_SLICES = 256
"""Most slices `_reversed_by_slices` takes of one dim (the sum of its size's prime factors)."""


def _reversed_by_slices(t: _Translator, x: SSAValue, dim: int) -> SSAValue | None:
    """`x` (integers in their own type) with `dim` in reverse order, without arithmetic: the
    dim split into its prime factors p₁ × … × pₖ (row-major digits of the index), each digit
    reversed by concatenating its p slices last to first, which reverses the whole index
    (n − 1 − Σ dᵢ·sᵢ = Σ (pᵢ − 1 − dᵢ)·sᵢ). None past `REVERSED_SLICES` slices."""
    shape = list(_type(x).get_shape())
    factors: list[int] = []
    rest, p = shape[dim], 2
    while rest > 1:
        if p * p > rest:  # rest is prime
            factors.append(rest)
            break
        while rest % p == 0:
            factors.append(p)
            rest //= p
        p += 1
    if sum(factors) > REVERSED_SLICES:
        return None
    split = t.reshape(x, [*shape[:dim], *factors, *shape[dim + 1 :]])
    for k, size in enumerate(factors):
        axis = dim + k
        parts = [t.emit(graph.SliceOp(split, axis, i, 1, 1)) for i in reversed(range(size))]
        split = t.emit(graph.ConcatOp(parts, axis))
    return t.reshape(split, shape)


def _moved_element_type(t: _Translator, node: Node, args: Sequence[Any]) -> Attribute:
    """The element type an op that only moves values (`cat`, `repeat`, `flip`, …) moves them
    in: integer inputs' own type where every tensor argument is of it, so values are moved
    exactly whatever they are (computed integers are f32, exact only where bounded); else the
    node's type."""
    from torch.fx import Node

    types = {_type(t.value(a, node)).element_type for a in args if isinstance(a, Node)}
    if len(types) == 1 and next(iter(types)) in graph.ID_TYPES:
        same = _ID_DTYPES.get(_dtype(node))
        if same == next(iter(types)):
            return same
    return t.tensor_type(node).element_type


def _rows(t: _Translator, table: SSAValue, ids: SSAValue) -> SSAValue:
    """`graph.gather` of `table`'s rows by `ids`; a mask's rows gathered as 0/1 floats (the op
    takes float tables)."""
    if _type(table).element_type != graph.BOOL:
        return t.emit(graph.GatherOp(table, ids))
    return t.cast(t.emit(graph.GatherOp(t.cast(table, f32), ids)), graph.BOOL)


def _take(t: _Translator, x: SSAValue, dim: int, ids: SSAValue) -> SSAValue:
    """The rows of `x` along `dim` that `ids` name (x's dim replaced by the ids' dims): a
    gather of x with `dim` moved to the front, the ids' dims moved back to its place."""
    rank = _type(x).get_num_dims()
    perm = [dim, *(d for d in range(rank) if d != dim)]
    table = x if dim == 0 else t.emit(graph.TransposeOp(x, perm))
    gathered = _rows(t, table, ids)  # [*ids, rest of x without dim]
    count = _type(ids).get_num_dims()
    order = [*range(count, count + dim), *range(count), *range(count + dim, count + rank - 1)]
    if order == list(range(len(order))):
        return gathered
    return t.emit(graph.TransposeOp(gathered, order))


@_handles("flip")
def _flip(t: _Translator, node: Node) -> SSAValue:
    """Each given dim in reverse order (`_reversed`)."""
    out = t.tensor_type(node)
    x = t.cast(t.value(node.args[0], node), _moved_element_type(t, node, node.args[:1]))
    for dim in _dims(list(node.args[1]), out.get_num_dims()):
        x = _reversed(t, x, dim)
    return x


@_handles("pixel_shuffle", "pixel_unshuffle")
def _pixel_shuffle(t: _Translator, node: Node) -> SSAValue:
    """`[N, C·r², H, W]` to `[N, C, H·r, W·r]` (and back for unshuffle): a reshape, a
    transpose and a reshape."""
    out = t.tensor_type(node)
    x = t.cast(t.value(node.args[0], node), out.element_type)
    r = int(node.args[1])
    *lead, c, h, w = _type(x).get_shape()
    k = len(lead)
    if node.target._overloadpacket.__name__ == "pixel_shuffle":  # pyright: ignore
        split = t.reshape(x, (*lead, c // (r * r), r, r, h, w))
        order = (*range(k), k, k + 3, k + 1, k + 4, k + 2)  # [.., C, H, r, W, r]
    else:
        split = t.reshape(x, (*lead, c, h // r, r, w // r, r))
        order = (*range(k), k, k + 2, k + 4, k + 1, k + 3)  # [.., C, r, r, H/r, W/r]
    return t.reshape(t.emit(graph.TransposeOp(split, order)), out.get_shape())


@_handles("roll")
def _roll(t: _Translator, node: Node) -> SSAValue:
    """Each dim's last `shift` elements moved to its front: two slices and a concat (over the
    flattened tensor where no dim is given)."""
    out = t.tensor_type(node)
    x = t.cast(t.value(node.args[0], node), _moved_element_type(t, node, node.args[:1]))
    shifts, dims = _arg(node, 1, "shifts"), _arg(node, 2, "dims", [])
    shifts = list(shifts) if isinstance(shifts, list | tuple) else [shifts]
    flat = not dims
    if flat:
        x = t.reshape(x, (math.prod(out.get_shape()),))
    dims = [0] if flat else _dims(dims, out.get_num_dims())
    for shift, dim in zip(shifts, dims, strict=True):
        extent = _type(x).get_shape()[dim]
        k = shift % extent
        if k:
            tail = t.emit(graph.SliceOp(x, dim, extent - k, k, 1))
            head = t.emit(graph.SliceOp(x, dim, 0, extent - k, 1))
            x = t.emit(graph.ConcatOp([tail, head], dim))
    return t.reshape(x, out.get_shape())


@_handles("repeat")
def _repeat(t: _Translator, node: Node) -> SSAValue:
    """`x.repeat(sizes)`: x given the leading dims of size 1 that `sizes` adds, then each dim
    the concat of its copies."""
    out = t.tensor_type(node)
    x = t.cast(t.value(node.args[0], node), _moved_element_type(t, node, node.args[:1]))
    sizes = list(node.args[1])
    x = t.reshape(x, (1,) * (len(sizes) - _type(x).get_num_dims()) + _type(x).get_shape())
    for dim, copies in enumerate(sizes):
        if copies > 1:
            x = t.emit(graph.ConcatOp([x] * copies, dim))
    return t.reshape(x, out.get_shape())


@_handles("repeat_interleave")
def _repeat_interleave(t: _Translator, node: Node) -> SSAValue:
    """Each element repeated `repeats` times along `dim` (of the flattened tensor where no dim
    is given): a dim of 1 after it, broadcast, merged; a tensor of repeats is refused."""
    repeats = _arg(node, 1, "repeats")
    if not isinstance(repeats, int):
        raise t.fail(node, "aten.repeat_interleave with a tensor of repeats")
    out = t.tensor_type(node)
    x = t.cast(t.value(node.args[0], node), _moved_element_type(t, node, node.args[:1]))
    dim = _arg(node, 2, "dim")
    if dim is None:
        x, dim = t.reshape(x, (math.prod(_type(x).get_shape()),)), 0
    shape = list(_type(x).get_shape())
    dim = _dims(dim, len(shape))[0]
    spread = shape[: dim + 1] + [1] + shape[dim + 1 :]
    copies = shape[: dim + 1] + [repeats] + shape[dim + 1 :]
    x = t.broadcast(t.reshape(x, spread), copies)
    return t.reshape(x, out.get_shape())


def _per_channel(
    t: _Translator, arg: Any, node: Node, shape: Sequence[int], element: Attribute
) -> SSAValue:
    """A `[C]` tensor argument (a norm's statistic, weight or bias) broadcast along dim 1 of
    `shape`."""
    value = t.cast(t.value(arg, node), element)
    return t.broadcast(t.reshape(value, [1, shape[1], *[1] * (len(shape) - 2)]), shape)


@_handles("batch_norm")
def _batch_norm(t: _Translator, node: Node) -> SSAValue:
    """Inference batch norm over dim 1 (`_running_norm`); batch statistics where there are no
    running statistics to update (`track_running_stats=False`: `_batch_statistics_norm`);
    training mode that updates running statistics is refused."""
    weight, bias, mean, var, training, _, eps = node.args[1:8]
    if training and mean is None and var is None:
        return _batch_statistics_norm(t, node, (weight, bias), float(eps))
    if training:
        raise t.fail(node, "aten.batch_norm in training mode (call module.eval())")
    out = t.tensor_type(node)
    x = t.cast(t.value(node.args[0], node), out.element_type)
    return _running_norm(t, node, x, (weight, bias, mean, var), float(eps))


@_handles("_native_batch_norm_legit", "_native_batch_norm_legit_functional")
def _batch_norm_training(t: _Translator, node: Node) -> list[SSAValue | None]:
    """What a training-mode `batch_norm` becomes where the program is made functional: with no
    running statistics (`_native_batch_norm_legit.no_stats`, a `track_running_stats=False`
    module) the batch statistics norm, (output, saved mean, saved rstd) with the saved
    statistics left out; one that updates running statistics is refused as `batch_norm` is."""
    if node.target._overloadname == "no_stats":  # pyright: ignore
        weight, bias, _, _, eps = node.args[1:6]
        return [_batch_statistics_norm(t, node, (weight, bias), float(eps)), None, None]
    raise t.fail(node, "aten.batch_norm in training mode (call module.eval())")


def _batch_statistics_norm(
    t: _Translator, node: Node, affine: tuple[Any, Any], eps: float
) -> SSAValue:
    """`(x - mean) * rsqrt(var + eps)` per channel (dim 1) with the batch's statistics (over
    every dim but 1, the variance biased), in f32 for f16/bf16 results, then the per-channel
    weight and bias."""
    x = t.value(node.args[0], node)
    out = _type(x)  # the input's type and shape
    shape = out.get_shape()
    work = _work_type(out)
    x = t.cast(x, work.element_type)
    dims = [d for d in range(len(shape)) if d != 1]
    mean = t.broadcast(t.emit(graph.ReduceMeanOp(x, dims, keepdim=True)), shape)
    centered = t.emit(graph.SubOp(x, mean))
    var = t.emit(graph.ReduceMeanOp(t.emit(graph.MulOp(centered, centered)), dims, keepdim=True))
    var_eps = t.emit(graph.AddOp(var, t.scalar(eps, _type(var))))
    y = t.emit(graph.MulOp(centered, t.broadcast(t.emit(graph.RsqrtOp(var_eps)), shape)))
    for arg, op in zip(affine, (graph.MulOp, graph.AddOp), strict=True):
        if arg is not None:
            y = t.emit(op(y, _per_channel(t, arg, node, shape, work.element_type)))
    return t.cast(y, out.element_type)


@_handles("_native_batch_norm_legit_no_training")
def _batch_norm_no_training(t: _Translator, node: Node) -> list[SSAValue | None]:
    """What `batch_norm` becomes where the program is made functional (a module with an
    in-place op, e.g. `nn.ReLU(inplace=True)`): (output, saved mean, saved rstd), the saved
    statistics empty in inference."""
    weight, bias, mean, var, _, eps = node.args[1:7]
    x = t.value(node.args[0], node)
    return [_running_norm(t, node, x, (weight, bias, mean, var), float(eps)), None, None]


def _running_norm(
    t: _Translator, node: Node, x: SSAValue, arguments: tuple[Any, ...], eps: float
) -> SSAValue:
    """`(x - running_mean) * rsqrt(running_var + eps) * weight + bias` per channel (dim 1);
    `arguments` are (weight, bias, running_mean, running_var), weight and bias optional. In
    f32 where `graph.norm_in_f32` says (f16 holds an eps of 1e-12 as 0, and rsqrt of a small
    variance lies past f16's range), rounded once to x's type."""
    weight, bias, mean, var = arguments
    out = _type(x)
    work = TensorType(f32, out.get_shape()) if graph.norm_in_f32(out.element_type, eps) else out
    shape = out.get_shape()
    x = t.cast(x, work.element_type)

    def channel(arg: Any) -> SSAValue:
        return _per_channel(t, arg, node, shape, work.element_type)

    centered = t.emit(graph.SubOp(x, channel(mean)))
    var_eps = t.emit(graph.AddOp(channel(var), t.scalar(eps, work)))
    y = t.emit(graph.MulOp(centered, t.emit(graph.RsqrtOp(var_eps))))
    if weight is not None:
        y = t.emit(graph.MulOp(y, channel(weight)))
    if bias is not None:
        y = t.emit(graph.AddOp(y, channel(bias)))
    return t.cast(y, out.element_type)


@_handles("group_norm")
def _group_norm(t: _Translator, node: Node) -> SSAValue:
    """Per sample and group of channels (dim 1): `_group_statistics_norm`."""
    weight, bias = _arg(node, 2, "weight"), _arg(node, 3, "bias")
    eps = float(_arg(node, 4, "eps", 1e-5))
    return _group_statistics_norm(t, node, node.args[1], (weight, bias), eps)


@_handles("instance_norm")
def _instance_norm(t: _Translator, node: Node) -> SSAValue:
    """Each sample's channel normalized over its own elements (a group norm with a group per
    channel), or, where the module tracks running statistics and is in eval mode, by those
    (as batch norm)."""
    weight, bias, mean, var, use_input_stats, _, eps = node.args[1:8]
    if use_input_stats:
        channels = t.tensor_type(node).get_shape()[1]
        return _group_statistics_norm(t, node, channels, (weight, bias), float(eps))
    out = t.tensor_type(node)
    x = t.cast(t.value(node.args[0], node), out.element_type)
    return _running_norm(t, node, x, (weight, bias, mean, var), float(eps))


def _group_statistics_norm(
    t: _Translator, node: Node, groups: int, affine: tuple[Any, Any], eps: float
) -> SSAValue:
    """`(x - mean) * rsqrt(var + eps)` over each sample's group of channels (dim 1) with the
    biased variance, in f32 for f16/bf16 results, then the per-channel weight and bias."""
    out = t.tensor_type(node)
    work = _work_type(out)
    shape = out.get_shape()
    grouped = [shape[0], groups, math.prod(shape[1:]) // groups]
    x = t.reshape(t.cast(t.value(node.args[0], node), work.element_type), grouped)
    mean = t.broadcast(t.emit(graph.ReduceMeanOp(x, [2], keepdim=True)), grouped)
    centered = t.emit(graph.SubOp(x, mean))
    var = t.emit(graph.ReduceMeanOp(t.emit(graph.MulOp(centered, centered)), [2], keepdim=True))
    var_eps = t.emit(graph.AddOp(var, t.scalar(eps, _type(var))))
    y = t.emit(graph.MulOp(centered, t.broadcast(t.emit(graph.RsqrtOp(var_eps)), grouped)))
    y = t.reshape(y, shape)
    for arg, op in zip(affine, (graph.MulOp, graph.AddOp), strict=True):
        if arg is not None:
            y = t.emit(op(y, _per_channel(t, arg, node, shape, work.element_type)))
    return t.cast(y, out.element_type)


@_handles("any", "all")
def _any_all(t: _Translator, node: Node) -> SSAValue:
    """Whether any (all) element is nonzero over the dims (all by default): the largest
    (smallest) of `x != 0` as 0/1 floats, compared with 0."""
    name = node.target._overloadpacket.__name__  # pyright: ignore
    x = t.value(node.args[0], node)
    if _type(x).element_type not in graph.FLOAT_TYPES:  # a mask or integers: 0 stays 0
        x = t.cast(x, f32)
    rank = _type(x).get_num_dims()
    nonzero = t.cast(t.emit(graph.CompareOp(x, t.scalar(0.0, _type(x)), "ne")), f32)
    dims = _dims(_arg(node, 1, "dim"), rank)
    keepdim = bool(_arg(node, 2, "keepdim", False))
    reduce = graph.ReduceMaxOp if name == "any" else graph.ReduceMinOp
    folded = t.emit(reduce(nonzero, dims, keepdim))
    return t.emit(graph.CompareOp(folded, t.scalar(0.0, _type(folded)), "ne"))


# --------------------------------------------------------------------------- reductions

_REDUCE: dict[str, type[graph.ReduceOp]] = {
    "mean": graph.ReduceMeanOp,
    "sum": graph.ReduceSumOp,
    "amax": graph.ReduceMaxOp,
    "amin": graph.ReduceMinOp,
}


@_handles(*_REDUCE)
def _reduce(t: _Translator, node: Node) -> SSAValue:
    out = t.tensor_type(node)
    x = t.cast(t.value(node.args[0], node), out.element_type)
    dims = _dims(_arg(node, 1, "dim"), _type(x).get_num_dims())  # 0-d: none (`emit`)
    keepdim = bool(_arg(node, 2, "keepdim", False))
    x = t.cast(x, _mask_work_type(out).element_type)
    reduced = t.emit(_REDUCE[node.target._overloadpacket.__name__](x, dims, keepdim))  # pyright: ignore
    return t.cast(reduced, out.element_type)


@_handles("prod")
def _prod(t: _Translator, node: Node) -> SSAValue:
    """The product over one dim (`prod(x, dim, keepdim)`) or all elements (`prod(x)`)."""
    out = t.tensor_type(node)
    x = t.cast(t.value(node.args[0], node), out.element_type)
    rank = _type(x).get_num_dims()
    if node.target._overloadname == "default":  # pyright: ignore
        dims, keepdim = list(range(rank)), False
    else:
        dims, keepdim = _dims(_arg(node, 1, "dim"), rank), bool(_arg(node, 2, "keepdim", False))
    return t.reshape(t.emit(graph.ReduceProdOp(x, dims, keepdim)), out.get_shape())


@_handles("var", "std", "var_mean", "std_mean")
def _variance(t: _Translator, node: Node) -> SSAValue | list[SSAValue | None]:
    """`var`/`std` over dims: the mean of squared deviations times n / (n - correction);
    `var_mean`/`std_mean` return the mean too. In f32 for f16/bf16 (and integers), rounded
    once at the end as torch's float accumulation is: a mean rounded to bf16 before the
    deviations gave a spread of bf16 ulps to values that are all equal."""
    x = t.value(node.args[0], node)
    element = _type(x).element_type
    x = t.cast(x, f32 if element not in graph.FLOAT_TYPES or element in (f16, bf16) else element)
    result = element if element in graph.FLOAT_TYPES else f32
    shape = _type(x).get_shape()
    overload = node.target._overloadname  # pyright: ignore
    if overload == "default":  # var(x, unbiased=True)
        dims, correction, keepdim = (
            list(range(len(shape))),
            int(_arg(node, 1, "unbiased", True)),
            False,
        )
    elif overload == "dim":  # var(x, dim, unbiased=True, keepdim=False)
        dims = _dims(_arg(node, 1, "dim"), len(shape))
        correction = int(_arg(node, 2, "unbiased", True))
        keepdim = bool(_arg(node, 3, "keepdim", False))
    else:  # var(x, dim=None, *, correction=1, keepdim=False)
        dims = _dims(_arg(node, 1, "dim"), len(shape))
        correction = node.kwargs.get("correction")
        correction = 1 if correction is None else correction
        keepdim = bool(node.kwargs.get("keepdim", False))
    mean = t.broadcast(t.emit(graph.ReduceMeanOp(x, dims, keepdim=True)), shape)
    centered = t.emit(graph.SubOp(x, mean))
    total = t.emit(graph.ReduceSumOp(t.emit(graph.MulOp(centered, centered)), dims, keepdim))
    count = math.prod(shape[d] for d in dims) - correction  # 0 or less gives inf/nan, as torch
    variance = t.emit(graph.DivOp(total, t.scalar(float(count), _type(total))))
    name = node.target._overloadpacket.__name__  # pyright: ignore
    if name.startswith("std"):
        variance = t.emit(graph.SqrtOp(variance))
    variance = t.cast(variance, result)
    if name.endswith("_mean"):
        return [variance, t.cast(t.emit(graph.ReduceMeanOp(x, dims, keepdim)), result)]
    return variance


@_handles("count_nonzero")
def _count_nonzero(t: _Translator, node: Node) -> SSAValue:
    """The number of nonzero elements over the dims (all by default), carried in f32."""
    x = t.value(node.args[0], node)
    if _type(x).element_type not in graph.FLOAT_TYPES:
        x = t.cast(x, f32)
    nonzero = t.cast(t.emit(graph.CompareOp(x, t.scalar(0.0, _type(x)), "ne")), f32)
    dims = _dims(_arg(node, 1, "dim"), _type(x).get_num_dims())
    return t.emit(graph.ReduceSumOp(nonzero, dims, False))


@_handles("nanmean", "nansum")
def _nan_reduction(t: _Translator, node: Node) -> SSAValue:
    """The sum (mean) of the elements that are not NaN over the dims; all NaN gives 0 (NaN)."""
    out = t.tensor_type(node)
    x = t.cast(t.value(node.args[0], node), _work_type(out).element_type)
    dims = _dims(_arg(node, 1, "dim"), _type(x).get_num_dims())
    keepdim = bool(_arg(node, 2, "keepdim", False))
    nan = t.emit(graph.CompareOp(x, x, "ne"))
    kept = t.emit(graph.SelectOp(nan, t.scalar(0.0, _type(x)), x))
    total = t.emit(graph.ReduceSumOp(kept, dims, keepdim))
    if node.target._overloadpacket.__name__ == "nansum":  # pyright: ignore
        return t.cast(total, out.element_type)
    counted = t.emit(graph.CompareOp(x, x, "eq"))
    count = t.emit(graph.ReduceSumOp(t.cast(counted, _type(x).element_type), dims, keepdim))
    return t.cast(t.emit(graph.DivOp(total, count)), out.element_type)


@_handles("aminmax")
def _aminmax(t: _Translator, node: Node) -> list[SSAValue | None]:
    """The smallest and the largest element over a dim (all by default)."""
    x = t.value(node.args[0], node)
    dim = node.kwargs.get("dim")
    keepdim = bool(node.kwargs.get("keepdim", False))
    dims = _dims(dim, _type(x).get_num_dims())
    return [
        t.emit(graph.ReduceMinOp(x, dims, keepdim)),
        t.emit(graph.ReduceMaxOp(x, dims, keepdim)),
    ]


@_handles("diagonal")
def _diagonal(t: _Translator, node: Node) -> SSAValue:
    """`x.diagonal(offset, dim1, dim2)`: the two dims moved last and merged, every (m + 1)-th
    element from the offset's start (a strided slice), the diagonal last as in torch."""
    x = t.value(node.args[0], node)
    rank = _type(x).get_num_dims()
    offset = int(_arg(node, 1, "offset", 0))
    first, second = _dims([_arg(node, 2, "dim1", 0), _arg(node, 3, "dim2", 1)], rank)
    order = [*(d for d in range(rank) if d not in (first, second)), first, second]
    moved = x if order == list(range(rank)) else t.emit(graph.TransposeOp(x, order))
    *lead, n, m = _type(moved).get_shape()
    start = offset if offset >= 0 else -offset * m
    length = t.tensor_type(node).get_shape()[-1]
    flat = t.reshape(moved, [*lead, n * m])
    return t.emit(graph.SliceOp(flat, len(lead), start, length, m + 1))


@_handles("diagonal_scatter")
def _diagonal_scatter(t: _Translator, node: Node) -> SSAValue:
    """`torch.diagonal_scatter(x, src, offset, dim1, dim2)` (`x.diagonal().fill_(v)` or
    `.copy_(y)` once functional): x where `col - row != offset`, src along the diagonal
    (`_onto_diagonal`)."""
    rank = t.tensor_type(node).get_num_dims()
    offset = int(_arg(node, 2, "offset", 0))
    first, second = _dims([_arg(node, 3, "dim1", 0), _arg(node, 4, "dim2", 1)], rank)
    return _onto_diagonal(t, node, node.args[0], node.args[1], offset, first, second)


def _onto_diagonal(
    t: _Translator, node: Node, x: Any, src: Any, offset: int, first: int, second: int
) -> SSAValue:
    """x with the diagonal `offset` of its dims `first` (rows) and `second` (columns) replaced
    by src (`[..., k]`, the other dims in order, as `x.diagonal` gives): a select on the mask of
    `col - row == offset` (an index expression) between src spread over those dims and x. A
    src of one value (a fill) is that value broadcast; else its element k sits at row k (column
    k where the offset is negative), a broadcast along the columns (rows), padded with zeros
    to the rows (columns) past the diagonal's end, which the mask leaves out."""
    out = t.tensor_type(node)
    shape = list(out.get_shape())
    rank = len(shape)
    if max(shape[first], shape[second]) > EXACT_INTEGERS:
        raise t.fail(node, f"{_op_name(node.target)} of shape {shape}")
    index = TensorType(f32, shape)
    rows, cols = (t.emit(graph.IotaOp(index, d)) for d in (first, second))
    gap = t.emit(graph.SubOp(cols, rows))
    mask = t.emit(graph.CompareOp(gap, t.scalar(float(offset), index), "eq"))
    work = f32 if out.element_type == graph.BOOL else out.element_type
    values = t.cast(_one_value(t.value(src, node)), work)
    if math.prod(_type(values).get_shape()) == 1:
        values = t.reshape(values, [1] * rank)
    else:  # [..., k] to [..., k, 1] (or [..., 1, k]), then into x's dim order
        along, across = (first, second) if offset >= 0 else (second, first)
        length = _type(values).get_shape()[-1]
        order = [*(d for d in range(rank) if d not in (first, second)), along, across]
        values = t.reshape(values, [*_type(values).get_shape(), 1])
        permutation = [order.index(d) for d in range(rank)]
        if permutation != list(range(rank)):
            values = t.emit(graph.TransposeOp(values, permutation))
        if length < shape[along]:
            rest = list(_type(values).get_shape())
            rest[along] = shape[along] - length
            values = t.emit(graph.ConcatOp([values, t.scalar(0.0, TensorType(work, rest))], along))
    return _select(t, node, mask, values, x)


def _one_value(x: SSAValue) -> SSAValue:
    """The one-element tensor `x` is a broadcast of (a fill, `t.scalar`), else `x`."""
    owner = x.owner
    if isinstance(owner, graph.BroadcastOp):
        source = owner.operands[0]
        if math.prod(_type(source).get_shape()) == 1:
            return source
    return x


def _diagonal_view(t: _Translator, node: Node) -> int:
    """The offset of the diagonal that `as_strided(x, size, stride, storage_offset)` views (as
    `fill_diagonal_` decomposes): a contiguous 2-D x of n × m, one dim of stride m + 1 and the
    whole diagonal's length, from column d (offset d ≥ 0) or row -d (offset d · m). Any other
    view (a wrapped diagonal of `fill_diagonal_(wrap=True)`, a diagonal of more dims, any other
    strides) is refused."""
    source = node.args[0]
    is_scatter = _op_name(node.target) == "aten.as_strided_scatter"
    size, stride = (
        list(_arg(node, i + is_scatter, key)) for i, key in ((1, "size"), (2, "stride"))
    )
    start = _arg(node, 3 + is_scatter, "storage_offset", None) or 0
    val = source.meta["val"]
    shape = [int(d) for d in val.shape]
    offset = None
    if len(shape) == 2 and val.is_contiguous() and val.storage_offset() == 0:
        n, m = shape
        offset = start if start < m else -(start // m) if start % m == 0 else None
        if offset is not None:
            length = min(n, m - offset) if offset >= 0 else min(n + offset, m)
            if length <= 0 or size != [length] or stride != [m + 1]:
                offset = None
    if offset is None:
        raise t.fail(
            node,
            f"{_op_name(node.target)} with size {size}, stride {stride} and storage offset "
            f"{start} of a tensor of shape {shape} (strides {list(val.stride())}): only a "
            "whole diagonal of a contiguous matrix (stride m + 1) is taken",
        )
    return offset


@_handles("as_strided")
def _as_strided(t: _Translator, node: Node) -> SSAValue:
    """`as_strided` viewing a matrix's diagonal (`_diagonal_view`): a strided slice of it
    flattened, as `x.diagonal(offset)`."""
    offset = _diagonal_view(t, node)
    x = t.value(node.args[0], node)
    n, m = _type(x).get_shape()
    length = t.tensor_type(node).get_shape()[0]
    start = offset if offset >= 0 else -offset * m
    return t.emit(graph.SliceOp(t.reshape(x, [n * m]), 0, start, length, m + 1))


@_handles("as_strided_scatter")
def _as_strided_scatter(t: _Translator, node: Node) -> SSAValue:
    """`as_strided_scatter` into a matrix's diagonal (`_diagonal_view`; `fill_diagonal_` once
    functional): as `diagonal_scatter`."""
    offset = _diagonal_view(t, node)
    return _onto_diagonal(t, node, node.args[0], node.args[1], offset, 0, 1)


@_handles("trace")
def _trace(t: _Translator, node: Node) -> SSAValue:
    """The sum of a matrix's diagonal (a strided slice of it flattened)."""
    out = t.tensor_type(node)
    x = t.value(node.args[0], node)
    n, m = _type(x).get_shape()
    diagonal = t.emit(graph.SliceOp(t.reshape(x, [n * m]), 0, 0, min(n, m), m + 1))
    return t.reshape(
        t.emit(graph.ReduceSumOp(t.cast(diagonal, out.element_type), [0], False)), out.get_shape()
    )


@_handles("pairwise_distance")
def _pairwise_distance(t: _Translator, node: Node) -> SSAValue:
    """`|| x1 - x2 + eps ||_p` along the last dim (p = 1, 2 or ±inf)."""
    import torch

    out = t.tensor_type(node)
    work = _work_type(out)
    shape = [int(d) for d in torch.broadcast_shapes(*(a.meta["val"].shape for a in node.args[:2]))]
    full = TensorType(work.element_type, shape)
    a, b = (t.operand_like(v, full, node) for v in node.args[:2])
    p = float(_arg(node, 2, "p", 2.0))
    eps = float(_arg(node, 3, "eps", 1e-6))
    keepdim = bool(_arg(node, 4, "keepdim", False))
    if p not in (1, 2, math.inf, -math.inf):
        raise t.fail(node, f"aten.pairwise_distance with p={p} (only 1, 2 and ±inf)")
    gap = t.emit(graph.AddOp(t.emit(graph.SubOp(a, b)), t.scalar(eps, full)))
    return t.cast(_norm(t, gap, [len(shape) - 1], keepdim, p), out.element_type)


@_handles("argmax", "argmin")
def _argmax(t: _Translator, node: Node) -> SSAValue:
    """The first index of the largest (smallest) element along a dim (`_arg_extreme`)."""
    x = t.value(node.args[0], node)
    dim, keepdim = _arg(node, 1, "dim"), bool(_arg(node, 2, "keepdim", False))
    name = node.target._overloadpacket.__name__  # pyright: ignore
    index = _arg_extreme(t, node, x, dim, keepdim, smallest=name == "argmin")
    return t.reshape(index, t.tensor_type(node).get_shape())


def _arg_extreme(
    t: _Translator, node: Node, x: SSAValue, dim: int | None, keepdim: bool, smallest: bool
) -> SSAValue:
    """The first index of the largest (smallest) element of `x` along `dim` (of the flattened
    tensor where it is None): `graph.argmax` (of -x for the smallest), an i64 tensor as
    torch's. NaN counts as the extreme, as in torch."""
    if _type(x).element_type not in graph.FLOAT_TYPES:  # a mask or integers, exact in f32
        if t.bound(node.args[0]) > EXACT_INTEGERS:
            raise t.fail(node, f"{_op_name(node.target)} of integers beyond 2^24")
        x = t.cast(x, f32)
    if dim is None or not _type(x).get_shape():  # flattened; a 0-d tensor's dim 0 or -1 too
        x = t.reshape(x, (math.prod(_type(x).get_shape()),))
        dim = None
    shape = _type(x).get_shape()
    dim = 0 if dim is None else _dims(dim, len(shape))[0]
    if shape[dim] > graph.ARGMAX_EXTENT:
        raise t.fail(node, f"{_op_name(node.target)} over {shape[dim]} elements, beyond 2^24")
    if smallest:
        x = t.emit(graph.NegOp(x))
    return t.emit(graph.ArgmaxOp(x, dim, keepdim, i64))


CUMSUM_EXTENT = 16384
"""Longest dim the cumulative ops run along: each of its n sums is a masked sum over the whole dim,
n² additions in all (the mask an index expression, no n x n buffer)."""


_CUMULATIVE = {
    "cumsum": (graph.ReduceSumOp, 0.0),
    "cumprod": (graph.ReduceProdOp, 1.0),
    "cummax": (graph.ReduceMaxOp, -math.inf),
    "cummin": (graph.ReduceMinOp, math.inf),
}
"""Each cumulative op's reduction and the value masked terms take (its identity)."""


@_handles(*_CUMULATIVE)
def _cumulative(t: _Translator, node: Node) -> SSAValue | list[SSAValue | None]:
    """`y[i] = x[0] ∘ … ∘ x[i]` along the dim (∘: +, ·, max or min): x broadcast along a new
    dim of i, the terms past i masked to the identity by comparing two index expressions,
    reduced (in f32 for f16/bf16; integer sums as the f32 they are carried in, exact while
    they stay within 2^24; integer products are refused). cummax/cummin give their values and,
    where they are read, their indices (`_cumulative_indices`)."""
    name = node.target._overloadpacket.__name__  # pyright: ignore
    reduce, identity = _CUMULATIVE[name]
    x = t.value(node.args[0], node)
    shape = list(_type(x).get_shape())
    rank = len(shape)
    indexed = name in ("cummax", "cummin") and any(  # the indices are read
        user.args[1] == 1 and user.users for user in node.users
    )
    if rank == 0:  # the prefix of a 0-d tensor is itself, its index 0
        if name not in ("cummax", "cummin"):
            return t.cast(x, t.tensor_type(node).element_type)
        return [x, t.cast(t.scalar(0.0, TensorType(f32, [])), i64) if indexed else None]
    dim = _dims(node.args[1], rank)[0]
    n = shape[dim]
    if _type(x).element_type not in graph.FLOAT_TYPES:
        exceeds = t.bound(node.args[0]) * n > EXACT_INTEGERS
        if name == "cumprod" or (name == "cumsum" and exceeds):
            if t.bound(node.args[0]) == math.inf and name == "cumsum":
                raise t.fail(
                    node,
                    "aten.cumsum of integers whose results may pass 2^24: an int32/int64 "
                    "input may hold any value, and tinyopt computes integer tensors in f32, "
                    "exact only up to 2^24; a 0/1 mask taken as `mask.bool()` (or `mask != "
                    "0`, or `mask.clamp(0, 1)`) first sums exactly, to at most its length",
                )
            raise t.fail(node, f"aten.{name} of integers whose results may pass 2^24")
    element = _type(x).element_type
    work = f32 if element not in graph.FLOAT_TYPES or element in (f16, bf16) else element
    x = t.cast(x, work)
    if n > CUMSUM_EXTENT:
        raise t.fail(node, f"aten.{name} along {n} elements (n² work; at most {CUMSUM_EXTENT})")
    terms, kept = _prefixes(t, x, dim)
    folded = _masked_reduce(t, kept, terms, rank, reduce, identity)
    result = _moved_back(t, folded, dim)
    if name in ("cummax", "cummin"):
        indices = None
        if indexed:
            if element not in graph.FLOAT_TYPES and t.bound(node.args[0]) > EXACT_INTEGERS:
                raise t.fail(node, f"aten.{name} indices of integers that may pass 2^24")
            indices = _moved_back(t, _cumulative_indices(t, terms, kept, folded), dim)
        return [t.cast(result, element) if element in graph.FLOAT_TYPES else result, indices]
    return t.cast(result, t.tensor_type(node).element_type)


def _cumulative_indices(
    t: _Translator, terms: SSAValue, kept: SSAValue, folded: SSAValue
) -> SSAValue:
    """cummax/cummin's indices, as torch's CPU kernel gives them: the last j ≤ i where x[j]
    equals the prefix's extreme (ties take the later index), or where the prefix holds NaN
    (its extreme then), the last NaN. `terms`/`kept` are `_prefixes`' (dim last, [..., i, j]),
    `folded` the extremes [..., i]; the index a masked max of j (exact in f32 to 2^24), i64."""
    square = list(_type(terms).get_shape())
    extreme = t.broadcast(t.reshape(folded, [*square[:-1], 1]), square)
    index = TensorType(f32, square)
    cols = t.emit(graph.IotaOp(index, len(square) - 1))
    # a NaN x[j] never equals the extreme; it is in a prefix whose extreme is NaN itself
    equal = t.cast(t.emit(graph.CompareOp(terms, extreme, "eq")), f32)
    nan = t.cast(t.emit(graph.CompareOp(terms, terms, "ne")), f32)
    hit = t.emit(graph.CompareOp(t.emit(graph.MaxOp(equal, nan)), t.scalar(0.0, index), "ne"))
    candidates = t.emit(graph.SelectOp(hit, cols, t.scalar(-1.0, index)))
    last = _masked_reduce(t, kept, candidates, len(square) - 1, graph.ReduceMaxOp, -1.0)
    return t.cast(last, i64)


def _prefixes(t: _Translator, x: SSAValue, dim: int) -> tuple[SSAValue, SSAValue]:
    """`x` with `dim` moved last and broadcast along a new dim before it, `[..., i, j]` holding
    x[j], and the mask of j ≤ i: a masked reduction over j folds each prefix (index
    expressions, no n × n buffer)."""
    moved = _moved_last(t, x, dim)
    lead, n = list(_type(moved).get_shape()[:-1]), _type(moved).get_shape()[-1]
    square = [*lead, n, n]
    terms = t.broadcast(t.reshape(moved, [*lead, 1, n]), square)
    index = TensorType(f32, square)
    rows, cols = (t.emit(graph.IotaOp(index, len(square) - k)) for k in (2, 1))
    return terms, t.emit(graph.CompareOp(cols, rows, "le"))


@_handles("logcumsumexp")
def _logcumsumexp(t: _Translator, node: Node) -> SSAValue:
    """`y[i] = m_i + log(Σ_{j ≤ i} exp(x[j] − m_i))` along the dim, m_i the prefix's largest
    element (taken as 0 where it is infinite, so an all −inf prefix gives −inf and one holding
    +inf gives +inf, as torch): n² terms as `cumsum`'s, in f32 for f16/bf16."""
    out = t.tensor_type(node)
    x = t.cast(t.value(node.args[0], node), _work_type(out).element_type)
    shape = list(_type(x).get_shape())
    rank = len(shape)
    if rank == 0:  # the prefix of a 0-d tensor is itself
        return t.cast(x, out.element_type)
    dim = _dims(node.args[1], rank)[0]
    n = shape[dim]
    if n > CUMSUM_EXTENT:
        raise t.fail(
            node, f"aten.logcumsumexp along {n} elements (n² work; at most {CUMSUM_EXTENT})"
        )
    terms, kept = _prefixes(t, x, dim)
    square = _type(terms).get_shape()
    top = _masked_reduce(t, kept, terms, rank, graph.ReduceMaxOp, -math.inf)
    infinite = t.emit(
        graph.CompareOp(t.emit(graph.AbsOp(top)), t.scalar(math.inf, _type(top)), "eq")
    )
    shift = t.emit(graph.SelectOp(infinite, t.scalar(0.0, _type(top)), top))
    shifted = t.emit(graph.SubOp(terms, t.broadcast(t.reshape(shift, [*square[:-1], 1]), square)))
    total = _masked_reduce(t, kept, t.emit(graph.ExpOp(shifted)), rank)
    result = t.emit(graph.AddOp(shift, t.emit(graph.LogOp(total))))
    return t.cast(_moved_back(t, result, dim), out.element_type)


RANK_EXTENT = 4096
"""Longest dim `topk`/`sort` rank along: each element's rank counts the elements before it in
order, n² comparisons in all (index expressions, no n x n buffer)."""


@_handles("topk", "sort", "argsort")
def _topk(t: _Translator, node: Node) -> SSAValue | list[SSAValue | None]:
    """The k largest (smallest) elements along a dim and their indices, in order (`sort`: all
    n of them; `argsort`: the indices). Each element's rank is the count of elements that come
    before it: larger (smaller) ones, NaN counting as the largest as in torch, and equal ones
    at lower indices; output r then takes the element of rank r (`_picked`).
    Ties come out in index order (a stable sort)."""
    name = node.target._overloadpacket.__name__  # pyright: ignore
    x = t.value(node.args[0], node)
    element = _type(x).element_type
    if element not in graph.FLOAT_TYPES:
        if t.bound(node.args[0]) > EXACT_INTEGERS:
            raise t.fail(node, f"aten.{name} of integers beyond 2^24")
        x = t.cast(x, f32)
    zero_d = not _type(x).get_shape()
    if zero_d:  # one element along its dim 0 (or -1)
        x = t.reshape(x, (1,))
    shape = list(_type(x).get_shape())
    rank = len(shape)
    if name == "topk":
        k, dim = int(node.args[1]), _arg(node, 2, "dim", -1)
        largest = bool(_arg(node, 3, "largest", True))
    else:
        k, dim = None, _arg(node, 1, "dim", -1)
        largest = bool(node.kwargs.get("descending", _arg(node, 2, "descending", False)))
    dim = _dims(dim, rank)[0]
    n = shape[dim]
    k = n if k is None else k
    if n > RANK_EXTENT:
        raise t.fail(node, f"aten.{name} along {n} elements (n² work; at most {RANK_EXTENT})")
    moved = _moved_last(t, x, dim)
    lead = list(_type(moved).get_shape()[:-1])
    ranks = _ranks(t, moved, largest)  # [..., n]
    picked = [*lead, k, n]
    index = TensorType(f32, picked)
    slot = t.emit(graph.IotaOp(index, len(picked) - 2))
    match = t.emit(
        graph.CompareOp(t.broadcast(t.reshape(ranks, [*lead, 1, n]), picked), slot, "eq")
    )

    candidates = t.broadcast(t.reshape(moved, [*lead, 1, n]), picked)
    values = _moved_back(t, _picked(t, match, candidates, rank), dim)
    positions = _masked_reduce(t, match, t.emit(graph.IotaOp(index, rank)), rank)
    indices = t.cast(_moved_back(t, positions, dim), i64)
    if zero_d:  # torch's results are 0-d again
        results = node.meta["val"] if name != "argsort" else (None, node.meta["val"])
        values, indices = (
            t.reshape(v, list(r.shape)) if r is not None else v
            for v, r in zip((values, indices), results, strict=True)
        )
    if name == "argsort":
        return indices
    return [t.cast(values, element) if element == graph.BOOL else values, indices]


@_handles("kthvalue", "median")
def _kthvalue(t: _Translator, node: Node) -> SSAValue | list[SSAValue | None]:
    """The k-th smallest element along a dim and its index (`median`: the lower median, k =
    (n + 1) // 2, of the dim or of all elements), by ascending ranks (`_ranks`); NaN counts
    as the largest, and a median of a row holding NaN is NaN (its first NaN), as torch's."""
    name = node.target._overloadpacket.__name__  # pyright: ignore
    x = t.value(node.args[0], node)
    if _type(x).element_type not in graph.FLOAT_TYPES:
        raise t.fail(node, f"aten.{name} of {_dtype(node.args[0])}")
    whole = name == "median" and node.target._overloadname == "default"  # pyright: ignore
    if whole:
        x, dim, keepdim = t.reshape(x, [math.prod(_type(x).get_shape())]), 0, False
    elif name == "median":
        dim, keepdim = _arg(node, 1, "dim", -1), bool(_arg(node, 2, "keepdim", False))
    else:
        dim, keepdim = _arg(node, 2, "dim", -1), bool(_arg(node, 3, "keepdim", False))
    zero_d = not _type(x).get_shape()
    x = _one_element(t, x)
    shape = list(_type(x).get_shape())
    rank = len(shape)
    dim = _dims(dim, rank)[0]
    n = shape[dim]
    if n > RANK_EXTENT:
        raise t.fail(node, f"aten.{name} along {n} elements (n² work; at most {RANK_EXTENT})")
    k = (n + 1) // 2 if name == "median" else int(node.args[1])
    moved = _moved_last(t, x, dim)
    lead = list(_type(moved).get_shape()[:-1])
    ranks = _ranks(t, moved, largest=False)
    target = t.scalar(float(k - 1), _type(ranks))
    if name == "median":  # torch's median of a row holding NaN: its first NaN (NaNs rank last)
        nan = t.cast(t.emit(graph.CompareOp(moved, moved, "ne")), f32)
        count = t.broadcast(t.emit(graph.ReduceSumOp(nan, [len(lead)], True)), [*lead, n])
        first_nan = t.emit(graph.SubOp(t.scalar(float(n), _type(count)), count))
        has_nan = t.emit(graph.CompareOp(count, t.scalar(0.0, _type(count)), "gt"))
        target = t.emit(graph.SelectOp(has_nan, first_nan, target))
    match = t.emit(graph.CompareOp(ranks, target, "eq"))
    value = _picked(t, match, moved, len(lead))
    index = t.emit(graph.IotaOp(TensorType(f32, [*lead, n]), len(lead)))
    position = _masked_reduce(t, match, index, len(lead))
    if keepdim:
        kept = [*shape[:dim], 1, *shape[dim + 1 :]]
        value, position = t.reshape(value, kept), t.reshape(position, kept)
    if whole:
        return value
    if zero_d:  # torch's results are 0-d again, keepdim or not
        value, position = _torch_shape(t, node, value), _torch_shape(t, node, position, 1)
    return [value, t.cast(position, i64)]


@_handles("quantile")
def _quantile(t: _Translator, node: Node) -> SSAValue:
    """`torch.quantile` along a dim (or of all elements) at quantiles known at capture (a
    number, or a constant tensor `forward` makes): position p = q·(n − 1) in ascending order
    (`_ranks`), the elements of ranks floor(p) and ceil(p) picked (`_picked`)
    and interpolated as `interpolation` says; a row holding NaN gives NaN, as torch's. torch's
    own decomposition truncates its positions to integers from the values, which is refused.
    Quantiles from the inputs or weights are refused (the positions would be values)."""
    from torch.fx import Node

    x = t.value(node.args[0], node)
    if _type(x).element_type not in graph.FLOAT_TYPES:
        raise t.fail(node, f"aten.quantile of {_dtype(node.args[0])}")
    q = node.args[1]
    fixed = t.constant_value(q) if isinstance(q, Node) else None
    if isinstance(q, Node) and fixed is None:
        raise t.fail(node, "aten.quantile at quantiles computed from the inputs or weights")
    levels = [float(q)] if fixed is None else [float(v) for v in fixed.reshape(-1).tolist()]
    interpolation = node.kwargs.get("interpolation", _arg(node, 4, "interpolation", "linear"))
    if interpolation not in ("linear", "lower", "higher", "midpoint", "nearest"):
        raise t.fail(node, f"aten.quantile with interpolation {interpolation}")
    if not all(0.0 <= level <= 1.0 for level in levels):
        raise t.fail(node, f"aten.quantile at {levels}: each quantile must be in [0, 1]")
    shape = list(_type(x).get_shape())
    dim = _arg(node, 2, "dim")
    out_shape = list(t.tensor_type(node).get_shape())  # keepdim's, and a dim of q leading
    each = out_shape[1:] if fixed is not None and fixed.dim() > 0 else out_shape
    if dim is None:
        x, dim = t.reshape(x, [math.prod(shape)]), 0
    moved = _moved_last(t, x, _dims(dim, _type(x).get_num_dims())[0])
    *lead, n = _type(moved).get_shape()
    if n > RANK_EXTENT:
        raise t.fail(node, f"aten.quantile along {n} elements (n² work; at most {RANK_EXTENT})")
    ranks = _ranks(t, moved, largest=False)

    def ranked(r: int) -> SSAValue:
        match = t.emit(graph.CompareOp(ranks, t.scalar(float(r), _type(ranks)), "eq"))
        return _picked(t, match, moved, len(lead))

    nan = t.cast(t.emit(graph.CompareOp(moved, moved, "ne")), f32)
    has_nan = t.emit(
        graph.CompareOp(
            t.emit(graph.ReduceSumOp(nan, [len(lead)], False)),
            t.scalar(0.0, TensorType(f32, lead)),
            "gt",
        )
    )
    last = ranked(n - 1)  # NaN ranks last: the row's NaN where it holds one
    parts = []
    for level in levels:
        position = level * (n - 1)
        if interpolation == "lower":
            position = math.floor(position)
        elif interpolation == "higher":
            position = math.ceil(position)
        elif interpolation == "nearest":
            position = round(position)  # half to even, as torch.round
        below, above = math.floor(position), math.ceil(position)
        value = ranked(below)
        if interpolation in ("linear", "midpoint"):  # lerped even at one rank: inf gives NaN
            weight = 0.5 if interpolation == "midpoint" else position - below
            value = _lerped(t, value, ranked(above), weight)
        value = t.emit(graph.SelectOp(has_nan, last, value))
        parts.append(t.reshape(value, [1, *each]))
    whole = parts[0] if len(parts) == 1 else t.emit(graph.ConcatOp(parts, 0))
    return t.reshape(whole, out_shape)


def _ranks(t: _Translator, x: SSAValue, largest: bool) -> SSAValue:
    """For each element of `x` along its last dim, how many elements come before it in
    descending (`largest`) or ascending order, NaN the largest, ties by index."""
    *lead, n = _type(x).get_shape()
    square = [*lead, n, n]  # [..., i, j]: does element j come before element i?
    mine = t.broadcast(t.reshape(x, [*lead, n, 1]), square)
    other = t.broadcast(t.reshape(x, [*lead, 1, n]), square)

    def flag(a: SSAValue, b: SSAValue, predicate: str) -> SSAValue:
        return t.cast(t.emit(graph.CompareOp(a, b, predicate)), f32)

    nan_other, nan_mine = (flag(v, v, "ne") for v in (other, mine))
    one = t.scalar(1.0, _type(nan_other))
    if largest:  # other > mine, or other NaN and mine not
        ahead = flag(other, mine, "gt")
        ahead = t.emit(
            graph.MaxOp(ahead, t.emit(graph.MulOp(nan_other, t.emit(graph.SubOp(one, nan_mine)))))
        )
    else:  # other < mine, or mine NaN and other not
        ahead = flag(other, mine, "lt")
        ahead = t.emit(
            graph.MaxOp(ahead, t.emit(graph.MulOp(nan_mine, t.emit(graph.SubOp(one, nan_other)))))
        )
    same = t.emit(graph.MaxOp(flag(other, mine, "eq"), t.emit(graph.MulOp(nan_other, nan_mine))))
    index = TensorType(f32, square)
    earlier = flag(
        t.emit(graph.IotaOp(index, len(square) - 1)),
        t.emit(graph.IotaOp(index, len(square) - 2)),
        "lt",
    )
    before = t.emit(graph.MaxOp(ahead, t.emit(graph.MulOp(same, earlier))))
    return t.emit(graph.ReduceSumOp(before, [len(square) - 1], False))


@_handles("softmax", "_softmax")
def _softmax(t: _Translator, node: Node) -> SSAValue:
    out = t.tensor_type(node)
    x = _one_element(t, t.cast(t.value(node.args[0], node), out.element_type))
    softmax = t.emit(graph.SoftmaxOp(x, _dims(node.args[1], _type(x).get_num_dims())[0]))
    return _torch_shape(t, node, softmax)


# ------------------------------------------------------------------- contractions, norms


@_handles("addmm", "baddbmm")
def _addmm(t: _Translator, node: Node) -> SSAValue:
    """`beta * input + alpha * (a @ b)`; with beta 0 the input is ignored (NaN included)."""
    out = t.tensor_type(node)
    a, b = (t.cast(t.value(x, node), out.element_type) for x in node.args[1:3])
    return _scaled_sum(t, node, t.emit(graph.MatmulOp(a, b)), out)


def _scaled_sum(t: _Translator, node: Node, product: SSAValue, out: TensorType) -> SSAValue:
    """`beta * input + alpha * product` of the addmm-like ops (input: the node's first
    argument, ignored with beta 0, NaN included)."""
    alpha, beta = node.kwargs.get("alpha", 1), node.kwargs.get("beta", 1)
    if alpha != 1:
        product = t.emit(graph.MulOp(product, t.scalar(float(alpha), out)))
    if beta == 0:
        return product
    bias = t.operand_like(node.args[0], out, node)
    if beta != 1:
        bias = t.emit(graph.MulOp(bias, t.scalar(float(beta), out)))
    return t.emit(graph.AddOp(product, bias))


@_handles("addbmm")
def _addbmm(t: _Translator, node: Node) -> SSAValue:
    """`beta · input + alpha · Σ_b batch1[b] @ batch2[b]`: one matmul of batch1 as
    `[N, B·K]` by batch2 as `[B·K, P]`, the batch folded into the contraction."""
    out = t.tensor_type(node)
    a, b = (t.cast(t.value(x, node), out.element_type) for x in node.args[1:3])
    batch, n, k = _type(a).get_shape()
    rows = t.reshape(t.emit(graph.TransposeOp(a, [1, 0, 2])), [n, batch * k])
    cols = t.reshape(b, [batch * k, _type(b).get_shape()[2]])
    return _scaled_sum(t, node, t.emit(graph.MatmulOp(rows, cols)), out)


@_handles("bilinear")
def _bilinear(t: _Translator, node: Node) -> SSAValue:
    """`y[.., o] = Σ_ij x1[.., i] · W[o, i, j] · x2[.., j] + bias[o]` (`nn.Bilinear`): x1 times
    W as one matmul (`[N, I] @ [I, O·J]`), then each row's O dot products with x2 over J."""
    out = t.tensor_type(node)
    x1, x2, weight = (t.cast(t.value(a, node), out.element_type) for a in node.args[:3])
    o, i, j = _type(weight).get_shape()
    n = math.prod(out.get_shape()[:-1])
    flat = t.reshape(t.emit(graph.TransposeOp(weight, [1, 0, 2])), [i, o * j])
    mixed = t.reshape(t.emit(graph.MatmulOp(t.reshape(x1, [n, i]), flat)), [n, o, j])
    right = t.broadcast(t.reshape(x2, [n, 1, j]), [n, o, j])
    y = t.emit(graph.ReduceSumOp(t.emit(graph.MulOp(mixed, right)), [2], False))
    bias = _arg(node, 3, "bias")
    if bias is not None:
        y = t.emit(graph.AddOp(y, t.operand_like(bias, _type(y), node)))
    return t.reshape(y, out.get_shape())


@_handles("cdist", "_cdist_forward")
def _cdist(t: _Translator, node: Node) -> SSAValue:
    """`out[.., p, r] = ‖x1[.., p, :] − x2[.., r, :]‖` of order 0, 1, 2, inf or any other
    positive number, as a reduction over the last dim of the two broadcast against each other
    (no `[.., P, R, M]` buffer: fusion reads both inside the reduction). Exact where torch, at
    order 2 past 25 rows, takes `|x|² + |y|² − 2 x·y` and rounds differently; in f32 for
    f16/bf16."""
    out = t.tensor_type(node)
    work = _work_type(out).element_type
    p = float(_arg(node, 2, "p", 2.0))
    *lead, rows, cols = out.get_shape()
    depth = _type(t.value(node.args[0], node)).get_shape()[-1]
    full = [*lead, rows, cols, depth]

    def spread(arg: Any, axis: int) -> SSAValue:
        x = t.cast(t.value(arg, node), work)
        shape = list(_type(x).get_shape())
        shape.insert(len(shape) - 1 - axis, 1)  # x1: [.., P, 1, M]; x2: [.., 1, R, M]
        return t.broadcast(t.reshape(x, [1] * (len(full) - len(shape)) + shape), full)

    if p < 0:
        raise t.fail(node, f"aten.cdist with p={p} (torch takes p ≥ 0)")
    gap = t.emit(graph.SubOp(spread(node.args[0], 0), spread(node.args[1], 1)))
    return t.cast(_norm(t, gap, [len(full) - 1], False, p), out.element_type)


@_handles("_scaled_mm")
def _scaled_mm(t: _Translator, node: Node) -> SSAValue:
    """`torch._scaled_mm(a, b, scale_a, scale_b, bias, scale_result, out_dtype)`: the FP8
    operands widened to f32 (exact), their f32 product times the scales (per tensor, or
    `[M, 1]` and `[1, N]` per row and column), plus the bias, rounded once to `out_dtype`.
    Block scales (torch's `BlockWise1x128` / `BlockWise128x128`: scale_a `[M or M/128, K/128]`,
    scale_b `[K/128, N/128 or N]`) multiply each operand before the product instead, each
    scale repeated over its block (`_block_spread`)."""
    out = t.tensor_type(node)
    work = TensorType(f32, out.get_shape())
    a, b = (t.cast(t.value(x, node), f32) for x in node.args[0:2])
    scales = [t.cast(t.value(arg, node), f32) for arg in node.args[2:4]]
    (m, k), n = _type(a).get_shape(), _type(b).get_shape()[1]
    if _blockwise(scales, m, n, k):
        a = t.emit(graph.MulOp(a, _block_spread(t, scales[0], (m, k))))
        b = t.emit(graph.MulOp(b, _block_spread(t, scales[1], (k, n))))
        scales = []
    product = t.emit(graph.MatmulOp(a, b))
    for scale in scales:
        if _type(scale).get_num_dims() < 2:
            scale = t.reshape(scale, [1] * (2 - _type(scale).get_num_dims()))
        product = t.emit(graph.MulOp(product, t.broadcast(scale, work.get_shape())))
    if _arg(node, 5, "scale_result") is not None:
        raise t.fail(node, "aten._scaled_mm with scale_result (an FP8 output)")
    bias = _arg(node, 4, "bias")
    if bias is not None:  # added in f32, one rounding to out_dtype as torch does
        product = t.emit(graph.AddOp(product, t.operand_like(bias, work, node)))
    return t.cast(product, out.element_type)


def _blockwise(scales: list[SSAValue], m: int, n: int, k: int) -> bool:
    """Whether `_scaled_mm`'s scales are block scales: shapes torch takes for them
    (`[M or ⌈M/128⌉, ⌈K/128⌉]`, `[⌈K/128⌉, ⌈N/128⌉ or N]`) and neither per tensor nor per row and
    column (where K is one block the two forms are the same scales)."""
    shapes = [tuple(_type(s).get_shape()) for s in scales]
    blocks = -(-k // FP8_SCALE_BLOCK)
    per_row = shapes[0] in ((), (1,), (1, 1), (m, 1)) and shapes[1] in ((), (1,), (1, 1), (1, n))
    a_blocks = shapes[0] in ((m, blocks), (-(-m // FP8_SCALE_BLOCK), blocks))
    b_blocks = shapes[1] in ((blocks, n), (blocks, -(-n // FP8_SCALE_BLOCK)))
    return not per_row and a_blocks and b_blocks


def _block_spread(t: _Translator, scale: SSAValue, shape: tuple[int, int]) -> SSAValue:
    """The `[R, C]` block scales of a `shape` operand repeated over their blocks: each dim of
    `shape` covered by its count of blocks (`extent / count` elements each, 1 or 128)."""
    counts = _type(scale).get_shape()
    sizes = [1 if count == extent else FP8_SCALE_BLOCK for count, extent in zip(counts, shape)]
    spread = t.reshape(scale, (counts[0], 1, counts[1], 1))
    spread = t.broadcast(spread, (counts[0], sizes[0], counts[1], sizes[1]))
    spread = t.reshape(spread, (counts[0] * sizes[0], counts[1] * sizes[1]))
    for dim, extent in enumerate(shape):
        if _type(spread).get_shape()[dim] != extent:
            spread = t.emit(graph.SliceOp(spread, dim, 0, extent))
    return spread


@_handles("linear")
def _linear(t: _Translator, node: Node) -> SSAValue:
    bias = _arg(node, 2, "bias")
    x, weight = t.value(node.args[0], node), t.value(node.args[1], node)
    return t.emit(graph.LinearOp(x, weight, None if bias is None else t.value(bias, node)))


@_handles("matmul", "mm", "bmm")
def _matmul(t: _Translator, node: Node) -> SSAValue:
    out = t.tensor_type(node)
    lhs, rhs = t.value(node.args[0], node), t.value(node.args[1], node)
    ls, rs = _type(lhs).get_shape(), _type(rhs).get_shape()
    if len(ls) < 2 or len(rs) < 2:
        raise t.fail(node, "matmul of a 1-D operand is not supported (unsqueeze it)")
    batch = out.get_shape()[:-2]
    # Operands broadcast to the result's batch dims, never flattened: a flattened (B*H) index
    # reads a [B, H, ...] operand through a division; planning merges the batch loops itself.
    lhs = t.broadcast(lhs, (*batch, *ls[-2:]))
    return t.emit(graph.MatmulOp(lhs, t.broadcast(rhs, (*batch, *rs[-2:]))))


RNN_STEPS = 4096
"""Most time steps × layers × directions an `nn.LSTM` / `nn.GRU` is unrolled into."""


def _recurrent_states(node: Node) -> bool:
    """Whether `node` is a recurrent op (its states' shapes not checked against torch's export,
    see `_check_shapes`) or picks one of its states."""
    recurrent = ("aten.lstm", "aten.gru", "aten.rnn_tanh", "aten.rnn_relu")
    if _op_name(node.target) == "_operator.getitem":
        source, index = node.args[:2]
        picked = _op_name(getattr(source, "target", None))
        return picked in recurrent and isinstance(index, int) and index > 0
    return _op_name(node.target) in recurrent


@_handles("lstm", "gru", "rnn_tanh", "rnn_relu")
def _recurrent(t: _Translator, node: Node) -> list[SSAValue | None]:
    """`nn.LSTM` / `nn.GRU` / `nn.RNN` (inference, padded input) unrolled over its static time
    steps: per layer and direction, the input projections of every step in one linear, then
    at each step the hidden state's linear and the gates as torch computes them (LSTM i, f,
    g, o; GRU r, z, n with b_hn inside r's product; RNN tanh or relu of the sum). Packed
    sequences, training, projections (`proj_size`) and more than `RNN_STEPS` unrolled steps
    are refused."""
    name = node.target._overloadpacket.__name__  # pyright: ignore
    lstm = name == "lstm"
    step_of = {"lstm": _lstm_step, "gru": _gru_step, "rnn_tanh": _tanh_step, "rnn_relu": _relu_step}
    gates = {"lstm": 4, "gru": 3}.get(name, 1)
    if node.target._overloadname != "input":  # pyright: ignore
        raise t.fail(node, f"aten.{name} of a packed sequence")
    has_biases, layers, _, train, bidirectional, batch_first = node.args[3:9]
    if train:
        raise t.fail(node, f"aten.{name} in training mode (call module.eval() first)")
    directions = 2 if bidirectional else 1
    per = 4 if has_biases else 2
    params = [t.value(p, node) for p in node.args[2]]
    if len(params) != layers * directions * per:
        raise t.fail(node, f"aten.{name} with projections (proj_size)")
    x = t.value(node.args[0], node)
    if _type(x).get_num_dims() != 3:
        raise t.fail(node, f"aten.{name} of an unbatched input")
    sequence = t.emit(graph.TransposeOp(x, (1, 0, 2))) if batch_first else x
    steps, batch, _ = _type(sequence).get_shape()
    if steps * layers * directions > RNN_STEPS:
        raise t.fail(node, f"aten.{name} of {steps} steps × {layers * directions} unrolled")
    hidden = _type(params[1]).get_shape()[1]
    given = node.args[1] if isinstance(node.args[1], list | tuple) else [node.args[1]]
    states = [t.value(h, node) for h in given]  # h0, and c0 for an LSTM
    finals: list[list[SSAValue]] = [[] for _ in states]
    layer_input = sequence
    for layer in range(layers):
        outputs = []
        for direction in range(directions):
            k = layer * directions + direction
            w_ih, w_hh, *biases = params[k * per : (k + 1) * per]
            b_ih, b_hh = biases or (None, None)
            projected = t.emit(graph.LinearOp(layer_input, w_ih, b_ih))
            h, *cell = (
                t.reshape(t.emit(graph.SliceOp(state, 0, k, 1, 1)), (batch, hidden))
                for state in states
            )
            c = cell[0] if lstm else h  # only an LSTM has a cell state
            order = range(steps) if direction == 0 else reversed(range(steps))
            produced: dict[int, SSAValue] = {}
            for step in order:
                xp = t.emit(graph.SliceOp(projected, 0, step, 1, 1))
                xp = t.reshape(xp, (batch, gates * hidden))
                hp = t.emit(graph.LinearOp(h, w_hh, b_hh))
                h, c = step_of[name](t, xp, hp, h, c, hidden)
                produced[step] = t.reshape(h, (1, batch, hidden))
            outputs.append(t.emit(graph.ConcatOp([produced[s] for s in range(steps)], 0)))
            finals[0].append(t.reshape(h, (1, batch, hidden)))
            if lstm:
                finals[1].append(t.reshape(c, (1, batch, hidden)))
        layer_input = outputs[0] if directions == 1 else t.emit(graph.ConcatOp(outputs, 2))
    result = t.emit(graph.TransposeOp(layer_input, (1, 0, 2))) if batch_first else layer_input
    ends = [f[0] if len(f) == 1 else t.emit(graph.ConcatOp(f, 0)) for f in finals if f]
    return [result, *ends]


@_handles("lstm_cell", "gru_cell")
def _recurrent_cell(t: _Translator, node: Node) -> SSAValue | list[SSAValue | None]:
    """`nn.LSTMCell` / `nn.GRUCell`: one step of `_recurrent`'s (h', and c' for an LSTM)."""
    lstm = node.target._overloadpacket.__name__ == "lstm_cell"  # pyright: ignore
    x = t.value(node.args[0], node)
    given = node.args[1] if isinstance(node.args[1], list | tuple) else [node.args[1]]
    h, c = ([t.value(v, node) for v in given] + [None])[:2]
    w_ih, w_hh = (t.value(w, node) for w in node.args[2:4])
    biases = [*node.args[4:6], None, None][:2]  # absent without biases
    b_ih, b_hh = (None if b is None else t.value(b, node) for b in biases)
    hidden = _type(w_hh).get_shape()[1]
    xp, hp = t.emit(graph.LinearOp(x, w_ih, b_ih)), t.emit(graph.LinearOp(h, w_hh, b_hh))
    if lstm:
        assert c is not None
        return list(_lstm_step(t, xp, hp, h, c, hidden))
    return _gru_step(t, xp, hp, h, h, hidden)[0]


def _gates(t: _Translator, x: SSAValue, count: int, hidden: int) -> list[SSAValue]:
    """The `count` blocks of `hidden` columns of `[B, count·hidden]`."""
    return [t.emit(graph.SliceOp(x, 1, g * hidden, hidden, 1)) for g in range(count)]


def _lstm_step(
    t: _Translator, xp: SSAValue, hp: SSAValue, h: SSAValue, c: SSAValue, hidden: int
) -> tuple[SSAValue, SSAValue]:
    """c' = σ(f)·c + σ(i)·tanh(g), h' = σ(o)·tanh(c'), the gates of xp + hp."""
    i, f, g, o = _gates(t, t.emit(graph.AddOp(xp, hp)), 4, hidden)
    i, f, o = (t.emit(graph.SigmoidOp(v)) for v in (i, f, o))
    c = t.emit(
        graph.AddOp(t.emit(graph.MulOp(f, c)), t.emit(graph.MulOp(i, t.emit(graph.TanhOp(g)))))
    )
    return t.emit(graph.MulOp(o, t.emit(graph.TanhOp(c)))), c


def _tanh_step(
    t: _Translator, xp: SSAValue, hp: SSAValue, h: SSAValue, c: SSAValue, hidden: int
) -> tuple[SSAValue, SSAValue]:
    """h' = tanh(xp + hp)."""
    return t.emit(graph.TanhOp(t.emit(graph.AddOp(xp, hp)))), c


def _relu_step(
    t: _Translator, xp: SSAValue, hp: SSAValue, h: SSAValue, c: SSAValue, hidden: int
) -> tuple[SSAValue, SSAValue]:
    """h' = relu(xp + hp)."""
    return t.emit(graph.ReluOp(t.emit(graph.AddOp(xp, hp)))), c


def _gru_step(
    t: _Translator, xp: SSAValue, hp: SSAValue, h: SSAValue, c: SSAValue, hidden: int
) -> tuple[SSAValue, SSAValue]:
    """r = σ(x_r + h_r), z = σ(x_z + h_z), n = tanh(x_n + r·h_n), h' = (1 − z)·n + z·h."""
    xr, xz, xn = _gates(t, xp, 3, hidden)
    hr, hz, hn = _gates(t, hp, 3, hidden)
    r = t.emit(graph.SigmoidOp(t.emit(graph.AddOp(xr, hr))))
    z = t.emit(graph.SigmoidOp(t.emit(graph.AddOp(xz, hz))))
    n = t.emit(graph.TanhOp(t.emit(graph.AddOp(xn, t.emit(graph.MulOp(r, hn))))))
    keep = t.emit(graph.SubOp(t.scalar(1.0, _type(z)), z))
    return t.emit(graph.AddOp(t.emit(graph.MulOp(keep, n)), t.emit(graph.MulOp(z, h)))), c


@_handles("_weight_norm")
def _weight_norm(t: _Translator, node: Node) -> SSAValue:
    """`nn.utils.weight_norm`'s weight: `v · g / ‖v‖`, the norm over every dim of v but `dim`
    (over all of them for dim −1)."""
    out = t.tensor_type(node)
    v, g = (t.cast(t.value(a, node), out.element_type) for a in node.args[:2])
    rank = out.get_num_dims()
    dim = _arg(node, 2, "dim", 0)
    kept = [] if dim == -1 else _dims(dim, rank)
    squares = t.emit(
        graph.ReduceSumOp(
            t.emit(graph.MulOp(v, v)), [d for d in range(rank) if d not in kept], keepdim=True
        )
    )
    norm = t.broadcast(t.emit(graph.SqrtOp(squares)), out.get_shape())
    scale = t.broadcast(t.reshape(g, _type(squares).get_shape()), out.get_shape())
    return t.emit(graph.MulOp(v, t.emit(graph.DivOp(scale, norm))))


@_handles("mv", "dot", "addmv")
def _matrix_vector(t: _Translator, node: Node) -> SSAValue:
    """`mv(a, x)` and `dot(a, b)` as matmuls of the vectors made columns (and rows), `addmv`
    as `beta * v + alpha * mv(a, x)`."""
    out = t.tensor_type(node)
    name = node.target._overloadpacket.__name__  # pyright: ignore
    operands = node.args[1:3] if name == "addmv" else node.args[:2]
    a, x = (t.cast(t.value(v, node), out.element_type) for v in operands)
    if name == "dot":
        a = t.reshape(a, (1, _type(a).get_shape()[0]))
    column = t.reshape(x, (_type(x).get_shape()[0], 1))
    product = t.reshape(t.emit(graph.MatmulOp(a, column)), out.get_shape())
    return _scaled_sum(t, node, product, out) if name == "addmv" else product


@_handles("outer")
def _outer(t: _Translator, node: Node) -> SSAValue:
    """`a[:, None] * b[None, :]`."""
    out = t.tensor_type(node)
    n, m = out.get_shape()
    a, b = (t.cast(t.value(x, node), out.element_type) for x in node.args[:2])
    return t.emit(
        graph.MulOp(
            t.broadcast(t.reshape(a, (n, 1)), (n, m)), t.broadcast(t.reshape(b, (1, m)), (n, m))
        )
    )


@_handles("cosine_similarity")
def _cosine_similarity(t: _Translator, node: Node) -> SSAValue:
    """`sum(a / max(|a|, eps) * b / max(|b|, eps))` along the dim (1 by default), a and b
    broadcast together first: torch's form, in f32 for f16/bf16 results."""
    import torch

    out = t.tensor_type(node)
    work = _work_type(out).element_type
    shape = [int(d) for d in torch.broadcast_shapes(*(a.meta["val"].shape for a in node.args[:2]))]
    dim = _dims(_arg(node, 2, "dim", 1), len(shape))[0]
    eps = float(_arg(node, 3, "eps", 1e-8))

    def unit(arg: Any) -> SSAValue:
        x = t.cast(t.value(arg, node), work)
        x = t.broadcast(
            t.reshape(x, [1] * (len(shape) - _type(x).get_num_dims()) + list(_type(x).get_shape())),
            shape,
        )
        norm = t.emit(
            graph.SqrtOp(t.emit(graph.ReduceSumOp(t.emit(graph.MulOp(x, x)), [dim], True)))
        )
        norm = t.emit(graph.MaxOp(norm, t.scalar(eps, _type(norm))))
        return t.emit(graph.DivOp(x, t.broadcast(norm, shape)))

    product = t.emit(graph.MulOp(unit(node.args[0]), unit(node.args[1])))
    return t.cast(t.emit(graph.ReduceSumOp(product, [dim], False)), out.element_type)


@_handles("nll_loss_forward", "nll_loss2d_forward")
def _nll_loss(t: _Translator, node: Node) -> list[SSAValue | None]:
    """torch's nll_loss (and so `cross_entropy` with class indices, which torch decomposes
    into log_softmax and this): `−x[.., target, ..] · weight[target]` along the class dim (1,
    or 0 for one sample) where the target is not `ignore_index`, then not reduced, summed, or
    summed over the picked weights' total; and that total. The class a target names is picked
    by a masked maximum over the classes (`_picked`: the target compared with the class index
    in f32, exact for fewer than 2^24 classes); a target outside [0, C) picks −inf (an
    infinite loss), where torch raises. In f32
    for f16/bf16."""
    x = t.value(node.args[0], node)
    shape = list(_type(x).get_shape())
    dim = 1 if len(shape) > 1 else 0
    if shape[dim] > EXACT_INTEGERS:
        raise t.fail(node, f"aten.nll_loss over {shape[dim]} classes (past 2^24)")
    out_type = _type(x).element_type
    work = _work_type(TensorType(out_type, shape))
    x = t.cast(x, work.element_type)
    target = t.cast(t.value(node.args[1], node), f32)
    rows = list(_type(target).get_shape())
    one_per_row = [*rows[:dim], 1, *rows[dim:]]
    wanted = t.broadcast(t.reshape(target, one_per_row), shape)
    hit = t.emit(graph.CompareOp(wanted, t.emit(graph.IotaOp(TensorType(f32, shape), dim)), "eq"))
    picked = _picked(t, hit, x, dim)
    row_type = TensorType(work.element_type, rows)
    zero, one = t.scalar(0.0, row_type), t.scalar(1.0, row_type)
    weight = _arg(node, 2, "weight")
    if weight is not None:
        w = t.cast(t.value(weight, node), work.element_type)
        spread = [1] * len(shape)
        spread[dim] = shape[dim]
        w = t.broadcast(t.reshape(w, spread), shape)
        one = _picked(t, hit, w, dim)
    ignore = float(_arg(node, 4, "ignore_index", -100))
    kept = t.emit(graph.CompareOp(target, t.scalar(ignore, _type(target)), "ne"))
    weights = t.emit(graph.SelectOp(kept, one, zero))
    losses = t.emit(
        graph.SelectOp(kept, t.emit(graph.NegOp(t.emit(graph.MulOp(picked, one)))), zero)
    )
    everything = list(range(len(rows)))
    total = t.emit(graph.ReduceSumOp(weights, everything, False)) if rows else weights
    reduction = int(_arg(node, 3, "reduction", 1))
    if reduction == 0:
        result = losses
    else:
        result = t.emit(graph.ReduceSumOp(losses, everything, False)) if rows else losses
        if reduction == 1:
            result = t.emit(graph.DivOp(result, total))
    return [t.cast(result, out_type), t.cast(total, out_type)]


@_handles("einsum")
def _einsum(t: _Translator, node: Node) -> SSAValue:
    """An einsum as a chain of batched matmuls, left to right: each pair's shared labels that
    a later operand or the output still needs are batch dims, the other shared ones the
    contraction, the rest the rows and columns; a label only one operand has and nothing
    later needs is summed out first. Repeated labels in one operand (diagonals) are refused."""
    out = t.tensor_type(node)
    terms, output = _einsum_labels(t, node, out.get_num_dims())
    values = [t.cast(t.value(a, node), out.element_type) for a in node.args[1]]
    if len(values) != len(terms):
        raise t.fail(node, f"aten.einsum: {len(terms)} terms for {len(values)} operands")
    sizes: dict[str, int] = {}
    for labels, value in zip(terms, values, strict=True):
        if len(labels) != _type(value).get_num_dims() or len(set(labels)) != len(labels):
            raise t.fail(
                node, f"aten.einsum term {''.join(labels)!r} (a diagonal, or the wrong rank)"
            )
        for label, size in zip(labels, _type(value).get_shape(), strict=True):
            sizes[label] = max(sizes.get(label, 1), size)
    labels, x = terms[0], values[0]
    for k in range(1, len(values) + 1):
        later = set(output).union(*terms[k + 1 :]) if k < len(values) else set(output)
        other = set(terms[k]) if k < len(values) else set()
        summed = [i for i, label in enumerate(labels) if label not in later | other]
        if summed:
            x = t.emit(graph.ReduceSumOp(x, summed, False))
            labels = [label for label in labels if label not in [labels[i] for i in summed]]
        if k == len(values):
            break
        y, right = values[k], terms[k]
        summed = [i for i, label in enumerate(right) if label not in later | set(labels)]
        if summed:
            y = t.emit(graph.ReduceSumOp(y, summed, False))
            right = [label for i, label in enumerate(right) if i not in summed]
        batch = [label for label in labels if label in right and label in later]
        inner = [label for label in labels if label in right and label not in later]
        rows = [label for label in labels if label not in right]
        columns = [label for label in right if label not in labels]
        lhs = _einsum_arrange(t, x, labels, [batch, rows, inner], sizes)
        rhs = _einsum_arrange(t, y, right, [batch, inner, columns], sizes)
        product = t.emit(graph.MatmulOp(lhs, rhs))
        labels = batch + rows + columns
        x = t.reshape(product, [sizes[label] for label in labels])
    order = [labels.index(label) for label in output]
    if order != list(range(len(order))):
        x = t.emit(graph.TransposeOp(x, order))
    return t.reshape(x, out.get_shape())


def _einsum_labels(t: _Translator, node: Node, out_rank: int) -> tuple[list[list[str]], list[str]]:
    """The equation's labels per operand and for the output (`...` spelled as one label per
    dim it stands for, right-aligned across operands; the output of an implicit equation is
    the labels used once, sorted, after the ellipsis)."""
    equation = str(node.args[0]).replace(" ", "")
    inputs, arrow, output = equation.partition("->")
    ranks = [a.meta["val"].dim() for a in node.args[1]]
    ellipsis = max(
        (
            r - len(term.replace("...", ""))
            for term, r in zip(inputs.split(","), ranks)
            if "..." in term
        ),
        default=0,
    )

    def spell(term: str, rank: int) -> list[str]:
        head, dots, tail = term.partition("...")
        if not dots:
            return list(term)
        covered = rank - len(head) - len(tail)
        return [*head, *(f"...{i}" for i in range(ellipsis - covered, ellipsis)), *tail]

    terms = [spell(term, rank) for term, rank in zip(inputs.split(","), ranks)]
    if arrow:
        return terms, spell(output, out_rank)
    counts: dict[str, int] = {}
    for label in (label for term in terms for label in term):
        counts[label] = counts.get(label, 0) + 1
    dots = [f"...{i}" for i in range(ellipsis)]
    return terms, dots + sorted(
        label for label, n in counts.items() if n == 1 and not label.startswith("...")
    )


def _einsum_arrange(
    t: _Translator, x: SSAValue, labels: list[str], groups: list[list[str]], sizes: dict[str, int]
) -> SSAValue:
    """`x` transposed to the labels of `groups` in order, broadcast where a dim is 1, and its
    last two groups merged: `[*batch, rows, columns]`."""
    flat = [label for group in groups for label in group]
    order = [labels.index(label) for label in flat]
    if order != list(range(len(order))):
        x = t.emit(graph.TransposeOp(x, order))
    x = t.broadcast(x, [sizes[label] for label in flat])
    batch, first, second = groups
    merged = [
        *(sizes[label] for label in batch),
        math.prod(sizes[label] for label in first),
        math.prod(sizes[label] for label in second),
    ]
    return t.reshape(x, merged)


@_handles("scaled_dot_product_attention")
def _attention(t: _Translator, node: Node) -> SSAValue:
    """`graph.attention`, with k and v of their own head count (GQA: `enable_gqa`), length
    and value size, and `attn_mask` (boolean or additive) as its mask operand. torch's
    `is_causal` aligns the diagonal to the first key (query i sees keys j ≤ i); where
    Sq = Skv that is `causal`, elsewhere it becomes a boolean mask (an index expression)."""
    if _arg(node, 4, "dropout_p", 0.0) != 0.0:
        raise t.fail(node, "scaled_dot_product_attention with dropout")
    out = t.tensor_type(node)
    q, k, v = (t.value(a, node) for a in node.args[:3])
    shape = _type(q).get_shape()
    ranks = {len(shape), _type(k).get_num_dims(), _type(v).get_num_dims()}
    if len(shape) not in (3, 4) or len(ranks) > 1:
        raise t.fail(node, f"scaled_dot_product_attention on rank {len(shape)} (expects 3 or 4)")
    q, k, v = (t.reshape(x, (1,) * (4 - len(shape)) + _type(x).get_shape()) for x in (q, k, v))
    (_, heads, sq, _), (_, kv_heads, skv, _) = _type(q).get_shape(), _type(k).get_shape()
    if heads % kv_heads:
        raise t.fail(
            node, f"scaled_dot_product_attention with {heads} query heads and {kv_heads} key heads"
        )
    mask = _arg(node, 3, "attn_mask")
    if mask is not None:
        mask = t.value(mask, node)
        rank = _type(mask).get_num_dims()
        if rank > 4:
            raise t.fail(node, f"scaled_dot_product_attention with an attn_mask of rank {rank}")
        mask = t.reshape(mask, (1,) * (4 - rank) + _type(mask).get_shape())
    scale = _arg(node, 7, "scale")
    scale = 1.0 / math.sqrt(shape[-1]) if scale is None else float(scale)
    causal = bool(_arg(node, 5, "is_causal", False))
    if causal and mask is not None:
        raise t.fail(node, "scaled_dot_product_attention with both attn_mask and is_causal")
    if causal and sq != skv:
        mask, causal = _first_key_causal(t, sq, skv), False
    try:
        attention = graph.AttentionOp(q, k, v, scale, causal, mask)
        attention.verify()
    except VerifyException as exc:
        raise t.fail(node, f"scaled_dot_product_attention: {exc}") from None
    result = t.emit(attention)
    given = _arg(node, 3, "attn_mask")  # torch's is_causal (a mask or not) keeps key 0
    if given is not None and _type(mask).element_type == graph.BOOL:
        result = _zero_where_no_key(t, given, mask, result)
    return t.reshape(result, out.get_shape())


def _zero_where_no_key(t: _Translator, given: Node, mask: SSAValue, result: SSAValue) -> SSAValue:
    """torch's attention gives 0 in a row whose boolean mask keeps no key (`graph.attention`
    averages v there): `result` where the row keeps a key, else 0. Nothing is added where the
    mask is computed from constants alone and every row keeps a key (a causal or banded
    mask). A float mask needs no such select: the attention kernels give 0 in a row whose every
    score is −inf, as torch does."""
    fixed = t.constant_value(given)
    if fixed is not None and bool(fixed.any(-1).all()):
        return result
    kept = t.emit(graph.ReduceMaxOp(t.cast(mask, f32), [3], True))
    spread = t.broadcast(kept, _type(result).get_shape())
    zero = t.scalar(0.0, _type(spread))
    keeps = t.emit(graph.CompareOp(spread, zero, "ne"))
    return t.emit(graph.SelectOp(keeps, result, t.cast(zero, _type(result).element_type)))


def _first_key_causal(t: _Translator, sq: int, skv: int) -> SSAValue:
    """torch's `is_causal` for Sq ≠ Skv, `[1, 1, Sq, Skv]` true where key j ≤ query i."""
    index = TensorType(f32, (1, 1, sq, skv))
    rows, cols = (t.emit(graph.IotaOp(index, dim)) for dim in (2, 3))
    return t.emit(graph.CompareOp(cols, rows, "le"))


@_handles("rms_norm")
def _rms_norm(t: _Translator, node: Node) -> SSAValue:
    """`graph.rms_norm` over the last dims (several merged into one), a missing weight as 1
    (`nn.RMSNorm(elementwise_affine=False)`), eps by default the dtype's."""
    import torch

    merged, row = _normalized_rows(t, node)
    eps = _arg(node, 3, "eps")
    eps = torch.finfo(node.meta["val"].dtype).eps if eps is None else eps
    norm = graph.RmsNormOp(merged, row(_arg(node, 2, "weight"), 1.0), eps)
    return t.reshape(t.emit(norm), t.tensor_type(node).get_shape())


@_handles("layer_norm")
def _layer_norm(t: _Translator, node: Node) -> SSAValue:
    """`graph.layer_norm` over the last dims (several merged into one), a missing weight as 1
    and a missing bias as 0."""
    merged, row = _normalized_rows(t, node)
    weight, bias = row(_arg(node, 2, "weight"), 1.0), row(_arg(node, 3, "bias"), 0.0)
    eps = float(_arg(node, 4, "eps", 1e-5))
    norm = graph.LayerNormOp(merged, weight, bias, eps)
    return t.reshape(t.emit(norm), t.tensor_type(node).get_shape())


def _normalized_rows(
    t: _Translator, node: Node
) -> tuple[SSAValue, Callable[[Any, float], SSAValue]]:
    """A norm's input (`args[0]`, in the result's type) with its normalized last dims
    (`args[1]`) merged into one of `width`, and what makes an affine argument a row of that
    width: the argument merged alike, or `default` where it is None."""
    out = t.tensor_type(node)
    x = t.cast(t.value(node.args[0], node), out.element_type)
    shape = out.get_shape()
    lead = len(shape) - len(node.args[1])
    width = math.prod(shape[lead:])

    def row(arg: Any, default: float) -> SSAValue:
        if arg is None:
            return t.scalar(default, TensorType(out.element_type, [width]))
        return t.reshape(t.cast(t.value(arg, node), out.element_type), [width])

    return t.reshape(x, (*shape[:lead], width)), row


# ------------------------------------------------------------------------ shape and data


@_handles(
    "view", "reshape", "_unsafe_view", "unsqueeze", "squeeze", "flatten", "unflatten", "expand",
    "expand_as", "broadcast_to",
)  # fmt: skip
def _reshape_or_expand(t: _Translator, node: Node) -> SSAValue:
    name = node.target._overloadpacket.__name__  # pyright: ignore
    if name == "view" and node.target._overloadname == "dtype":  # pyright: ignore
        # `Tensor.view(dtype)` reinterprets the bits, it does not convert the values
        source, target = _dtype(node.args[0]), str(node.args[1]).removeprefix("torch.")
        if source != target:
            raise t.fail(
                node,
                f"Tensor.view({target}) of {source} values reinterprets their bits (a bitcast), "
                f"which tinyopt does not capture (`.to({target})` converts the values)",
            )
        return t.value(node.args[0], node)
    out = t.tensor_type(node)
    x = t.value(node.args[0], node)
    if name in ("expand", "expand_as", "broadcast_to"):
        return t.broadcast(x, out.get_shape())
    return t.reshape(x, out.get_shape())


@_handles("transpose", "permute", "t", "numpy_T", "swapaxes", "mT", "movedim")
def _transpose(t: _Translator, node: Node) -> SSAValue:
    x = t.value(node.args[0], node)
    rank = _type(x).get_num_dims()
    name = node.target._overloadpacket.__name__  # pyright: ignore
    if name == "permute":
        perm = _dims(node.args[1], rank)
    elif name == "movedim":  # the moved dims at their places, the others in order around them
        sources, targets = (
            _dims(a if isinstance(a, list | tuple) else [a], rank) for a in node.args[1:3]
        )
        rest = iter(d for d in range(rank) if d not in sources)
        placed = dict(zip(targets, sources, strict=True))
        perm = [placed[d] if d in placed else next(rest) for d in range(rank)]
    elif name in ("t", "numpy_T"):
        perm = list(reversed(range(rank)))
    elif name == "mT":
        perm = [*range(rank - 2), rank - 1, rank - 2]
    else:
        a, b = _dims([node.args[1], node.args[2]], rank)
        perm = list(range(rank))
        perm[a], perm[b] = b, a
    if perm == list(range(rank)):
        return x
    return t.emit(graph.TransposeOp(x, perm))


@_handles("contiguous", "clone", "alias", "detach", "detach_", "lift_fresh_copy")
def _identity(t: _Translator, node: Node) -> SSAValue:
    return t.value(node.args[0], node)


@_handles("view_as", "reshape_as")
def _view_as(t: _Translator, node: Node) -> SSAValue:
    """`x.view_as(other)`: x reshaped to other's shape."""
    return t.reshape(t.value(node.args[0], node), t.tensor_type(node).get_shape())


@_handles("dropout", "alpha_dropout", "feature_dropout", "feature_alpha_dropout")
def _dropout(t: _Translator, node: Node) -> SSAValue:
    """Dropout of any kind in eval mode (or with p = 0) is the identity."""
    if _arg(node, 2, "train") and _arg(node, 1, "p") != 0.0:
        raise t.fail(node, "dropout in training mode (call module.eval() first)")
    return t.value(node.args[0], node)


@_handles("to", "_to_copy", "type_as")
def _to(t: _Translator, node: Node) -> SSAValue:
    source = node.args[0]
    if _dtype(node) in _ID_DTYPES and _dtype(source) not in (*_ID_DTYPES, "bool"):
        value = t.constant_value(node)
        if value is None:
            raise t.fail(
                node,
                f"conversion of {_dtype(source)} to {_dtype(node)} (truncation) of a value "
                "computed from the inputs or weights",
            )
        return t.folded(node, value)
    value = t.value(source, node)
    if _dtype(node) == _dtype(source) and _type(value).element_type in graph.ID_TYPES:
        return value  # an integer input's `.long()` on int64: the same tensor, not computed
    return t.cast(value, t.tensor_type(node).element_type)


@_handles("slice", "select", "narrow")
def _slice(t: _Translator, node: Node) -> SSAValue:
    out = t.tensor_type(node)
    x = t.value(node.args[0], node)
    shape = _type(x).get_shape()
    dim = _dims(_arg(node, 1, "dim", 0), len(shape))[0]
    name = node.target._overloadpacket.__name__  # pyright: ignore
    if name == "select":
        start, size, step = node.args[2] % shape[dim], 1, 1
    elif name == "narrow":  # x.narrow(dim, start, length)
        start, size, step = node.args[2] % shape[dim], out.get_shape()[dim], 1
    else:
        start, step = _arg(node, 2, "start") or 0, _arg(node, 4, "step", 1)
        start = min(max(start + shape[dim] if start < 0 else start, 0), shape[dim])
        size = out.get_shape()[dim]
    if (start, size, step) == (0, shape[dim], 1):  # all of it: a select of a dim of 1 drops it
        return t.reshape(x, out.get_shape())
    sliced = t.emit(graph.SliceOp(x, dim, start, size, step))
    return t.reshape(sliced, out.get_shape())


@_handles("embedding")
def _embedding(t: _Translator, node: Node) -> SSAValue:
    """`F.embedding`: rows of the table gathered by integer ids, a module input or computed
    (HF GPT-2's `wpe(torch.arange(S))`: an integer carried in f32, exact, converted to i64); ids
    out of range are clamped (torch raises). A table renormed for the lookup (`max_norm`,
    `_embedding_renorm`) has the rows gathered scaled."""
    table, ids = t.value(node.args[0], node), t.value(node.args[1], node)
    if _dtype(node.args[1]) not in _ID_DTYPES:
        raise t.fail(node, f"aten.embedding indices of dtype {_dtype(node.args[1])}")
    if _type(ids).element_type not in graph.ID_TYPES:
        ids = t.cast(ids, i64)
    rows = _rows(t, table, ids)
    renorm = node.args[0]
    if _op_name(renorm.target) != "aten.embedding_renorm":
        return rows
    return _renormed_rows(t, rows, float(renorm.args[2]), float(renorm.args[3]))


@_handles("embedding_renorm")
def _embedding_renorm(t: _Translator, node: Node) -> SSAValue:
    """`nn.Embedding(max_norm=...)`'s renorm of the table's rows its ids name, made by torch in
    place before the lookup: the table passed on as it is, and the lookup at the same ids
    scales the rows it gathers (`_renormed_rows`), which gives the lookup's result of this one
    call. The table's write back is not reproduced (the weight stays as it is, where torch's
    module keeps the renormed rows for its later calls), so the renormed table may feed only
    lookups at the same ids, or the renorm of a later lookup with the same max_norm (rows
    already within it are left as they are)."""
    for user in _readers(node):
        name = _op_name(user.target) if user.op == "call_function" else user.op
        lookup = name == "aten.embedding" and user.args[:2] == (node, node.args[1])
        again = name == "aten.embedding_renorm" and user.args[2:4] == node.args[2:4]
        if not (lookup or again or name == "output"):
            raise t.fail(
                node,
                "aten.embedding_renorm (nn.Embedding's max_norm) of a table read other than by "
                "its lookup: torch renorms the table in place, which tinyopt does not reproduce",
            )
    return t.value(node.args[0], node)


def _readers(node: Node) -> Iterator[Node]:
    """The nodes that read `node`'s value, looking through `detach` and `alias`."""
    for user in node.users:
        if _op_name(user.target) in ("aten.detach", "aten.alias"):
            yield from _readers(user)
        else:
            yield user


def _renormed_rows(t: _Translator, rows: SSAValue, max_norm: float, order: float) -> SSAValue:
    """Gathered rows each scaled by `max_norm / (norm + 1e-7)` where their order-`order` norm
    exceeds `max_norm`, as torch's `embedding_renorm_` scales them in the table (a repeated id's
    rows alike); in f32 for f16/bf16."""
    out = _type(rows)
    x = t.cast(rows, _work_type(out).element_type)
    norm = _norm(t, x, [out.get_num_dims() - 1], True, order)
    shifted = t.emit(graph.AddOp(norm, t.scalar(1e-7, _type(norm))))
    scale = t.emit(graph.DivOp(t.scalar(max_norm, _type(norm)), shifted))
    over = t.emit(graph.CompareOp(norm, t.scalar(max_norm, _type(norm)), "gt"))
    factor = t.emit(graph.SelectOp(over, scale, t.scalar(1.0, _type(norm))))
    scaled = t.emit(graph.MulOp(x, t.broadcast(factor, out.get_shape())))
    return t.cast(scaled, out.element_type)


@_handles("bucketize", "searchsorted")
def _bucketize(t: _Translator, node: Node) -> SSAValue:
    """Where each value goes in sorted boundaries (1-D, or for `searchsorted` one sequence per
    row of the values): their count less the count of those at or above it (above it, with
    `right` or `side="right"`), so NaN and values past the last boundary go to the end, as
    torch's binary search puts them. A masked count over the boundaries (values × boundaries
    comparisons), in f32 for f16/bf16; integers are refused past 2^24."""
    name = node.target._overloadpacket.__name__  # pyright: ignore
    values_arg, bounds_arg = node.args[:2] if name == "bucketize" else node.args[1::-1]
    if node.kwargs.get("sorter") is not None:
        raise t.fail(node, "aten.searchsorted with a sorter")
    right = bool(node.kwargs.get("right", False)) or node.kwargs.get("side") == "right"
    for arg in (values_arg, bounds_arg):
        if _dtype(arg) in _ID_DTYPES and t.bound(arg) > EXACT_INTEGERS:
            raise t.fail(node, f"aten.{name} of integers beyond 2^24")
    work = t.float_like(node, [values_arg, bounds_arg]).element_type
    if work in (f16, bf16):
        work = f32
    values = t.cast(t.value(values_arg, node), work)
    bounds = t.cast(t.value(bounds_arg, node), work)
    shape = list(_type(values).get_shape())
    count = _type(bounds).get_shape()[-1]
    full = [*shape, count]
    if _type(bounds).get_num_dims() == 1:
        bounds = t.reshape(bounds, [1] * len(shape) + [count])
    else:
        bounds = t.reshape(bounds, [*shape[:-1], 1, count])
    spread = t.broadcast(bounds, full)
    above = t.emit(
        graph.CompareOp(
            spread, t.broadcast(t.reshape(values, [*shape, 1]), full), "gt" if right else "ge"
        )
    )
    ahead = t.emit(graph.ReduceSumOp(t.cast(above, f32), [len(shape)], False))
    return t.emit(graph.SubOp(t.scalar(float(count), _type(ahead)), ahead))


@_handles("histc")
def _histc(t: _Translator, node: Node) -> SSAValue:
    """`torch.histc(x, bins, min, max)` as torch's CPU kernel bins each element: in x's own
    dtype, `trunc((x − min) · bins / (max − min))` (each step rounded to that dtype, so an
    element near an edge lands where torch puts it, not where exact arithmetic would), max
    in the last bin, NaN and elements outside [min, max] in none; a masked count per bin
    (bins × elements comparisons, index expressions). torch counts in x's dtype, so f16/bf16
    are taken only while that count is exact; `min == max` (the default: the range of the
    data) is refused."""
    import torch

    out = t.tensor_type(node)
    source = node.args[0].meta["val"]
    bins = int(_arg(node, 1, "bins", 100))
    low, high = float(_arg(node, 2, "min", 0)), float(_arg(node, 3, "max", 0))
    if low == high:
        raise t.fail(
            node,
            "aten.histc with min == max (by default both 0) takes its range from the data's "
            "min and max, which tinyopt does not read at capture: give min < max",
        )
    info = torch.finfo(source.dtype)
    counted = round(2 / info.eps)  # the counts the dtype holds exactly
    if source.numel() > min(counted, EXACT_INTEGERS):
        raise t.fail(
            node,
            f"aten.histc of {source.numel()} {source.dtype} elements: torch counts in the "
            f"input's dtype, exact only to {counted}",
        )
    # torch's kernel multiplies by the bin count as x's dtype holds it (bf16 257 is 256)
    factor = float(torch.tensor(bins, dtype=source.dtype))
    if not math.isfinite(low) or not math.isfinite(high) or (high - low) * factor > info.max:
        raise t.fail(
            node,
            f"aten.histc over [{low}, {high}] in {bins} bins: (max − min) · bins overflows "
            f"{source.dtype} (torch's bin of an element is then undefined)",
        )
    first, last = (float(torch.tensor(b, dtype=source.dtype)) for b in (low, high))
    if first == last:
        raise t.fail(
            node,
            f"aten.histc over [{low}, {high}]: min and max round to the same {source.dtype} "
            f"value {first}, so torch's bins are all empty of width and its bin of an element "
            "equal to it undefined (0 / 0): give a range the input's dtype tells apart",
        )
    x = t.cast(t.reshape(t.value(node.args[0], node), [source.numel()]), f32)
    like = _type(x)

    def rounded(op: Operation) -> SSAValue:  # to x's dtype, as each step of torch's is
        return t.cast(t.cast(t.emit(op), out.element_type), f32)

    start, end = t.scalar(first, like), t.scalar(last, like)
    offset = rounded(graph.MulOp(rounded(graph.SubOp(x, start)), t.scalar(factor, like)))
    position = rounded(graph.DivOp(offset, rounded(graph.SubOp(end, start))))
    position = t.emit(graph.TruncOp(position))
    position = t.emit(graph.MinOp(position, t.scalar(float(bins - 1), like)))
    inside = t.emit(  # NaN compares False
        graph.MulOp(
            t.cast(t.emit(graph.CompareOp(x, start, "ge")), f32),
            t.cast(t.emit(graph.CompareOp(x, end, "le")), f32),
        )
    )
    square = [bins, source.numel()]
    rows = t.emit(graph.IotaOp(TensorType(f32, square), 0))
    spread = t.broadcast(t.reshape(position, [1, source.numel()]), square)
    hit = t.cast(t.emit(graph.CompareOp(spread, rows, "eq")), f32)
    kept = t.broadcast(t.reshape(inside, [1, source.numel()]), square)
    counts = t.emit(graph.ReduceSumOp(t.emit(graph.MulOp(hit, kept)), [1], False))
    return t.cast(counts, out.element_type)


@_handles("embedding_bag", "_embedding_bag")
def _embedding_bag(t: _Translator, node: Node) -> list[SSAValue | None]:
    """`nn.EmbeddingBag`'s sum, mean or max of the table's rows over each bag (its first
    result; reading the others is refused). Bags of one length (a 2-D input: offsets torch
    computes from constants, evenly spaced) reduce a `[bags, length, dim]` gather; bags given by
    offsets take a masked reduction over every id (bags · ids terms, at most 2^24). Ids equal
    to `padding_idx` count for nothing, and a bag with no id left gives 0, as torch's;
    `per_sample_weights` scale the rows of a sum. In f32 for f16/bf16."""
    table, ids = t.value(node.args[0], node), t.value(node.args[1], node)
    mode = int(_arg(node, 4, "mode", 0))
    weights = _arg(node, 6, "per_sample_weights")
    last = bool(_arg(node, 7, "include_last_offset", False))
    padding = _arg(node, 8, "padding_idx")
    if _type(ids).get_num_dims() != 1:
        raise t.fail(node, "aten.embedding_bag with ids of rank other than 1")
    if _type(ids).element_type not in graph.ID_TYPES:
        ids = t.cast(ids, i64)
    count = _type(ids).get_shape()[0]
    rows = t.emit(graph.GatherOp(table, ids))  # [ids, dim]
    work = _work_type(_type(rows)).element_type
    rows = t.cast(rows, work)
    dim = _type(rows).get_shape()[1]
    if weights is not None:
        scale = t.cast(t.value(weights, node), work)
        rows = t.emit(graph.MulOp(rows, t.broadcast(t.reshape(scale, [count, 1]), [count, dim])))
    kept = t.scalar(1.0, TensorType(f32, [count]))  # 1 per id that counts
    if padding is not None:
        ids_f32 = t.cast(ids, f32)
        other = t.emit(graph.CompareOp(ids_f32, t.scalar(float(padding), _type(ids_f32)), "ne"))
        kept = t.cast(other, f32)
    fixed = t.constant_value(node.args[2])
    starts = [int(v) for v in fixed.tolist()] if fixed is not None and not last else []
    length = count // len(starts) if starts else 0
    if length and starts == list(range(0, count, length)) and length * len(starts) == count:
        bags = len(starts)
        membership = t.reshape(kept, [bags, length])  # [bag, position in it]
        terms = t.reshape(rows, [bags, length, dim])
    else:
        offsets = t.cast(t.value(node.args[2], node), f32)
        bags = _type(offsets).get_shape()[0] - int(last)
        if bags * count > GATHER_TERMS:
            raise t.fail(node, f"aten.embedding_bag of {bags} bags over {count} ids (past 2^24)")
        grid = TensorType(f32, [bags, count])
        lower = t.emit(graph.SliceOp(offsets, 0, 0, bags, 1))
        if last:
            upper = t.emit(graph.SliceOp(offsets, 0, 1, bags, 1))
        else:
            end = t.scalar(float(count), TensorType(f32, [1]))
            upper = end
            if bags > 1:
                upper = t.emit(
                    graph.ConcatOp([t.emit(graph.SliceOp(offsets, 0, 1, bags - 1, 1)), end], 0)
                )
        position = t.emit(graph.IotaOp(grid, 1))
        after = t.emit(
            graph.CompareOp(position, t.broadcast(t.reshape(lower, [bags, 1]), [bags, count]), "ge")
        )
        before = t.emit(
            graph.CompareOp(position, t.broadcast(t.reshape(upper, [bags, 1]), [bags, count]), "lt")
        )
        inside = t.emit(graph.SelectOp(after, t.cast(before, f32), t.scalar(0.0, grid)))
        membership = t.emit(
            graph.MulOp(inside, t.broadcast(t.reshape(kept, [1, count]), [bags, count]))
        )
        terms = t.broadcast(t.reshape(rows, [1, count, dim]), [bags, count, dim])
    full = _type(terms).get_shape()
    member = t.emit(
        graph.CompareOp(
            t.broadcast(t.reshape(membership, [*full[:2], 1]), full),
            t.scalar(0.0, TensorType(f32, full)),
            "ne",
        )
    )
    sizes = t.emit(graph.ReduceSumOp(membership, [1], True))  # [bags, 1]
    if mode == 2:
        result = _masked_reduce(t, member, terms, 1, graph.ReduceMaxOp, -math.inf)
    else:
        result = _masked_reduce(t, member, terms, 1)
    if mode == 1:
        divisor = t.cast(t.emit(graph.MaxOp(sizes, t.scalar(1.0, _type(sizes)))), work)
        result = t.emit(graph.DivOp(result, t.broadcast(divisor, [bags, dim])))
    empty = t.emit(graph.CompareOp(sizes, t.scalar(0.0, _type(sizes)), "eq"))
    result = t.emit(
        graph.SelectOp(t.broadcast(empty, [bags, dim]), t.scalar(0.0, _type(result)), result)
    )
    return [t.cast(result, _type(table).element_type), None, None, None]


@_handles("index", "index_select")
def _index(t: _Translator, node: Node) -> SSAValue:
    """`x[..., ids, ...]` along one dim: a gather of the rows of x moved to the front.

    Negative ids count from the end, as in torch; ids out of range are clamped (torch raises).
    An integer tensor indexed is taken in f32 (`translate` refuses the result unless bounded).
    """
    x = t.value(node.args[0], node)
    x = t.cast(x, f32) if _type(x).element_type in graph.ID_TYPES else x
    rank = _type(x).get_num_dims()
    if node.target._overloadpacket.__name__ == "index_select":  # pyright: ignore
        if rank == 0:  # of a 0-d tensor: its one element, at a 0-d or one-element index
            ids = t.cast(t.value(node.args[2], node), f32)
            taken = _take(t, _one_element(t, x), 0, t.cast(_from_the_end(t, ids, 1), i64))
            return _torch_shape(t, node, taken)
        dim, ids_arg = _dims(node.args[1], rank)[0], node.args[2]
    else:
        given = [i for i, ids in enumerate(node.args[1]) if ids is not None]
        if len(given) > 1:
            return _index_adjacent_dims(t, node, x, given)
        dim, ids_arg = given[0], node.args[1][given[0]]
    if _dtype(ids_arg) not in _ID_DTYPES:
        raise t.fail(node, f"indexing with a {_dtype(ids_arg)} tensor (only integer indices)")
    rows = _type(x).get_shape()[dim]
    ids = t.cast(t.value(ids_arg, node), f32)  # exact: beyond 2^24 an id is past any dim
    return _take(t, x, dim, t.cast(_from_the_end(t, ids, rows), i64))


def _from_the_end(t: _Translator, ids: SSAValue, size: int) -> SSAValue:
    """f32 ids with the negative ones counted from the end of a dim of `size`, as torch's."""
    wrapped = t.emit(graph.AddOp(ids, t.scalar(float(size), _type(ids))))
    negative = t.emit(graph.CompareOp(ids, t.scalar(0.0, _type(ids)), "lt"))
    return t.emit(graph.SelectOp(negative, wrapped, ids))


def _index_adjacent_dims(t: _Translator, node: Node, x: SSAValue, dims: list[int]) -> SSAValue:
    """`x[ids0, ids1, ...]` over adjacent dims (`h[torch.arange(B), lengths - 1]`): the dims
    flattened into one and one gather by the row-major id `Σ idsₖ·strideₖ`, the ids broadcast
    together. Each id counts from the end where negative and is clamped to its dim (torch
    raises there), so an id out of range never reaches another row."""
    import torch

    if dims != list(range(dims[0], dims[-1] + 1)):
        raise t.fail(node, "indexing with index tensors in dims that are not adjacent")
    args = [node.args[1][d] for d in dims]
    for arg in args:
        if _dtype(arg) == "bool":
            raise t.fail(node, "indexing with a boolean mask beside other index tensors")
        if _dtype(arg) not in _ID_DTYPES:
            raise t.fail(node, f"indexing with a {_dtype(arg)} tensor (only integer indices)")
    shape = list(_type(x).get_shape())
    sizes = shape[dims[0] : dims[-1] + 1]
    if math.prod(sizes) > EXACT_INTEGERS:
        raise t.fail(
            node, f"indexing {math.prod(sizes)} elements by several index tensors (past 2^24)"
        )
    common = [int(d) for d in torch.broadcast_shapes(*(a.meta["val"].shape for a in args))]
    index = TensorType(f32, common)

    def number(value: float) -> SSAValue:
        return t.scalar(value, index)

    flat: SSAValue | None = None
    for k, (arg, size) in enumerate(zip(args, sizes, strict=True)):
        ids = t.cast(t.value(arg, node), f32)
        shape_ids = list(_type(ids).get_shape())
        ids = t.broadcast(t.reshape(ids, [1] * (len(common) - len(shape_ids)) + shape_ids), common)
        ids = t.emit(graph.MaxOp(_from_the_end(t, ids, size), number(0.0)))
        ids = t.emit(graph.MinOp(ids, number(size - 1)))
        stride = math.prod(sizes[k + 1 :])
        term = ids if stride == 1 else t.emit(graph.MulOp(ids, number(stride)))
        flat = term if flat is None else t.emit(graph.AddOp(flat, term))
    assert flat is not None
    table = t.reshape(x, [*shape[: dims[0]], math.prod(sizes), *shape[dims[-1] + 1 :]])
    return _take(t, table, dims[0], t.cast(flat, i64))


GATHER_TERMS = 2**24
"""Most terms a `torch.gather` may sum per slice: each output element is a masked sum over
the whole gathered dim (index length × dim length terms per slice)."""


@_handles("gather")
def _gather_along(t: _Translator, node: Node) -> SSAValue:
    """`torch.gather(x, dim, index)`: `out[.., j, ..] = x[.., index[.., j, ..], ..]` as a masked
    maximum over x's dim (`_picked`: one term where the index matches, the indices compared as
    f32, exact below 2^24); x is sliced to the index's extent in the other dims. An index out
    of range gives −inf (torch raises)."""
    out = t.tensor_type(node)
    dim = _dims(node.args[1], max(out.get_num_dims(), 1))[0]  # a 0-d tensor's dim 0 or -1
    return _gathered(t, node, t.value(node.args[0], node), dim, t.value(node.args[2], node))


@_handles("take_along_dim")
def _take_along_dim(t: _Translator, node: Node) -> SSAValue:
    """`torch.take_along_dim(x, index, dim)`: x and the index broadcast against each other in
    every dim but `dim`, a negative index counted from the end, then `gather`; without `dim`,
    of both flattened. An index out of range gives −inf (torch raises)."""
    out = t.tensor_type(node)
    x, index = t.value(node.args[0], node), t.cast(t.value(node.args[1], node), f32)
    dim = _arg(node, 2, "dim", None)
    if dim is None:
        flat = [math.prod(_type(x).get_shape())]
        return _gathered(t, node, t.reshape(x, flat), 0, index)
    shape = list(out.get_shape())
    dim = _dims(dim, len(shape))[0]
    n = _type(x).get_shape()[dim]
    x = t.broadcast(x, [*shape[:dim], n, *shape[dim + 1 :]])
    return _gathered(t, node, x, dim, _from_the_end(t, t.broadcast(index, shape), n))


def _gathered(t: _Translator, node: Node, x: SSAValue, dim: int, index: SSAValue) -> SSAValue:
    """`gather(x, dim, index)` of `node`'s result type (`_gather_along`)."""
    out = t.tensor_type(node)
    work = _work_type(out).element_type
    x = t.cast(x, f32 if work == graph.BOOL else work)  # a mask picked as 0/1 floats
    x, index = _one_element(t, x), _one_element(t, t.cast(index, f32))  # 0-d: one element
    shape = list(out.get_shape()) or [1]
    rank = len(shape)
    n = _type(x).get_shape()[dim]
    if shape[dim] * n > GATHER_TERMS:
        raise t.fail(
            node, f"aten.gather of {shape[dim]} from {n} elements (their product past 2^24)"
        )
    for d in range(rank):
        if d != dim and _type(x).get_shape()[d] != shape[d]:
            x = t.emit(graph.SliceOp(x, d, 0, shape[d], 1))
    wide = [*shape, n]  # [.., j, .., k]
    terms = t.broadcast(
        t.reshape(_moved_last(t, x, dim), [*shape[:dim], 1, *shape[dim + 1 :], n]), wide
    )
    k = t.emit(graph.IotaOp(TensorType(f32, wide), rank))
    wanted = t.broadcast(t.reshape(index, [*shape, 1]), wide)
    match = t.emit(graph.CompareOp(wanted, k, "eq"))
    return t.cast(t.reshape(_picked(t, match, terms, rank), out.get_shape()), out.element_type)


_SCATTER_REDUCTIONS: dict[str, tuple[type[graph.ReduceOp], float, type[graph.BinaryOp]]] = {
    "sum": (graph.ReduceSumOp, 0.0, graph.AddOp),
    "mean": (graph.ReduceSumOp, 0.0, graph.AddOp),
    "prod": (graph.ReduceProdOp, 1.0, graph.MulOp),
    "amax": (graph.ReduceMaxOp, -math.inf, graph.MaxOp),
    "amin": (graph.ReduceMinOp, math.inf, graph.MinOp),
}
"""`scatter_reduce`'s reductions: the masked reduction, its identity and how x joins in."""
_SCATTER_REDUCE_OF_SCATTER = {"add": "sum", "multiply": "prod"}
"""`scatter`'s `reduce` names, as `scatter_reduce` names them."""


@_handles("scatter", "scatter_add", "index_add", "scatter_reduce")
def _scatter(t: _Translator, node: Node) -> SSAValue:
    """`_scattered`, of a 0-d x as of its one element along dim 0 (`_one_element`)."""
    return _torch_shape(t, node, _scattered(t, node))


def _scattered(t: _Translator, node: Node) -> SSAValue:
    """`x.scatter(dim, index, value)` (one number), `x.scatter_add(dim, index, src)`,
    `x.index_add(dim, index, src, alpha=...)`, `x.scatter_reduce(dim, index, src, reduce)` and
    `x.scatter(dim, index, src or value, reduce=...)`: for each position k along the dim,
    whether some index entry j names it (compared as f32), and the reduction (sum; for
    scatter_reduce also prod, amax, amin, mean; scatter's add and multiply) of the src entries
    that do, over the whole index (a masked reduction: at most 2^24 terms a slice); positions
    no entry names keep x. The index must match x's shape but along the dim (index_add's 1-D
    index is broadcast); scatter of a src tensor without a reduce (which of duplicate writes
    wins is unspecified) is refused unless its indices are distinct by construction."""
    name = node.target._overloadpacket.__name__  # pyright: ignore
    out = t.tensor_type(node)
    work = _work_type(out).element_type
    work = f32 if work == graph.BOOL else work  # a mask scattered as 0 and 1
    x = _one_element(t, t.cast(t.value(node.args[0], node), work))  # a 0-d x: one element
    shape = list(_type(x).get_shape())
    rank = len(shape)
    dim = _dims(node.args[1], rank)[0]
    index = _one_element(t, t.cast(t.value(node.args[2], node), f32))
    source = (
        node.args[3] if len(node.args) > 3 else node.kwargs.get("value", node.kwargs.get("src"))
    )
    reduced = name == "scatter_reduce" or _arg(node, 4, "reduce") is not None
    unique = name == "scatter" and _distinct_along(node.args[2], dim, rank)
    if name == "scatter" and not (reduced or unique or isinstance(source, bool | int | float)):
        raise t.fail(
            node,
            "aten.scatter of a src tensor at indices that may repeat (which duplicate write "
            "wins is unspecified; indices from topk, sort or argsort along the dim are taken)",
        )
    if name == "index_add":
        m = _type(index).get_shape()[0]
        along = [1] * rank
        along[dim] = m
        wide_index = [*shape[:dim], m, *shape[dim + 1 :]]
        index = t.broadcast(t.reshape(index, along), wide_index)
    m = _type(index).get_shape()[dim]
    expected = [*shape[:dim], m, *shape[dim + 1 :]]
    if list(_type(index).get_shape()) != expected:
        raise t.fail(
            node, f"aten.{name} with an index of {list(_type(index).get_shape())} into {shape}"
        )
    n = shape[dim]
    if n * m > GATHER_TERMS:
        raise t.fail(node, f"aten.{name} of {m} into {n} elements (their product past 2^24)")
    lead = [d for i, d in enumerate(shape) if i != dim]
    wide = [*lead, n, m]  # [.., k, j]
    named = t.broadcast(t.reshape(_moved_last(t, index, dim), [*lead, 1, m]), wide)
    k = t.emit(graph.IotaOp(TensorType(f32, wide), len(wide) - 2))
    hit = t.emit(graph.CompareOp(named, k, "eq"))
    if name == "scatter" and not reduced:
        any_hit = _named_somewhere(t, hit, dim)
        if isinstance(source, bool | int | float):
            hit_out, x_out = (t.reshape(v, out.get_shape()) for v in (any_hit, x))  # 0-d x
            return t.cast(_select(t, node, hit_out, float(source), x_out), out.element_type)
    if isinstance(source, bool | int | float):  # scatter's value, added or multiplied
        src = t.scalar(float(source), TensorType(work, wide))
    else:
        src = _one_element(t, t.cast(t.value(source, node), work))
        src = t.broadcast(t.reshape(_moved_last(t, src, dim), [*lead, 1, m]), wide)
    alpha = _arg(node, 4, "alpha", 1) if name == "index_add" else 1
    if alpha != 1:  # index_add's src scaled: x + alpha · (sum of the src entries naming k)
        src = t.emit(graph.MulOp(src, t.scalar(float(alpha), _type(src))))
    if reduced:
        return t.cast(_scatter_reduced(t, node, x, hit, src, dim), out.element_type)
    if name == "scatter":  # distinct indices: the one src entry naming k, else x
        picked = _moved_back(t, _picked(t, hit, src, len(wide) - 1), dim)
        return t.cast(t.emit(graph.SelectOp(any_hit, picked, x)), out.element_type)
    return t.cast(t.emit(graph.AddOp(x, _added_at(t, hit, src, dim))), out.element_type)


def _added_at(t: _Translator, hit: SSAValue, src: SSAValue, dim: int) -> SSAValue:
    """What scatter_add, index_add and index_put's accumulate add to x at each position k: the
    sum of the src entries naming it (`hit` `[.., k, j]`, a masked sum over j), moved back to
    `dim`; −0.0 where no entry but a −0.0 names k. torch adds the entries to x one by one, and
    `x + s₁ + s₂ + …` is −0.0 only where x and every sᵢ are −0.0: a masked sum starting at
    +0.0 would turn x's −0.0 into +0.0, at positions no entry names too, while x + −0.0 is x
    for every x."""
    last = _type(hit).get_num_dims() - 1
    summed = _moved_back(t, _masked_reduce(t, hit, src, last), dim)
    if _type(src).element_type not in graph.FLOAT_TYPES:
        return summed
    negative = t.emit(graph.CopySignOp(t.scalar(1.0, _type(src)), src))  # −1 for −0.0
    zero = t.emit(graph.CompareOp(src, t.scalar(0.0, _type(src)), "eq"))
    signed = t.emit(graph.SelectOp(zero, negative, t.scalar(1.0, _type(src))))  # NaN: 1
    other = _masked_reduce(t, hit, signed, last, graph.ReduceMaxOp, -1.0)  # 1: not only −0.0
    other = _moved_back(t, t.emit(graph.CompareOp(other, t.scalar(0.0, _type(other)), "gt")), dim)
    return t.emit(graph.SelectOp(other, summed, t.scalar(-0.0, _type(summed))))


def _named_somewhere(t: _Translator, hit: SSAValue, dim: int) -> SSAValue:
    """From `hit` `[.., k, j]` (index entry j names position k), whether some entry names each
    position, the positions moved back to `dim`."""
    last = _type(hit).get_num_dims() - 1
    named = t.emit(graph.ReduceMaxOp(t.cast(hit, f32), [last], False))
    return _moved_back(t, t.emit(graph.CompareOp(named, t.scalar(0.0, _type(named)), "ne")), dim)


def _scatter_reduced(
    t: _Translator, node: Node, x: SSAValue, hit: SSAValue, src: SSAValue, dim: int
) -> SSAValue:
    """scatter_reduce at positions k: the `reduce` of the src entries naming k (`hit`, over
    the last dim), with x's element among them where `include_self` (always for scatter's
    reduce); x where none names k."""
    how = _arg(node, 4, "reduce", "sum")
    how = _SCATTER_REDUCE_OF_SCATTER.get(how, how)
    if how not in _SCATTER_REDUCTIONS:
        raise t.fail(node, f"aten.scatter_reduce with reduce={how!r}")
    if how == "mean" and _dtype(node) in _ID_DTYPES:
        raise t.fail(node, "aten.scatter_reduce's mean of integers (a floor division)")
    include_self = bool(_arg(node, 5, "include_self", True))
    reduce, identity, join = _SCATTER_REDUCTIONS[how]
    last = _type(hit).get_num_dims() - 1
    folded = _moved_back(t, _masked_reduce(t, hit, src, last, reduce, identity), dim)
    count = _moved_back(t, t.emit(graph.ReduceSumOp(t.cast(hit, f32), [last], False)), dim)
    if include_self and join is graph.AddOp:  # x's −0.0 kept as torch's adds keep it
        folded = t.emit(graph.AddOp(x, _added_at(t, hit, src, dim)))
    elif include_self:
        folded = t.emit(join(folded, x))
    elif join is graph.AddOp and _type(folded).element_type in graph.FLOAT_TYPES:
        # torch's sum without x starts at +0.0: −0.0 entries alone give +0.0
        folded = t.emit(graph.AddOp(folded, t.scalar(0.0, _type(folded))))
    if how == "mean":
        count = t.cast(count, _type(x).element_type)
        if include_self:
            count = t.emit(graph.AddOp(count, t.scalar(1.0, _type(count))))
        folded = t.emit(
            graph.DivOp(folded, t.emit(graph.MaxOp(count, t.scalar(1.0, _type(count)))))
        )
    named = t.emit(graph.CompareOp(count, t.scalar(0.0, _type(count)), "gt"))
    return t.emit(graph.SelectOp(named, folded, x))


_SAME_VALUES = ("to", "_to_copy", "clone", "contiguous", "alias", "detach", "lift_fresh_copy")
"""Ops that pass their argument's values through unchanged."""


def _distinct_along(index: Any, dim: int, rank: int) -> bool:
    """Whether an index tensor's entries are distinct along `dim` by construction: the
    indices of topk or sort, or argsort's, taken along that dim of a tensor of `rank` dims."""
    from torch.fx import Node

    while isinstance(index, Node) and _op_name(index.target).removeprefix("aten.") in _SAME_VALUES:
        index = index.args[0]
    if not isinstance(index, Node):
        return False
    if _op_name(index.target) == "_operator.getitem":  # topk's or sort's indices
        source = index.args[0]
        name = _op_name(source.target).removeprefix("aten.")
        if index.args[1] != 1 or name not in ("topk", "sort"):
            return False
    else:  # argsort's result
        source, name = index, _op_name(index.target).removeprefix("aten.")
        if name != "argsort":
            return False
    along = _arg(source, 2 if name == "topk" else 1, "dim", -1)
    return source.args[0].meta["val"].dim() == rank and _dims(along, rank)[0] == dim


def _moved_last(t: _Translator, x: SSAValue, dim: int) -> SSAValue:
    """`x` with `dim` moved to the end."""
    rank = _type(x).get_num_dims()
    if dim == rank - 1:
        return x
    return t.emit(graph.TransposeOp(x, [*(d for d in range(rank) if d != dim), dim]))


def _moved_back(t: _Translator, x: SSAValue, dim: int) -> SSAValue:
    """`x` with its last dim moved to `dim` (undoes `_moved_last`)."""
    rank = _type(x).get_num_dims()
    if dim == rank - 1:
        return x
    return t.emit(graph.TransposeOp(x, [*range(dim), rank - 1, *range(dim, rank - 1)]))


def _masked_reduce(
    t: _Translator,
    keep: SSAValue,
    values: SSAValue,
    dim: int,
    reduce: type[graph.ReduceOp] = graph.ReduceSumOp,
    identity: float = 0.0,
) -> SSAValue:
    """`values` reduced over `dim` where `keep` holds, the other terms taken as `identity`: a
    masked sum adds the kept terms (scatter_add) or folds a prefix (cumsum); `_picked` takes
    one term."""
    masked = t.emit(graph.SelectOp(keep, values, t.scalar(identity, _type(values))))
    return t.emit(reduce(masked, [dim], False))


def _picked(t: _Translator, keep: SSAValue, values: SSAValue, dim: int) -> SSAValue:
    """The one term of `values` along `dim` where `keep` holds (topk, gather, a scatter at
    distinct indices), exactly: of floats a masked maximum over −inf, since a masked sum
    starts at +0.0 and turns a picked −0.0 into +0.0 (torch keeps −0.0); no term kept gives
    −inf. Integers (no signed zero) keep the masked sum, no term kept giving 0."""
    if _type(values).element_type in graph.FLOAT_TYPES:
        return _masked_reduce(t, keep, values, dim, graph.ReduceMaxOp, -math.inf)
    return _masked_reduce(t, keep, values, dim)


@_handles("cat", "concat")
def _cat(t: _Translator, node: Node) -> SSAValue:
    out = t.tensor_type(node)
    element = _moved_element_type(t, node, node.args[0])
    parts = [t.cast(t.value(a, node), element) for a in node.args[0]]
    parts = [p for p in parts if math.prod(_type(p).get_shape()) > 0]
    if len(parts) == 1:
        return parts[0]
    dim = _dims(_arg(node, 1, "dim", 0), out.get_num_dims())[0]
    return t.emit(graph.ConcatOp(parts, dim))


@_handles(
    "split", "split_with_sizes", "chunk", "unbind", "tensor_split", "hsplit", "vsplit", "dsplit"
)
def _split(t: _Translator, node: Node) -> list[SSAValue | None]:
    """Slices of the input along a dim, one per result (`getitem` picks them): each after the
    one before, or, where tensor_split (hsplit, vsplit, dsplit) is given indices, from the
    index before it (a Python slice's start: parts may be empty or overlap)."""
    x = t.value(node.args[0], node)
    shape = _type(x).get_shape()
    name = node.target._overloadpacket.__name__  # pyright: ignore
    fixed = {"hsplit": min(1, len(shape) - 1), "vsplit": 0, "dsplit": 2}
    dim = fixed.get(name, _dims(_arg(node, 1 if name == "unbind" else 2, "dim", 0), len(shape))[0])
    indices = node.args[1] if name in (*fixed, "tensor_split") else None
    starts = [0, *indices] if isinstance(indices, list | tuple) else None
    parts: list[SSAValue | None] = []
    start = 0
    for i, val in enumerate(node.meta["val"]):
        size = 1 if name == "unbind" else int(val.shape[dim])
        if starts is not None:
            start = min(max(starts[i] + shape[dim] if starts[i] < 0 else starts[i], 0), shape[dim])
        if size == 0:
            parts.append(None)
            continue
        sliced = x if size == shape[dim] else t.emit(graph.SliceOp(x, dim, start, size, 1))
        parts.append(t.reshape(sliced, [int(d) for d in val.shape]))
        start += size
    return parts


def _getitem(t: _Translator, node: Node) -> SSAValue:
    parts = t.values.get(node.args[0])
    if not isinstance(parts, list):
        raise t.fail(node, "operator.getitem of something other than a split")
    part = parts[node.args[1]]
    if part is None:
        raise t.fail(
            node,
            f"result {node.args[1]} of {_op_name(node.args[0].target)}, which tinyopt does not "
            "compute (an empty split part; the indices of a pooling, cummax or cummin)",
        )
    return part


_HANDLERS["_operator.getitem"] = _getitem


# ---------------------------------------------------------------- masks, index expressions


@_handles("eq", "ne", "lt", "le", "gt", "ge")
def _compare(t: _Translator, node: Node) -> SSAValue:
    """A comparison, computed in the operands' promoted float type (f32 for integers).

    Integers round to f32 monotonically, so against integers of magnitude below 2^24 (held
    exactly: a number, `arange`, a bool) the order of any integer is unchanged: an integer input
    of lengths compared with positions (`arange(n) < lengths[:, None]`, a padding mask) is
    exact. Two integers of unknown magnitude are refused."""
    lhs, rhs = node.args[:2]
    like = t.float_like(node, node.args[:2])
    if all(_dtype(a) in (*_ID_DTYPES, "bool") or isinstance(a, int) for a in (lhs, rhs)):
        exact = [t.bound(a) <= EXACT_INTEGERS for a in (lhs, rhs)]
        below = [t.bound(a) < EXACT_INTEGERS for a in (lhs, rhs)]
        if not (all(exact) or any(below)):
            raise t.fail(node, "comparison of integers beyond 2^24 (not exact in f32)")
    a, b = (t.operand_like(x, like, node) for x in (lhs, rhs))
    return t.emit(graph.CompareOp(a, b, node.target._overloadpacket.__name__))  # pyright: ignore


def _select(t: _Translator, node: Node, cond: Any, a: Any, b: Any) -> SSAValue:
    """`cond ? a : b` with torch's broadcasting and promotion (a mask result via f32); each of
    the three a node argument or a value already built."""
    out = t.tensor_type(node)
    work = TensorType(f32, out.get_shape()) if out.element_type == graph.BOOL else out
    mask_type = TensorType(graph.BOOL, out.get_shape())
    mask = cond if isinstance(cond, SSAValue) else t.operand_like(cond, mask_type, node)

    def operand(x: Any) -> SSAValue:
        if isinstance(x, SSAValue):
            return t.broadcast(t.cast(x, work.element_type), work.get_shape())
        return t.operand_like(_stored(node, x), work, node)

    return t.cast(t.emit(graph.SelectOp(mask, operand(a), operand(b))), out.element_type)


def _stored(node: Node, value: Any) -> Any:
    """A Python number as torch stores it in `node`'s dtype: an integer dtype truncates a float
    toward zero (`torch.full_like(ids, 2.7)` holds 2, `ids.masked_fill(m, -2.7)` writes -2)."""
    if isinstance(value, float) and math.isfinite(value) and _dtype(node) in _ID_DTYPES:
        return float(math.trunc(value))
    return value


@_handles("where")
def _where(t: _Translator, node: Node) -> SSAValue:
    if len(node.args) < 3:
        raise t.fail(node, "torch.where with only a condition (nonzero)")
    return _select(t, node, *node.args[:3])


@_handles("masked_fill")
def _masked_fill(t: _Translator, node: Node) -> SSAValue:
    return _select(t, node, node.args[1], node.args[2], node.args[0])


@_handles("logical_not", "bitwise_not")
def _not(t: _Translator, node: Node) -> SSAValue:
    if _dtype(node) != "bool":
        raise t.fail(node, f"{_op_name(node.target)} of {_dtype(node)} (only of masks)")
    x = t.operand_like(node.args[0], t.float_like(node, node.args[:1]), node)
    return t.emit(graph.CompareOp(x, t.scalar(0.0, _type(x)), "eq"))


_LOGICAL = {"and": graph.MulOp, "or": graph.MaxOp, "xor": None}


@_handles(
    "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor",
    "__and__", "__or__", "__xor__",
)  # fmt: skip
def _logical(t: _Translator, node: Node) -> SSAValue:
    """Masks combined as 0/1 floats: and is a product, or a maximum, xor an inequality."""
    name = node.target._overloadpacket.__name__.strip("_")  # pyright: ignore
    if _dtype(node) != "bool":
        raise t.fail(node, f"{_op_name(node.target)} of {_dtype(node)} (only of masks)")
    shape = t.tensor_type(node).get_shape()
    a, b = (
        t.cast(t.operand_like(x, TensorType(graph.BOOL, shape), node), f32) for x in node.args[:2]
    )
    kind = _LOGICAL[name.split("_")[-1]]
    if kind is None:
        return t.emit(graph.CompareOp(a, b, "ne"))
    return t.emit(graph.CompareOp(t.emit(kind(a, b)), t.scalar(0.0, _type(a)), "ne"))


HARDTANH_RANGE = (-1.0, 1.0)
"""`hardtanh`'s default min_val and max_val."""


@_handles("clamp", "clamp_min", "clamp_max", "hardtanh", "relu6")
def _clamp(t: _Translator, node: Node) -> SSAValue:
    """`min(max(x, low), high)` (NaN stays NaN; low > high gives high, as torch); `relu6` is
    hardtanh on [0, 6]."""
    out = t.tensor_type(node)
    x = t.operand_like(node.args[0], out, node)
    name = node.target._overloadpacket.__name__  # pyright: ignore
    low = None if name == "clamp_max" else _arg(node, 1, "min_val" if name == "hardtanh" else "min")
    high = _arg(node, 1, "max") if name == "clamp_max" else None
    if name in ("clamp", "hardtanh"):
        high = _arg(node, 2, "max_val" if name == "hardtanh" else "max")
    if name == "hardtanh":
        low = HARDTANH_RANGE[0] if low is None else low
        high = HARDTANH_RANGE[1] if high is None else high
    if name == "relu6":
        low, high = 0.0, 6.0
    for bound, fold in ((low, graph.MaxOp), (high, graph.MinOp)):
        if bound is None:
            continue
        value = t.operand_like(bound, out, node)
        folded = t.emit(fold(x, value))
        # a zero bound, or a tensor's: x kept where it equals the bound (−0.0 at 0, as torch)
        number = isinstance(bound, int | float)
        x = folded if number and bound != 0 else _kept_zero(t, x, value, folded)
    return x


_FILL_VALUES = {
    "ones": 1,
    "zeros": 0,
    "ones_like": 1,
    "zeros_like": 0,
    "new_ones": 1,
    "new_zeros": 0,
    # torch leaves an empty tensor's values unspecified (CLIP's mask is `torch.empty(...)
    # .fill_(min)`, a buffer written before it is read): zeros are values as good as any
    "empty": 0,
    "empty_like": 0,
    "new_empty": 0,
    "empty_strided": 0,
}
_FILL_ARG = {"full": 1, "full_like": 1, "new_full": 2, "scalar_tensor": 0, "fill": 1}
"""Where each filling op takes its value (by position)."""


@_handles(*_FILL_VALUES, *_FILL_ARG)
def _fill(t: _Translator, node: Node) -> SSAValue:
    """A tensor of one value: a one-element constant (or a one-element tensor) broadcast where
    it is read."""
    name = node.target._overloadpacket.__name__  # pyright: ignore
    value = _FILL_VALUES.get(name)
    if value is None:
        value = node.args[_FILL_ARG[name]]
    out = t.tensor_type(node)
    if not isinstance(value, bool | int | float):
        one = t.cast(t.value(value, node), out.element_type)
        if math.prod(_type(one).get_shape()) != 1:
            raise t.fail(node, f"{name} with a tensor of {list(_type(one).get_shape())} values")
        return t.broadcast(t.reshape(one, [1] * out.get_num_dims()), out.get_shape())
    return t.scalar(float(_stored(node, value)), out)


@_handles("one_hot")
def _one_hot(t: _Translator, node: Node) -> SSAValue:
    """`one_hot(ids, num_classes)`: ids compared with the class index (an index expression),
    0/1 integers carried in f32 (torch.export refuses num_classes=-1, a size that depends on
    the values)."""
    out = t.tensor_type(node)
    shape = out.get_shape()
    ids = t.cast(t.value(node.args[0], node), f32)
    wanted = t.broadcast(t.reshape(ids, [*shape[:-1], 1]), shape)
    classes_index = t.emit(graph.IotaOp(TensorType(f32, shape), len(shape) - 1))
    return t.cast(t.emit(graph.CompareOp(wanted, classes_index, "eq")), out.element_type)


_LARGEST_FINITE = {
    f32: float(np.finfo(np.float32).max),
    f16: 65504.0,
    bf16: float.fromhex("0x1.FEp127"),
}
"""Each float type's largest finite value."""


@_handles("nan_to_num")
def _nan_to_num(t: _Translator, node: Node) -> SSAValue:
    """NaN to `nan` (0), +inf to `posinf` and -inf to `neginf` (by default the dtype's largest
    and lowest finite values)."""
    out = t.tensor_type(node)
    x = t.operand_like(node.args[0], out, node)
    top = _LARGEST_FINITE[out.element_type]
    nan, posinf = _arg(node, 1, "nan", 0.0), _arg(node, 2, "posinf", None)
    neginf = _arg(node, 3, "neginf", None)
    replaced = t.emit(
        graph.SelectOp(
            t.emit(graph.CompareOp(x, x, "ne")),
            t.scalar(float(0.0 if nan is None else nan), out),  # nan=-0.0 kept
            x,
        )
    )
    for value, default in ((posinf, top), (neginf, -top)):
        bound = t.scalar(math.copysign(math.inf, default), out)
        hit = t.emit(graph.CompareOp(x, bound, "eq"))
        target = default if value is None else float(value)
        replaced = t.emit(graph.SelectOp(hit, t.scalar(target, out), replaced))
    return replaced


@_handles("diff")
def _diff(t: _Translator, node: Node) -> SSAValue:
    """`x[1:] - x[:-1]` along the dim (`x[1:] != x[:-1]` of a mask), n times, of x between
    `prepend` and `append` (concatenated to it along the dim)."""
    out = t.tensor_type(node)
    dim = _dims(_arg(node, 2, "dim", -1), out.get_num_dims())[0]
    x = t.cast(t.value(node.args[0], node), out.element_type)
    prepend, append = (_arg(node, i, key) for i, key in ((3, "prepend"), (4, "append")))
    before = [t.cast(t.value(prepend, node), out.element_type)] if prepend is not None else []
    after = [t.cast(t.value(append, node), out.element_type)] if append is not None else []
    if before or after:
        x = t.emit(graph.ConcatOp([*before, x, *after], dim))
    for _ in range(int(_arg(node, 1, "n", 1))):
        extent = _type(x).get_shape()[dim]
        later = t.emit(graph.SliceOp(x, dim, 1, extent - 1, 1))
        earlier = t.emit(graph.SliceOp(x, dim, 0, extent - 1, 1))
        if out.element_type == graph.BOOL:  # torch's diff of a mask: logical_xor, a mask
            x = t.emit(graph.CompareOp(t.cast(later, f32), t.cast(earlier, f32), "ne"))
        else:
            x = t.emit(graph.SubOp(later, earlier))
    return x


@_handles("special_logit", "logit")
def _logit(t: _Translator, node: Node) -> SSAValue:
    """`log(z / (1 - z))` with z = x clamped into [eps, 1 - eps] where eps is given."""
    out = t.tensor_type(node)
    work = _work_type(out)
    z = t.operand_like(node.args[0], work, node)
    eps = _arg(node, 1, "eps", None)
    if eps is not None:
        z = t.emit(graph.MaxOp(z, t.scalar(float(eps), work)))
        z = t.emit(graph.MinOp(z, t.scalar(1.0 - float(eps), work)))
    odds = t.emit(graph.DivOp(z, t.emit(graph.SubOp(t.scalar(1.0, work), z))))
    return t.cast(t.emit(graph.LogOp(odds)), out.element_type)


@_handles("copy")
def _copy(t: _Translator, node: Node) -> SSAValue:
    """The functional `copy(self, src)`: src cast and broadcast to self's type."""
    return t.operand_like(node.args[1], t.tensor_type(node), node)


@_handles("slice_scatter", "select_scatter")
def _scatter_into_slice(t: _Translator, node: Node) -> SSAValue:
    """x with a slice or one index along a dim replaced by src: a concat of x before it, src
    and x after it (a slice with a step: `_scatter_into_strided_slice`)."""
    name = node.target._overloadpacket.__name__  # pyright: ignore
    out = t.tensor_type(node)
    x = t.cast(t.value(node.args[0], node), out.element_type)
    src = t.cast(t.value(node.args[1], node), out.element_type)
    shape = list(out.get_shape())
    dim = _dims(_arg(node, 2, "dim", 0), len(shape))[0]
    extent = shape[dim]
    if name == "select_scatter":
        start = node.args[3] % extent
        end, step = start + 1, 1
    else:
        start, end = _arg(node, 3, "start") or 0, _arg(node, 4, "end")
        step = _arg(node, 5, "step", 1)
        start = min(max(start + extent if start < 0 else start, 0), extent)
        end = extent if end is None else min(max(end + extent if end < 0 else end, 0), extent)
    if end <= start:
        return x
    if step != 1:
        return _scatter_into_strided_slice(t, x, src, dim, start, end, step)
    piece = [*shape[:dim], end - start, *shape[dim + 1 :]]
    return _spliced(t, x, dim, start, t.reshape(src, piece))


def _scatter_into_strided_slice(
    t: _Translator, x: SSAValue, src: SSAValue, dim: int, start: int, end: int, step: int
) -> SSAValue:
    """x with x[start:end:step] along `dim` replaced by src (`pe[:, 0::2] = sin(...)`): the
    `count · step` elements from `start` (x padded with zeros where they run past its end)
    viewed as `[count, step]`, their first column replaced by src, then spliced back."""
    shape = list(_type(x).get_shape())
    lead, tail, extent = shape[:dim], shape[dim + 1 :], shape[dim]
    count = len(range(start, end, step))
    padded = x
    if start + count * step > extent:
        past = start + count * step - extent
        zeros = t.scalar(0.0, TensorType(_type(x).element_type, [*lead, past, *tail]))
        padded = t.emit(graph.ConcatOp([x, zeros], dim))
    span = t.emit(graph.SliceOp(padded, dim, start, count * step, 1))
    grid = t.reshape(span, [*lead, count, step, *tail])
    kept = t.emit(graph.SliceOp(grid, dim + 1, 1, step - 1, 1))
    column = t.reshape(src, [*lead, count, 1, *tail])
    joined = t.emit(graph.ConcatOp([column, kept], dim + 1))
    return _spliced(t, x, dim, start, t.reshape(joined, [*lead, count * step, *tail]))


def _spliced(t: _Translator, x: SSAValue, dim: int, start: int, region: SSAValue) -> SSAValue:
    """x with its elements from `start` along `dim` replaced by `region`'s (cut at x's end): a
    concat of x before them, the region and x after them."""
    extent = _type(x).get_shape()[dim]
    length = min(_type(region).get_shape()[dim], extent - start)
    if length < _type(region).get_shape()[dim]:
        region = t.emit(graph.SliceOp(region, dim, 0, length, 1))
    stop = start + length
    parts = [
        *([t.emit(graph.SliceOp(x, dim, 0, start, 1))] if start > 0 else []),
        region,
        *([t.emit(graph.SliceOp(x, dim, stop, extent - stop, 1))] if stop < extent else []),
    ]
    return parts[0] if len(parts) == 1 else t.emit(graph.ConcatOp(parts, dim))


@_handles("masked_scatter")
def _masked_scatter(t: _Translator, node: Node) -> SSAValue:
    """`x.masked_scatter(mask, source)`: the positions where the mask holds, in row-major
    order, take source's elements in turn. Where the mask is constant over x's trailing dims
    (a broadcast, or an expansion: LLaVA's `(ids == image_token).unsqueeze(-1).expand_as(x)`),
    a row of those dims at a time: a row's rank among the masked rows (a prefix count, as
    `cumsum`) picks a row of source viewed as rows of that width; else element by element.
    More masked rows than source holds repeat its last row (torch raises)."""
    out = t.tensor_type(node)
    shape = list(out.get_shape())
    work = f32 if out.element_type == graph.BOOL else out.element_type  # a mask as 0/1 floats
    x = t.cast(t.value(node.args[0], node), work)
    unexpanded, given, lead = _mask_rows(node.args[1], shape)
    rows, width = math.prod(shape[:lead]), math.prod(shape[lead:])
    if rows > CUMSUM_EXTENT:
        raise t.fail(
            node, f"aten.masked_scatter over {rows} rows (n² work; at most {CUMSUM_EXTENT})"
        )
    held = t.reshape(t.value(unexpanded, node), given)
    held = t.reshape(t.broadcast(held, [*shape[:lead], *given[lead:]]), [rows])
    mask = t.cast(held, f32)
    terms, kept = _prefixes(t, mask, 0)  # [rows, rows]: mask[j] where j <= i
    before = t.emit(graph.SubOp(_masked_reduce(t, kept, terms, 1), mask))  # masked rows before
    source = t.cast(t.value(node.args[2], node), work)
    total = math.prod(_type(source).get_shape())
    count = total // width
    if count == 0:
        return t.cast(x, out.element_type)
    flat = t.emit(graph.SliceOp(t.reshape(source, [total]), 0, 0, count * width, 1))
    picked = _rows(t, t.reshape(flat, [count, width]), t.cast(before, i64))
    held = t.broadcast(t.reshape(held, [rows, 1]), [rows, width])
    written = t.emit(graph.SelectOp(held, picked, t.reshape(x, [rows, width])))
    return t.cast(t.reshape(written, shape), out.element_type)


def _mask_rows(mask: Any, shape: list[int]) -> tuple[Any, list[int], int]:
    """The mask before an expansion (`expand`, `expand_as`, `broadcast_to`; else the mask), its
    shape aligned to `shape`'s rank, and `lead`: the dims from `lead` on are those it is 1 in
    at the end of `shape` (where `shape` is not), so it holds or not for whole rows of them."""
    from torch.fx import Node

    source = mask
    if isinstance(mask, Node) and _op_name(mask.target) in (
        "aten.expand",
        "aten.expand_as",
        "aten.broadcast_to",
    ):
        source = mask.args[0]
    dims = list(source.meta["val"].shape)
    given = [1] * (len(shape) - len(dims)) + dims
    lead = len(shape)
    while lead > 0 and given[lead - 1] == 1 and shape[lead - 1] != 1:
        lead -= 1
    return source, given, lead


@_handles("index_put")
def _index_put(t: _Translator, node: Node) -> SSAValue:
    """`x[mask] = values` with one boolean mask (of x's leading dims): where(mask, values, x);
    or with one 1-D integer index along a dim (`_index_put_at`: `index_copy`, `index_fill`,
    `x[:, ids] = v`)."""
    out = t.tensor_type(node)
    indices = [i for i in node.args[1] if i is not None]
    if len(indices) == 1 and _dtype(indices[0]) in _ID_DTYPES:
        return _index_put_at(t, node, list(node.args[1]).index(indices[0]), indices[0])
    if len(indices) != 1 or len(node.args[1]) != 1 or _dtype(indices[0]) != "bool":
        raise t.fail(node, "aten.index_put with several index tensors")
    if _arg(node, 3, "accumulate", False):
        raise t.fail(node, "aten.index_put of a boolean mask with accumulate=True")
    mask = t.value(indices[0], node)
    shape = out.get_shape()
    lead = _type(mask).get_shape()
    mask = t.broadcast(t.reshape(mask, [*lead, *[1] * (len(shape) - len(lead))]), shape)
    values = t.value(node.args[2], node)
    if math.prod(_type(values).get_shape()) != 1:
        raise t.fail(node, "aten.index_put of a tensor of values (only one value)")
    one = t.reshape(values, [1] * len(shape))
    return _select(t, node, mask, t.broadcast(one, shape), node.args[0])


def _index_put_at(t: _Translator, node: Node, dim: int, ids_arg: Node) -> SSAValue:
    """`x[..., ids, ...] = values` along `dim` with a 1-D integer index (negative ids count from
    the end): for each position k, whether some id names it (compared as f32) and the sum of
    the values of those that do (a masked sum, as scatter_add's): added to x with
    `accumulate`, else x where none names k and the value where one does (`_picked`). A
    tensor of values written without `accumulate` needs ids distinct by construction (arange,
    or topk's, sort's or argsort's): which of repeated writes wins is unspecified."""
    out = t.tensor_type(node)
    work = _work_type(out).element_type
    work = f32 if work == graph.BOOL else work
    x = t.cast(t.value(node.args[0], node), work)
    shape = list(out.get_shape())
    ids = t.cast(t.value(ids_arg, node), f32)
    if _type(ids).get_num_dims() != 1:
        raise t.fail(node, "aten.index_put at an integer index of more than one dim")
    n, m = shape[dim], _type(ids).get_shape()[0]
    if n * m > GATHER_TERMS:
        raise t.fail(node, f"aten.index_put of {m} into {n} elements (their product past 2^24)")
    ids = _from_the_end(t, ids, n)
    lead = [d for i, d in enumerate(shape) if i != dim]
    wide = [*lead, n, m]  # [.., k, j]
    named = t.broadcast(t.reshape(ids, [*[1] * len(lead), 1, m]), wide)
    hit = t.emit(
        graph.CompareOp(named, t.emit(graph.IotaOp(TensorType(f32, wide), len(lead))), "eq")
    )
    any_hit = _named_somewhere(t, hit, dim)
    accumulate = bool(_arg(node, 3, "accumulate", False))
    indexed = [*shape[:dim], m, *shape[dim + 1 :]]
    single = _single_value(node.args[2])
    if single is not None and not accumulate:  # index_fill: repeated ids write the same value
        one = t.cast(t.reshape(t.value(single, node), [1] * len(shape)), work)
        return t.cast(t.emit(graph.SelectOp(any_hit, t.broadcast(one, shape), x)), out.element_type)
    values = t.cast(t.value(node.args[2], node), work)
    if not accumulate and not (_distinct_ids(ids_arg) or _distinct_constant(t, ids_arg, n)):
        raise t.fail(
            node,
            "aten.index_put of a tensor of values at ids that may repeat (which write wins is "
            "unspecified; arange, topk, sort or argsort indices and constants without repeats "
            "are taken)",
        )
    given = list(_type(values).get_shape())
    values = t.broadcast(t.reshape(values, [1] * (len(indexed) - len(given)) + given), indexed)
    src = t.broadcast(t.reshape(_moved_last(t, values, dim), [*lead, 1, m]), wide)
    if accumulate:
        return t.cast(t.emit(graph.AddOp(x, _added_at(t, hit, src, dim))), out.element_type)
    picked = _moved_back(t, _picked(t, hit, src, len(wide) - 1), dim)  # ids without repeats
    return t.cast(t.emit(graph.SelectOp(any_hit, picked, x)), out.element_type)


def _distinct_ids(ids: Any) -> bool:
    """Whether a 1-D index's entries are distinct by construction: an arange (shifted by a
    number), or topk's, sort's or argsort's indices (`_distinct_along`)."""
    from torch.fx import Node

    source = ids
    while isinstance(source, Node):
        name = _op_name(source.target).removeprefix("aten.")
        if name in ("add", "sub") and isinstance(source.args[1], int | float):
            source = source.args[0]  # a shift keeps entries distinct
        elif name in _SAME_VALUES:
            source = source.args[0]
        else:
            break
    if isinstance(source, Node) and _op_name(source.target) == "aten.arange":
        return True
    return _distinct_along(ids, 0, 1)


def _distinct_constant(t: _Translator, ids: Any, n: int) -> bool:
    """Whether `ids` is a constant naming no position of an extent-`n` dim twice (a negative id
    counting from the end)."""
    from torch.fx import Node

    fixed = t.constant_value(ids) if isinstance(ids, Node) else None
    if fixed is None:
        return False
    named = [int(v) % n for v in fixed.reshape(-1).tolist()]
    return len(set(named)) == len(named)


def _single_value(values: Any) -> Node | None:
    """The one-element tensor `values` is broadcast from (index_fill's value, expanded), or
    None."""
    from torch.fx import Node

    while isinstance(values, Node):
        if math.prod(values.meta["val"].shape) == 1:
            return values
        if _op_name(values.target).removeprefix("aten.") not in ("expand", "broadcast_to"):
            return None
        values = values.args[0]
    return None


@_handles("tril_indices", "triu_indices")
def _triangle_indices(t: _Translator, node: Node) -> SSAValue:
    """The (row, column) pairs of a triangle (DLRM's pairwise interactions), from numbers
    alone: computed by torch at capture and passed as one more trailing argument."""
    value = t.constant_value(node)
    if value is None:
        raise t.fail(node, f"{_op_name(node.target)} of sizes computed from the inputs")
    return t.folded(node, value)


@_handles("arange")
def _arange(t: _Translator, node: Node) -> SSAValue:
    """`start + step * i`: an index expression, never a buffer. Of a float dtype with a start
    or step not an integer (or values past 2^24), the values torch gives, found at capture
    (`constant_value`) and taken as one more trailing argument: torch computes them in
    float64 and rounds once (`arange(0, 1, 0.3)[3]` is f32's 0.9, where f32's 3 · 0.3 is one
    ulp above)."""
    out = t.tensor_type(node)
    start, step = _arange_start_step(node)
    n = out.get_shape()[0] if out.get_shape() else 1
    exact = (
        all(float(v).is_integer() for v in (start, step))
        and max(abs(start), abs(start + step * (n - 1))) <= EXACT_INTEGERS
    )
    if out.element_type in graph.FLOAT_TYPES and not exact:
        value = t.constant_value(node)
        if value is not None:
            return t.cast(t.folded_floats(node, value), out.element_type)
    iota = t.emit(graph.IotaOp(TensorType(f32, out.get_shape()), 0))
    if step != 1:
        iota = t.emit(graph.MulOp(iota, t.scalar(float(step), _type(iota))))
    if start != 0:
        iota = t.emit(graph.AddOp(iota, t.scalar(float(start), _type(iota))))
    return t.cast(iota, out.element_type)


def _arange_start_step(node: Node) -> tuple[float, float]:
    overload = node.target._overloadname  # pyright: ignore
    if overload == "default":
        return 0, 1
    start, step = node.args[0], (_arg(node, 2, "step", 1) if overload == "start_step" else 1)
    if _dtype(node) in _ID_DTYPES:  # torch truncates start, end and step to the integer dtype
        return math.trunc(start), math.trunc(step)
    return start, step


@_handles("linspace")
def _linspace(t: _Translator, node: Node) -> SSAValue:
    """`torch.linspace(start, end, steps)` as torch computes it: `start + i·step` for the
    first half, `end − (steps − 1 − i)·step` for the rest, step = (end − start)/(steps − 1);
    an index expression. Of an integer dtype (torch truncates float64 steps from integer
    bounds), the values torch gives, found at capture (`constant_value`) and taken as one more
    trailing argument with their bound."""
    out = t.tensor_type(node)
    bounds = [_arg(node, 0, "start"), _arg(node, 1, "end")]
    if not all(isinstance(b, int | float) for b in bounds):
        raise t.fail(node, "aten.linspace with tensor bounds")
    if _dtype(node) in _ID_DTYPES:
        value = t.constant_value(node)
        if value is None:  # pragma: no cover - numbers as bounds make a constant
            raise t.fail(node, "aten.linspace of an integer dtype not known at capture")
        return t.cast(t.folded(node, value), out.element_type)
    start, end = (float(b) for b in bounds)
    steps = int(_arg(node, 2, "steps"))
    work = TensorType(f32, out.get_shape())
    index = t.emit(graph.IotaOp(work, 0))
    step = (end - start) / (steps - 1) if steps > 1 else 0.0
    head = t.emit(graph.MulOp(index, t.scalar(step, work)))
    head = t.emit(graph.AddOp(head, t.scalar(start, work)))
    back = t.emit(graph.SubOp(t.scalar(float(steps - 1), work), index))
    tail = t.emit(graph.MulOp(back, t.scalar(step, work)))
    tail = t.emit(graph.SubOp(t.scalar(end, work), tail))
    first = t.emit(graph.CompareOp(index, t.scalar(float(max(steps // 2, 1)), work), "lt"))
    return t.cast(t.emit(graph.SelectOp(first, head, tail)), out.element_type)


@_handles("logspace")
def _logspace(t: _Translator, node: Node) -> SSAValue:
    """`torch.logspace(start, end, steps, base)`: the values torch's CPU kernel gives, found
    at capture (`constant_value`) and taken as one more trailing argument. Torch rounds start
    and end to the dtype first and computes each power in float64 (rounded once to the
    dtype), which an f32 `pow` of f32 exponents misses by many ulps (bf16 `logspace(0.1, 1.1,
    3)` is 1.2578, 4, 12.625; 10^30 is off by 4e-6 in f32). An integer dtype (torch truncates
    the powers) is refused."""
    out = t.tensor_type(node)
    if _dtype(node) in _ID_DTYPES:
        raise t.fail(node, f"aten.logspace of dtype {_dtype(node)} (only of float dtypes)")
    if out.get_shape()[0] == 0:
        raise t.fail(node, "aten.logspace of 0 steps (empty tensors are not supported)")
    value = t.constant_value(node)
    if value is None:
        raise t.fail(node, "aten.logspace with tensor bounds computed from an input")
    return t.cast(t.folded_floats(node, value, "values"), out.element_type)


@_handles("float_power")
def _float_power(t: _Translator, node: Node) -> SSAValue:
    """Refused with its own message: torch.float_power computes and returns float64 whatever
    its inputs' dtype, and tinyopt's tensors have no float64 (nor would computing it in f32
    be what it means: an f32 power overflows where float64's does not)."""
    raise t.fail(
        node,
        "aten.float_power (torch.float_power) always computes in and returns float64, and "
        "float64 results are not supported on the GPU path (tensors are f32, f16 or bf16): "
        "use torch.pow for a power in the input's dtype",
    )


@_handles("eye")
def _eye(t: _Translator, node: Node) -> SSAValue:
    """`torch.eye(n, m)`: 1 where the row index equals the column index, an index expression
    (no n × m buffer)."""
    out = t.tensor_type(node)
    shape = out.get_shape()
    if max(shape) > EXACT_INTEGERS:
        raise t.fail(node, f"aten.eye of shape {list(shape)}")
    index = TensorType(f32, shape)
    rows, cols = (t.emit(graph.IotaOp(index, d)) for d in (0, 1))
    return t.cast(t.emit(graph.CompareOp(rows, cols, "eq")), out.element_type)


@_handles("tril", "triu")
def _triangle(t: _Translator, node: Node) -> SSAValue:
    """Keep the elements on and below (tril) or above (triu) a diagonal, from the row and
    column indices: a causal mask is an index expression, never an S x S buffer."""
    shape = t.tensor_type(node).get_shape()
    if len(shape) < 2 or max(shape[-2:]) > EXACT_INTEGERS:
        raise t.fail(node, f"{_op_name(node.target)} of shape {list(shape)}")
    index = TensorType(f32, shape)
    rows, cols = (t.emit(graph.IotaOp(index, len(shape) - k)) for k in (2, 1))
    above = t.emit(graph.SubOp(cols, rows))
    diagonal = t.scalar(float(_arg(node, 1, "diagonal", 0)), index)
    lower = node.target._overloadpacket.__name__ == "tril"  # pyright: ignore
    keep = t.emit(graph.CompareOp(above, diagonal, "le" if lower else "ge"))
    return _select(t, node, keep, node.args[0], 0)


def _integer_bound(t: _Translator, node: Node) -> float:
    """Bound the magnitude of an integer tensor computed by `node` from its arguments."""
    from torch.fx import Node

    name = _op_name(node.target).removeprefix("aten.")
    args = [*node.args, *node.kwargs.values()]
    if name == "arange":
        start, step = _arange_start_step(node)
        return max(abs(start), abs(start + step * (int(node.meta["val"].shape[0]) - 1)))
    if name in ("add", "sub", "rsub"):  # a ± alpha·b (rsub: b - alpha·a): alpha scales one
        alpha = abs(_arg(node, 2, "alpha", 1))
        scaled, other = (node.args[0], node.args[1]) if name == "rsub" else node.args[1::-1]
        return t.bound(other) + _bound_product(alpha, t.bound(scaled))
    if name == "mul":
        return _bound_product(t.bound(node.args[0]), t.bound(node.args[1]))
    if name == "sum":
        count = math.prod(node.args[0].meta["val"].shape) / max(
            math.prod(node.meta["val"].shape), 1
        )
        return t.bound(node.args[0]) * count
    if name in ("cummax", "cummin"):  # values of the argument, and indices along the dim
        shape = node.args[0].meta["val"].shape
        extent = shape[_dims(node.args[1], len(shape))[0]] if len(shape) else 1
        return max(_integer_values_bound(t, node.args[0]), extent)
    if name in ("remainder", "fmod"):  # below the divisor, of an exact dividend
        dividend, divisor = t.bound(node.args[0]), t.bound(node.args[1])
        if dividend == math.inf:
            return math.inf
        return min(dividend, divisor) if name == "fmod" else divisor
    if name in ("floor_divide", "div"):  # by a nonzero integer (torch raises at 0): no larger
        return t.bound(node.args[0])
    if name in ("index", "index_select"):  # values of the indexed tensor (not of the ids)
        return t.bound(node.args[0])
    if name == "count_nonzero":  # at most the number of elements
        return math.prod(node.args[0].meta["val"].shape)
    if name == "cumsum":
        shape = node.args[0].meta["val"].shape
        extent = shape[_dims(node.args[1], len(shape))[0]] if len(shape) else 1  # 0-d: 1
        return t.bound(node.args[0]) * extent
    if name == "frexp":  # the exponents (the mantissas are floats)
        return FREXP_EXPONENT_BOUND
    if name == "relu":  # its argument's values, or 0
        return t.bound(node.args[0])
    if name in ("sign", "one_hot", "eye"):
        return 1
    if name == "clamp" and _clamped_both_ways(node):
        # values in [min, max] (max where min > max): exact of an unbounded input too, whose
        # rounding to f32 keeps it past the bound it is clamped to
        return max(t.bound(_arg(node, 1, "min")), t.bound(_arg(node, 2, "max")))
    if name == "hardtanh":  # values in [min_val, max_val] (by default [-1, 1])
        low, high = HARDTANH_RANGE
        return max(abs(_arg(node, 1, "min_val", low)), abs(_arg(node, 2, "max_val", high)))
    if name in _FILL_VALUES:
        return abs(_FILL_VALUES[name])
    if name in ("argmax", "argmin", "argsort"):
        return max(node.args[0].meta["val"].shape, default=1)
    if name in ("bucketize", "searchsorted"):  # at most the boundaries' count
        bounds = node.args[1] if name == "bucketize" else node.args[0]
        return bounds.meta["val"].shape[-1]
    if name in ("topk", "sort") or (
        name in ("max", "min") and node.target._overloadname == "dim"  # pyright: ignore
    ):  # values of the argument (integers only where it holds integers), and indices
        return max(_integer_values_bound(t, node.args[0]), 1, *node.args[0].meta["val"].shape)
    if name in _FILL_ARG:
        return t.bound(node.args[_FILL_ARG[name]])
    if name in _MOVES_INTEGERS:  # the values of tensor arguments only (the rest are shapes)
        tensors = [a for a in args if isinstance(a, Node)]
        tensors += [
            x for a in args if isinstance(a, list | tuple) for x in a if isinstance(x, Node)
        ]
        return max(t.bound(a) for a in tensors)
    if name in _SELECTS_INTEGERS:
        return max(t.bound(a) for a in args if isinstance(a, Node | bool | int | float))
    return math.inf


_LOOKUPS = {"embedding": (1, None), "index_select": (2, 1), "gather": (2, 1)}
"""Ops whose integer argument (at the first position) names positions along a dim of their
first argument (the dim at the second position; None: dim 0), every one of its elements, and
torch raises where one is outside [-n, n) (`aten.index` is handled on its own)."""
_COVERS_INTEGERS = {
    "view", "reshape", "_unsafe_view", "unsqueeze", "squeeze", "flatten", "unflatten",
    "expand", "expand_as", "broadcast_to", "transpose", "permute", "t", "numpy_T", "swapaxes",
    "mT", "movedim", "contiguous", "clone", "alias", "detach", "view_as", "reshape_as",
    "repeat", "repeat_interleave", "flip", "roll", "cat", "concat", "stack", "neg", "abs",
}  # fmt: skip
"""Ops whose result holds every element of their (first or listed) tensor arguments, values
unchanged or, `neg` and `abs`, of the same magnitude."""


def _bounds_of_looked_up_inputs(program: ExportedProgram, inputs: Sequence[Node]) -> dict:
    """A bound on each integer module input that the program uses, every element of it, to
    name positions along a dim of n elements (`F.embedding(ids, table)`, `x[ids]`,
    `index_select`, `gather`; the input itself or a copy holding all of it: a view, `repeat`,
    `cat`, …): n, as torch raises for an id outside [-n, n) (tinyopt's lookups clamp where
    torch raises). The bound is proved by the lookup wherever torch gives a result: the
    program runs every op of its graph, so an id out of range raises there, whatever comes
    first. The smallest such n over the lookups of an input."""
    from torch.fx import Node

    integer_inputs = {n for n in inputs if _dtype(n) in _ID_DTYPES}
    bounds: dict[Node, float] = {}

    def sources(arg: Any, depth: int = 0) -> set[Node]:
        """The integer inputs every element of which `arg` holds (or, for `neg`/`abs`, holds
        with its magnitude)."""
        if not isinstance(arg, Node) or depth > 64:
            return set()
        if arg in integer_inputs:
            return {arg}
        name = _op_name(arg.target).removeprefix("aten.") if arg.op == "call_function" else ""
        if name not in _COVERS_INTEGERS or _dtype(arg) not in _ID_DTYPES:
            return set()
        if name in ("cat", "concat", "stack"):  # each part is held whole
            return set().union(*(sources(a, depth + 1) for a in arg.args[0]))
        if not arg.args or not _holds_every_element(arg):
            return set()
        return sources(arg.args[0], depth + 1)

    def bounded(arg: Any, extent: int) -> None:
        for found in sources(arg):
            bounds[found] = min(bounds.get(found, math.inf), float(extent))

    for node in program.graph.nodes:
        if node.op != "call_function":
            continue
        name = _op_name(node.target).removeprefix("aten.")
        if name in _LOOKUPS:
            position, dim_position = _LOOKUPS[name]
            table = node.args[0].meta.get("val")
            shape = tuple(table.shape) if table is not None else ()
            dim = 0 if dim_position is None else node.args[dim_position]
            if len(node.args) > position and shape:
                bounded(node.args[position], int(shape[dim % len(shape)]))
        elif name == "index" and node.args[0].meta.get("val") is not None:
            indices = node.args[1]
            if any(_dtype(i) == "bool" for i in indices if isinstance(i, Node)):
                continue  # a mask stands for several dims
            shape = tuple(node.args[0].meta["val"].shape)
            for dim, ids in enumerate(indices):
                if isinstance(ids, Node) and dim < len(shape):
                    bounded(ids, int(shape[dim]))
    return bounds


def _holds_every_element(node: Node) -> bool:
    """Whether the result of data movement `node` holds every element of its first argument:
    not where it is empty and the argument is not (`repeat` or `expand` to a size 0), nor
    where `repeat_interleave` takes a tensor of counts (a count of 0 drops an element)."""
    from torch.fx import Node

    if _op_name(node.target) == "aten.repeat_interleave" and any(
        isinstance(a, Node) for a in (*node.args[1:], *node.kwargs.values())
    ):
        return False
    source, result = node.args[0], node.meta.get("val")
    before = source.meta.get("val") if isinstance(source, Node) else None
    if result is None or before is None:
        return False
    return result.numel() > 0 or before.numel() == 0


def _bound_product(a: float, b: float) -> float:
    """The bound of a product of integers bounded by `a` and `b`: 0 where either is 0 (a
    product with an exact zero is zero; `inf * 0` would be NaN, which passes every check)."""
    return 0.0 if a == 0 or b == 0 else a * b


def _clamped_both_ways(node: Node) -> bool:
    """Whether a `clamp` has both a min and a max (`clamp(ids, 0, n - 1)`)."""
    return _arg(node, 1, "min") is not None and _arg(node, 2, "max") is not None


def _integer_values_bound(t: _Translator, arg: Node) -> float:
    """The bound of an argument's values where they are integers (or a mask); 0 for floats,
    whose values are no integers to bound."""
    return t.bound(arg) if _dtype(arg) in (*_ID_DTYPES, "bool") else 0


_MOVES_INTEGERS = {
    "view", "reshape", "_unsafe_view", "unsqueeze", "squeeze", "flatten", "unflatten", "expand",
    "expand_as", "broadcast_to", "transpose", "permute", "t", "numpy_T", "swapaxes", "mT",
    "contiguous", "clone", "alias", "detach", "detach_", "lift_fresh_copy", "to", "_to_copy",
    "type_as", "slice", "select", "cat", "concat", "_operator.getitem", "split",
    "split_with_sizes", "chunk", "unbind", "tril", "triu", "neg", "abs", "amax", "amin",
    "stack", "roll", "repeat", "repeat_interleave", "flip", "pixel_shuffle", "pixel_unshuffle",
    "gather", "im2col", "unfold", "narrow", "movedim", "view_as", "reshape_as",
    "slice_scatter", "select_scatter", "copy", "take_along_dim", "diagonal", "diagonal_scatter",
    "as_strided", "as_strided_scatter",
}  # fmt: skip
"""Ops whose integer results are values of their tensor arguments."""
_SELECTS_INTEGERS = {
    "where",
    "masked_fill",
    "clamp",
    "clamp_min",
    "clamp_max",
    "maximum",
    "minimum",
    "fmax",
    "fmin",
    "max",
    "min",
    "pad",
    "constant_pad_nd",
}
"""Ops whose integer results are values of their tensor or number arguments."""


# ---------------------------------------------------------------------------- convolution


@_handles("conv1d", "conv2d", "conv3d", "convolution")
def _convolution(t: _Translator, node: Node) -> SSAValue:
    """A 1-D or 2-D convolution (`_convolve`); `convolution` with `transposed` set is a
    transposed one (`_transposed_convolution`)."""
    name = node.target._overloadpacket.__name__  # pyright: ignore
    if name == "convolution":
        if node.args[6]:
            return _transposed_convolution(t, node)
        stride, padding, dilation, groups = node.args[3], node.args[4], node.args[5], node.args[8]
    else:
        stride, padding = _arg(node, 3, "stride", 1), _arg(node, 4, "padding", 0)
        dilation, groups = _arg(node, 5, "dilation", 1), _arg(node, 6, "groups", 1)
    out = t.tensor_type(node)
    x, weight = (t.cast(t.value(a, node), out.element_type) for a in node.args[:2])
    spatial = _convolution_dims(t, node, x, weight)
    stride, dilation = (_per_dim(v, spatial) for v in (stride, dilation))
    kernel = _type(weight).get_shape()[2:]
    if padding == "valid":
        padding = 0
    elif padding == "same":
        x = _same_padding_remainder(t, x, dilation, kernel)
        padding = [d * (k - 1) // 2 for d, k in zip(dilation, kernel)]
    window = _WindowShape(kernel, out.get_shape()[2:], stride, _per_dim(padding, spatial), dilation)
    bias = _arg(node, 2, "bias")
    pointwise = all(k == 1 for k in kernel) and all(s == 1 for s in stride)
    if groups == 1 and pointwise and not any(window.padding):
        return _pointwise(t, node, x, weight, bias)
    return _add_bias(t, node, _convolve(t, x, weight, window, groups), bias)


def _same_padding_remainder(
    t: _Translator, x: SSAValue, dilation: Sequence[int], kernel: Sequence[int]
) -> SSAValue:
    """`x [N, C, *S]` with one zero after the end of each spatial dim whose `padding='same'`
    total, dilation·(kernel − 1), is odd: torch pads half on each side and the extra one
    after."""
    for i, (d, k) in enumerate(zip(dilation, kernel)):
        if d * (k - 1) % 2:
            x = t.emit(graph.ConcatOp([x, _constant_block(t, x, 2 + i, 1, 0.0)], 2 + i))
    return x


def _pointwise(t: _Translator, node: Node, x: SSAValue, weight: SSAValue, bias: Any) -> SSAValue:
    """A 1×1 convolution at stride 1 without padding: the weight `[O, C]` times each image's
    pixels `[C, H·W]`, the output `[N, O, H·W]` as it lies (no windows, no transposes: one GEMM
    whose A every image shares), the bias a per-row epilogue."""
    n, c, *sizes = _type(x).get_shape()
    o = _type(weight).get_shape()[0]
    w = t.broadcast(t.reshape(weight, (1, o, c)), (n, o, c))
    product = t.emit(graph.MatmulOp(w, t.reshape(x, (n, c, math.prod(sizes)))))
    return t.reshape(_add_bias(t, node, product, bias), (n, o, *sizes))


def _convolution_dims(t: _Translator, node: Node, x: SSAValue, weight: SSAValue) -> int:
    """The spatial dims of a convolution (1 or 2; others are refused)."""
    spatial = _type(x).get_num_dims() - 2
    if _type(x).get_num_dims() == _type(weight).get_num_dims() - 1:
        raise t.fail(
            node,
            "convolution of an unbatched input (no batch dim; x.unsqueeze(0) before the "
            "convolution gives one)",
        )
    if spatial not in (1, 2, 3) or _type(x).get_num_dims() != _type(weight).get_num_dims():
        raise t.fail(node, f"convolution over {spatial} spatial dims (1 to 3 are supported)")
    return spatial


def _add_bias(t: _Translator, node: Node, result: SSAValue, bias: Any) -> SSAValue:
    """`result [N, O, *S]` plus a per-channel `bias` (if any)."""
    if bias is None:
        return result
    shape = _type(result).get_shape()
    element = _type(result).element_type
    channel = t.reshape(t.cast(t.value(bias, node), element), (shape[1], *[1] * (len(shape) - 2)))
    return t.emit(graph.AddOp(result, t.broadcast(channel, shape)))


def _convolve(
    t: _Translator, x: SSAValue, weight: SSAValue, window: _WindowShape, groups: int
) -> SSAValue:
    """A convolution as one (batched over groups) matmul of its windows.

    The windows of x (zero-padded by a concat, every kernel offset a strided slice) are laid
    out as `[N, g, OH*OW, Cg*KH*KW]`, in the order of the weight's flattened
    `[O, Cg, KH, KW]`; `fuse` inlines the pads and slices as index maps into the GEMM's A
    loads. A kernel equal to its stride with no padding (a ViT patch embedding) is a
    reshape and a transpose, with no slices at all (a 1×1 one at stride 1 is `_pointwise`).
    """
    n = _type(x).get_shape()[0]
    o, cg = _type(weight).get_shape()[:2]
    kernel, sizes = window.kernel, window.sizes
    columns = _windows(t, x, window)  # [N, OHW, C*KK]
    kk, hw = math.prod(kernel), math.prod(sizes)
    columns = t.reshape(columns, (n, hw, groups, cg * kk))
    columns = t.emit(graph.TransposeOp(columns, (0, 2, 1, 3)))  # [N, g, OHW, Cg*KK]
    og = o // groups
    w = t.reshape(weight, (groups, og, cg * kk))
    w = t.broadcast(t.emit(graph.TransposeOp(w, (0, 2, 1))), (n, groups, cg * kk, og))
    product = t.emit(graph.MatmulOp(columns, w))  # [N, g, OHW, Og]
    return t.reshape(t.emit(graph.TransposeOp(product, (0, 1, 3, 2))), (n, o, *sizes))


@_handles("conv_transpose1d", "conv_transpose2d", "conv_transpose3d")
def _transposed_convolution(t: _Translator, node: Node) -> SSAValue:
    """A transposed convolution as the convolution it equals: x with stride - 1 zeros between
    its elements, padded by dilation · (kernel - 1) - padding on each side (plus
    output_padding after; a negative amount crops), convolved at stride 1 by the weight with
    its in and out channels swapped per group and its window reversed."""
    if node.target._overloadpacket.__name__ == "convolution":  # pyright: ignore
        stride, padding, dilation = node.args[3:6]
        extra, groups = node.args[7], node.args[8]
    else:
        stride, padding = _arg(node, 3, "stride", 1), _arg(node, 4, "padding", 0)
        extra, groups = _arg(node, 5, "output_padding", 0), _arg(node, 6, "groups", 1)
        dilation = _arg(node, 7, "dilation", 1)
    out = t.tensor_type(node)
    x, weight = (t.cast(t.value(a, node), out.element_type) for a in node.args[:2])
    spatial = _convolution_dims(t, node, x, weight)
    stride, padding, dilation, extra = (
        _per_dim(v, spatial) for v in (stride, padding, dilation, extra)
    )
    c, og, *kernel = _type(weight).get_shape()
    for i in range(spatial):
        dim = 2 + i
        x = _spread(t, x, dim, stride[i])
        before = dilation[i] * (kernel[i] - 1) - padding[i]

        def zeros(kept: SSAValue, size: int, first: bool, dim: int = dim) -> SSAValue:
            return _constant_block(t, kept, dim, size, 0.0)

        x = _pad_or_crop(t, x, dim, before, before + extra[i], zeros)
    flipped = t.reshape(weight, (groups, c // groups, og, *kernel))
    flipped = t.emit(graph.TransposeOp(flipped, (0, 2, 1, *range(3, 3 + spatial))))
    flipped = t.reshape(flipped, (groups * og, c // groups, *kernel))
    for i in range(spatial):
        flipped = _reversed(t, flipped, 2 + i)
    sizes = out.get_shape()[2:]
    window = _WindowShape(kernel, sizes, [1] * spatial, [0] * spatial, dilation)
    result = _convolve(t, x, flipped, window, groups)
    return _add_bias(t, node, result, _arg(node, 2, "bias"))


def _spread(t: _Translator, x: SSAValue, dim: int, stride: int) -> SSAValue:
    """`x` with `stride - 1` zeros after each element along `dim` but the last."""
    if stride == 1:
        return x
    shape = list(_type(x).get_shape())
    extent = shape[dim]
    column = t.reshape(x, [*shape[: dim + 1], 1, *shape[dim + 1 :]])
    zeros = _constant_block(t, column, dim + 1, stride - 1, 0.0)
    spread = t.emit(graph.ConcatOp([column, zeros], dim + 1))
    merged = t.reshape(spread, [*shape[:dim], extent * stride, *shape[dim + 1 :]])
    return t.emit(graph.SliceOp(merged, dim, 0, (extent - 1) * stride + 1, 1))


def _spatial_dims(name: str) -> int:
    """The spatial dims an op named `..._1d`, `..._2d` or `..._3d` slides over."""
    return next(d for d in (3, 2, 1) if f"{d}d" in name)


def _per_dim(value: Any, spatial: int) -> list[int]:
    values = list(value) if isinstance(value, list | tuple) else [value]
    return [int(v) for v in (values * spatial if len(values) == 1 else values)]


@dataclass(frozen=True)
class _WindowShape:
    """A sliding window over some dims of a tensor: its extent, the output's extent, and the
    stride, padding (each side) and dilation, one per dim."""

    kernel: Sequence[int]
    sizes: Sequence[int]
    stride: Sequence[int]
    padding: Sequence[int]
    dilation: Sequence[int]


def _window_slices(
    t: _Translator,
    x: SSAValue,
    dims: Sequence[int],
    window: _WindowShape,
    fill: float,
    overhang: Sequence[int] = (),
) -> Iterator[SSAValue]:
    """Yield, for each offset in the window (row-major), the strided slice of `x` (padded by
    blocks of `fill` on both sides of each dim, and `overhang` more after the end: the windows
    a ceil-mode pooling adds) that the offset reads at every output position: what a
    convolution multiplies and a pooling folds."""
    overhang = overhang or [0] * len(dims)
    for dim, pad, more in zip(dims, window.padding, overhang, strict=True):
        if pad or more:
            parts = [_constant_block(t, x, dim, pad, fill)] if pad else []
            parts += [x, _constant_block(t, x, dim, pad + more, fill)]
            x = t.emit(graph.ConcatOp(parts, dim))
    for offsets in itertools.product(*(range(k) for k in window.kernel)):
        piece = x
        for dim, offset, size, step, spread in zip(
            dims, offsets, window.sizes, window.stride, window.dilation, strict=True
        ):
            start = offset * spread
            if (start, size, step) != (0, _type(piece).get_shape()[dim], 1):
                piece = t.emit(graph.SliceOp(piece, dim, start, size, step))
        yield piece


def _windows(t: _Translator, x: SSAValue, window: _WindowShape) -> SSAValue:
    """Return the windows of `x [N, C, *S]` as `[N, prod(sizes), C * prod(kernel)]`."""
    kernel, sizes, stride = window.kernel, window.sizes, window.stride
    padding, dilation = window.padding, window.dilation
    n, c, *space = _type(x).get_shape()
    spatial = len(space)
    if list(kernel) == list(stride) and not any(padding) and set(dilation) == {1}:
        for i, (k, size) in enumerate(zip(kernel, sizes)):  # drop rows no window reaches
            if space[i] != k * size:
                x = t.emit(graph.SliceOp(x, 2 + i, 0, k * size, 1))
        split = [n, c, *[d for pair in zip(sizes, kernel) for d in pair]]
        blocks = t.reshape(x, split)  # [N, C, OH, KH, OW, KW]
        outer = [2 + 2 * i for i in range(spatial)]
        inner = [3 + 2 * i for i in range(spatial)]
        moved = t.emit(graph.TransposeOp(blocks, (0, *outer, 1, *inner)))
        return t.reshape(moved, (n, math.prod(sizes), c * math.prod(kernel)))
    dims = [2 + i for i in range(spatial)]
    pieces = [
        t.reshape(piece, (n, c, 1, *sizes)) for piece in _window_slices(t, x, dims, window, 0.0)
    ]
    stacked = pieces[0] if len(pieces) == 1 else t.emit(graph.ConcatOp(pieces, 2))
    moved = t.emit(graph.TransposeOp(stacked, (0, *range(3, 3 + spatial), 1, 2)))
    return t.reshape(moved, (n, math.prod(sizes), c * math.prod(kernel)))


@_handles("im2col")
def _unfold(t: _Translator, node: Node) -> SSAValue:
    """`F.unfold`: the windows of `x [N, C, H, W]` as `[N, C·KH·KW, L]` (`_windows`, moved)."""
    out = t.tensor_type(node)
    x = t.cast(t.value(node.args[0], node), out.element_type)
    kernel, dilation, padding, stride = (_per_dim(v, 2) for v in node.args[1:5])
    space = _type(x).get_shape()[2:]
    sizes = [
        (size + 2 * p - d * (k - 1) - 1) // s + 1
        for size, k, d, p, s in zip(space, kernel, dilation, padding, stride, strict=True)
    ]
    columns = _windows(t, x, _WindowShape(kernel, sizes, stride, padding, dilation))
    return t.emit(graph.TransposeOp(columns, (0, 2, 1)))


@_handles("col2im")
def _fold(t: _Translator, node: Node) -> SSAValue:
    """`F.fold`, `F.unfold`'s inverse: `x [N, C·KH·KW, LH·LW]` (or without N) summed into
    `[N, C, H, W]` where each column's window lies. For each kernel offset, the `[N, C, LH, LW]`
    values it holds are spread `stride - 1` zeros apart and padded with zeros to sit at
    `offset · dilation` in the padded output; the KH·KW of them are summed and the padding is
    cropped. Adds of whole tensors, where a scatter would take a masked sum over every column
    per output element. In f32 for f16/bf16, as torch accumulates."""
    out = t.tensor_type(node)
    x = t.cast(t.value(node.args[0], node), _work_type(out).element_type)
    size, kernel, dilation, padding, stride = (_per_dim(v, 2) for v in node.args[1:6])
    shape = list(out.get_shape())
    batch, channels = (1, shape[0]) if len(shape) == 3 else shape[:2]
    counts = [
        (s + 2 * p - d * (k - 1) - 1) // st + 1
        for s, k, d, p, st in zip(size, kernel, dilation, padding, stride, strict=True)
    ]
    blocks = t.reshape(x, [batch, channels, math.prod(kernel), *counts])
    padded = [s + 2 * p for s, p in zip(size, padding, strict=True)]
    total: SSAValue | None = None
    for index, offsets in enumerate(itertools.product(*(range(k) for k in kernel))):
        piece = t.emit(graph.SliceOp(blocks, 2, index, 1, 1))
        piece = t.reshape(piece, [batch, channels, *counts])
        for i, offset in enumerate(offsets):
            dim = 2 + i
            piece = _spread(t, piece, dim, stride[i])
            before = offset * dilation[i]
            after = padded[i] - before - _type(piece).get_shape()[dim]

            def zeros(kept: SSAValue, size: int, first: bool, dim: int = dim) -> SSAValue:
                return _constant_block(t, kept, dim, size, 0.0)

            piece = _pad_or_crop(t, piece, dim, before, after, zeros)
        total = piece if total is None else t.emit(graph.AddOp(total, piece))
    assert total is not None
    for i, (s, p) in enumerate(zip(size, padding, strict=True)):
        if p:
            total = t.emit(graph.SliceOp(total, 2 + i, p, s, 1))
    return t.cast(t.reshape(total, shape), out.element_type)


@_handles("unfold")
def _tensor_unfold(t: _Translator, node: Node) -> SSAValue:
    """`x.unfold(dim, size, step)`: the windows of `size` elements `step` apart along `dim`,
    that dim becoming their count and a last dim of `size` their elements: offset j of every
    window is the strided slice from j, and the `size` slices are stacked last."""
    out = t.tensor_type(node)
    x = t.value(node.args[0], node)
    shape = list(_type(x).get_shape())
    dim = _dims(node.args[1], max(len(shape), 1))[0]
    size, step = int(node.args[2]), int(node.args[3])
    count = out.get_shape()[dim] if shape else 1
    moved = [*out.get_shape()[:-1], 1]
    parts = []
    for j in range(size):
        part = x if not shape else t.emit(graph.SliceOp(x, dim, j, count, step))
        parts.append(t.reshape(part, moved))
    return parts[0] if size == 1 else t.emit(graph.ConcatOp(parts, len(moved) - 1))


# -------------------------------------------------------------------------------- pooling


@_handles("max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d")
def _pool(t: _Translator, node: Node) -> SSAValue:
    """Max or average pooling over the last 1 or 2 dims: every kernel offset a strided slice
    of x (padded by a concat: -inf for max, 0 for an average that counts the pads), folded
    with max or add (then divided by the window's size). With `ceil_mode` the last windows may
    run past the padded input: they are padded as far with the same fill, and an average
    divides each by the part of its window inside the padded input, as torch does (inside the
    input itself with `count_include_pad=False`)."""
    name = node.target._overloadpacket.__name__  # pyright: ignore
    spatial = _spatial_dims(name)
    average = name.startswith("avg")
    kernel = _per_dim(node.args[1], spatial)
    stride = _per_dim(_arg(node, 2, "stride", None) or kernel, spatial)
    padding = _per_dim(_arg(node, 3, "padding", 0), spatial)
    dilation = [1] * spatial if average else _per_dim(_arg(node, 4, "dilation", 1), spatial)
    counts_pads = _arg(node, 5, "count_include_pad", True)
    divisor_override = _arg(node, 6, "divisor_override", None) if average else None
    out = t.tensor_type(node)
    x = t.cast(t.value(node.args[0], node), out.element_type)
    rank = out.get_num_dims()
    dims = list(range(rank - spatial, rank))
    sizes = [out.get_shape()[d] for d in dims]
    window = _WindowShape(kernel, sizes, stride, padding, dilation)
    inputs = [_type(x).get_shape()[d] for d in dims]
    overhang = [  # past the padded input: the windows ceil_mode adds
        max(0, (o - 1) * s + (k - 1) * d + 1 - (n + 2 * p))
        for o, s, k, d, n, p in zip(sizes, stride, kernel, dilation, inputs, padding)
    ]
    folded: SSAValue | None = None
    for piece in _window_slices(t, x, dims, window, 0.0 if average else -math.inf, overhang):
        if folded is None:
            folded = piece
        else:
            folded = t.emit((graph.AddOp if average else graph.MaxOp)(folded, piece))
    assert folded is not None
    if not average:
        return folded
    if divisor_override is not None:
        return t.emit(graph.DivOp(folded, t.scalar(float(divisor_override), out)))
    if not any(overhang) and (counts_pads or not any(padding)):
        return t.emit(graph.DivOp(folded, t.scalar(float(math.prod(kernel)), out)))
    work = TensorType(f32, out.get_shape())  # window sizes, exact small integers
    divisor: SSAValue | None = None
    for dim, s, k, n, p in zip(dims, stride, kernel, inputs, padding):
        # the window of output o starts at o·s − p; inside the padded input it holds
        # min(k, n + 2p − o·s) elements, inside the input itself (count_include_pad=False)
        # min(o·s − p + k, n) − max(o·s − p, 0) (index expressions, as `arange`)
        steps = t.emit(graph.MulOp(t.emit(graph.IotaOp(work, dim)), t.scalar(float(s), work)))
        if counts_pads:
            room = t.emit(graph.SubOp(t.scalar(float(n + 2 * p), work), steps))
            span = t.emit(graph.MinOp(room, t.scalar(float(k), work)))
        else:
            start = t.emit(graph.SubOp(steps, t.scalar(float(p), work)))
            end = t.emit(graph.AddOp(start, t.scalar(float(k), work)))
            span = t.emit(
                graph.SubOp(
                    t.emit(graph.MinOp(end, t.scalar(float(n), work))),
                    t.emit(graph.MaxOp(start, t.scalar(0.0, work))),
                )
            )
        divisor = span if divisor is None else t.emit(graph.MulOp(divisor, span))
    assert divisor is not None
    return t.emit(graph.DivOp(folded, t.cast(divisor, out.element_type)))


GRID_SAMPLE_MODES = {0: "bilinear", 1: "nearest", 2: "bicubic"}
GRID_SAMPLE_PADDINGS = {0: "zeros", 1: "border", 2: "reflection"}
"""`aten.grid_sampler`'s integer codes for `F.grid_sample`'s mode and padding_mode."""


@_handles("grid_sampler", "grid_sampler_2d")
def _grid_sample(t: _Translator, node: Node) -> SSAValue:
    """`F.grid_sample(x, grid)` in 2-D, bilinear or nearest, zeros, border or reflection
    padding: each output point's source (ix, iy) from the grid in [−1, 1] (`align_corners` as
    torch unnormalizes it; border clamps it into the input, reflection reflects it about the
    input's edges as torch's `reflect_coordinates` and then clamps it), then the four
    neighbours at floor(ix), floor(iy) and one past (bilinear), or the one at (ix, iy) rounded
    half to even as torch's nearbyint (nearest), each a gather of x's rows (x as [N·H·W, C],
    the row n·H·W + y·W + x computed in f32, exact below 2^24) weighted by the bilinear weights
    (1 for nearest), a neighbour outside the input weighing 0 (zeros). Bilinear weights are
    continuous in (ix, iy): a floor that rounds the other way at an integer moves the result by
    an ulp, not a pixel."""
    x_arg, grid_arg, mode, padding, align = node.args[:5]
    if GRID_SAMPLE_MODES.get(mode) not in ("bilinear", "nearest"):
        raise t.fail(node, f"aten.grid_sampler in mode {GRID_SAMPLE_MODES.get(mode, mode)}")
    if GRID_SAMPLE_PADDINGS.get(padding) not in ("zeros", "border", "reflection"):
        paddings = GRID_SAMPLE_PADDINGS.get(padding, padding)
        raise t.fail(node, f"aten.grid_sampler with padding_mode {paddings}")
    out = t.tensor_type(node)
    x, grid = (t.cast(t.value(a, node), f32) for a in (x_arg, grid_arg))
    n, c, h, w = _type(x).get_shape()
    _, ho, wo, _ = _type(grid).get_shape()
    if n * h * w > EXACT_INTEGERS:
        raise t.fail(node, f"aten.grid_sampler of {n * h * w} input points (past 2^24)")
    points = TensorType(f32, [n, ho, wo])

    def number(value: float) -> SSAValue:
        return t.scalar(value, points)

    def source(coordinate: int, size: int) -> SSAValue:
        g = t.reshape(t.emit(graph.SliceOp(grid, 3, coordinate, 1, 1)), [n, ho, wo])
        if align:  # ((g + 1) / 2)·(size − 1)
            scaled = t.emit(
                graph.MulOp(t.emit(graph.AddOp(g, number(1.0))), number((size - 1) / 2))
            )
        else:  # ((g + 1)·size − 1) / 2
            scaled = t.emit(graph.AddOp(g, number(1.0)))
            scaled = t.emit(graph.MulOp(scaled, number(size)))
            scaled = t.emit(graph.DivOp(t.emit(graph.SubOp(scaled, number(1.0))), number(2.0)))
        if GRID_SAMPLE_PADDINGS[padding] == "reflection":
            scaled = reflected(
                scaled, 0 if align else -1, 2 * (size - 1) if align else 2 * size - 1
            )
        if GRID_SAMPLE_PADDINGS[padding] in ("border", "reflection"):
            scaled = t.emit(graph.MinOp(t.emit(graph.MaxOp(scaled, number(0.0))), number(size - 1)))
        return scaled

    def reflected(v: SSAValue, twice_low: int, twice_high: int) -> SSAValue:
        # torch's reflect_coordinates: d = |v − low|, extra = fmod(d, span), flips = d // span;
        # extra + low after an even count of flips, span − extra + low after an odd one (flips
        # taken from d − extra, a multiple of span, so that it agrees with the fmod)
        if twice_low == twice_high:
            return number(0.0)
        low, span = twice_low / 2, (twice_high - twice_low) / 2
        distance = t.emit(graph.AbsOp(t.emit(graph.SubOp(v, number(low)))))
        extra = t.emit(graph.FmodOp(distance, number(span)))
        flips = t.emit(graph.SubOp(distance, extra))
        flips = t.emit(graph.RoundOp(t.emit(graph.DivOp(flips, number(span)))))
        even = t.emit(graph.CompareOp(t.emit(graph.FmodOp(flips, number(2.0))), number(0.0), "eq"))
        flipped = t.emit(graph.SubOp(number(span), extra))
        return t.emit(graph.AddOp(t.emit(graph.SelectOp(even, extra, flipped)), number(low)))

    ix, iy = source(0, w), source(1, h)
    if GRID_SAMPLE_MODES[mode] == "nearest":  # nearbyint: halves to the even neighbour
        columns: tuple[tuple[SSAValue, SSAValue], ...] = ((t.emit(graph.RoundOp(ix)), number(1.0)),)
        rows: tuple[tuple[SSAValue, SSAValue], ...] = ((t.emit(graph.RoundOp(iy)), number(1.0)),)
    else:
        x0, y0 = t.emit(graph.FloorOp(ix)), t.emit(graph.FloorOp(iy))
        x1, y1 = (t.emit(graph.AddOp(v, number(1.0))) for v in (x0, y0))
        columns = ((x0, t.emit(graph.SubOp(x1, ix))), (x1, t.emit(graph.SubOp(ix, x0))))
        rows = ((y0, t.emit(graph.SubOp(y1, iy))), (y1, t.emit(graph.SubOp(iy, y0))))
    table = t.reshape(t.emit(graph.TransposeOp(x, [0, 2, 3, 1])), [n * h * w, c])
    base = t.emit(graph.MulOp(t.emit(graph.IotaOp(points, 0)), number(h * w)))
    total: SSAValue | None = None
    for (xc, wx), (yc, wy) in itertools.product(columns, rows):
        weight = t.emit(graph.MulOp(wx, wy))
        for coordinate, size in ((xc, w), (yc, h)):  # a neighbour outside the input weighs 0
            for bound, predicate in ((0.0, "ge"), (size - 1, "le")):
                inside = t.emit(graph.CompareOp(coordinate, number(bound), predicate))
                weight = t.emit(graph.SelectOp(inside, weight, number(0.0)))
        xs, ys = (
            t.emit(graph.MinOp(t.emit(graph.MaxOp(v, number(0.0))), number(size - 1)))
            for v, size in ((xc, w), (yc, h))
        )
        row = t.emit(graph.AddOp(base, t.emit(graph.AddOp(t.emit(graph.MulOp(ys, number(w))), xs))))
        picked = t.emit(graph.GatherOp(table, t.cast(row, i64)))  # [n, ho, wo, c]
        weights = t.broadcast(t.reshape(weight, [n, ho, wo, 1]), [n, ho, wo, c])
        weighted = t.emit(graph.MulOp(picked, weights))
        total = weighted if total is None else t.emit(graph.AddOp(total, weighted))
    assert total is not None
    return t.cast(t.emit(graph.TransposeOp(total, [0, 3, 1, 2])), out.element_type)


@_handles(
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "_adaptive_avg_pool2d", "adaptive_avg_pool3d",
    "_adaptive_avg_pool3d", "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d",
)  # fmt: skip
def _adaptive_pool(t: _Translator, node: Node) -> SSAValue | list[SSAValue | None]:
    """Adaptive average or max pooling: to sizes that divide the input's, each output element
    the mean (maximum) of an equal block (a reshape and a reduction); to other sizes, one
    spatial dim at a time, output element o the mean (maximum) of the slice from
    floor(o·in/out) to ceil((o+1)·in/out), as torch's windows, which may differ in size and
    overlap (a mean of means: the same mean, rounded otherwise). A max pooling's indices are
    refused."""
    name = node.target._overloadpacket.__name__  # pyright: ignore
    maximum = "max" in name
    x = t.value(node.args[0], node)
    shape = list(_type(x).get_shape())
    spatial = _spatial_dims(name)
    sizes = _per_dim(node.args[1], spatial)
    inputs = shape[-spatial:]
    reduce = graph.ReduceMaxOp if maximum else graph.ReduceMeanOp
    if any(i % o for i, o in zip(inputs, sizes, strict=True)):
        for d, (i, o) in enumerate(zip(inputs, sizes, strict=True)):
            dim = len(shape) - spatial + d
            windows = []
            for k in range(o):
                start, end = k * i // o, -(-(k + 1) * i // o)
                window = t.emit(graph.SliceOp(x, dim, start, end - start, 1))
                windows.append(t.emit(reduce(window, [dim], keepdim=True)))
            x = windows[0] if o == 1 else t.emit(graph.ConcatOp(windows, dim))
        return [x, None] if maximum else x
    split = shape[:-spatial] + [d for i, o in zip(inputs, sizes) for d in (o, i // o)]
    blocks = t.reshape(x, split)
    inner = [len(shape) - spatial + 2 * k + 1 for k in range(spatial)]
    pooled = t.reshape(t.emit(reduce(blocks, inner, keepdim=False)), [*shape[:-spatial], *sizes])
    return [pooled, None] if maximum else pooled


# ---------------------------------------------------------------------------- resampling


@_handles(
    "upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d", "upsample_linear1d",
    "upsample_bilinear2d", "upsample_trilinear3d", "upsample_bicubic2d",
    "_upsample_nearest_exact1d", "_upsample_nearest_exact2d", "_upsample_nearest_exact3d",
)  # fmt: skip
def _upsample(t: _Translator, node: Node) -> SSAValue:
    """`F.interpolate` in nearest, linear, bilinear, trilinear and bicubic modes, one spatial
    dim at a time: each output row's source rows computed from its index in f32 as torch
    computes them (index expressions, no buffer), then taken by a gather (nearest) or by two
    (linear) or four (cubic) gathers weighted and added (in f32 for f16/bf16)."""
    name = node.target._overloadpacket.__name__  # pyright: ignore
    cubic = "cubic" in name
    linear = "linear" in name or cubic
    spatial = _spatial_dims(name)
    out = t.tensor_type(node)
    x = t.cast(t.value(node.args[0], node), _work_type(out).element_type)
    rest = list(node.args[2:])
    align = bool(rest.pop(0)) if linear else False
    if node.target._overloadname == "vec":  # pyright: ignore
        scales = list(rest[0] or [None] * spatial) if rest else [None] * spatial
    else:
        scales = (rest + [None] * spatial)[:spatial]
    rank = out.get_num_dims()
    for k in range(spatial):
        dim = rank - spatial + k
        source, target = _type(x).get_shape()[dim], out.get_shape()[dim]
        if cubic:
            x = _cubic_resample(t, x, dim, target, align, scales[k])
        elif linear:
            x = _linear_resample(t, x, dim, target, align, scales[k])
        else:
            exact = "exact" in name
            # torch's CPU kernel of 2-D nearest (`nearest_idx`) copies where the size is kept
            # and halves where it doubles, whatever the scale; 1-D and 3-D and nearest-exact
            # compute every row from the scale
            shortcut = spatial == 2 and not exact
            if source != target or not (shortcut or scales[k] in (None, 1.0)):
                sources = _nearest_sources(t, source, target, scales[k], exact, shortcut)
                x = _take(t, x, dim, sources)
    return t.cast(x, out.element_type)


def _source_scale(source: int, target: int, scale: float | None) -> float:
    """torch's `compute_scales_value`: 1 / scale_factor where one was given, else the ratio of
    the sizes, as an f32."""
    return float(np.float32(1.0 / scale) if scale else np.float32(source) / np.float32(target))


def _exact_scale(source: int, target: int, scale: float, exact: bool) -> float:
    """A scale s' whose rows `floor((i [+ 0.5]) · s')` are the ones torch's f32 products give
    (`scale` the f32 torch multiplies by) both in f32 and in exact arithmetic (the float64
    reference): an f32 product rounding up to an integer, as 3 · 1.6666666 rounds to 5, is
    below it exactly. `scale` itself where it already is such a scale, else the nearest f32
    of a few around it that is, else `scale` (the f32 rows are torch's either way)."""
    rows = np.arange(target, dtype=np.float64) + (0.5 if exact else 0.0)
    last = source - 1

    def sources(s: float) -> tuple[np.ndarray, np.ndarray]:
        in_f32 = np.floor((rows.astype(np.float32) * np.float32(s)).astype(np.float32))
        return np.minimum(in_f32, last), np.minimum(np.floor(rows * s), last)

    wanted, _ = sources(scale)
    candidates = [np.float32(scale)]
    for direction in (np.inf, -np.inf):
        step = np.float32(scale)
        for _ in range(8):
            step = np.nextafter(step, np.float32(direction))
            candidates.append(step)
    for candidate in sorted(candidates, key=lambda c: abs(float(c) - scale)):
        in_f32, exactly = sources(float(candidate))
        if np.array_equal(in_f32, wanted) and np.array_equal(exactly, wanted):
            return float(candidate)
    return scale


def _nearest_sources(
    t: _Translator,
    source: int,
    target: int,
    scale: float | None,
    exact: bool = False,
    shortcut: bool = True,
) -> SSAValue:
    """torch's `nearest_idx` for each output row i: `min(floor(i · s), source - 1)` in f32 (s
    = 1/2 where the output is twice the input with `shortcut`, torch's shift in its 2-D
    kernel); `nearest-exact` rounds the row's centre instead, `min(floor((i + 0.5) · s),
    source - 1)`."""
    halved = target == 2 * source and not exact and shortcut
    s = 0.5 if halved else _exact_scale(source, target, _source_scale(source, target, scale), exact)
    index = TensorType(f32, [target])
    rows = t.emit(graph.IotaOp(index, 0))
    if exact:
        rows = t.emit(graph.AddOp(rows, t.scalar(0.5, index)))
    scaled = t.emit(graph.MulOp(rows, t.scalar(s, index)))
    rows = t.emit(graph.MinOp(t.emit(graph.FloorOp(scaled)), t.scalar(float(source - 1), index)))
    return t.cast(rows, i64)


def _linear_resample(
    t: _Translator, x: SSAValue, dim: int, target: int, align: bool, scale: float | None
) -> SSAValue:
    """`x[i0] · (1 - w) + x[i1] · w` along `dim` for each output row i: torch's source point p
    (`area_pixel_compute_source_index`: `s · i` with aligned corners, else `max(s · (i +
    0.5) - 0.5, 0)`) in f32, i0 = floor(p), i1 the next row within the input, w = p - i0.
    A dim that keeps its size is copied, whatever the scale (1.19 on 4 rows): torch's CPU
    linear kernels copy it (bicubic's does not)."""
    source = _type(x).get_shape()[dim]
    if source == target:
        return x
    if align:
        s = (source - 1) / (target - 1) if target > 1 else 0.0
    else:
        s = _source_scale(source, target, scale)
    index = TensorType(f32, [target])
    point = t.emit(graph.IotaOp(index, 0))
    if not align:
        point = t.emit(graph.AddOp(point, t.scalar(0.5, index)))
    point = t.emit(graph.MulOp(point, t.scalar(s, index)))
    if not align:
        shifted = t.emit(graph.SubOp(point, t.scalar(0.5, index)))
        point = t.emit(graph.MaxOp(shifted, t.scalar(0.0, index)))
    low = t.emit(graph.FloorOp(point))
    last = t.scalar(float(source - 1), index)
    high = t.emit(graph.MinOp(t.emit(graph.AddOp(low, t.scalar(1.0, index))), last))
    below, above = (_take(t, x, dim, t.cast(rows, i64)) for rows in (low, high))
    full = _type(below).get_shape()
    along = [1] * len(full)
    along[dim] = target

    def spread(weight: SSAValue) -> SSAValue:
        return t.broadcast(t.reshape(t.cast(weight, _type(x).element_type), along), full)

    weight = t.emit(graph.SubOp(point, low))
    keep = t.emit(graph.SubOp(t.scalar(1.0, index), weight))
    return t.emit(
        graph.AddOp(
            t.emit(graph.MulOp(below, spread(keep))), t.emit(graph.MulOp(above, spread(weight)))
        )
    )


ANTIALIAS_EXTENT = 4096
"""Longest side an antialiased resampling takes: `_antialias_taps` runs torch's kernel on an
n × n one-hot probe (in float64) to read its weights."""


@_handles("_upsample_bilinear2d_aa", "_upsample_bicubic2d_aa")
def _antialiased_upsample(t: _Translator, node: Node) -> SSAValue:
    """`F.interpolate(..., antialias=True)` in bilinear or bicubic mode, one spatial dim at a
    time: each output row a weighted sum of a window of input rows (`_antialias_taps`, the
    weights torch's own kernel gives, found at capture), a gather of the taps and a sum of
    their products with the weights (in f32 for f16/bf16)."""
    out = t.tensor_type(node)
    x = t.cast(t.value(node.args[0], node), _work_type(out).element_type)
    align = bool(node.args[2])
    if node.target._overloadname == "vec":  # pyright: ignore
        scales = list(node.args[3] or [None, None]) if len(node.args) > 3 else [None, None]
    else:
        scales = [_arg(node, 3, "scales_h"), _arg(node, 4, "scales_w")]
    rank = out.get_num_dims()
    (height, width), (rows_out, columns_out) = _type(x).get_shape()[-2:], out.get_shape()[-2:]
    if 1 in (width, columns_out) and (height != rows_out or scales[0] not in (None, 1.0)):
        raise t.fail(
            node,
            f"{_op_name(node.target)} resampling the height of an image 1 wide (or to 1 wide): "
            "torch's CPU kernel does not resample each dim in turn there (the output rows of "
            "a 1-wide image come out equal), so there is no weighted sum of rows to capture",
        )
    if max(height, width) > ANTIALIAS_EXTENT:
        raise t.fail(
            node,
            f"{_op_name(node.target)} of a {height} × {width} image (its weights are found "
            f"from an n × n probe at capture; at most {ANTIALIAS_EXTENT} a side)",
        )
    for k in range(2):
        dim = rank - 2 + k
        source, target = _type(x).get_shape()[dim], out.get_shape()[dim]
        rows, weights, inside = _antialias_taps(node, source, target, align, scales[k], k)
        taps = rows.shape[1]
        ids = t.cast(t.folded_floats(node, rows, f"rows{k}"), i64)
        taken = _take(t, x, dim, ids)  # dim replaced by [target, taps]
        full = list(_type(taken).get_shape())
        along = [1] * len(full)
        along[dim : dim + 2] = [target, taps]
        weight = t.cast(t.folded_floats(node, weights, f"weights{k}"), _type(x).element_type)
        terms = t.emit(graph.MulOp(taken, t.broadcast(t.reshape(weight, along), full)))
        # a tap past a row's window (padding to the widest) adds nothing, not 0 · inf
        kept = t.cast(t.folded_floats(node, inside, f"window{k}"), graph.BOOL)
        zero = t.scalar(0.0, _type(terms))
        terms = t.emit(graph.SelectOp(t.broadcast(t.reshape(kept, along), full), terms, zero))
        x = t.emit(graph.ReduceSumOp(terms, [dim + 1], False))
    return t.cast(x, out.element_type)


def _antialias_taps(
    node: Node, source: int, target: int, align: bool, scale: float | None, dim: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The input rows (clamped into the input), weights and window mask of each output row's
    taps [target, taps] along one dim of an antialiased resampling, as torch's kernel has them:
    the op run in float64 on one-hot rows (row j hot gives column j of the weights) and on
    rows holding one NaN (NaN where j is in the window, weight 0 at its ends included, as a
    NaN there reaches torch's result). The other dim is 2 kept 2, whose weights are the
    identity (torch's kernel mixes the rows of an input 1 wide)."""
    import torch

    op = node.target._overloadpacket.default  # pyright: ignore
    shape, size, scales = [1, source, 2, 2], [2, 2], [None, None]
    shape[2 + dim], size[dim], scales[dim] = source, target, scale

    def resampled(hot: float) -> torch.Tensor:
        value = torch.tensor(hot, dtype=torch.float64)
        probe = torch.where(torch.eye(source, dtype=torch.bool), value, 0.0)
        probe = probe.reshape(source, source, 1).expand(source, source, 2)
        probe = probe.reshape(shape) if dim == 0 else probe.transpose(1, 2).reshape(shape)
        result = op(probe, size, align, *scales)  # [1, source, target, 2] or [1, source, 2, target]
        return (result[0, :, :, 0] if dim == 0 else result[0, :, 0, :]).T

    weights = resampled(1.0)  # [target, source]
    window = resampled(math.nan).isnan()
    first = window.to(torch.int64).argmax(1)
    count = window.sum(1)
    taps = int(count.max())
    offsets = torch.arange(taps)
    rows = (first[:, None] + offsets).clamp(max=source - 1)
    inside = offsets < count[:, None]
    taken = torch.where(inside, weights.gather(1, rows), 0.0)
    return rows.to(torch.float32), taken, inside.to(torch.float32)


CUBIC_A = -0.75
"""The cubic convolution's parameter torch's bicubic interpolation uses (Keys' kernel)."""


def _cubic_resample(
    t: _Translator, x: SSAValue, dim: int, target: int, align: bool, scale: float | None
) -> SSAValue:
    """`sum over k < 4 of x[clamp(i0 - 1 + k)] · w_k(p - i0)` along `dim`: torch's bicubic
    source point p (as `_linear_resample`'s, not clamped at 0), i0 = floor(p), the four rows
    around it clamped into the input, weighted by the cubic convolution kernel with A = -0.75."""
    source = _type(x).get_shape()[dim]
    if align:
        s = (source - 1) / (target - 1) if target > 1 else 0.0
    else:
        s = _source_scale(source, target, scale)
    index = TensorType(f32, [target])

    def number(value: float) -> SSAValue:
        return t.scalar(value, index)

    point = t.emit(graph.IotaOp(index, 0))
    if not align:
        point = t.emit(graph.AddOp(point, number(0.5)))
    point = t.emit(graph.MulOp(point, number(s)))
    if not align:
        point = t.emit(graph.SubOp(point, number(0.5)))
    low = t.emit(graph.FloorOp(point))
    frac = t.emit(graph.SubOp(point, low))

    def near(d: SSAValue) -> SSAValue:  # ((A + 2) d - (A + 3)) d² + 1, for |d| <= 1
        inner = t.emit(
            graph.SubOp(t.emit(graph.MulOp(d, number(CUBIC_A + 2))), number(CUBIC_A + 3))
        )
        return t.emit(
            graph.AddOp(t.emit(graph.MulOp(t.emit(graph.MulOp(inner, d)), d)), number(1.0))
        )

    def far(d: SSAValue) -> SSAValue:  # ((A d - 5 A) d + 8 A) d - 4 A, for 1 < |d| < 2
        a = t.emit(graph.SubOp(t.emit(graph.MulOp(d, number(CUBIC_A))), number(5 * CUBIC_A)))
        b = t.emit(graph.AddOp(t.emit(graph.MulOp(a, d)), number(8 * CUBIC_A)))
        return t.emit(graph.SubOp(t.emit(graph.MulOp(b, d)), number(4 * CUBIC_A)))

    def distance(offset: float) -> SSAValue:
        return (
            t.emit(graph.AddOp(frac, number(offset)))
            if offset >= 0
            else t.emit(graph.SubOp(number(-offset), frac))
        )

    weights = [far(distance(1.0)), near(frac), near(distance(-1.0)), far(distance(-2.0))]
    total: SSAValue | None = None
    for k, weight in enumerate(weights):
        rows = t.emit(graph.AddOp(low, number(float(k - 1))))
        rows = t.emit(
            graph.MinOp(t.emit(graph.MaxOp(rows, number(0.0))), number(float(source - 1)))
        )
        taken = _take(t, x, dim, t.cast(rows, i64))
        full = list(_type(taken).get_shape())
        along = [1] * len(full)
        along[dim] = target
        spread = t.broadcast(t.reshape(t.cast(weight, _type(x).element_type), along), full)
        term = t.emit(graph.MulOp(taken, spread))
        total = term if total is None else t.emit(graph.AddOp(total, term))
    assert total is not None
    return total
