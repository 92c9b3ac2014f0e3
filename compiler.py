"""The Python entry point: parse tinyopt IR, apply a pass pipeline, compile for the GPU."""

from __future__ import annotations

import dataclasses
import functools
import gc
import re
import typing
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser
from xdsl.passes import ModulePass, PassPipeline
from xdsl.universe import Universe
from xdsl.utils.arg_spec import parse_pipeline
from xdsl.utils.exceptions import ArgSpecParseError, DiagnosticException, ParseError

from tinyopt.compile_timer import phase, requested, timed_pass, timing

if TYPE_CHECKING:
    from tinyopt.backends.cuda.runtime import CompiledModule

DEFAULT_PIPELINE = "fuse,apply-tuned,tile,to-cuda"
"""The pipeline `lower` applies when none is given: tuned where the tuning cache has an entry for
a kernel on this GPU model (`apply-tuned`, docs/tuning.md), the heuristics elsewhere."""


@functools.cache
def _multiverse() -> Universe:
    """xDSL's `Universe.get_multiverse()`, read once per process.

    It reads the `xdsl.universe` entry points of every installed distribution (about 3 ms), and
    `lower` asked for it three times a program; the installed packages do not change while a
    process runs, and the dialect and pass tables it returns are only read here."""
    return Universe.get_multiverse()


def context() -> Context:
    """Returns a context with xDSL's dialects and tinyopt's graph, loop and tile loaded."""
    ctx = Context()
    for name, get in _multiverse().all_dialects.items():
        ctx.register_dialect(name, get)
    return ctx


