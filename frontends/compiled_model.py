"""A torch module compiled by tinyopt into a callable on CUDA tensors (needs the `torch` extra).

README.md ("Running a captured model on the GPU") describes it. Everything that does not
depend on a call's tensors is done once: the weights go to the GPU, the intermediates get one
arena, and every launch's parameters are packed (`HostFunction.pack`). A call checks its
inputs, allocates fresh outputs with torch's caching allocator, writes the inputs' and
outputs' addresses into the packed parameters and queues the kernels on torch's current
stream: no copy, no CUDA graph, a few microseconds of Python.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tinyopt.backends.cuda.nvrtc import default_arch
from tinyopt.backends.cuda.runtime import CompiledModule, HostFunction, PackedCall
from tinyopt.build_cache import build
from tinyopt.compile_timer import phase, requested, timing
from tinyopt.compiler import apply_pipeline
from tinyopt.frontends.module_fingerprint import fingerprint, named_tensors
from tinyopt.frontends.torch_fx import capture

if TYPE_CHECKING:
    import torch
    from xdsl.dialects.builtin import ModuleOp

PIPELINE = "decompose,fuse,flash-attention,apply-tuned,tile,to-cuda"
"""Attention fused into one kernel, GEMMs on tensor cores where the tile rules can (mma=auto),
and each kernel the tuning cache holds for this GPU model with its tuned knobs."""

ALIGNMENT = 16
"""Bytes every buffer's address is a multiple of: kernels access memory in 16-byte vectors and
TMA needs 16-byte aligned tensors."""


@dataclass(frozen=True)
class InputSignature:
    """The tensors a compiled model takes: their shapes and dtypes, and the device.

    The kernels read the caller's tensors where they are, so an input must also be
    C-contiguous and start at a 16-byte aligned address. Nothing is copied or made contiguous
    behind the caller's back: any other input is a TypeError naming it and what is wrong.
    """

    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[torch.dtype, ...]
    device: torch.device
    tensor: type  # torch.Tensor, kept here as torch is imported lazily

    @classmethod
    def of(cls, examples: Sequence[torch.Tensor], device: torch.device) -> InputSignature:
        """Return the signature of tensors like `examples` on `device`."""
        import torch

        shapes = tuple(tuple(x.shape) for x in examples)
        return cls(shapes, tuple(x.dtype for x in examples), device, torch.Tensor)

    def addresses(self, inputs: Sequence[object]) -> list[int]:
        """Check `inputs` and return their device addresses."""
        if len(inputs) != len(self.shapes):
            raise TypeError(f"the model takes {len(self.shapes)} inputs, got {len(inputs)}")
        addresses = []
        for given, shape, dtype in zip(inputs, self.shapes, self.dtypes):
            if not (
                isinstance(given, self.tensor)
                and given.shape == shape
                and given.dtype == dtype
                and given.device == self.device
                and given.is_contiguous()
            ):
                index = len(addresses)
                raise TypeError(f"input {index}: {self._mismatch(given, shape, dtype)}")
            address = given.data_ptr()
            if address % ALIGNMENT:
                raise TypeError(
                    f"input {len(addresses)} starts at an address that is not {ALIGNMENT}-byte "
                    "aligned (a view at an offset?); the kernels need aligned tensors: pass a "
                    "clone()"
                )
            addresses.append(address)
        return addresses

    def _mismatch(self, given: object, shape: tuple[int, ...], dtype: torch.dtype) -> str:
        """Say how `given` differs from a tensor of `shape` and `dtype` on the device."""
        if not isinstance(given, self.tensor):
            return f"expected a tensor, got a {type(given).__name__}"
        if given.shape != shape or given.dtype != dtype:
            return (
                f"the model was compiled for {shape} {dtype}, "
                f"got {tuple(given.shape)} {given.dtype}"
            )
        if given.device != self.device:
            return f"the model runs on {self.device}, the tensor is on {given.device}"
        return (
            f"the tensor of strides {given.stride()} is not contiguous; the kernels read "
            "C-contiguous tensors: pass x.contiguous()"
        )


class CompiledModel:
    """A captured module run by tinyopt's kernels on the caller's tensors, weights bound once.

    Inputs are checked by `InputSignature` (shapes and dtypes of the example inputs, on the
    current CUDA device when the model was built). Every call returns new output tensors, so a
    result the caller holds is never overwritten by a later call.

    The intermediates of all calls share one arena, so calls must not overlap: calls on one
    stream are ordered by it, and a call on another stream than the previous call's first
    makes its stream wait for that one. A lock keeps threads from interleaving calls (the
    packed parameters are shared too).
    """

    def __init__(
        self,
        module: torch.nn.Module,
        *example_inputs: torch.Tensor,
        pipeline: str = PIPELINE,
        time_passes: bool = False,
    ) -> None:
        with timing(requested(time_passes)):
            self._build(module, example_inputs, pipeline)

    def _build(
        self, module: torch.nn.Module, example_inputs: Sequence[torch.Tensor], pipeline: str
    ) -> None:
        """Capture, lower and compile `module`, bind its weights and pack its launches."""
        import torch

        compiled, name, weights = build_kernels(
            module, example_inputs, pipeline, poison=False, sync=False
        )
        self.function = compiled.function(name)
        self.device = torch.device("cuda", torch.cuda.current_device())
        self._device_index = self.device.index
        self.signature = InputSignature.of(example_inputs, self.device)
        self.weights = [_aligned(w.detach().to(self.device)) for w in weights]
        self._output_templates = [
            output_template(s.type.shape, getattr(torch, s.type.dtype_name), self.device)
            for s in self.function.outputs
        ]
        self._empty_like = torch.empty_like
        self._contiguous = torch.contiguous_format
        self._arena = torch.empty(self.function.arena_size, dtype=torch.uint8, device=self.device)
        examples = [_aligned(x.detach().to(self.device)) for x in example_inputs]
        self.call: PackedCall = self.function.pack(
            [t.data_ptr() for t in (*examples, *self.weights)],
            [t.data_ptr() for t in self._allocate_outputs()],
            self._arena.data_ptr(),
            per_call=len(examples),
        )
        with phase("load"):
            self.call.load()
        self._returns = _sources(self.function, len(examples))
        self._returns_first_output = self._returns == [(0, 0)]
        self._stream = torch.cuda.current_stream(self.device)
        self._stream_handle = self._stream.cuda_stream
        # torch's own launchers read the current stream's handle this way (no Stream object)
        self._current_stream_handle = torch._C._cuda_getCurrentRawStream
        self._lock = threading.Lock()

    def __call__(self, *inputs: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        """Run the model on `inputs`; return its output (a tuple when it has several)."""
        addresses = self.signature.addresses(inputs)
        outputs = self._allocate_outputs()
        for output in outputs:
            addresses.append(output.data_ptr())
        stream = self._current_stream_handle(self._device_index)
        with self._lock:
            if stream != self._stream_handle:
                self._follow_previous_stream()
            self.call(stream, addresses)
        if self._returns_first_output:
            return outputs[0]
        pools = (outputs, inputs, self.weights)
        results = tuple(pools[pool][index] for pool, index in self._returns)
        return results[0] if len(results) == 1 else results

    def _allocate_outputs(self) -> list[torch.Tensor]:
        """Return fresh C-contiguous tensors for the function's outputs."""
        empty_like, contiguous = self._empty_like, self._contiguous
        return [empty_like(t, memory_format=contiguous) for t in self._output_templates]

    def _follow_previous_stream(self) -> None:
        """Order the current stream after the previous call's stream, which may still run
        kernels using the arena, and keep the arena and the weights from being reused by
        torch's allocator before the current stream is done with them."""
        import torch

        current = torch.cuda.current_stream(self.device)
        current.wait_stream(self._stream)
        for tensor in (self._arena, *self.weights):
            if tensor.numel():
                tensor.record_stream(current)
        self._stream, self._stream_handle = current, current.cuda_stream


