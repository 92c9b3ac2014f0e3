"""Capture a `torch.nn.Module` into a graph-dialect `func.func` (needs the `torch` extra).

README.md ("From PyTorch") lists the ops covered. `torch.export.export` is used rather than
`torch.fx.symbolic_trace` because it hands over a normalized program: one ATen op per node,
parameters and buffers lifted to placeholders with a signature naming them, and every node's
static shape and dtype in `node.meta["val"]` (needed to make broadcasting and type promotion
explicit). The function's arguments are the module's inputs, then its weights in the order of
export's signature: parameters, buffers, then tensor constants created in `forward`. Torch is
imported lazily, so tinyopt itself works without it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import AnyFloat, ModuleOp, TensorType, bf16, f16, f32, i32, i64
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.utils.exceptions import VerifyException

from tinyopt.dialects import graph

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
    """Return a tensor's values as numpy (bf16 as float32, which holds them exactly)."""
    import torch

    tensor = tensor.detach().cpu()
    return (tensor.float() if tensor.dtype == torch.bfloat16 else tensor).numpy()


def capture(
    module: torch.nn.Module, *example_inputs: torch.Tensor, name: str = "forward"
) -> Capture:
    """Capture `module` called on `example_inputs` as a graph-dialect function `@name`.

    Raises `FrontendError` for an op, dtype or argument kind the graph dialect cannot express.
    """
    import torch

    try:
        program = torch.export.export(module, tuple(example_inputs))
    except Exception as exc:  # torch raises many exception types for untraceable code
        raise FrontendError(f"torch.export cannot trace {type(module).__name__}: {exc}") from exc
    return _Translator(program, name).run()


_DTYPES: dict[str, AnyFloat] = {"float32": f32, "float16": f16, "bfloat16": bf16}
_ID_DTYPES = {"int64": i64, "int32": i32}
"""Integer dtypes, allowed for the indices of an embedding."""


def _source(node: Node) -> str:
    """Return where the user's code created `node` (its last stack frame), or ''."""
    trace = (node.meta.get("stack_trace") or "").strip().splitlines()
    frames = [line.strip() for line in trace if line.strip().startswith("File ")]
    return f", at {frames[-1]}" if frames else ""


def _op_name(target: Any) -> str:
    """Return a readable name of a call target: `aten.topk`, `operator.getitem`, …."""
    packet = getattr(target, "_overloadpacket", None)
    if packet is not None:
        return f"{target.namespace}.{packet.__name__}"
    return f"{getattr(target, '__module__', None) or '?'}.{getattr(target, '__name__', target)}"


