"""Run modules produced by `to-cuda`: compile their kernels and execute their host functions."""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from cuda.core import Buffer, Stream
from xdsl.dialects import func, memref
from xdsl.dialects.builtin import (
    MemRefType,
    ModuleOp,
    UnregisteredOp,
)
from xdsl.ir import Operation, SSAValue

from tinyopt.backends.cuda.buffer_plan import Lifetime, plan
from tinyopt.backends.cuda.parallel_compile import compile_all
from tinyopt.backends.cuda.errors import CudaArgumentError, CudaModuleError
from tinyopt.backends.cuda.launch import (
    BoundLaunch,
    Kernel,
    PackedLaunch,
    allocate,
    context_pushed,
    current_context,
    current_device,
    device_pointer,
    download,
    poison,
    synchronize,
    upload,
)
from tinyopt.backends.cuda.nvrtc import default_arch
from tinyopt.compile_timer import phase
from tinyopt.dialects import tile
from tinyopt.dialects.runtime_scalar import check_value, describe, host_bounds, is_scalar_type

# element type -> (dtype name checked on arrays, numpy storage dtype: 16- and 8-bit floats as
# their bits); integers are the
# indices an embedding (graph.gather) reads or integer inputs, i1 the masks (C++ `bool`)
_ELEMENT_TYPES = {
    "f32": ("float32", np.dtype(np.float32)),
    "f16": ("float16", np.dtype(np.float16)),
    "bf16": ("bfloat16", np.dtype(np.uint16)),
    "f8E4M3FN": ("float8_e4m3fn", np.dtype(np.uint8)),
    "f8E5M2": ("float8_e5m2", np.dtype(np.uint8)),
    "i64": ("int64", np.dtype(np.int64)),
    "i32": ("int32", np.dtype(np.int32)),
    "i1": ("bool", np.dtype(np.bool_)),
}


def _op_name(op: Operation) -> str:
    """Return an op's name, also for ops parsed while their dialect was not loaded."""
    return op.op_name.data if isinstance(op, UnregisteredOp) else op.name


@dataclass(frozen=True)
class _BufferType:
    """The static shape and element type of a memref the host function handles."""

    shape: tuple[int, ...]
    dtype_name: str
    storage: np.dtype

    @property
    def nbytes(self) -> int:
        """Return the buffer size in bytes."""
        return int(np.prod(self.shape, dtype=np.int64)) * self.storage.itemsize

    def accepts(self, array: object) -> bool:
        """Return whether `array` has this shape and element type."""
        name = str(array.dtype).removeprefix("torch.")
        bits = {"bfloat16": "uint16", "float8_e4m3fn": "uint8", "float8_e5m2": "uint8"}
        names = {self.dtype_name, bits.get(self.dtype_name, self.dtype_name)}
        return tuple(array.shape) == self.shape and name in names

    def __str__(self) -> str:
        return f"{'x'.join(map(str, self.shape))} {self.dtype_name}"


def _buffer_type(value: SSAValue, where: str) -> _BufferType:
    """Return the buffer type of a memref value, rejecting what the runtime cannot hold."""
    memref_type = value.type
    if not (
        isinstance(memref_type, MemRefType) and str(memref_type.element_type) in _ELEMENT_TYPES
    ):
        raise CudaModuleError(
            f"{where}: expected a memref of f32, f16, bf16, f8E4M3FN, f8E5M2, i64, i32 or i1, "
            f"got {memref_type}"
        )
    shape = tuple(memref_type.get_shape())
    if any(d < 0 for d in shape):
        raise CudaModuleError(f"{where}: memref {memref_type} has a dynamic shape")
    return _BufferType(shape, *_ELEMENT_TYPES[str(memref_type.element_type)])


@dataclass(frozen=True)
class _ScalarType:
    """A runtime scalar argument: its C type's numpy dtype, its bounds and its name."""

    storage: np.dtype
    bounds: tuple[int, int]
    name: str

    def check(self, value: object) -> int:
        """Return the value given for the scalar, checked against its bounds."""
        return check_value(self.name, value, self.bounds)

    def __str__(self) -> str:
        return f"an integer in {self.bounds[0]}..{self.bounds[1]}"


