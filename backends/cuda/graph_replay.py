"""A packed call recorded once as a CUDA graph and replayed, its runtime scalars (positions,
lengths) and buffer addresses updated at each replay (docs/ir.md, "Runtime scalars").

The graph holds one kernel node per launch of the `PackedCall`, each depending on the one
before. The edge into a kernel marked `pdl` is programmatic: it leaves the upstream kernel's
programmatic port, which fires once each of its blocks has run
`griddepcontrol.launch_dependents` or exited, so the kernel's blocks are launched while the
upstream kernel drains and wait for it at their `griddepcontrol.wait`, as a direct launch with
programmatic stream serialization does.

A replay writes the values given for this call into the packed parameters as a call would
(`PackedCall.repoint`, which checks each runtime scalar against its bounds first: a position
out of range raises before anything is queued), then gives every node whose parameters
changed its new ones with `cuGraphExecKernelNodeSetParams` (the driver copies them; replays
already queued keep theirs) and launches the graph. A decode step's position thus changes
from one replay to the next with no recompilation and no device buffer read by every thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cuda.bindings import driver

from tinyopt.backends.cuda.errors import CudaArgumentError, CudaLaunchError
from tinyopt.backends.cuda.launch import PackedLaunch, check_aligned
from tinyopt.backends.cuda.runtime import HostFunction, PackedCall


def _checked(result: tuple, what: str) -> object:
    """Return the value of a driver call's result, raising `CudaLaunchError` on failure."""
    if result[0] != driver.CUresult.CUDA_SUCCESS:
        raise CudaLaunchError(f"{what} failed: {result[0].name}")
    return result[1] if len(result) > 1 else None


def _edge(programmatic: bool) -> driver.CUgraphEdgeData:
    """The edge into a kernel node: full completion and visibility of the node before, or,
    into a kernel marked `pdl`, the before node's programmatic port."""
    edge = driver.CUgraphEdgeData()
    if programmatic:
        edge.from_port = driver.CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC
        edge.type = driver.CUgraphDependencyType.CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC
    return edge