def build_kernels(
    module: torch.nn.Module,
    example_inputs: Sequence[torch.Tensor],
    pipeline: str = PIPELINE,
    poison: bool = True,
    sync: bool = True,
) -> tuple[CompiledModule, str, list[torch.Tensor]]:
    """Capture `module` on `example_inputs`, lower it and compile its kernels, or take them from
    the build cache (no GPU needed); return the compiled module, its function's name and the
    weights its trailing arguments take, in order."""
    weights: list[torch.Tensor] = []

    def lower() -> tuple[ModuleOp, dict[str, object], bool]:
        with phase("capture"):
            captured = capture(module, *example_inputs)
        weights.extend(captured.weights.values())
        lowered = apply_pipeline(captured.module.clone(), pipeline)
        names = list(captured.weights)
        extra = {"function": captured.function.sym_name.data, "weights": names}
        # a tensor the program itself made (a lifted constant) is not the module's to look up
        return lowered, extra, set(names) <= set(named_tensors(module))

    compiled, extra, cached = build(
        lambda: fingerprint(module, example_inputs), pipeline, default_arch(), lower, poison, sync
    )
    if cached:
        tensors = named_tensors(module)
        weights = [tensors[name] for name in extra["weights"]]  # type: ignore[union-attr]
    return compiled, str(extra["function"]), weights


def output_template(
    shape: tuple[int, ...], dtype: torch.dtype, device: torch.device
) -> torch.Tensor:
    """Return a one-element tensor expanded to `shape`, from which
    `torch.empty_like(template, memory_format=torch.contiguous_format)` makes a fresh
    C-contiguous tensor of `shape`, `dtype` and `device` at each call: it parses one tensor,
    not a shape, a dtype and a device (with a full-size template, about 2 us less than
    torch.empty on the H200's host, 2026-12-02)."""
    import torch

    return torch.empty((1,) * len(shape), dtype=dtype, device=device).expand(shape)


def _aligned(tensor: torch.Tensor) -> torch.Tensor:
    """Return `tensor` as a C-contiguous tensor at an aligned address (a copy if needed)."""
    tensor = tensor.contiguous()
    return tensor if tensor.data_ptr() % ALIGNMENT == 0 else tensor.clone()


def _sources(function: HostFunction, inputs: int) -> list[tuple[int, int]]:
    """Return where each result of `function` comes from, as (pool, index): pool 0 is the
    fresh outputs, 1 the inputs and 2 the weights (a function may return an argument)."""
    outputs = [s.value for s in function.outputs]
    sources = []
    for value in function.returns:
        if value in outputs:
            sources.append((0, outputs.index(value)))
        else:
            position = function.params.index(value)
            sources.append((1, position) if position < inputs else (2, position - inputs))
    return sources