def _param_type(function: func.FuncOp, position: int) -> _BufferType | _ScalarType:
    """Return the type of a host function's argument: a buffer, or a runtime scalar."""
    arg = function.args[position]
    bounds = host_bounds(function)
    where = f"@{function.sym_name.data} argument {position}"
    if is_scalar_type(arg.type):
        if position not in bounds:
            raise CudaModuleError(f"{where}: an integer argument needs its bounds (tinyopt.bounds)")
        storage = _ELEMENT_TYPES[str(arg.type)][1]
        return _ScalarType(storage, bounds[position], describe(function, arg))
    return _buffer_type(arg, where)


@dataclass(frozen=True)
class _Alloc:
    """Allocate a fresh buffer for `value`."""

    value: SSAValue
    type: _BufferType


@dataclass(frozen=True)
class _Launch:
    """Launch `kernel` on the buffers bound to `operands` (of `types`)."""

    kernel: Kernel
    operands: tuple[SSAValue, ...]
    types: tuple[_BufferType | _ScalarType, ...]

    def buffers(self) -> list[tuple[tuple[int, ...], str]]:
        """Each parameter's (shape, dtype name); a runtime scalar's is ((), its dtype)."""
        return [
            ((), t.storage.name) if isinstance(t, _ScalarType) else (t.shape, t.dtype_name)
            for t in self.types
        ]

    def scalars(self) -> dict[int, np.dtype]:
        """The runtime scalar parameters' C types, by position."""
        return {k: t.storage for k, t in enumerate(self.types) if isinstance(t, _ScalarType)}


class _NumpyFrame:
    """Buffers of one call whose arrays are numpy: inputs go to the device, results come back."""

    def __init__(self) -> None:
        self.stream: Stream = current_device().default_stream
        self.buffers: dict[SSAValue, Buffer] = {}

    def bind(self, value: SSAValue, array: np.ndarray) -> int:
        """Copy an input array to a fresh device buffer bound to `value`."""
        buffer = upload(np.ascontiguousarray(array), self.stream)
        self.buffers[value] = buffer
        return int(buffer.handle)

    def allocate(self, value: SSAValue, buffer_type: _BufferType) -> int:
        """Allocate a device buffer bound to `value`."""
        buffer = allocate(buffer_type.nbytes, self.stream)
        self.buffers[value] = buffer
        return int(buffer.handle)

    def arena(self, nbytes: int) -> int:
        """Allocate the bytes the intermediates share and return their address."""
        self.intermediates = allocate(nbytes, self.stream)
        return int(self.intermediates.handle)

    def results(self, values: tuple[SSAValue, ...], types: list[_BufferType]) -> list[object]:
        """Queue copies of the returned buffers into new numpy arrays (valid after a sync)."""
        arrays = [np.empty(t.shape, t.storage) for t in types]
        for value, array in zip(values, arrays):
            download(int(self.buffers[value].handle), array, self.stream)
        return arrays


class _DeviceFrame:
    """Buffers of one call whose arrays are torch or cupy CUDA arrays, used zero-copy."""

    def __init__(self, first: object) -> None:
        framework = type(first).__module__.split(".")[0]
        if framework not in ("torch", "cupy"):
            raise CudaArgumentError(
                f"host functions take numpy arrays or torch / cupy CUDA arrays, "
                f"got a {type(first).__name__}"
            )
        self.framework = importlib.import_module(framework)
        if framework == "torch":
            self.empty = functools.partial(self.framework.empty, device=first.device)
            handle = self.framework.cuda.current_stream(first.device).cuda_stream
        else:  # cupy allocates on its current device
            self.empty = self.framework.empty
            handle = self.framework.cuda.get_current_stream().ptr
        current_device()  # makes the device's context current before wrapping the stream
        self.stream = Stream.from_handle(handle)
        self.arrays: dict[SSAValue, object] = {}

    def bind(self, value: SSAValue, array: object) -> int:
        """Bind an input device array to `value` and return its address."""
        self.arrays[value] = array
        return device_pointer(array, self.stream)

    def allocate(self, value: SSAValue, buffer_type: _BufferType) -> int:
        """Allocate an array of the caller's framework bound to `value`."""
        if not hasattr(self.framework, buffer_type.dtype_name):
            raise CudaArgumentError(
                f"{self.framework.__name__} has no {buffer_type.dtype_name} arrays"
            )
        dtype = getattr(self.framework, buffer_type.dtype_name)
        return self.bind(value, self.empty(buffer_type.shape, dtype=dtype))

    def arena(self, nbytes: int) -> int:
        """Allocate the bytes the intermediates share (a uint8 array) and return their address."""
        self.intermediates = self.empty((nbytes,), dtype=self.framework.uint8)
        return device_pointer(self.intermediates, self.stream)

    def results(self, values: tuple[SSAValue, ...], types: list[_BufferType]) -> list[object]:
        """Return the arrays bound to the returned values."""
        return [self.arrays[value] for value in values]