class CheckedParser(Parser):
    """xDSL's parser refusing a dense constant too large to hold with a `ParseError` at it (a
    `MemoryError`, or an `OverflowError` past 2^63 elements, before)."""

    def parse_dense_int_or_fp_elements_attr(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        start = self._current_token.span
        try:
            return super().parse_dense_int_or_fp_elements_attr(*args, **kwargs)
        except (MemoryError, OverflowError):
            raise ParseError(
                start,
                "this dense constant does not fit in memory (the parser stores every element, "
                "a splat's too)",
            ) from None


def parse(text: str, ctx: Context | None = None) -> ModuleOp:
    """Parses MLIR text (graph, loop or tile level) and verifies it.

    Refuses what the command line refuses (cli.py), as a `ParseError` at the place: text nested
    more than `cli.MAX_NESTING` levels deep (a `RecursionError` before) and a dense constant
    too large to hold (a `MemoryError`); a leading byte-order mark is skipped, as there."""
    from tinyopt.cli import refuse_deep_nesting  # cli imports this module

    if isinstance(text, str):
        text = text.removeprefix("\ufeff")
        refuse_deep_nesting(text)
    with phase("parse"):
        module = CheckedParser(ctx or context(), text).parse_module()
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


class PipelineError(DiagnosticException, ValueError):
    """A pipeline the passes cannot be built from: malformed text, an unknown pass or option, an
    option given twice or given a value of the wrong kind. A `DiagnosticException` (as the passes'
    own refusals) and a `ValueError` (as these were before)."""


def _option_value(value: object) -> str:
    """An option's value as the message shows it: `true`, `64`, `"64"` (a quoted number)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str) and re.fullmatch(r"[-+]?\d+", value):
        return f'"{value}"'
    return str(value)


def _knob_domain(pass_name: str, option: str) -> str:
    """`; KNOB must be ...` for an option of `tile` or `plan` that is a schedule knob, else ''."""
    if pass_name not in ("tile", "plan"):
        return ""
    from tinyopt.passes.tile.knobs import KNOB

    knob = KNOB.get(option)
    return f"; {option} must be {knob.domain.words}" if knob else ""


_CHECKED: set[str] = set()
"""Pipelines `check_pipeline` passed against all registered passes (a tuner checks one many
times; each check costs about 2 ms)."""


def check_pipeline(
    spec: str, available: dict[str, Callable[[], type[ModulePass]]] | None = None
) -> None:
    """Raises `PipelineError` naming the first problem of a `-p`-style pipeline: malformed text
    (with the caret xDSL's parser puts under it), an unknown pass or option, an option given
    twice, or a value of the wrong kind (naming the option, what it takes and, for a `tile`
    knob, its domain)."""
    if available is None:
        if spec in _CHECKED:
            return
        check_pipeline(spec, _multiverse().all_passes)
        _CHECKED.add(spec)
        return
    try:
        specs = list(parse_pipeline(spec))
    except ArgSpecParseError as exc:  # xDSL's derives from BaseException, not Exception
        # drop the heading and the pass-pipeline:1:N line; the message follows the caret
        context = str(exc).splitlines()[2:]
        reason = " ".join(line.strip() for line in context[2:])
        heading = f"invalid pass pipeline '{spec}': {reason[:1].lower()}{reason[1:]}"
        raise PipelineError("\n".join([heading.rstrip(": "), *context[:2]])) from None
    for pass_spec, given in zip(specs, option_keys(spec), strict=False):
        if pass_spec.name not in available:
            raise PipelineError(
                f"unknown pass '{pass_spec.name}' (see `tinyopt --help` for the passes)"
            )
        pass_type = available[pass_spec.name]()
        fields = {f.name: f for f in dataclasses.fields(pass_type) if f.init}
        try:
            hints = typing.get_type_hints(pass_type)
        except Exception:  # an annotation that does not resolve: leave the check to xDSL
            hints = {}
        repeated = {key for key in given if given.count(key) > 1}
        if repeated:
            raise PipelineError(f"option '{min(repeated)}' given twice for pass '{pass_spec.name}'")
        for option, values in pass_spec.normalize_parameter_names().parameters.items():
            if option not in fields:
                raise PipelineError(
                    f"unknown option '{option}' for pass '{pass_spec.name}' "
                    f"(options: {', '.join(fields) or 'none'})"
                )
            wanted = hints.get(option)
            if wanted in (int, bool, str) and (
                not values or not all(type(v) is wanted for v in values)
            ):
                kind = {int: "an integer", bool: "true or false", str: "a word"}[wanted]
                default = fields[option].default
                if wanted is str and isinstance(default, str):
                    kind = f"a word (its default: {default})"
                shown = " ".join(map(_option_value, values)) or "no value"
                raise PipelineError(
                    f"option '{option}' of pass '{pass_spec.name}' takes {kind}, got {shown}"
                    f"{_knob_domain(pass_spec.name, option)}"
                )


def apply_pipeline(
    module: ModuleOp, pipeline: str, ctx: Context | None = None, time_passes: bool = False
) -> ModuleOp:
    """Applies a `-p`-style pipeline (e.g. `fuse,tile{threads=128},to-cuda`) in place; with
    `time_passes` (or `$TINYOPT_TIME_PASSES`), prints each pass's and pattern's time on stderr.
    A pipeline that cannot be built raises `PipelineError` (`check_pipeline`)."""
    if not isinstance(module, ModuleOp):
        raise TypeError(
            f"apply_pipeline takes a parsed ModuleOp (tinyopt.compiler.parse), got "
            f"{type(module).__name__}"
        )
    if not isinstance(pipeline, str):
        raise TypeError(f"the pipeline must be a string such as 'fuse,tile', got {pipeline!r}")
    check_pipeline(pipeline)
    passes = _multiverse().all_passes
    ctx = ctx or context()
    with timing(requested(time_passes)), _older_objects_frozen():
        try:
            parsed = PassPipeline.parse_spec(passes, pipeline).passes
        except ArgSpecParseError as exc:  # xDSL's derives from BaseException, not Exception
            raise PipelineError(f"invalid pass pipeline '{pipeline}': {exc}") from None
        except ValueError as exc:  # anything check_pipeline lets through
            raise PipelineError(f"invalid pass pipeline '{pipeline}': {exc}") from None
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
    if not isinstance(text, str):
        raise TypeError(f"lower takes the program's MLIR text (a str), got {type(text).__name__}")
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