class _Translator:
    """Translates one exported program node by node into a block of graph ops."""

    def __init__(self, program: ExportedProgram, name: str):
        self.program = program
        self.name = name
        self.ops: list[Operation] = []
        self.values: dict[Node, SSAValue] = {}

    # ----------------------------------------------------------------------------- helpers

    def fail(self, node: Node, message: str) -> FrontendError:
        """Build a FrontendError about `node` (callers `raise` it)."""
        return FrontendError(f"{message} (node {node.name}{_source(node)})")

    def tensor_type(self, node: Node) -> TensorType[AnyFloat]:
        """Return the graph tensor type of a node's (single tensor) result.

        Integer tensors are allowed only as inputs that are nothing but embedding indices.
        """
        import torch

        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            raise self.fail(node, f"{_op_name(node.target)} does not produce one tensor")
        dtype = str(val.dtype).removeprefix("torch.")
        shape = [int(d) for d in val.shape]
        if dtype in _ID_DTYPES and node.op == "placeholder" and _only_ids(node):
            return TensorType(_ID_DTYPES[dtype], shape)
        if dtype not in _DTYPES:
            raise self.fail(
                node,
                f"dtype {val.dtype} is not supported (graph tensors are f32, f16 or bf16; "
                "integer tensors only as embedding indices)",
            )
        return TensorType(_DTYPES[dtype], shape)

    def emit(self, op: Operation) -> SSAValue:
        """Append `op` and return its result."""
        self.ops.append(op)
        return op.results[0]

    def value(self, arg: Any, node: Node) -> SSAValue:
        """Return the SSA value of a node argument that must be a tensor."""
        from torch.fx import Node

        if not isinstance(arg, Node) or arg not in self.values:
            raise self.fail(node, f"{_op_name(node.target)}: expected a tensor operand, got {arg}")
        return self.values[arg]

    def cast(self, x: SSAValue, element_type: AnyFloat) -> SSAValue:
        """Return `x` converted to `element_type` (itself when it already is)."""
        if _type(x).element_type == element_type:
            return x
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
        IR holds one number, not one per element of the activation."""
        return self.broadcast(self.emit(graph.ConstantOp.scalar(value, like)), like.get_shape())

    # --------------------------------------------------------------------------------- run

    def run(self) -> Capture:
        """Translate the whole program and return the capture."""
        from torch.export.graph_signature import InputKind, OutputKind

        signature = self.program.graph_signature
        for node in self.program.graph.nodes:  # name unsupported ops before dtype problems
            name = _op_name(node.target)
            if node.op == "call_function" and name not in _HANDLERS and name not in _SKIPPED:
                raise self.fail(node, f"cannot capture {name}")
        placeholders = {n.name: n for n in self.program.graph.nodes if n.op == "placeholder"}
        inputs: list[Node] = []
        weights: dict[str, torch.Tensor] = {}
        weight_nodes: list[Node] = []
        tensors = {**self.program.constants, **self.program.state_dict}
        for spec in signature.input_specs:
            node = placeholders[spec.arg.name]
            if spec.kind == InputKind.USER_INPUT:
                inputs.append(node)
            elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
                assert spec.target is not None
                weights[spec.target] = tensors[spec.target]
                weight_nodes.append(node)
            else:
                raise self.fail(node, f"input of kind {spec.kind.name} is not supported")
        block = Block(arg_types=[self.tensor_type(n) for n in (*inputs, *weight_nodes)])
        for node, arg in zip((*inputs, *weight_nodes), block.args, strict=True):
            arg.name_hint = node.name
            self.values[node] = arg

        results: list[SSAValue] = []
        for node in self.program.graph.nodes:
            if node.op == "call_function":
                self.translate(node)
            elif node.op == "output":
                kinds = {s.arg.name: s.kind for s in signature.output_specs}
                for out in node.args[0]:
                    if kinds.get(getattr(out, "name", None)) != OutputKind.USER_OUTPUT:
                        raise self.fail(node, "the module mutates a buffer or returns a non-tensor")
                    results.append(self.value(out, node))
        block.add_ops([*self.ops, func.ReturnOp(*results)])
        function = func.FuncOp(
            self.name, ([a.type for a in block.args], [r.type for r in results]), Region(block)
        )
        module = ModuleOp([function])
        try:
            module.verify()
        except VerifyException as exc:
            raise FrontendError(f"captured IR does not verify: {exc}") from exc
        return Capture(module, weights)

    def translate(self, node: Node) -> None:
        """Translate one call node, recording its result value."""
        name = _op_name(node.target)
        if name in _SKIPPED:
            return
        value = _HANDLERS[name](self, node)
        if isinstance(value.owner, Operation) and value.name_hint is None:
            value.name_hint = node.name
        self.values[node] = value


def _type(x: SSAValue) -> TensorType[AnyFloat]:
    assert isinstance(x.type, TensorType)
    return x.type  # pyright: ignore[reportUnknownVariableType]


def _only_ids(node: Node) -> bool:
    """Return whether every use of `node` is as the indices of an `aten.embedding`."""
    return bool(node.users) and all(
        _op_name(user.target) == "aten.embedding"
        and user.args[1] is node
        and user.args[0] is not node
        for user in node.users
    )


Handler = Callable[[_Translator, "Node"], SSAValue]
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
    """Normalize a dim, a list of dims or None (all dims) to non-negative ints."""
    if dims is None or dims == []:
        return list(range(rank))
    return [d % rank for d in (dims if isinstance(dims, list | tuple) else [dims])]


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
    "relu": graph.ReluOp,
    "silu": graph.SiluOp,
}


@_handles(*_UNARY)
def _unary(t: _Translator, node: Node) -> SSAValue:
    out = t.tensor_type(node)
    x = t.operand_like(node.args[0], out, node)
    return t.emit(_UNARY[node.target._overloadpacket.__name__](x))  # pyright: ignore


@_handles("gelu")
def _gelu(t: _Translator, node: Node) -> SSAValue:
    out = t.tensor_type(node)
    x = t.operand_like(node.args[0], out, node)
    approximate = _arg(node, 1, "approximate", "none")
    if approximate == "none":
        return t.emit(graph.GeluOp(x))
    # tanh form: x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))
    cube = t.emit(graph.MulOp(x, t.emit(graph.MulOp(x, x))))
    inner = t.emit(graph.AddOp(x, t.emit(graph.MulOp(cube, t.scalar(0.044715, out)))))
    th = t.emit(graph.TanhOp(t.emit(graph.MulOp(inner, t.scalar(math.sqrt(2 / math.pi), out)))))
    half_x = t.emit(graph.MulOp(x, t.scalar(0.5, out)))
    return t.emit(graph.MulOp(half_x, t.emit(graph.AddOp(th, t.scalar(1.0, out)))))


_BINARY: dict[str, type[graph.BinaryOp]] = {
    "add": graph.AddOp,
    "sub": graph.SubOp,
    "rsub": graph.SubOp,
    "mul": graph.MulOp,
    "div": graph.DivOp,
    "pow": graph.PowOp,
    "maximum": graph.MaxOp,
    "minimum": graph.MinOp,
}


@_handles(*_BINARY)
def _binary(t: _Translator, node: Node) -> SSAValue:
    name = node.target._overloadpacket.__name__  # pyright: ignore
    out = t.tensor_type(node)
    if node.kwargs.get("rounding_mode") is not None:
        raise t.fail(node, f"aten.div with rounding_mode={node.kwargs['rounding_mode']!r}")
    lhs = t.operand_like(node.args[0], out, node)
    rhs = t.operand_like(node.args[1], out, node)
    alpha = node.kwargs.get("alpha", 1)
    if alpha != 1:
        rhs = t.emit(graph.MulOp(rhs, t.scalar(float(alpha), out)))
    if name == "rsub":
        lhs, rhs = rhs, lhs
    return t.emit(_BINARY[name](lhs, rhs))


@_handles("square")
def _square(t: _Translator, node: Node) -> SSAValue:
    x = t.operand_like(node.args[0], t.tensor_type(node), node)
    return t.emit(graph.MulOp(x, x))


# --------------------------------------------------------------------------- reductions

_REDUCE: dict[str, type[graph.ReduceOp]] = {
    "mean": graph.ReduceMeanOp,
    "sum": graph.ReduceSumOp,
    "amax": graph.ReduceMaxOp,
}


@_handles(*_REDUCE)
def _reduce(t: _Translator, node: Node) -> SSAValue:
    out = t.tensor_type(node)
    x = t.cast(t.value(node.args[0], node), out.element_type)
    dims = _dims(_arg(node, 1, "dim"), _type(x).get_num_dims())
    keepdim = bool(_arg(node, 2, "keepdim", False))
    return t.emit(_REDUCE[node.target._overloadpacket.__name__](x, dims, keepdim))  # pyright: ignore


@_handles("softmax", "_softmax")
def _softmax(t: _Translator, node: Node) -> SSAValue:
    out = t.tensor_type(node)
    x = t.cast(t.value(node.args[0], node), out.element_type)
    return t.emit(graph.SoftmaxOp(x, _dims(node.args[1], out.get_num_dims())[0]))


# ------------------------------------------------------------------- contractions, norms


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
    if len(rs) == 2:  # [..., M, K] x [K, N]: the weight broadcast; `fuse` makes it one GEMM
        return t.emit(graph.MatmulOp(lhs, t.broadcast(rhs, (*batch, *rs))))
    count = math.prod(batch)
    lhs3 = t.reshape(t.broadcast(lhs, (*batch, *ls[-2:])), (count, *ls[-2:]))
    rhs3 = t.reshape(t.broadcast(rhs, (*batch, *rs[-2:])), (count, *rs[-2:]))
    return t.reshape(t.emit(graph.MatmulOp(lhs3, rhs3)), out.get_shape())


@_handles("scaled_dot_product_attention")
def _attention(t: _Translator, node: Node) -> SSAValue:
    if _arg(node, 3, "attn_mask") is not None or _arg(node, 4, "dropout_p", 0.0) != 0.0:
        raise t.fail(node, "scaled_dot_product_attention with attn_mask or dropout")
    out = t.tensor_type(node)
    q, k, v = (t.value(a, node) for a in node.args[:3])
    shape = _type(q).get_shape()
    if len(shape) not in (3, 4):
        raise t.fail(node, f"scaled_dot_product_attention on rank {len(shape)} (expects 3 or 4)")
    q, k, v = (t.reshape(x, (1,) * (4 - len(shape)) + _type(x).get_shape()) for x in (q, k, v))
    heads, kv_heads = _type(q).get_shape()[1], _type(k).get_shape()[1]
    if heads != kv_heads:  # GQA: query head h reads key/value head h // (heads / kv_heads)
        k, v = (_repeat_heads(t, x, heads // kv_heads) for x in (k, v))
    if not _type(q) == _type(k) == _type(v):
        raise t.fail(
            node,
            "scaled_dot_product_attention needs q, k, v of one shape after repeating heads, "
            f"got {_type(q)}, {_type(k)}, {_type(v)}",
        )
    scale = _arg(node, 7, "scale")
    scale = 1.0 / math.sqrt(shape[-1]) if scale is None else float(scale)
    causal = bool(_arg(node, 5, "is_causal", False))
    return t.reshape(t.emit(graph.AttentionOp(q, k, v, scale, causal)), out.get_shape())


def _repeat_heads(t: _Translator, x: SSAValue, groups: int) -> SSAValue:
    """Repeat each head of `[B, H, S, D]` `groups` times in place: `[B, H * groups, S, D]`."""
    b, h, s, d = _type(x).get_shape()
    spread = t.broadcast(t.reshape(x, (b, h, 1, s, d)), (b, h, groups, s, d))
    return t.reshape(spread, (b, h * groups, s, d))


@_handles("rms_norm")
def _rms_norm(t: _Translator, node: Node) -> SSAValue:
    import torch

    weight, eps = _arg(node, 2, "weight"), _arg(node, 3, "eps")
    if len(node.args[1]) != 1 or weight is None:
        raise t.fail(node, "rms_norm over several dims or without a weight")
    x = t.value(node.args[0], node)
    eps = torch.finfo(node.meta["val"].dtype).eps if eps is None else eps
    return t.emit(graph.RmsNormOp(x, t.value(weight, node), eps))


@_handles("layer_norm")
def _layer_norm(t: _Translator, node: Node) -> SSAValue:
    weight, bias = _arg(node, 2, "weight"), _arg(node, 3, "bias")
    if len(node.args[1]) != 1 or weight is None or bias is None:
        raise t.fail(node, "layer_norm over several dims or without weight and bias")
    x = t.value(node.args[0], node)
    eps = float(_arg(node, 4, "eps", 1e-5))
    return t.emit(graph.LayerNormOp(x, t.value(weight, node), t.value(bias, node), eps))


# ------------------------------------------------------------------------ shape and data


@_handles(
    "view", "reshape", "_unsafe_view", "unsqueeze", "squeeze", "flatten", "unflatten", "expand",
    "expand_as", "broadcast_to",
)  # fmt: skip
def _reshape_or_expand(t: _Translator, node: Node) -> SSAValue:
    out = t.tensor_type(node)
    x = t.value(node.args[0], node)
    name = node.target._overloadpacket.__name__  # pyright: ignore
    if name in ("expand", "expand_as", "broadcast_to"):
        return t.broadcast(x, out.get_shape())
    return t.reshape(x, out.get_shape())


@_handles("transpose", "permute", "t", "numpy_T", "swapaxes", "mT")
def _transpose(t: _Translator, node: Node) -> SSAValue:
    x = t.value(node.args[0], node)
    rank = _type(x).get_num_dims()
    name = node.target._overloadpacket.__name__  # pyright: ignore
    if name == "permute":
        perm = _dims(node.args[1], rank)
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


@_handles("dropout")
def _dropout(t: _Translator, node: Node) -> SSAValue:
    if _arg(node, 2, "train") and _arg(node, 1, "p") != 0.0:
        raise t.fail(node, "dropout in training mode (call module.eval() first)")
    return t.value(node.args[0], node)


@_handles("to", "_to_copy", "type_as")
def _to(t: _Translator, node: Node) -> SSAValue:
    return t.cast(t.value(node.args[0], node), t.tensor_type(node).element_type)


@_handles("slice", "select")
def _slice(t: _Translator, node: Node) -> SSAValue:
    out = t.tensor_type(node)
    x = t.value(node.args[0], node)
    shape = _type(x).get_shape()
    dim = _dims(_arg(node, 1, "dim", 0), len(shape))[0]
    if node.target._overloadpacket.__name__ == "select":  # pyright: ignore
        start, size, step = node.args[2] % shape[dim], 1, 1
    else:
        start, step = _arg(node, 2, "start") or 0, _arg(node, 4, "step", 1)
        start = min(max(start + shape[dim] if start < 0 else start, 0), shape[dim])
        size = out.get_shape()[dim]
    if size == 0:
        raise t.fail(node, "a slice with no elements")
    if (start, size, step) == (0, shape[dim], 1):
        return x
    sliced = t.emit(graph.SliceOp(x, dim, start, size, step))
    return t.reshape(sliced, out.get_shape())


@_handles("embedding")
def _embedding(t: _Translator, node: Node) -> SSAValue:
    table, ids = t.value(node.args[0], node), t.value(node.args[1], node)
    if _type(ids).element_type not in graph.ID_TYPES:
        raise t.fail(node, "aten.embedding indices must be a module input of int32 or int64")
    return t.emit(graph.GatherOp(table, ids))


@_handles("cat", "concat")
def _cat(t: _Translator, node: Node) -> SSAValue:
    out = t.tensor_type(node)
    parts = [t.cast(t.value(a, node), out.element_type) for a in node.args[0]]
    parts = [p for p in parts if math.prod(_type(p).get_shape()) > 0]
    if len(parts) == 1:
        return parts[0]
    dim = _dims(_arg(node, 1, "dim", 0), out.get_num_dims())[0]
    return t.emit(graph.ConcatOp(parts, dim))
