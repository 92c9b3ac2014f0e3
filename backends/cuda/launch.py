"""Load cubins and launch their kernels on arrays, with cuda.core."""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from cuda.bindings import driver
from cuda.core import Buffer, Device, LaunchConfig, ObjectCode, Stream, TensorMapDescriptor, launch
from cuda.core import Kernel as CoreKernel
from cuda.core._tensor_map import TensorMapDataType, TensorMapSwizzle
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
    return view.ptr


_TMA_TYPES = {
    "float32": TensorMapDataType.FLOAT32,
    "float16": TensorMapDataType.FLOAT16,
    "bfloat16": TensorMapDataType.BFLOAT16,
}
_TMA_SWIZZLES = {
    0: TensorMapSwizzle.NONE,
    32: TensorMapSwizzle.SWIZZLE_32B,
    64: TensorMapSwizzle.SWIZZLE_64B,
    128: TensorMapSwizzle.SWIZZLE_128B,
}
_STORAGE = {"float32": np.float32, "float16": np.float16, "bfloat16": np.uint16}


def tensor_map(
    pointer: int, shape: Sequence[int], dtype_name: str, box: Sequence[int], swizzle: int
) -> TensorMapDescriptor:
    """Encode the TMA tensor map of a C-contiguous device buffer for copies of `box`
    (dimensions in shape order) into shared memory swizzled by `swizzle` bytes (0: none).

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
            tuple(box), data_type=_TMA_TYPES[dtype_name], swizzle=_TMA_SWIZZLES[swizzle]
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

    `tensor_maps` maps a parameter position to the (box, swizzle) of the TMA tensor map the
    kernel takes there instead of a pointer. With `pdl` it is launched with programmatic stream
    serialization (docs/knobs.md).
    """

    def __init__(
        self,
        cubin: bytes,
        name: str,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        smem_bytes: int = 0,
        tensor_maps: dict[int, tuple[tuple[int, ...], int]] | None = None,
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

    def function(self) -> CoreKernel:
        """Return the loaded cuda.core kernel, loading the cubin on first use."""
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
        return self._function

    def bind(
        self, pointers: Sequence[int], buffers: Sequence[tuple[tuple[int, ...], str]] = ()
    ) -> BoundLaunch:
        """Fix the kernel's parameters to raw device pointers, once, for repeated launches.

        `buffers` gives each pointer's (shape, dtype name); the kernel's tensor-map
        parameters need it to encode their maps (encoded here, not at each launch).
        """
        function = self.function()
        if function.num_arguments != len(pointers):
            raise CudaArgumentError(
                f"kernel '{self.name}' takes {function.num_arguments} parameters, "
                f"got {len(pointers)} buffers"
            )
        args: list[object] = [np.uint64(p) for p in pointers]
        for position, (box, swizzle) in self.tensor_maps.items():
            if position >= len(buffers):
                raise CudaArgumentError(
                    f"kernel '{self.name}' takes a tensor map as parameter {position}: "
                    "launch it with the buffers' shapes"
                )
            shape, dtype_name = buffers[position]
            args[position] = tensor_map(pointers[position], shape, dtype_name, box, swizzle)
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
