"""Load cubins and launch their kernels on arrays: with cuda.core, or from parameters packed once
into host memory, with the driver API (`PackedLaunch`, the per-call path of `CompiledModel`)."""

import contextlib
import ctypes
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
from cuda.bindings import driver
from cuda.core import Buffer, Device, LaunchConfig, ObjectCode, Stream, TensorMapDescriptor, launch
from cuda.core import Kernel as CoreKernel
from cuda.core._tensor_map import TensorMapDataType, TensorMapL2Promotion, TensorMapSwizzle
from cuda.core.graph import GraphBuilder
from cuda.core.utils import StridedMemoryView

from tinyopt.backends.cuda.errors import (
    CudaArgumentError,
    CudaLaunchError,
    CudaUnavailableError,
)
from tinyopt.backends.cuda.nvrtc import gpu_available

STATIC_SMEM_LIMIT = 48 * 1024
_MAX_DYNAMIC_SMEM = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
POISON_BYTE = 0xFF  # every float format reads 0xFF.. bytes as NaN
_Map = TypeVar("_Map")


def current_device() -> Device:
    """Return the current CUDA device, made current on this thread."""
    if not gpu_available():
        raise CudaUnavailableError("no CUDA GPU is available to run kernels on")
    device = Device()
    device.set_current()
    return device


def _check_driver(result: tuple, what: str) -> None:
    """Raise `CudaLaunchError` when a cuda.bindings.driver call did not succeed."""
    if result[0] != driver.CUresult.CUDA_SUCCESS:
        raise CudaLaunchError(f"{what} failed: {result[0].name}")


def current_context() -> int:
    """Return the handle of the CUDA context current on this thread (0 when there is none)."""
    result = driver.cuCtxGetCurrent()
    _check_driver(result, "cuCtxGetCurrent")
    return int(result[1])