@dataclass(frozen=True)
class BoundCall:
    """A host function with its arrays bound: buffers allocated and every kernel's parameters
    fixed once, so each call only queues the launches.

    Timing a bound call measures the kernels alone, without argument checks, host-device copies
    or allocations (numpy inputs are uploaded once, when binding).
    """

    function: HostFunction
    frame: _NumpyFrame | _DeviceFrame
    launches: list[BoundLaunch]

    def __call__(self) -> None:
        """Queue the function's kernels, in order, on the stream the arrays were bound on."""
        for launch in self.launches:
            launch(self.frame.stream)

    def results(self) -> object:
        """Return the result arrays the calls write (numpy: copied back, after waiting).

        Device arrays are returned without waiting: they are ordered on the bound stream.
        """
        function = self.function
        results = self.frame.results(function.returns, function.return_types)
        if isinstance(self.frame, _NumpyFrame):
            synchronize(self.frame.stream, f"@{function.name}")
        return results[0] if len(results) == 1 else tuple(results)

    def graph(self) -> Callable[[], None]:
        """Capture the launches into a CUDA graph; return a call that replays it on the stream.

        One graph launch replaces the host work of every kernel launch, which is what small,
        fast kernel sequences are bound by.
        """
        builder = current_device().create_graph_builder().begin_building()
        for launch in self.launches:
            launch(builder)
        graph = builder.end_building().complete()
        stream = self.frame.stream
        return lambda: graph.launch(stream)


class PackedCall:
    """A host function's launches with their parameters packed once (`HostFunction.pack`): a
    call writes the addresses of the buffers that change from call to call into each launch
    that uses them, then queues every launch. Nothing is checked, converted or allocated.

    The packed parameters are shared by all calls, so calls must not overlap (one thread at a
    time); the driver copies them when it queues a launch, so a queued launch never changes.
    A call given the addresses of the previous call (torch's caching allocator often hands
    the same blocks back) writes nothing. A runtime scalar given at each call is written the
    same way, as a value where a buffer has its address; it is checked against its bounds
    before anything is written.
    """

    def __init__(
        self,
        launches: list[PackedLaunch],
        uses: list[list[tuple[PackedLaunch, int]]],
        scalars: dict[int, _ScalarType] | None = None,
    ) -> None:
        self.launches = launches
        self.uses = uses  # per buffer given at each call: every (launch, parameter) using it
        self.scalars = scalars or {}  # the runtime scalars among them, by position
        self.context: int | None = None
        self._pointers: list[int] | None = None  # what every use points to, once all written

    def load(self) -> None:
        """Load every kernel, and take the context current now as the one they run in."""
        for launch in self.launches:
            launch.load()
        current_device()
        self.context = current_context()

    def repoint(self, pointers: Sequence[int]) -> None:
        """Make every launch use the buffers given at each call at `pointers` from now on."""
        if len(pointers) != len(self.uses):
            raise CudaArgumentError(
                f"the packed call takes {len(self.uses)} addresses, got {len(pointers)}"
            )
        for position, scalar in self.scalars.items():
            scalar.check(pointers[position])
        if pointers == self._pointers:
            return
        self._pointers = None  # until every use is written: a failure leaves nothing assumed
        for uses, pointer in zip(self.uses, pointers):
            for launch, position in uses:
                launch.repoint(position, pointer)
        self._pointers = list(pointers)

    def __call__(self, stream: int, pointers: Sequence[int]) -> None:
        """Repoint the buffers given at each call to `pointers` and queue the launches on the
        stream with handle `stream` (a stream of the loaded context).

        From a thread where another context (or none) is current, the loaded one is made
        current around the launches, so they run on the device the buffers are on.
        """
        self.repoint(pointers)
        if self.context is None:
            self.load()
        if current_context() == self.context:
            for launch in self.launches:
                launch(stream)
            return
        with context_pushed(self.context):
            for launch in self.launches:
                launch(stream)


