"""Exceptions raised by the CUDA backend."""


class CudaError(Exception):
    """Base class of every error the CUDA backend raises on a user-visible path."""


class CudaCompileError(CudaError):
    """NVRTC rejected a translation unit; carries the kernel name and the NVRTC log."""

    def __init__(self, name: str, log: str) -> None:
        self.name = name
        self.log = log
        super().__init__(f"NVRTC failed to compile kernel '{name}':\n{log}")


class CudaUnavailableError(CudaError):
    """No CUDA driver or GPU is available for an operation that needs one."""


class CudaLaunchError(CudaError):
    """A kernel launch, copy or synchronization failed on the device."""


class CudaArgumentError(CudaError):
    """An array passed to a kernel or host function does not fit its parameter."""


class CudaModuleError(CudaError):
    """A module handed to the runtime holds something the runtime cannot run."""
