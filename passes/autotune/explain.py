"""`tinyopt explain`: the CUDA diff, and the measured latency, of one knob change on one kernel."""

from __future__ import annotations

import difflib
import io
import re

from tinyopt.compiler import apply_pipeline, context
from tinyopt.dialects import loop
from tinyopt.passes.autotune.cache import kernel_key
from tinyopt.passes.autotune.measure import Candidate, Program, tile_with
from tinyopt.passes.autotune.search import Config
from tinyopt.passes.tile.knobs import KNOB, Knobs, check
from tinyopt.universe import CudaTarget


def parse_config(text: str) -> Config:
    """Parses `name=value ...` (as in `tile{...}`) into knobs; raises ValueError naming a
    knob that does not exist or a value outside its domain."""
    config: Config = {}
    for word in text.replace(",", " ").split():
        name, sep, value = word.partition("=")
        if not sep or name not in KNOB:
            raise ValueError(f"expected knob=value with a knob of {sorted(KNOB)}, got '{word}'")
        if name in config:
            raise ValueError(f"tile: {name} is given twice in '{text}'")
        number = re.fullmatch(r"-?[0-9]+", value)
        if isinstance(KNOB[name].default, int):
            if not number:
                raise ValueError(f"tile: {name} takes an integer, got '{value}'")
            config[name] = int(value)
        elif number and any(type(v) is int for v in KNOB[name].domain.values):
            config[name] = int(value)  # `persistent`: auto, 0 or 1
        else:
            config[name] = value
    check_config(config)
    return config


def check_config(config: Config) -> None:
    """Raises ValueError naming the first knob of `config` outside its domain."""
    check(Knobs(**config))


def pick_kernel(program: Program, name: str | None) -> loop.KernelOp:
    """Returns the loop kernel `name` of the program, or its first; raises KeyError."""
    kernels = loop.kernels(program.loop_module())
    for kernel in kernels:
        if name is None or kernel.sym_name.data == name:
            return kernel
    if name is None:  # said "no loop kernel @None"
        fuse = "fuse" in (p.split("{")[0].strip() for p in program.prefix.split(","))
        hint = "" if fuse else " (fuse lowers graph functions to loop kernels)"
        raise KeyError(f"'{program.prefix}' leaves no loop kernel to change{hint}")
    names = ", ".join(k.sym_name.data for k in kernels) or "none"
    raise KeyError(f"no loop kernel @{name} after '{program.prefix}' (kernels: {names})")


def cuda_text(program: Program, candidate: Candidate) -> str:
    """Returns the program's CUDA C (as `-t cuda` prints it) under the candidate's knobs."""
    module = program.loop_module()
    tile_with(module, candidate.knobs)
    apply_pipeline(module, "to-cuda")
    out = io.StringIO()
    CudaTarget().emit(context(), module, out)
    return out.getvalue()


def sides(kernel: loop.KernelOp, base: Config, change: Config) -> tuple[Candidate, Candidate]:
    """Returns the candidates before and after the change (other kernels at their defaults)."""
    key = kernel_key(kernel)
    return Candidate.of({key: base}), Candidate.of({key: {**base, **change}})


def unified_diff(before: str, after: str, left: str, right: str) -> str:
    """Returns the unified diff of two CUDA texts, labelled by their knobs."""
    before_lines, after_lines = before.splitlines(keepends=True), after.splitlines(keepends=True)
    return "".join(difflib.unified_diff(before_lines, after_lines, left, right))


def label(config: Config) -> str:
    """Returns `tile{...}` for a configuration (only knobs off their defaults)."""
    return f"tile{{{Knobs(**config).describe()}}}"