class HostFunction:
    """A host function of a compiled module, callable on numpy, torch or cupy arrays.

    Intermediate buffers (allocated, not returned) share one arena: two of them take the same
    bytes when no launch uses both (see buffer_plan.py). With `poison` nothing is shared, so a
    kernel that reads what no kernel wrote reads NaN, not an earlier buffer's data.
    """

    def __init__(
        self, op: func.FuncOp, kernels: dict[str, Kernel], poison: bool, sync: bool
    ) -> None:
        self.name = op.sym_name.data
        self.poison = poison
        self.sync = sync
        block = op.body.block
        self.params = tuple(block.args)
        self.param_types = [_param_type(op, i) for i in range(len(block.args))]
        by_param = dict(zip(self.params, self.param_types))
        self.steps: list[_Alloc | _Launch] = []
        self.returns: tuple[SSAValue, ...] = ()
        views: dict[SSAValue, SSAValue] = {}  # a collapse_shape view -> the buffer it views
        for inner in block.ops:
            name = _op_name(inner)
            if isinstance(inner, memref.AllocOp):
                self.steps.append(_Alloc(inner.memref, _buffer_type(inner.memref, f"@{self.name}")))
            elif isinstance(inner, memref.CollapseShapeOp):
                views[inner.result] = views.get(inner.src, inner.src)
            elif name == "loop.launch":
                callee = inner.properties["callee"].root_reference.data
                if callee not in kernels:
                    raise CudaModuleError(f"@{self.name} launches @{callee}, which is no kernel")
                types = tuple(
                    by_param[v]
                    if isinstance(by_param.get(v), _ScalarType)
                    else _buffer_type(v, f"@{self.name}")
                    for v in inner.operands
                )
                buffers = tuple(views.get(v, v) for v in inner.operands)
                self.steps.append(_Launch(kernels[callee], buffers, types))
            elif isinstance(inner, func.ReturnOp):
                self.returns = tuple(inner.arguments)
                if any(v in views for v in self.returns):
                    raise CudaModuleError(f"@{self.name} returns a collapse_shape view")
            else:
                raise CudaModuleError(
                    f"@{self.name}: host functions may hold only memref.alloc, "
                    f"memref.collapse_shape, loop.launch and func.return, found {name}"
                )
        self.return_types = [_buffer_type(v, f"@{self.name} result") for v in self.returns]
        self.outputs = [s for s in self.steps if isinstance(s, _Alloc) and s.value in self.returns]
        self.offsets, self.arena_size = plan(self._lifetimes(), share=not poison)

    def _lifetimes(self) -> list[Lifetime]:
        """Return the steps from first to last use of each intermediate buffer."""
        lifetimes = []
        for index, step in enumerate(self.steps):
            if isinstance(step, _Alloc) and step.value not in self.returns:
                uses = [
                    i for i, s in enumerate(self.steps) if step.value in getattr(s, "operands", ())
                ]
                uses = uses or [index]
                lifetimes.append(Lifetime(step.value, step.type.nbytes, min(uses), max(uses)))
        return lifetimes

    def __call__(self, *arrays: object) -> object:
        """Run the function: one result is returned as is, several as a tuple.

        numpy arrays are copied to the device and results come back as numpy (bf16 as
        uint16); torch / cupy CUDA arrays are used in place and results are new arrays of
        the same framework, written on its current stream.
        """
        call = self.bind(*arrays)
        call()
        results = call.results()  # numpy results have waited for the device already
        if self.sync and isinstance(call.frame, _DeviceFrame):
            synchronize(call.frame.stream, f"@{self.name}")
        return results

    def bind(self, *arrays: object) -> BoundCall:
        """Check and bind the arrays, allocate (and poison) the buffers, fix every launch."""
        frame, pointers = self._prepare(arrays)
        launches = [
            step.kernel.bind([pointers[v] for v in step.operands], step.buffers(), step.scalars())
            for step in self.steps
            if isinstance(step, _Launch)
        ]
        return BoundCall(self, frame, launches)

    def pack(
        self, params: Sequence[int], outputs: Sequence[int], arena: int, per_call: int
    ) -> PackedCall:
        """Pack every launch for buffers at these device addresses: one per parameter, one per
        output (the allocations returned, in `outputs` order) and the `arena` of `arena_size`
        bytes where the intermediates live. The packed call takes, at each call, new addresses
        for the first `per_call` parameters and for every output, in that order; the other
        parameters and the intermediates stay where they were packed.

        The addresses must be 16-byte aligned C-contiguous buffers of the parameters' types;
        packing checks their number and that each is a non-negative integer. A runtime scalar
        parameter takes its value in place of an address, checked against its bounds here and
        at each call (`PackedCall`): the packed launches pass it by value, so a call (or a CUDA
        graph's replay) takes the value of that call, with no device buffer.
        """
        if len(params) != len(self.params) or len(outputs) != len(self.outputs):
            raise CudaArgumentError(
                f"@{self.name} packs {len(self.params)} parameters and {len(self.outputs)} "
                f"outputs, got {len(params)} and {len(outputs)}"
            )
        if not (hasattr(per_call, "__index__") and 0 <= per_call <= len(self.params)):
            raise CudaArgumentError(
                f"@{self.name}: per_call must be an integer in [0, {len(self.params)}] (how many "
                f"of its {len(self.params)} parameters are given at each call), got {per_call!r}"
            )
        params = [
            t.check(p) if isinstance(t, _ScalarType) else p
            for p, t in zip(params, self.param_types)
        ]
        addresses = [
            (f"parameter {i}", p)
            for i, (p, t) in enumerate(zip(params, self.param_types))
            if not isinstance(t, _ScalarType)
        ]
        addresses += [(f"output {i}", p) for i, p in enumerate(outputs)]
        for what, address in [*addresses, ("the arena", arena)]:
            if isinstance(address, bool) or not hasattr(address, "__index__") or address < 0:
                raise CudaArgumentError(
                    f"@{self.name}: {what} must be a device address (a non-negative integer), "
                    f"got {address!r}"
                )
        pointers = dict(zip(self.params, params))
        pointers.update((s.value, p) for s, p in zip(self.outputs, outputs))
        pointers.update((value, arena + offset) for value, offset in self.offsets.items())
        given = [*self.params[:per_call], *(s.value for s in self.outputs)]
        uses: dict[SSAValue, list[tuple[PackedLaunch, int]]] = {v: [] for v in given}
        launches = []
        for step in self.steps:
            if isinstance(step, _Launch):
                launch = PackedLaunch(
                    step.kernel, [pointers[v] for v in step.operands], step.buffers()
                )
                launches.append(launch)
                for position, value in enumerate(step.operands):
                    if value in uses:
                        uses[value].append((launch, position))
        scalars = {
            position: t
            for position, t in enumerate(self.param_types[:per_call])
            if isinstance(t, _ScalarType)
        }
        return PackedCall(launches, [uses[v] for v in given], scalars)

    def _prepare(
        self, arrays: tuple[object, ...]
    ) -> tuple[_NumpyFrame | _DeviceFrame, dict[SSAValue, int]]:
        """Checks the arrays, binds them, and allocates (and poisons) the function's buffers."""
        arrays = tuple(np.asarray(a) if isinstance(a, np.generic) else a for a in arrays)
        if len(arrays) != len(self.params):
            raise CudaArgumentError(
                f"@{self.name} takes {len(self.params)} arrays, got {len(arrays)}"
            )
        scalars: dict[SSAValue, int] = {}
        for i, (array, expected) in enumerate(zip(arrays, self.param_types)):
            if isinstance(expected, _ScalarType):
                scalars[self.params[i]] = expected.check(array)
                continue
            shaped = hasattr(array, "shape")
            if not shaped or not expected.accepts(array):
                got = f"{tuple(array.shape)} {array.dtype}" if shaped else type(array).__name__
                raise CudaArgumentError(f"@{self.name} argument {i} must be {expected}, got {got}")
        given = [(v, a) for v, a in zip(self.params, arrays) if v not in scalars]
        host = all(isinstance(a, np.ndarray) for _, a in given)
        if not host and any(isinstance(a, np.ndarray) for _, a in given):
            raise CudaArgumentError(f"@{self.name} got numpy and device arrays mixed")
        frame = _NumpyFrame() if host else _DeviceFrame(given[0][1])
        pointers = {v: frame.bind(v, a) for v, a in given}
        pointers.update(scalars)
        fresh = [(frame.allocate(s.value, s.type), s.type.nbytes) for s in self.outputs]
        pointers.update((s.value, p) for s, (p, _) in zip(self.outputs, fresh))
        if self.arena_size:
            base = frame.arena(self.arena_size)
            pointers.update((value, base + offset) for value, offset in self.offsets.items())
            fresh.append((base, self.arena_size))
        if self.poison:
            for pointer, nbytes in fresh:
                poison(pointer, nbytes, frame.stream)
        return frame, pointers


