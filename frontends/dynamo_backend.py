"""`torch.compile(model, backend="tinyopt")`: tinyopt as a Dynamo backend (needs the `torch` extra).

README.md ("torch.compile backend") shows the use. Dynamo hands `backend` each FX graph it
extracts, with the module's parameters and buffers lifted to graph inputs. The graph is compiled
on its first call, when real tensors are at hand: `capture` exports it to ATen with torch.export
and translates it, and `CompiledModel` lowers, compiles and runs it, binding the caller's
tensors on every call (the weights are graph inputs here, so they are bound at every call like
the other inputs). Dynamo guards every graph on
its input shapes, dtypes, devices, `requires_grad` and the grad mode, so what the first call
decides holds for every later one. A graph tinyopt cannot take (an op it cannot capture,
symbolic shapes, autograd, an output aliasing an input, no CUDA device) runs eagerly with one
warning naming why: compiling never raises, while errors of the user's own code, run eagerly,
propagate as usual.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from tinyopt.backends.cuda.nvrtc import gpu_available
from tinyopt.frontends.compiled_model import CompiledModel
from tinyopt.frontends.torch_fx import Capture, FrontendError, capture

if TYPE_CHECKING:
    import torch
    from torch.fx import GraphModule


class UnsupportedGraph(Exception):
    """A Dynamo graph tinyopt does not compile, beyond its ops; the message says why."""


def backend(gm: GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
    """Return the callable Dynamo runs in place of `gm` (compiled on its first call)."""
    return _GraphCall(gm)


def capture_graph(gm: GraphModule, inputs: Sequence[Any]) -> Capture:
    """Capture a Dynamo graph on `inputs` as tinyopt does before compiling it.

    Raises `UnsupportedGraph` for what tinyopt does not take beyond the ops (symbolic shapes,
    autograd, an output aliasing an input) and `FrontendError` for an op it cannot capture.
    """
    _check_graph(gm, inputs)
    return capture(gm, *_detached(inputs))


class _GraphCall:
    """One Dynamo graph: compiled by tinyopt on its first call, or run eagerly."""

    def __init__(self, gm: GraphModule):
        self.gm = gm
        self.run: Callable[..., Any] | None = None

    def __call__(self, *args: Any) -> Any:
        if self.run is None:
            self.run = self._build(args)
        return self.run(*args)

    def _build(self, args: Sequence[Any]) -> Callable[..., Any]:
        """Compile the graph for `args`, or warn once and return its eager forward."""
        try:
            return _compile(self.gm, args)
        except (UnsupportedGraph, FrontendError) as exc:
            reason = str(exc)
        except Exception as exc:  # the promise is eager fallback, whatever the compiler raised
            reason = f"{type(exc).__name__}: {exc}"
        warnings.warn(f"tinyopt backend: running this graph eagerly: {reason}")
        return self.gm.forward


def _compile(gm: GraphModule, args: Sequence[Any]) -> Callable[..., Any]:
    """Return tinyopt's compiled call of `gm` on inputs like `args`, in Dynamo's output form."""
    from torch.utils._pytree import tree_flatten, tree_unflatten

    _check_device(gm, args)
    _check_graph(gm, args)
    compiled = CompiledModel(gm, *_detached(args))
    _, structure = tree_flatten(gm.graph.output_node().args[0])

    def run(*inputs: Any) -> Any:
        results = compiled(*_detached(inputs))
        flat = list(results) if isinstance(results, tuple) else [results]
        return tree_unflatten(flat, structure)

    return run


def _check_device(gm: GraphModule, args: Sequence[Any]) -> None:
    """Raise `UnsupportedGraph` unless every input is on the current CUDA device (where the
    runtime loads the kernels), after capturing the graph: an op tinyopt cannot take is the more
    useful reason, so it is named first."""
    import torch

    devices = {a.device for a in args if isinstance(a, torch.Tensor)}
    if gpu_available() and {d.type for d in devices} == {"cuda"}:
        if devices == {torch.device("cuda", torch.cuda.current_device())}:
            return
    capture_graph(gm, args)
    if not gpu_available():
        raise UnsupportedGraph("no CUDA device")
    raise UnsupportedGraph(
        f"inputs on {sorted(map(str, devices))}, not all on the current CUDA device"
    )


def _detached(inputs: Sequence[Any]) -> list[torch.Tensor]:
    """Return the inputs as the contiguous, grad-free tensors the kernels bind."""
    return [x.detach().contiguous() for x in inputs]


def _check_graph(gm: GraphModule, inputs: Sequence[Any]) -> None:
    """Raise `UnsupportedGraph` unless `gm` is a static-shape inference graph of tensors."""
    import torch
    from torch.multiprocessing.reductions import StorageWeakRef
    from torch.utils._pytree import tree_leaves

    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for node, given in zip(placeholders, inputs, strict=True):
        val = node.meta.get("example_value")
        static = isinstance(val, torch.Tensor) and all(isinstance(d, int) for d in val.shape)
        if not static or not isinstance(given, torch.Tensor):
            raise UnsupportedGraph(
                f"graph input {node.name} is {val!r}, not a tensor of static shape (dynamic "
                "shapes: torch.compile(..., dynamic=False) compiles one graph per shape)"
            )
    if torch.is_grad_enabled() and any(x.requires_grad for x in inputs):
        raise UnsupportedGraph(
            "autograd: an input requires grad while grad mode is on (tinyopt compiles "
            "inference only; run under torch.no_grad() or torch.inference_mode())"
        )
    storages = {StorageWeakRef(n.meta["example_value"].untyped_storage()) for n in placeholders}
    for out in tree_leaves(gm.graph.output_node().args[0]):
        val = getattr(out, "meta", {}).get("example_value")
        if not isinstance(val, torch.Tensor):
            raise UnsupportedGraph(f"the graph returns {out!r}, not a tensor")
        storage = StorageWeakRef(val.untyped_storage())
        if storage in storages:
            raise UnsupportedGraph(
                f"output {out.name} aliases a graph input or another output "
                "(tinyopt returns new tensors)"
            )
        storages.add(storage)
