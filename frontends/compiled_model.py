"""A torch module compiled by tinyopt into a callable on CUDA tensors (needs the `torch` extra).

README.md ("Running a captured model on the GPU") describes it. With `graph=True` (the default)
a call copies the inputs into the bound input tensors, replays the kernels as one CUDA graph on
the current torch stream and returns copies of the outputs (the bound outputs are overwritten by
the next call); with `graph=False` it binds the caller's tensors and returns fresh outputs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tinyopt.backends.cuda.runtime import BoundCall, compile_module
from tinyopt.compiler import apply_pipeline
from tinyopt.frontends.torch_fx import capture

if TYPE_CHECKING:
    import torch

PIPELINE = "decompose,fuse,flash-attention,apply-tuned,tile,to-cuda"
"""Attention fused into one kernel, GEMMs on tensor cores where the tile rules can (mma=auto),
and each kernel the tuning cache holds for this GPU model with its tuned knobs."""


class CompiledModel:
    """A captured module bound to static CUDA buffers, run by replaying its kernels."""

    def __init__(
        self,
        module: torch.nn.Module,
        *example_inputs: torch.Tensor,
        pipeline: str = PIPELINE,
        graph: bool = True,
    ) -> None:
        import torch

        captured = capture(module, *example_inputs)
        lowered = apply_pipeline(captured.module.clone(), pipeline)
        self.function = compile_module(lowered, poison=False, sync=False).function(
            captured.function.sym_name.data
        )
        self.inputs = [torch.empty_like(x, device="cuda") for x in example_inputs]
        self.weights = [w.detach().to("cuda").contiguous() for w in captured.weights.values()]
        self.graph = graph
        if graph:  # static buffers and their graph; graph=False binds each call's tensors
            self.call: BoundCall = self.function.bind(*self.inputs, *self.weights)
            self.launch = self.call.graph()

    def __call__(self, *inputs: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        """Run the model on `inputs` (shapes and dtypes of the example inputs)."""
        if len(inputs) != len(self.inputs):
            raise TypeError(f"the model takes {len(self.inputs)} inputs, got {len(inputs)}")
        for bound, given in zip(self.inputs, inputs):
            if given.shape != bound.shape or given.dtype != bound.dtype:
                raise TypeError(
                    f"the model was compiled for {tuple(bound.shape)} {bound.dtype} inputs, "
                    f"got {tuple(given.shape)} {given.dtype}"
                )
        if not self.graph:
            return self.function(*inputs, *self.weights)
        for bound, given in zip(self.inputs, inputs):
            bound.copy_(given)
        self.launch()
        results = self.call.results()
        if isinstance(results, tuple):
            return tuple(r.clone() for r in results)
        return results.clone()