@dataclass(frozen=True)
class CompiledModule:
    """The kernels of a `to-cuda` module compiled to cubins, and its runnable host functions."""

    kernels: dict[str, Kernel]
    functions: dict[str, HostFunction]

    def function(self, name: str) -> HostFunction:
        """Return the host function `name` as a Python callable."""
        if name not in self.functions:
            raise CudaModuleError(
                f"no host function @{name}; the module has {sorted(self.functions)}"
            )
        return self.functions[name]

    __getitem__ = function


PDL_SM = 90
"""`griddepcontrol` (programmatic dependent launch) exists from sm_90 (Hopper) on."""


def _sm_version(arch: str) -> int:
    """Return the number of an NVRTC architecture: 90 for "sm_90a", 80 for "compute_80"."""
    digits = re.search(r"\d+", arch)
    if digits is None:
        raise CudaModuleError(f"cannot read the architecture {arch!r} (expected e.g. sm_90a)")
    return int(digits.group())


def compile_module(
    module: ModuleOp,
    arch: str | None = None,
    poison: bool = True,
    sync: bool = True,
    cubins: Mapping[str, bytes] | None = None,
) -> CompiledModule:
    """Compile every `tile.cuda_kernel` of `module` with NVRTC and prepare its host functions.

    `arch` defaults to the current GPU's, or sm_90a where there is none; compiling needs
    no GPU, running does. With `poison`, every buffer a call allocates is filled with NaN
    first, so unwritten outputs show. With `sync`, calls on device arrays wait for the
    device so faults surface at the call that caused them (numpy calls always wait). A kernel
    marked `pdl` (`to-cuda{pdl=1}`, the default) is launched with programmatic dependent launch
    on sm_90 or newer, as any other below. Kernels named in `cubins` take that
    cubin (the build cache's); the others are compiled together (`compile_all`: from the cubin
    cache, else NVRTC in parallel processes).
    """
    arch = arch or default_arch()
    kernels: dict[str, Kernel] = {}
    sources: dict[str, str] = {}
    host_ops: list[func.FuncOp] = []
    for op in module.ops:
        name = _op_name(op)
        if name == "tile.cuda_kernel":
            props = op.properties
            symbol = props["sym_name"].data
            # Below sm_90 the printed griddepcontrol compiles to nothing and the kernel is
            # launched as any other.
            pdl = "pdl" in props and _sm_version(arch) >= PDL_SM
            grid, block = props["grid"].get_values(), props["block"].get_values()
            maps = {
                spec.arg: (spec.box, spec.swizzle, spec.l2_promotion)
                for spec in tile.tensor_maps(op)
            }
            smem = props["smem"].value.data
            kernels[symbol] = Kernel(b"", symbol, grid, block, smem, maps, pdl)
            sources[symbol] = props["source"].data
        elif isinstance(op, func.FuncOp):
            host_ops.append(op)
        else:
            raise CudaModuleError(
                f"a to-cuda module holds only tile.cuda_kernel and func.func ops, found {name}"
            )
    given = cubins or {}
    missing = [name for name in sources if name not in given]
    with phase("nvrtc"):
        compiled = compile_all([(sources[name], name) for name in missing], arch) if missing else []
    for name, cubin in (*given.items(), *zip(missing, compiled)):
        if name in kernels:
            kernels[name].cubin = cubin
    functions = {op.sym_name.data: HostFunction(op, kernels, poison, sync) for op in host_ops}
    return CompiledModule(kernels, functions)
