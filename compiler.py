"""The Python entry point: parse tinyopt IR, apply a pass pipeline, compile for the GPU."""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser
from xdsl.passes import PassPipeline
from xdsl.universe import Universe

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
    module = Parser(ctx or context(), text).parse_module()
    module.verify()
    return module


def apply_pipeline(module: ModuleOp, pipeline: str, ctx: Context | None = None) -> ModuleOp:
    """Applies a `-p`-style pipeline (e.g. `fuse,tile{threads=128},to-cuda`) in place."""
    passes = Universe.get_multiverse().all_passes
    PassPipeline.parse_spec(passes, pipeline).apply(ctx or context(), module)
    module.verify()
    return module


def lower(text: str, pipeline: str = DEFAULT_PIPELINE) -> tuple[ModuleOp, ModuleOp]:
    """Parses a program and lowers a copy; returns (the program, the lowered module)."""
    program = parse(text)
    return program, apply_pipeline(program.clone(), pipeline)
