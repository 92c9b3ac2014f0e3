"""A packed call recorded once as a CUDA graph and replayed, its runtime scalars (positions,
lengths) and buffer addresses updated at each replay (docs/ir.md, "Runtime scalars").

The graph holds one kernel node per launch of the `PackedCall`, each depending on the one
before (kernels marked `pdl` run fully serialized here: an edge of a graph built node by node
has no programmatic serialization; `griddepcontrol` then waits for nothing). A replay writes
the values given for this call into the packed parameters as a call would (`PackedCall.repoint`,
which checks each runtime scalar against its bounds first: a position out of range raises
before anything is queued), then gives every node whose parameters changed its new ones with
`cuGraphExecKernelNodeSetParams` (the driver copies them; replays already queued keep theirs)
and launches the graph. A decode step's position thus changes from one replay to the next
with no recompilation and no device buffer read by every thread.
"""

from __future__ import annotations

from collections.abc import Sequence

from cuda.bindings import driver

from tinyopt.backends.cuda.errors import CudaLaunchError
from tinyopt.backends.cuda.launch import PackedLaunch
from tinyopt.backends.cuda.runtime import PackedCall


def _checked(result: tuple, what: str) -> object:
    """Return the value of a driver call's result, raising `CudaLaunchError` on failure."""
    if result[0] != driver.CUresult.CUDA_SUCCESS:
        raise CudaLaunchError(f"{what} failed: {result[0].name}")
    return result[1] if len(result) > 1 else None


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
                driver.cuGraphAddKernelNode(
                    graph, previous, len(previous), launch.node_params()
                ),
                f"adding kernel '{launch.name}' to a CUDA graph",
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