@contextlib.contextmanager
def context_pushed(context: int) -> Iterator[None]:
    """Make `context` current on this thread inside the block, then restore the previous one."""
    _check_driver(driver.cuCtxPushCurrent(driver.CUcontext(context)), "cuCtxPushCurrent")
    try:
        yield
    finally:
        _check_driver(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")


def allocate(nbytes: int, stream: Stream) -> Buffer:
    """Allocate `nbytes` of device memory, ordered on `stream`."""
    return current_device().allocate(nbytes, stream=stream)


def poison(pointer: int, nbytes: int, stream: Stream) -> None:
    """Fill `nbytes` at device `pointer` with 0xFF bytes (NaN in f32, f16 and bf16)."""
    _check_driver(
        driver.cuMemsetD8Async(pointer, POISON_BYTE, nbytes, stream.handle), "cuMemsetD8Async"
    )


def upload(array: np.ndarray, stream: Stream) -> Buffer:
    """Copy a C-contiguous numpy array into a fresh device buffer, ordered on `stream`."""
    buffer = allocate(array.nbytes, stream)
    _check_driver(
        driver.cuMemcpyHtoDAsync(
            int(buffer.handle), array.ctypes.data, array.nbytes, stream.handle
        ),
        "cuMemcpyHtoDAsync",
    )
    return buffer


def download(pointer: int, out: np.ndarray, stream: Stream) -> None:
    """Copy `out.nbytes` from device `pointer` into the C-contiguous numpy array `out`.

    The copy is ordered on `stream`; `out` holds the data once the stream is synchronized.
    """
    _check_driver(
        driver.cuMemcpyDtoHAsync(out.ctypes.data, pointer, out.nbytes, stream.handle),
        "cuMemcpyDtoHAsync",
    )


def device_pointer(array: object, stream: Stream) -> int:
    """Return the device address of a C-contiguous DLPack / CUDA-array-interface array.

    Nothing is copied: torch and cupy CUDA tensors pass through as they are, and work
    queued on `stream` is ordered after the producer's stream.
    """
    if str(getattr(array, "dtype", "")).startswith("torch.float8"):  # DLPack may lack FP8
        import torch

        array = array.view(torch.uint8)  # type: ignore[attr-defined]
    try:
        view = StridedMemoryView.from_any_interface(array, stream_ptr=int(stream.handle))
    except BufferError as exc:
        raise CudaArgumentError(
            f"a {type(array).__name__} is neither a numpy array nor a device array "
            "(DLPack or __cuda_array_interface__)"
        ) from exc
    if not view.is_device_accessible:
        raise CudaArgumentError(f"a {type(array).__name__} on the host is not a device array")
    contiguous = np.cumprod((1,) + view.shape[:0:-1])[::-1] if view.shape else ()
    if view.strides is not None and tuple(view.strides) != tuple(contiguous):
        raise CudaArgumentError(
            f"a {type(array).__name__} of shape {view.shape} has strides {view.strides}; "
            "kernels need C-contiguous arrays"
        )
    check_aligned(view.ptr, type(array).__name__)
    return view.ptr


BUFFER_ALIGNMENT = 16
"""The alignment every buffer's address must have: kernels read and write 16-byte vectors and
TMA copies from the start of a buffer."""


def check_aligned(address: int, what: str) -> None:
    """Raise `CudaArgumentError` unless `address` is `BUFFER_ALIGNMENT`-byte aligned."""
    if address % BUFFER_ALIGNMENT:
        raise CudaArgumentError(
            f"a {what} at {address:#x} is not {BUFFER_ALIGNMENT}-byte aligned (a view that "
            "starts inside its storage?); kernels read 16-byte vectors: pass a copy"
        )


_TMA_TYPES = {
    "float32": TensorMapDataType.FLOAT32,
    "float16": TensorMapDataType.FLOAT16,
    "bfloat16": TensorMapDataType.BFLOAT16,
    "float8_e4m3fn": TensorMapDataType.UINT8,  # TMA copies bytes; wgmma reads them as FP8
    "float8_e5m2": TensorMapDataType.UINT8,
}
_TMA_SWIZZLES = {
    0: TensorMapSwizzle.NONE,
    32: TensorMapSwizzle.SWIZZLE_32B,
    64: TensorMapSwizzle.SWIZZLE_64B,
    128: TensorMapSwizzle.SWIZZLE_128B,
}
_TMA_L2_PROMOTIONS = {
    0: TensorMapL2Promotion.NONE,
    64: TensorMapL2Promotion.L2_64B,
    128: TensorMapL2Promotion.L2_128B,
    256: TensorMapL2Promotion.L2_256B,
}
_STORAGE = {
    "float32": np.float32,
    "float16": np.float16,
    "bfloat16": np.uint16,
    "float8_e4m3fn": np.uint8,
    "float8_e5m2": np.uint8,
}


def tensor_map(
    pointer: int,
    shape: Sequence[int],
    dtype_name: str,
    box: Sequence[int],
    swizzle: int,
    l2_promotion: int = 0,
) -> TensorMapDescriptor:
    """Encode the TMA tensor map of a C-contiguous device buffer for copies of `box`
    (dimensions in shape order) into shared memory swizzled by `swizzle` bytes (0: none), the
    L2 filling misses in aligned pieces of `l2_promotion` bytes (0: none).

    Elements outside the buffer read as zeros. The map refers to `pointer`; it is valid as
    long as the buffer is.
    """
    storage = np.dtype(_STORAGE[dtype_name])
    nbytes = int(np.prod(shape, dtype=np.int64)) * storage.itemsize
    view = StridedMemoryView.from_buffer(
        Buffer.from_handle(pointer, nbytes), tuple(shape), dtype=storage
    )
    try:
        return view.as_tensor_map(
            tuple(box),
            data_type=_TMA_TYPES[dtype_name],
            swizzle=_TMA_SWIZZLES[swizzle],
            l2_promotion=_TMA_L2_PROMOTIONS[l2_promotion],
        )
    except Exception as exc:  # cuda.core raises ValueError or its CUDAError
        raise CudaArgumentError(
            f"cannot encode a tensor map of a {list(shape)} {dtype_name} buffer with box "
            f"{list(box)}: {exc}"
        ) from exc


@dataclass(frozen=True)
class BoundLaunch:
    """A kernel with its parameters fixed: each call only queues the launch."""

    name: str
    function: CoreKernel
    config: LaunchConfig
    args: tuple[object, ...]

    def __call__(self, stream: Stream | GraphBuilder) -> None:
        """Queue the launch on `stream` (or record it into a graph being built)."""
        try:
            launch(stream, self.config, self.function, *self.args)
        except Exception as exc:  # cuda.core reports launch failures as its CUDAError
            raise CudaLaunchError(f"launching kernel '{self.name}' failed: {exc}") from exc


class Kernel:
    """One kernel of a cubin with a fixed grid, block and dynamic shared memory size.

    `tensor_maps` maps a parameter position to the (box, swizzle, L2 promotion) of the TMA
    tensor map the kernel takes there instead of a pointer. With `pdl` it is launched with
    programmatic stream serialization (docs/knobs.md).
    """

    def __init__(
        self,
        cubin: bytes,
        name: str,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        smem_bytes: int = 0,
        tensor_maps: dict[int, tuple[tuple[int, ...], int, int]] | None = None,
        pdl: bool = False,
    ) -> None:
        self.cubin = cubin
        self.name = name
        self.grid = tuple(grid)
        self.block = tuple(block)
        self.smem_bytes = smem_bytes
        self.tensor_maps = tensor_maps or {}
        self.pdl = pdl
        self._function: CoreKernel | None = None

    def function(self, parameters: int) -> CoreKernel:
        """Return the loaded cuda.core kernel, loading the cubin on first use, after checking
        that it takes `parameters` parameters (one per buffer it is launched on)."""
        if self._function is None:
            device = current_device()
            try:
                function = ObjectCode.from_cubin(self.cubin, name=self.name).get_kernel(self.name)
            except Exception as exc:  # cuda.core raises its own CUDAError or RuntimeError
                raise CudaLaunchError(f"cannot load kernel '{self.name}': {exc}") from exc
            if self.smem_bytes > STATIC_SMEM_LIMIT:
                cu_device = driver.CUdevice(device.device_id)
                _check_driver(
                    driver.cuKernelSetAttribute(
                        _MAX_DYNAMIC_SMEM, self.smem_bytes, function.handle, cu_device
                    ),
                    f"setting {self.smem_bytes} bytes of dynamic shared memory on '{self.name}'",
                )
            self._function = function
        if self._function.num_arguments != parameters:
            raise CudaArgumentError(
                f"kernel '{self.name}' takes {self._function.num_arguments} parameters, "
                f"got {parameters} buffers"
            )
        return self._function

    def encode_tensor_maps(
        self,
        pointers: Sequence[int],
        buffers: Sequence[tuple[tuple[int, ...], str]],
        encode: Callable[[int, Sequence[int], str, Sequence[int], int, int], _Map],
    ) -> dict[int, _Map]:
        """Return, by parameter position, the tensor map of each tensor-map parameter, made
        by `encode` (`tensor_map`, or a packed map) from the parameter's pointer, its buffer's
        (shape, dtype name) in `buffers` and the kernel's box, swizzle and L2 promotion."""
        maps: dict[int, _Map] = {}
        for position, (box, swizzle, l2_promotion) in self.tensor_maps.items():
            if position >= len(buffers):
                raise CudaArgumentError(
                    f"kernel '{self.name}' takes a tensor map as parameter {position}: "
                    "give it the buffers' shapes"
                )
            shape, dtype_name = buffers[position]
            maps[position] = encode(
                pointers[position], shape, dtype_name, box, swizzle, l2_promotion
            )
        return maps

    def bind(
        self,
        pointers: Sequence[int],
        buffers: Sequence[tuple[tuple[int, ...], str]] = (),
        scalars: Mapping[int, np.dtype] | None = None,
    ) -> BoundLaunch:
        """Fix the kernel's parameters to raw device pointers, once, for repeated launches.

        `buffers` gives each pointer's (shape, dtype name); the kernel's tensor-map
        parameters need it to encode their maps (encoded here, not at each launch).
        `scalars` gives the C type of each runtime scalar parameter, whose entry in
        `pointers` is its value, passed by value.
        """
        function = self.function(len(pointers))
        maps = self.encode_tensor_maps(pointers, buffers, tensor_map)
        scalars = scalars or {}
        args = [
            scalars[position].type(p) if position in scalars else maps.get(position, np.uint64(p))
            for position, p in enumerate(pointers)
        ]
        config = LaunchConfig(
            grid=self.grid,
            block=self.block,
            shmem_size=self.smem_bytes,
            programmatic_stream_serialization=self.pdl,
        )
        return BoundLaunch(self.name, function, config, tuple(args))

    def __call__(self, *arrays: object, stream: Stream | None = None) -> None:
        """Launch on `arrays` and wait for the kernel, raising `CudaLaunchError` on a fault.

        numpy arrays are copied to the device and back into themselves (so they must be
        C-contiguous and writeable); torch / cupy CUDA arrays are used in place.
        """
        stream = stream or current_device().default_stream
        staged: list[tuple[np.ndarray, Buffer]] = []
        pointers = []
        for array in arrays:
            if isinstance(array, np.ndarray):
                if not (array.flags.c_contiguous and array.flags.writeable):
                    raise CudaArgumentError(
                        f"kernel '{self.name}' needs C-contiguous, writeable numpy arrays"
                    )
                buffer = upload(array, stream)
                staged.append((array, buffer))
                pointers.append(int(buffer.handle))
            else:
                pointers.append(device_pointer(array, stream))
        self.bind(pointers)(stream)
        for array, buffer in staged:
            download(int(buffer.handle), array, stream)
        synchronize(stream, f"kernel '{self.name}'")


def synchronize(stream: Stream, what: str) -> None:
    """Wait for `stream`, reporting a device fault of `what` as `CudaLaunchError`."""
    try:
        stream.sync()
    except Exception as exc:  # cuda.core reports asynchronous faults as its CUDAError
        raise CudaLaunchError(f"{what} failed on the device: {exc}") from exc


TENSOR_MAP_BYTES = 128
"""The size of a CUtensorMap, and the alignment cuda.h (CUDA 13) declares for it."""

_SUCCESS = driver.CUresult.CUDA_SUCCESS
_NO_INTERLEAVE = driver.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE
_ZERO_FILL = driver.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE
_PDL = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION


class _PackedTensorMap:
    """A TMA tensor map encoded into aligned host memory of our own, so that a packed launch
    can pass it by address and a call can swap its global address in place.

    It encodes what `tensor_map` encodes (same box, swizzle, zero fill, L2 promotion);
    cuda.core's descriptors keep their bytes out of reach, so the driver encodes it here.
    """

    def __init__(
        self,
        pointer: int,
        shape: Sequence[int],
        dtype_name: str,
        box: Sequence[int],
        swizzle: int,
        l2_promotion: int = 0,
    ) -> None:
        self._storage = ctypes.create_string_buffer(2 * TENSOR_MAP_BYTES)
        base = ctypes.addressof(self._storage)
        self.address = base + (-base % TENSOR_MAP_BYTES)
        self._map = driver.CUtensorMap(_ptr=self.address)  # a view of our bytes, not a copy
        itemsize = np.dtype(_STORAGE[dtype_name]).itemsize
        rank = len(shape)
        # the driver numbers dimensions innermost first; dimension 0's stride is the element
        row_major_strides = [itemsize * int(np.prod(shape[d + 1 :])) for d in range(rank)]
        result = driver.cuTensorMapEncodeTiled(
            driver.CUtensorMapDataType(int(_TMA_TYPES[dtype_name])),
            rank,
            pointer,
            [driver.cuuint64_t(n) for n in reversed(shape)],
            [driver.cuuint64_t(s) for s in reversed(row_major_strides[:-1])],
            [driver.cuuint32_t(n) for n in reversed(box)],
            [driver.cuuint32_t(1)] * rank,
            _NO_INTERLEAVE,
            driver.CUtensorMapSwizzle(int(_TMA_SWIZZLES[swizzle])),
            driver.CUtensorMapL2promotion(int(_TMA_L2_PROMOTIONS[l2_promotion])),
            _ZERO_FILL,
        )
        if result[0] != _SUCCESS:
            raise CudaArgumentError(
                f"cannot encode a tensor map of a {list(shape)} {dtype_name} buffer with box "
                f"{list(box)}: {result[0].name}"
            )
        ctypes.memmove(self.address, result[1].getPtr(), TENSOR_MAP_BYTES)
        self.pointer = pointer

    def repoint(self, pointer: int) -> None:
        """Make the map describe the same shape at `pointer` (16-byte aligned)."""
        _check_driver(
            driver.cuTensorMapReplaceAddress(self._map, pointer), "cuTensorMapReplaceAddress"
        )
        self.pointer = pointer


class PackedLaunch:
    """A kernel launch whose parameters are packed once into host memory the driver reads at
    each launch: a call rewrites only the pointers that changed (`repoint`) and queues the
    launch with the driver API, skipping cuda.core's conversion of every argument at every
    launch, which costs microseconds: the whole budget of a short kernel's call.

    Every parameter has an 8-byte slot: a pointer, or a runtime scalar's value (an `int`
    parameter reads the slot's low 4 bytes, its value on a little-endian host: scalars are
    checked non-negative and within their bounds before they are written).

    A tensor-map parameter is encoded once and repointed in place. The driver copies the
    parameters when it queues a launch, so repointing never changes a launch already queued.
    The cubin is loaded at the first launch, so packing needs no GPU unless a parameter is a
    tensor map.
    """

    def __init__(
        self,
        kernel: Kernel,
        pointers: Sequence[int],
        buffers: Sequence[tuple[tuple[int, ...], str]],
    ) -> None:
        self.kernel = kernel
        self.name = kernel.name
        self._pointers = (ctypes.c_uint64 * len(pointers))(*pointers)
        base = ctypes.addressof(self._pointers)
        addresses = [base + i * ctypes.sizeof(ctypes.c_uint64) for i in range(len(pointers))]
        self._maps = kernel.encode_tensor_maps(pointers, buffers, _PackedTensorMap)
        for position, packed in self._maps.items():
            addresses[position] = packed.address
        self._params = (ctypes.c_void_p * len(pointers))(*addresses)
        self._params_address = ctypes.addressof(self._params)
        self._handle: object | None = None
        self._node_function: object | None = None  # the handle as a graph node takes it
        self._dims = (*kernel.grid, *kernel.block, kernel.smem_bytes)
        self._config: driver.CUlaunchConfig | None = None

    def repoint(self, position: int, pointer: int) -> None:
        """Make parameter `position` (a pointer or a tensor map) refer to `pointer` from the
        next launch on."""
        packed = self._maps.get(position)
        if packed is None:
            self._pointers[position] = pointer
        else:
            packed.repoint(pointer)

    def pointer(self, position: int) -> int:
        """Return the address parameter `position` refers to at the next launch."""
        packed = self._maps.get(position)
        return self._pointers[position] if packed is None else packed.pointer

    def load(self) -> None:
        """Load the kernel (once) and check that it takes the packed parameters."""
        if self._handle is not None:
            return
        function = self.kernel.function(len(self._pointers))
        if self.kernel.pdl:
            self._config = _launch_config(self.kernel)
        self._handle = function.handle

    def node_params(self) -> driver.CUDA_KERNEL_NODE_PARAMS:
        """Return the launch as the parameters of a CUDA graph kernel node: the driver copies
        the packed parameters when a node is added or updated, as when a launch is queued."""
        self.load()
        params = driver.CUDA_KERNEL_NODE_PARAMS()
        if self._node_function is None:
            handle = self._handle
            if not isinstance(handle, driver.CUfunction):  # cuda.core loads library kernels
                kernel = driver.CUkernel(int(handle))  # type: ignore[call-overload]
                result = driver.cuKernelGetFunction(kernel)
                _check_driver(result, f"getting the function of kernel '{self.name}'")
                handle = result[1]
            self._node_function = handle
        params.func = self._node_function
        params.gridDimX, params.gridDimY, params.gridDimZ = self.kernel.grid
        params.blockDimX, params.blockDimY, params.blockDimZ = self.kernel.block
        params.sharedMemBytes = self.kernel.smem_bytes
        params.kernelParams = self._params_address
        return params

    def __call__(self, stream: int) -> None:
        """Queue the launch on the stream with handle `stream`, in the current context."""
        if self._handle is None:
            self.load()
        if self._config is None:
            (result,) = driver.cuLaunchKernel(
                self._handle, *self._dims, stream, self._params_address, 0
            )
        else:
            self._config.hStream = stream
            (result,) = driver.cuLaunchKernelEx(self._config, self._handle, self._params_address, 0)
        if result != _SUCCESS:
            raise CudaLaunchError(f"launching kernel '{self.kernel.name}' failed: {result.name}")


def _launch_config(kernel: Kernel) -> driver.CUlaunchConfig:
    """Return the driver launch configuration of a kernel launched with programmatic stream
    serialization (`pdl`); the caller sets its stream before each launch."""
    config = driver.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = kernel.grid
    config.blockDimX, config.blockDimY, config.blockDimZ = kernel.block
    config.sharedMemBytes = kernel.smem_bytes
    attribute = driver.CUlaunchAttribute()
    attribute.id = _PDL
    attribute.value.programmaticStreamSerializationAllowed = 1
    config.attrs = [attribute]
    config.numAttrs = 1
    return config
