"""Checking a lowered program on the GPU against the float64 numpy reference of its graph."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import MemRefType, ModuleOp, TensorType, bf16, f8E4M3FN, f8E5M2, f16, f32
from xdsl.ir import Attribute

from tinyopt.backends.fp8 import fp8_format
from tinyopt.backends.reference import numpy_dtype, random_inputs, run_reference
from tinyopt.dialects.runtime_scalar import check_value, describe, runtime_scalars

TOLERANCES: dict[Attribute, float] = {
    f32: 1e-4,
    f16: 2e-2,
    bf16: 2e-2,
    f8E4M3FN: 2**-4,
    f8E5M2: 2**-3,
}
"""Largest relative error ‖out − ref‖ / ‖ref‖ accepted per output element type (an 8-bit
float: the reference rounds where the program casts, so only values rounding to a neighbour
after a different f32 computation differ, by at most one step of 2^-3 or 2^-2)."""


def to_storage(array: np.ndarray, element_type: Attribute) -> np.ndarray:
    """Returns the array the runtime takes for `element_type` (bf16 as its uint16 bits, FP8 as
    its uint8 bits).

    C order without `np.ascontiguousarray`, which turns a rank-0 array into shape (1,).
    """
    if element_type == bf16:
        bits = np.asarray(array, np.float32, order="C").view(np.uint32) >> 16
        return np.asarray(bits, np.uint16)  # a rank-0 shift gives a numpy scalar
    if fmt := fp8_format(element_type):
        return np.asarray(fmt.bits(array), order="C")
    return np.asarray(array, numpy_dtype(element_type), order="C")


def from_storage(array: np.ndarray, element_type: Attribute) -> np.ndarray:
    """Returns runtime output as float64 (bf16 arrives as uint16 bits, FP8 as uint8 bits)."""
    if element_type == bf16:
        return (array.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if fmt := fp8_format(element_type):
        return fmt.decode(array)
    return array.astype(np.float64)


def relative_error(out: np.ndarray, ref: np.ndarray) -> float:
    """Returns ‖out − ref‖ / ‖ref‖; NaN anywhere in `out` gives NaN, which fails any bound."""
    scale = float(np.linalg.norm(ref))
    return float(np.linalg.norm(out - ref)) / (scale if scale > 0 else 1.0)


def element_type(t: Attribute) -> Attribute:
    """Returns the element type of a tensor or memref type."""
    assert isinstance(t, TensorType | MemRefType)
    return t.element_type


def graph_function(module: ModuleOp, name: str | None = None) -> func.FuncOp:
    """Returns the function `name`, or the module's first function with a body."""
    for op in module.ops:
        if isinstance(op, func.FuncOp) and op.body.blocks:
            if name is None or op.sym_name.data == name:
                return op
    if name is not None:  # `--func ''` said "the module has no function"
        raise KeyError("no function @" + (name or '""'))
    raise KeyError("the module has no function")


def scalar_values(graph: func.FuncOp, given: Sequence[str]) -> dict[int, int]:
    """Returns the values `NAME=VALUE` items give the runtime scalars of `graph` (the arguments
    named `%NAME`), by argument position, each checked against its bounds; raises ValueError
    naming the item and the problem."""
    scalars = runtime_scalars(graph)
    named = {arg.name_hint: arg for arg in scalars}
    values: dict[int, int] = {}
    for item in given:
        name, equals, text = item.partition("=")
        arg = named.get(name.removeprefix("%"))
        if not equals or arg is None:
            known = ", ".join(f"%{n}" for n in named) or "none"
            raise ValueError(
                f"--scalar {item}: expected NAME=VALUE naming a runtime scalar of "
                f"@{graph.sym_name.data} (it has {known})"
            )
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"--scalar {item}: {text!r} is not an integer") from None
        if arg.index in values:
            raise ValueError(f"--scalar {item}: %{arg.name_hint} is given twice")
        bounds = (scalars[arg].lo, scalars[arg].hi)
        values[arg.index] = check_value(describe(graph, arg), value, bounds)
    return values


def device_inputs(
    graph: func.FuncOp, seed: int, scalars: dict[int, int] | None = None
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Returns fresh random inputs for a graph function: (reference arrays, runtime arrays);
    the runtime scalars in `scalars` (by argument position) get those values."""
    inputs = random_inputs(graph, seed)
    for position, value in (scalars or {}).items():
        inputs[position] = np.array(value, inputs[position].dtype)
    types = [element_type(t) for t in graph.function_type.inputs]
    return inputs, [to_storage(a, t) for a, t in zip(inputs, types, strict=True)]


def errors_against_reference(
    graph: func.FuncOp, outputs: Sequence[np.ndarray], inputs: Sequence[np.ndarray]
) -> list[float]:
    """Returns the relative error of each runtime output against the float64 reference."""
    references = run_reference(graph, *inputs)
    types = [element_type(t) for t in graph.function_type.outputs]
    return [
        relative_error(from_storage(out, t), ref)
        for out, ref, t in zip(outputs, references, types, strict=True)
    ]


def tolerance(graph: func.FuncOp) -> float:
    """Returns the loosest tolerance among the function's output types."""
    return max(TOLERANCES[element_type(t)] for t in graph.function_type.outputs)
