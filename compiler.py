"""The Python entry point: parse tinyopt IR, apply a pass pipeline, compile for the GPU."""

from __future__ import annotations

import gc
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser
from xdsl.passes import PassPipeline
from xdsl.universe import Universe
from xdsl.utils.exceptions import ArgSpecParseError

from tinyopt.compile_timer import phase, requested, timed_pass, timing

if TYPE_CHECKING:
    from tinyopt.backends.cuda.runtime import CompiledModule

DEFAULT_PIPELINE = "fuse,apply-tuned,tile,to-cuda"
"""The pipeline `lower` applies when none is given: tuned where the tuning cache has an entry for
a kernel on this GPU model (`apply-tuned`, docs/tuning.md), the heuristics elsewhere."""


def context() -> Context:
    """Returns a context with xDSL's dialects and tinyopt's graph, loop and tile loaded."""
    ctx = Context()
    for name, get in Universe.get_multiverse().all_dialects.items():
        ctx.register_dialect(name, get)
    return ctx


def parse(text: str, ctx: Context | None = None) -> ModuleOp:
    """Parses MLIR text (graph, loop or tile level) and verifies it."""
    with phase("parse"):
        module = Parser(ctx or context(), text).parse_module()
        module.verify()
    return module


@contextmanager
def _older_objects_frozen() -> Iterator[None]:
    """Keeps the cyclic garbage collector off the objects alive before a pipeline runs.

    Passes make many short-lived cycles, and each full collection they trigger would walk every
    older object too (torch's, in a process that imported it: the zoo's GPT-2 at 1×16 lowered
    in 0.92-0.97 s of CPU time, 0.71-0.79 s with them frozen). Where something froze objects
    already (the lit suite's fork server, tests/lit_fork.py), it is left to manage them."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def option_keys(spec: str) -> list[list[str]]:
    """The option names written in each pass's braces, in order and with repeats (xDSL's
    parser keeps the last of a repeated option)."""
    passes, depth, start = [], 0, 0
    for i, char in enumerate(f"{spec},"):
        depth += {"{": 1, "}": -1}.get(char, 0)
        if char == "," and depth == 0:
            passes.append(spec[start:i])
            start = i + 1
    bodies = [p[p.find("{") + 1 : p.rfind("}")] if "{" in p else "" for p in passes]
    return [re.findall(r"([A-Za-z_][\w-]*)\s*=", body) for body in bodies]


def apply_pipeline(
    module: ModuleOp, pipeline: str, ctx: Context | None = None, time_passes: bool = False
) -> ModuleOp:
    """Applies a `-p`-style pipeline (e.g. `fuse,tile{threads=128},to-cuda`) in place; with
    `time_passes` (or `$TINYOPT_TIME_PASSES`), prints each pass's and pattern's time on stderr."""
    passes = Universe.get_multiverse().all_passes
    for keys in option_keys(pipeline):
        if repeated := sorted({key for key in keys if keys.count(key) > 1}):
            raise ValueError(f"pipeline '{pipeline}': option '{repeated[0]}' given twice")
    ctx = ctx or context()
    with timing(requested(time_passes)), _older_objects_frozen():
        try:
            parsed = PassPipeline.parse_spec(passes, pipeline).passes
        except ArgSpecParseError as exc:  # xDSL's derives from BaseException, not Exception
            raise ValueError(f"invalid pass pipeline '{pipeline}': {exc}") from None
        for module_pass in parsed:
            with timed_pass(module_pass.name):
                module_pass.apply(ctx, module)
        with phase("verify"):
            module.verify()
    return module


def lower(
    text: str, pipeline: str = DEFAULT_PIPELINE, time_passes: bool = False
) -> tuple[ModuleOp, ModuleOp]:
    """Parses a program and lowers a copy; returns (the program, the lowered module). With
    `time_passes` (or `$TINYOPT_TIME_PASSES`), prints where the time went on stderr."""
    with timing(requested(time_passes)):
        program = parse(text)
        return program, apply_pipeline(program.clone(), pipeline)


def compile_text(
    text: str,
    pipeline: str = DEFAULT_PIPELINE,
    arch: str | None = None,
    poison: bool = True,
    sync: bool = True,
    time_passes: bool = False,
) -> CompiledModule:
    """Lowers a program through a pipeline ending in `to-cuda` and compiles its kernels
    (`compile_module`'s `arch`, `poison` and `sync`), or takes both from the build cache
    (`build_cache.py`); with `time_passes` (or `$TINYOPT_TIME_PASSES`), prints where the time
    went on stderr."""
    from tinyopt.backends.cuda.nvrtc import default_arch
    from tinyopt.build_cache import build

    def lower_text() -> tuple[ModuleOp, dict[str, object], bool]:
        return lower(text, pipeline)[1], {}, True

    with timing(requested(time_passes)):
        arch = arch or default_arch()
        compiled, _, _ = build(lambda: {"text": text}, pipeline, arch, lower_text, poison, sync)
        return compiled
