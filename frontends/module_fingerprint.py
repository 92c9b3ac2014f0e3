"""What determines a torch module's capture, as JSON fields for the build cache's key: the code
of its classes (the whole files defining them, so the helpers they call there count too), each
submodule's plain attributes (`eps`, `training`, ...), the names, shapes and dtypes of its
parameters and buffers (not their values: they are the function's arguments), the example
inputs' shapes and dtypes, and torch's version.

Code a class calls in another file of the user's is not part of it (README.md, "Compile
time": turn the cache off while editing such code).
"""

from __future__ import annotations

import functools
import hashlib
import inspect
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


@functools.lru_cache(maxsize=256)
def _file_hash(path: str, mtime_ns: int, size: int) -> str:
    with open(path, "rb") as source:
        return hashlib.sha256(source.read()).hexdigest()


def _class_files(cls: type) -> list[str] | None:
    """Return the hashes of the files defining `cls` and its bases outside torch, or None
    where a class has no source file (defined in an interactive session)."""
    import os

    hashes = []
    for klass in cls.__mro__:
        if klass is object or klass.__module__.split(".")[0] in ("torch", "builtins"):
            continue
        path = _defining_file(klass)
        if path is None:
            return None
        stat = os.stat(path)
        hashes.append(_file_hash(path, stat.st_mtime_ns, stat.st_size))
    return hashes


def _defining_file(klass: type) -> str | None:
    """Return the file defining `klass`: from its module, else (a module loaded from a path
    and not registered in `sys.modules`) from its functions' code."""
    import os

    try:
        path: str | None = inspect.getsourcefile(klass)
    except TypeError:
        path = None
    if path is None:
        codes = (getattr(f, "__code__", None) for f in vars(klass).values())
        path = next((c.co_filename for c in codes if c is not None), None)
    return path if path is not None and os.path.isfile(path) else None


def _plain(value: object) -> object:
    """Return a stable JSON form of an attribute: numbers, strings and their containers as
    they are, a function or class by its qualified name, anything else by its type."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if callable(value) and hasattr(value, "__qualname__"):
        return f"{getattr(value, '__module__', '')}.{value.__qualname__}"
    return f"<{type(value).__module__}.{type(value).__qualname__}>"


def _spec(tensor: torch.Tensor) -> list[object]:
    return [list(tensor.shape), str(tensor.dtype), tensor.device.type]


def fingerprint(
    module: torch.nn.Module, example_inputs: Sequence[torch.Tensor]
) -> dict[str, object] | None:
    """Return the fields that determine `module`'s capture on inputs like `example_inputs`, or
    None where the module's code cannot be read (then nothing is cached)."""
    import torch

    submodules = []
    for name, sub in module.named_modules(remove_duplicate=False):
        files = _class_files(type(sub))
        if files is None:
            return None
        attributes = {k: _plain(v) for k, v in vars(sub).items() if not k.startswith("_")}
        cls = type(sub)
        submodules.append([name, f"{cls.__module__}.{cls.__qualname__}", files, attributes])
    return {
        "modules": submodules,
        "parameters": [[n, *_spec(p)] for n, p in module.named_parameters(remove_duplicate=False)],
        "buffers": [[n, *_spec(b)] for n, b in module.named_buffers(remove_duplicate=False)],
        "inputs": [_spec(x) for x in example_inputs],
        "torch": torch.__version__,
    }


def named_tensors(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Return every parameter and buffer of `module` by each of its state-dict names."""
    tensors = dict(module.named_buffers(remove_duplicate=False))
    tensors.update(module.named_parameters(remove_duplicate=False))
    return tensors