class GraphReplay:
    """The launches of `call` as one executable CUDA graph; call it like the packed call."""

    def __init__(self, call: PackedCall) -> None:
        self.call = call
        if call.context is None:
            call.load()
        graph = _checked(driver.cuGraphCreate(0), "cuGraphCreate")
        self.nodes: dict[PackedLaunch, object] = {}
        previous: list[object] = []
        for launch in call.launches:
            node = _checked(
                driver.cuGraphAddKernelNode(graph, [], 0, launch.node_params()),
                f"adding kernel '{launch.name}' to a CUDA graph",
            )
            if previous:
                _checked(
                    driver.cuGraphAddDependencies(
                        graph, previous, [node], [_edge(launch.kernel.pdl)], 1
                    ),
                    f"making kernel '{launch.name}' depend on the one before in a CUDA graph",
                )
            self.nodes[launch] = node
            previous = [node]
        self.graph = graph
        self.executable = _checked(driver.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")

    def __call__(self, stream: int, values: Sequence[int]) -> None:
        """Replay the graph on the stream with handle `stream` (of the loaded context), with
        `values`: what the packed call takes at each call, the buffers' addresses and the
        runtime scalars' values."""
        changed = self._changed(values)
        self.call.repoint(values)
        for launch in changed:
            _checked(
                driver.cuGraphExecKernelNodeSetParams(
                    self.executable, self.nodes[launch], launch.node_params()
                ),
                f"updating kernel '{launch.name}' in a CUDA graph",
            )
        _checked(driver.cuGraphLaunch(self.executable, stream), "cuGraphLaunch")

    def _changed(self, values: Sequence[int]) -> list[PackedLaunch]:
        """The launches a parameter of which `values` changes, in launch order."""
        touched = {
            launch
            for uses, value in zip(self.call.uses, values)
            for launch, position in uses
            if launch.pointer(position) != value
        }
        return [launch for launch in self.call.launches if launch in touched]

    def __del__(self) -> None:
        for destroy, handle in (
            (driver.cuGraphExecDestroy, getattr(self, "executable", None)),
            (driver.cuGraphDestroy, getattr(self, "graph", None)),
        ):
            if handle is not None:
                destroy(handle)


class BoundReplay:
    """A host function bound once to torch CUDA tensors and replayed as one CUDA graph: a
    decode step whose weights and caches stay where they are while its position and its
    input tokens change from one replay to the next.

    `arrays` gives every argument (a runtime scalar as an int: its value at the first call).
    At each call, the first `per_call` arguments take new values (runtime scalars as ints,
    buffers as tensors of their type), checked as a packed call checks them (scalars against
    their bounds); the others stay bound, and the function's in-place results (its caches)
    are written into them. Each result the function allocates is written into a tensor
    given at the call (`outputs`), or into the one allocated here (`self.outputs`).
    Calls are queued on torch's current stream without waiting.
    """

    def __init__(self, function: HostFunction, arrays: Sequence[object], per_call: int) -> None:
        import torch

        self.function = function
        self.per_call = per_call
        if len(arrays) != len(function.params):
            raise CudaArgumentError(
                f"@{function.name} takes {len(function.params)} arguments, got {len(arrays)}"
            )
        self._arrays = list(arrays)  # keeps the bound tensors alive
        self.outputs = [
            torch.empty(s.type.shape, dtype=getattr(torch, s.type.dtype_name), device="cuda")
            for s in function.outputs
        ]
        self._arena = torch.empty(max(function.arena_size, 16), dtype=torch.uint8, device="cuda")
        params = [self._address(i, a) for i, a in enumerate(arrays)]
        outputs = [t.data_ptr() for t in self.outputs]
        call = function.pack(params, outputs, self._arena.data_ptr(), per_call)
        self.replay = GraphReplay(call)

    def _address(self, position: int, array: object) -> int:
        """The value a packed call takes for argument `position`: an int for a runtime
        scalar, a checked tensor's address for a buffer."""
        expected = self.function.param_types[position]
        if not hasattr(expected, "accepts"):
            return int(array)  # type: ignore[arg-type]
        tensor: Any = array
        if not (expected.accepts(tensor) and tensor.is_cuda and tensor.is_contiguous()):
            shaped = hasattr(tensor, "shape")
            got = f"{tuple(tensor.shape)} {tensor.dtype}" if shaped else type(tensor).__name__
            raise CudaArgumentError(
                f"@{self.function.name} argument {position} must be a contiguous CUDA tensor "
                f"of {expected}, got {got}"
            )
        check_aligned(tensor.data_ptr(), f"{type(tensor).__name__} for argument {position}")
        return tensor.data_ptr()

    def __call__(self, *values: object, outputs: Sequence[object] | None = None) -> None:
        """Replay with the first `per_call` arguments `values` and results into `outputs`."""
        import torch

        if len(values) != self.per_call:
            raise CudaArgumentError(
                f"the replay of @{self.function.name} takes {self.per_call} values, "
                f"got {len(values)}"
            )
        targets = self.outputs if outputs is None else list(outputs)
        if len(targets) != len(self.outputs):
            raise CudaArgumentError(
                f"@{self.function.name} has {len(self.outputs)} results, got {len(targets)}"
            )
        for target, own in zip(targets, self.outputs):
            if target is not own and not (
                isinstance(target, torch.Tensor)
                and target.shape == own.shape
                and target.dtype == own.dtype
                and target.is_cuda
                and target.is_contiguous()
            ):
                raise CudaArgumentError(
                    f"@{self.function.name}: a result tensor must be contiguous "
                    f"{tuple(own.shape)} {own.dtype} on the GPU"
                )
        given = [self._address(i, v) for i, v in enumerate(values)]
        for k, target in enumerate(targets):
            check_aligned(target.data_ptr(), f"result tensor {k}")  # type: ignore[attr-defined]
        given += [t.data_ptr() for t in targets]  # type: ignore[attr-defined]
        self.replay(torch.cuda.current_stream().cuda_stream, given)
