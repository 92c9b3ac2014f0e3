"""The `tinyopt` command: xdsl-opt with tinyopt's passes, CUDA output and the subcommands
`run`, `capture`, `check-assoc`, `tune` and `explain` (README.md describes each).

Bad input is answered with a diagnostic on stderr and exit status 1, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.util
import io
import logging
import os
import re
import sys
import time
import unicodedata
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.utils.arg_spec import parse_pipeline
from xdsl.utils.exceptions import (
    DiagnosticException,
    ParseError,
    VerifyException,
)
from xdsl.utils.lexer import Input, Span
from xdsl.xdsl_opt_main import xDSLOptMain

from tinyopt.backends import check
from tinyopt.backends.cuda.errors import CudaError
from tinyopt.compile_timer import active, phase, timing
from tinyopt import compiler
from tinyopt.compiler import DEFAULT_PIPELINE
from tinyopt.universe import TINYOPT_UNIVERSE

if TYPE_CHECKING:
    from tinyopt.passes.autotune.measure import Program


class CliError(Exception):
    """A user error that the command reports in one line, without a traceback; `located`
    when the message starts with `FILE:LINE:COL: error: ` already."""

    def __init__(self, message: str, located: bool = False):
        super().__init__(message)
        self.located = located


MAX_NESTING = 100
"""The deepest nesting of brackets (`{`, `(`, `[`, `<`) tinyopt parses. xDSL's parser (and its
verifier and printer) recurse a few Python frames per level, so a file nested a few hundred
levels deep would end in a RecursionError; real programs nest about ten levels."""


@dataclasses.dataclass
class _Source:
    """A parsed input: its text, and where each op of its module starts."""

    module: ModuleOp
    text: str
    name: str
    line_offset: int
    starts: dict[Operation, Span[str]]


_SOURCES: list[_Source] = []
"""The inputs parsed in this process, to locate a verifier error at its op's source line."""


_OP_NAME = re.compile(r"(?:[%\w.$#-]+\s*(?::\s*\d+\s*)?,?\s*)*=?\s*\"?([\w.]+)")
"""An operation's name after its results (`%a, %b = graph.op` or `"graph.op"`)."""


class _LocatingParser(compiler.CheckedParser):
    """The parser of `tinyopt.compiler.parse` that also records where each op starts."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.starts: dict[Operation, Span[str]] = {}

    def parse_operation(self) -> Operation:
        start = self._current_token.span
        try:
            op = super().parse_operation()
        except VerifyException as exc:  # a property or attribute its op's definition refuses
            name = _OP_NAME.match(start.input.content, start.start)
            what = f"{name.group(1)}: " if name else ""
            raise ParseError(start, f"{what}{exc}") from None
        self.starts[op] = start
        return op


def _pass_summaries() -> str:
    """Return the help epilog: each tinyopt pass with the first line of its docstring."""
    lines = ["tinyopt passes:"]
    for name, get_pass in TINYOPT_UNIVERSE.all_passes.items():
        try:
            summary = (get_pass().__doc__ or "").strip().splitlines()[0]
        except ImportError as exc:
            summary = f"(unavailable: {exc})"
        lines.append(f"  {name:<12} {summary}")
    return "\n".join(lines)


SUBCOMMAND_SUMMARIES = {
    "run": "compile FILE, run it on the GPU and compare it with the float64 reference",
    "capture": "capture a PyTorch module (FILE.py:NAME) into the graph dialect",
    "tune": "search each kernel's tile knobs on the GPU; store the best in the tuning cache",
    "explain": "show the CUDA diff (and on a GPU the latency) of one tile knob change",
    "check-assoc": "decide whether each step function's sequential fold has a merge",
}
"""One line per subcommand for `tinyopt --help` (each has its own `--help`)."""


def _subcommand_summaries() -> str:
    """Return the help's list of subcommands."""
    lines = ["subcommands (tinyopt SUBCOMMAND --help for each):"]
    lines += [f"  {name:<12} {summary}" for name, summary in SUBCOMMAND_SUMMARIES.items()]
    return "\n".join(lines)


def check_pipeline(spec: str, available: dict[str, Callable[[], type[ModulePass]]]) -> None:
    """Raise `CliError` naming the first unknown pass or option of a pipeline, if any (the
    Python API's check, `compiler.check_pipeline`, which raises `PipelineError`)."""
    try:
        compiler.check_pipeline(spec, available)
    except compiler.PipelineError as exc:
        raise CliError(str(exc)) from None


def _target_given(args: Sequence[str]) -> bool:
    """Return whether the command line names an output target (`-t`/`--target`)."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("-t", "--target")
    known, _ = parser.parse_known_args(args)
    return known.target is not None


OUTPUT_TARGETS = ("mlir", "cuda")
"""What `-t` may name: the IR, or the CUDA C of a module after `to-cuda`."""


class TinyoptMain(xDSLOptMain):
    """xdsl-opt's driver that prints CUDA C after `to-cuda` and names unknown passes."""

    def __init__(self, args: Sequence[str]) -> None:
        self.target_given = _target_given(args)
        super().__init__(description="tinyopt: graph -> loop -> tile -> CUDA C, on xDSL", args=args)

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        """Register xdsl-opt's arguments and list the subcommands and tinyopt's passes after
        them in `--help`."""
        super().register_all_arguments(arg_parser)
        arg_parser.prog = "tinyopt"
        arg_parser.usage = (
            "tinyopt [options] [input_file]\n"
            f"       tinyopt {{{','.join(SUBCOMMANDS)}}} ... (see tinyopt SUBCOMMAND --help)"
        )
        arg_parser.formatter_class = argparse.RawDescriptionHelpFormatter
        # The list of passes imports every pass (0.1 s and more): build it only for `--help`.
        format_help = arg_parser.format_help

        def format_help_with_passes() -> str:
            arg_parser.epilog = f"{_subcommand_summaries()}\n\n{_pass_summaries()}"
            return format_help()

        arg_parser.format_help = format_help_with_passes  # type: ignore[method-assign]

    # xDSL's four `register_all_*` each read the `xdsl.universe` entry points of every installed
    # distribution again (`Universe.get_multiverse`): half of a forked `tinyopt --help`'s
    # time (lit's RUN lines) and of a small program's. These register the same tables from
    # the process's one reading (`compiler._multiverse`).
    def register_all_dialects(self) -> None:
        """Register every dialect of xDSL's multiverse, as xDSL's driver does."""
        for name, factory in compiler._multiverse().all_dialects.items():
            self.ctx.register_dialect(name, factory)

    def register_all_frontends(self) -> None:
        """Register every frontend of xDSL's multiverse, as xDSL's driver does."""
        for name, factory in compiler._multiverse().all_frontends.items():
            if name not in self.available_frontends:
                self.available_frontends[name] = factory

    def register_all_passes(self) -> None:
        """Register every pass of xDSL's multiverse, as xDSL's driver does."""
        for name, factory in compiler._multiverse().all_passes.items():
            self.register_pass(name, factory)

    def register_all_targets(self) -> None:
        """Register the output targets tinyopt's modules have: `mlir` and `cuda` (xDSL's
        assembly, LLVM and other targets expect dialects tinyopt never produces)."""
        self.available_targets = {
            name: factory
            for name, factory in compiler._multiverse().all_targets.items()
            if name in OUTPUT_TARGETS
        }

    def setup_pipeline(self) -> None:
        """Build the pipeline, reporting bad passes or options as `CliError`."""
        check_pipeline(self.args.passes, self.available_passes)
        try:
            super().setup_pipeline()
        except ValueError as exc:
            raise CliError(f"invalid pass pipeline '{self.args.passes}': {exc}") from None
        last = self.pipeline.passes[-1].name if self.pipeline.passes else None
        if last == "to-cuda" and not self.target_given:
            self.args.target = "cuda"
        if self.pipeline.callback is not None:  # --time-passes and the IR between passes
            between = self.pipeline.callback
            started = time.perf_counter()

            def to_stderr(previous: ModulePass | None, module: ModuleOp, following: object) -> None:
                nonlocal started
                timer = active()
                if timer is not None and previous is not None:
                    timer.add(f"pass {previous.name}", time.perf_counter() - started)
                with contextlib.redirect_stdout(sys.stderr):
                    between(previous, module, following)  # type: ignore[arg-type]
                if timer is not None:
                    timer.current_pass = getattr(following, "name", "")
                started = time.perf_counter()

            self.pipeline = dataclasses.replace(self.pipeline, callback=to_stderr)

    def prepare_input(self) -> tuple[list[tuple[IO[bytes], int]], str]:
        """Open the input (`-` or none: stdin), reporting a file extension no frontend
        handles as `CliError`."""
        if self.args.input_file == "-":
            self.args.input_file = None
        try:
            return super().prepare_input()
        except ValueError as exc:
            raise CliError(f"{exc} (tinyopt reads .mlir files)") from None

    def run(self) -> None:
        """Run xdsl-opt's steps (with `--time-passes`, then print the time of each phase, pass
        and rewrite pattern on stderr)."""
        with timing(self.args.time_passes):
            self._run()

    def _run(self) -> None:
        """Run xdsl-opt's steps; with `-o FILE`, write `FILE.partial` and rename it on success.

        A symbolic link is followed (the file it names is replaced, the link kept); a target
        that is no regular file (a device such as /dev/null, a FIFO) is written directly."""
        target = self.args.output_file
        if target is None:
            if not self.args.split_input_file or self.args.verify_diagnostics:
                return super().run()
            # Several chunks: print them all once the last one lowered, not the ones before a
            # chunk that fails (exit 1 after half the output, the rest never processed).
            buffer = io.StringIO()
            with contextlib.redirect_stdout(buffer):
                super().run()
            sys.stdout.write(buffer.getvalue())
            return None
        if not target:
            raise CliError("-o needs a file name, got ''")
        if os.path.isdir(target):
            raise CliError(f"-o {target}: is a directory")
        if os.path.exists(target) and not os.path.isfile(target):
            return super().run()
        target = os.path.realpath(target)
        if not os.path.isdir(os.path.dirname(target)):
            raise CliError(f"-o {self.args.output_file}: no such directory")
        self.args.output_file = partial = f"{target}.partial"
        try:
            super().run()
            os.replace(partial, target)
        finally:
            self.args.output_file = target
            if os.path.lexists(partial):
                os.remove(partial)

    def parse_chunk(
        self, chunk: IO[bytes], file_extension: str, start_offset: int = 0
    ) -> ModuleOp | None:
        """Parse MLIR text with the checks xDSL's parser lacks: UTF-8 (a leading byte-order
        mark is skipped), nesting depth (`MAX_NESTING`), memory; record where each op starts."""
        if (self.args.frontend or file_extension) != "mlir":
            return super().parse_chunk(chunk, file_extension, start_offset)
        name = self.get_input_name()
        data = chunk.read().removeprefix(b"\xef\xbb\xbf")
        try:
            text = data.decode()
        except UnicodeDecodeError as exc:
            line = data.count(b"\n", 0, exc.start) + 1 + start_offset
            column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
            raise CliError(
                f"{name}:{line}:{column}: error: not UTF-8 text: byte 0x{data[exc.start]:02x} "
                "cannot be decoded (tinyopt reads MLIR source)",
                located=True,
            ) from None
        refuse_deep_nesting(text, name, start_offset)
        parser = _LocatingParser(self.ctx, text, name)
        with phase("parse"):
            module = parser.parse_module(not self.args.no_implicit_module)
        _SOURCES.append(_Source(module, text, name, start_offset, parser.starts))
        return module

    def parse_file(self) -> ModuleOp:
        """Parse the input file as one module."""
        chunks, extension = self.prepare_input()
        ((chunk, _),) = chunks
        with chunk:
            module = self.parse_chunk(chunk, extension)
        assert module is not None
        return module


_CLOSERS = {"{": "}", "(": ")", "[": "]"}


def _scan_brackets(
    text: str, closers: dict[str, str], limit: int | None = None
) -> tuple[list[tuple[str, int, int, int]], int | None]:
    """Match the brackets of `text`: return those left open at its end, each as (opener,
    line, column, offset), and the offset of the first opener past `limit` levels (or None).

    String literals and `//` comments are skipped; `->` is not a closing `>`.
    """
    stack: list[tuple[str, int, int, int]] = []
    line, column, i = 1, 1, 0
    while i < len(text):
        char = text[i]
        if char == '"':
            end = text.find('"', i + 1)
            while end > 0 and text[end - 1] == "\\":
                end = text.find('"', end + 1)
            end = len(text) if end < 0 else end
            line, column = line + text.count("\n", i, end), column + (end - i)
            i = end
        elif text.startswith("//", i):
            i = text.find("\n", i) - 1 if "\n" in text[i:] else len(text)
        elif text.startswith("->", i):
            i, column = i + 1, column + 1
        elif char in closers:
            stack.append((char, line, column, i))
            if limit is not None and len(stack) > limit:
                return stack, i
        elif char in closers.values() and stack and closers[stack[-1][0]] == char:
            stack.pop()
        if i < len(text) and text[i] == "\n":
            line, column = line + 1, 0
        i += 1
        column += 1
    return stack, None


def _unclosed_bracket(text: str) -> str | None:
    """Return where the innermost bracket left open at the end of `text` is, as a phrase
    (`<` is not tracked)."""
    stack, _ = _scan_brackets(text, _CLOSERS)
    if not stack:
        return None
    opener, line, column, _ = stack[-1]
    return f"expected '{_CLOSERS[opener]}' to close the '{opener}' at line {line}, column {column}"


def refuse_deep_nesting(text: str, name: str = "<unknown>", start_offset: int = 0) -> None:
    """Raise a `ParseError` at the first bracket of `text` nested deeper than `MAX_NESTING`
    (xDSL's recursive parser would raise a `RecursionError`), if any."""
    deep = _scan_brackets(text, {**_CLOSERS, "<": ">"}, MAX_NESTING)[1]
    if deep is not None:
        span = Span(deep, deep + 1, Input(text, name), start_offset)
        raise ParseError(
            span, f"nested more than {MAX_NESTING} levels deep (brackets, regions, types)"
        )


def _format_parse_error(error: ParseError) -> str:
    """Format a parse error MLIR-style: `file:line:col: error: message` and the source line.

    When the parser ran out of input, the message says so and names the bracket left open
    (xDSL reports a truncated region as an empty "in block definition").
    """
    message = error.msg.strip()
    if error.msg.startswith("Unexpected character: "):  # the character may be whitespace
        message = f"unexpected character {_describe_char(error.msg[-1])}"
    elif "{first_char}" in message:  # xDSL's message leaves its placeholder unfilled
        message = message.replace("{first_char}", repr(error.span.text[:1]))
    content = error.span.input.content
    text = content.decode(errors="replace") if isinstance(content, bytes) else content
    if not text[error.span.start :].strip():
        if not text.strip():
            message = "empty input: expected an operation"
        else:
            if message in ("", "in block definition"):
                message = _unclosed_bracket(text) or ""
            message = f"unexpected end of input: {message[:1].lower()}{message[1:]}".rstrip(": ")
    context = _context(error.span)
    return "\n".join([f"{error.span.get_location()}: error: {message}", *context])


_LINE_BREAKS = str.maketrans(dict.fromkeys("\v\f\r\x1c\x1d\x1e\x85\u2028\u2029", " "))
"""Characters other than newline that end a line for `str.splitlines` (and some terminals):
shown as spaces in a diagnostic's source line, so that it stays one line under its caret."""


def _context(span: Span[str]) -> list[str]:
    """Return the source line of `span` and its caret line."""
    return [line.translate(_LINE_BREAKS) for line in span.print_with_context().split("\n")[1:3]]


def _describe_char(char: str) -> str:
    """Return `char` quoted, or its code point and name where it does not print."""
    if char.isprintable() and not char.isspace():
        return f"'{char}'"
    name = unicodedata.name(char, "a control character")
    if char == "\ufeff":
        name = "a byte-order mark"
    return f"U+{ord(char):04X} ({name.lower()})"


def _failing_op(error: DiagnosticException) -> tuple[_Source, Operation] | None:
    """Return the parsed op whose verifier raises `error`'s message, with its source."""
    for source in reversed(_SOURCES):
        for op in source.module.walk(region_first=True):
            if op not in source.starts:
                continue
            try:
                op.verify(verify_nested_ops=False)
            except Exception as exc:  # a verifier may raise anything
                if str(exc) == str(error):
                    return source, op
    return None


def _format_diagnostic(error: DiagnosticException) -> str:
    """Format a verifier or pass error: `file:line:col: error: message` with the source line
    of the op that does not verify, or `tinyopt: error: message` where no parsed op raises
    it (a pass's error, which names its pass, function or kernel)."""
    found = _failing_op(error)
    if found is None:
        return f"tinyopt: error: {error}"
    source, op = found
    start = source.starts[op]
    span = Span(start.start, start.end, Input(source.text, source.name), source.line_offset)
    return "\n".join([f"{span.get_location()}: error: {error}", *_context(span)])


def run_parser() -> argparse.ArgumentParser:
    """Return the argument parser of `tinyopt run`."""
    parser = argparse.ArgumentParser(
        prog="tinyopt run",
        description="Compile FILE, run it on random inputs on the GPU and compare it with "
        "the float64 numpy reference of its graph function.",
    )
    parser.add_argument("file", help="MLIR file holding a graph-level func.func")
    parser.add_argument("--func", help="function to run (default: the first one)")
    parser.add_argument("--bench", action="store_true", help="also time the kernels")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    parser.add_argument(
        "--scalar",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="value of the runtime scalar %%NAME (a position; default: random within its bounds)",
    )
    parser.add_argument("-p", "--passes", default=DEFAULT_PIPELINE, help="pass pipeline")
    return parser


def _scalar_values(args: argparse.Namespace) -> dict[int, int]:
    """Return the runtime scalars' values `tinyopt run --scalar` gives, by argument position,
    checked against their bounds; raises `CliError` naming a bad one."""
    module = TinyoptMain([args.file]).parse_file()
    try:
        return check.scalar_values(check.graph_function(module, args.func), args.scalar)
    except (KeyError, ValueError) as exc:
        raise CliError(str(exc.args[0])) from None


def run_command(args: argparse.Namespace) -> None:
    """Compile a graph function, run it on random inputs on the GPU and check it.

    Prints the largest relative error over the outputs (and with `--bench` the median time
    and effective bandwidth); raises `CliError` when the error exceeds the dtype's tolerance.
    Values given with `--scalar` are checked against their bounds first, then the file and the
    pipeline, on any machine.
    """
    from tinyopt.backends.cuda.nvrtc import gpu_available

    values = _scalar_values(args) if args.scalar else {}
    tool = TinyoptMain([args.file, "-p", args.passes])
    module = tool.parse_file()  # the file's own errors first, on any machine
    try:
        graph_func = check.graph_function(module, args.func).clone()
    except KeyError as exc:
        raise CliError(exc.args[0]) from None
    name = graph_func.sym_name.data
    tool.apply_passes(module)  # the pipeline's errors too, on any machine
    if not gpu_available():
        raise CliError("no CUDA GPU available")
    from tinyopt.backends.cuda.runtime import compile_module
    from tinyopt.backends.cuda.timing import time_function

    compiled = compile_module(module)

    inputs, device_inputs = check.device_inputs(graph_func, args.seed, values)
    run = compiled.function(name)
    outputs = run(*device_inputs)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    errors = check.errors_against_reference(graph_func, outputs, inputs)
    print(f"max rel error: {max(errors):.3e}")
    if args.bench:
        ms = time_function(run.bind(*device_inputs), [])
        nbytes = sum(a.nbytes for a in device_inputs) + sum(o.nbytes for o in outputs)
        print(f"median time: {ms:.4f} ms")
        print(f"effective bandwidth: {nbytes / (ms * 1e-3) / 1e9:.1f} GB/s")
    out_types = [check.element_type(t) for t in graph_func.function_type.outputs]
    failed = [
        f"output {i}: {e:.3e} > {check.TOLERANCES.get(t, 0.0):.0e} ({t})"
        for i, (e, t) in enumerate(zip(errors, out_types))
        if not e <= check.TOLERANCES.get(t, 0.0)
    ]
    if failed:
        raise CliError("result differs from the reference: " + "; ".join(failed))


def check_assoc_parser() -> argparse.ArgumentParser:
    """Return the argument parser of `tinyopt check-assoc`."""
    parser = argparse.ArgumentParser(
        prog="tinyopt check-assoc",
        description="Decide for each step function of FILE (a func.func with a tinyopt.init "
        "attribute) whether its sequential fold has a merge; print the merge or a "
        "counterexample (docs/associativity.md).",
    )
    parser.add_argument("file", help="MLIR file holding step functions")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random chunks")
    return parser


def check_assoc_command(args: argparse.Namespace) -> bool:
    """Print the associativity verdict of each step function; return whether all have a merge."""
    from tinyopt.passes.loop_rewrites.associativity import (
        StepError,
        check_associative,
        step_functions,
    )

    module = TinyoptMain([args.file]).parse_file()
    module.verify()
    steps = step_functions(module)
    if not steps:
        raise CliError(
            f"{args.file} has no step function (a func.func with a tinyopt.init attribute)"
        )
    verdicts = []
    for step in steps:
        try:
            verdicts.append(check_associative(step, args.seed))
        except StepError as exc:
            raise CliError(str(exc)) from None
        print(verdicts[-1].report())
    return all(v.associative for v in verdicts)


def _tuning_program(args: argparse.Namespace, arch: str) -> Program:
    """Returns the graph function `tinyopt tune` / `explain` work on, parsed and checked."""
    from tinyopt.passes.autotune.measure import Program

    module = TinyoptMain([args.file]).parse_file()
    module.verify()
    try:
        name = check.graph_function(module, args.func).sym_name.data
    except KeyError as exc:
        raise CliError(exc.args[0]) from None
    check_pipeline(args.passes, TINYOPT_UNIVERSE.all_passes)
    if {"plan", "tile", "to-cuda"} & {p.name for p in parse_pipeline(args.passes)}:
        raise CliError(f"-p gives the passes before tile (e.g. 'fuse'), got '{args.passes}'")
    return Program(Path(args.file).read_text(), name, args.passes, arch, args.seed)


def _add_program_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="MLIR file holding a graph-level func.func")
    parser.add_argument("--func", help="function to tune (default: the first one)")
    parser.add_argument("-p", "--passes", default="fuse", help="passes before tile (default: fuse)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs")


def tune_parser() -> argparse.ArgumentParser:
    """Return the argument parser of `tinyopt tune`."""
    from tinyopt.passes.autotune.search import SEARCHES

    parser = argparse.ArgumentParser(
        prog="tinyopt tune",
        description="Search the tile knobs of each kernel of FILE on the GPU (each candidate "
        "checked against the float64 reference before its time counts) and store the best "
        "in the tuning cache, which `tinyopt FILE -p fuse,apply-tuned,tile,to-cuda` then uses "
        "(docs/tuning.md).",
    )
    _add_program_arguments(parser)
    parser.add_argument("--method", choices=sorted(SEARCHES), default="mcts")
    parser.add_argument("--budget", type=int, default=64, help="trials per kernel (64)")
    parser.add_argument("--time", type=float, help="seconds per kernel")
    parser.add_argument("--patience", type=int, help="stop after N trials without improvement")
    parser.add_argument("--jobs", type=int, help="build processes (default: one per CPU)")
    parser.add_argument("--batch", type=int, default=8, help="candidates per search step (8)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per candidate")
    return parser


TUNE_POSITIVE = 1e-9
"""The least a time option of `tinyopt tune` may be (any positive number of seconds)."""

TUNE_LIMITS = {
    "budget": 1,
    "time": TUNE_POSITIVE,
    "patience": 1,
    "jobs": 1,
    "batch": 1,
    "timeout": TUNE_POSITIVE,
}
"""The least value of each numeric option of `tinyopt tune` (a search of 0 trials, a timeout of
-5 seconds or 0 build processes cannot run)."""


def tune_command(args: argparse.Namespace) -> None:
    """Tune every kernel of a graph function, print a summary and store the results."""
    from tinyopt.backends.cuda.nvrtc import arch_of_current_device, gpu_available

    for option, least in TUNE_LIMITS.items():
        value = getattr(args, option)
        if value is not None and not value >= least:
            at_least = "positive" if least == TUNE_POSITIVE else f"at least {least}"
            raise CliError(f"--{option} must be {at_least}, got {value}")
    program = _tuning_program(args, "sm_90a")  # the file's and the pipeline's errors first
    if not gpu_available():
        raise CliError(
            "tinyopt tune measures candidates on a CUDA GPU and none is available "
            "(`tinyopt explain` shows a knob's CUDA diff without one)"
        )
    from tinyopt.passes.autotune.cache import TuningCache, db_path, gpu_model
    from tinyopt.passes.autotune.report import failure_summary, progress_line, summary_table
    from tinyopt.passes.autotune.search import Budget
    from tinyopt.passes.autotune.tuner import tune
    from tinyopt.passes.autotune.workers import GpuMeasurer

    program = dataclasses.replace(program, arch=arch_of_current_device())
    budget = Budget(args.budget, args.time, args.patience)
    path, gpu = db_path(), gpu_model()
    end = "\r" if sys.stderr.isatty() else "\n"
    cache = TuningCache(path) if path else None
    try:
        with GpuMeasurer(args.jobs, args.timeout) as measurer:
            results = tune(
                program,
                measurer,
                args.method,
                budget,
                cache,
                gpu,
                lambda p: print(progress_line(p), end=end, file=sys.stderr, flush=True),
                args.batch,
            )
    finally:
        if cache is not None:
            cache.close()
    print(file=sys.stderr)
    print(summary_table(results))
    if failures := failure_summary(results):
        print("\nmost common failures:\n" + failures)
    if untuned := [r.name for r in results if r.best is None]:
        raise CliError(f"no candidate of {', '.join(untuned)} ran correctly (failures above)")
    where = f"stored in {path} for {gpu}" if path else "not stored (TINYOPT_TUNING_DB=off)"
    print(f"\ntuned configurations {where}")


def explain_parser() -> argparse.ArgumentParser:
    """Return the argument parser of `tinyopt explain`."""
    parser = argparse.ArgumentParser(
        prog="tinyopt explain",
        description="Show what one knob change does to a kernel: the unified diff of the "
        "generated CUDA and, on a GPU, the measured latency of both sides.",
    )
    _add_program_arguments(parser)
    parser.add_argument("--kernel", help="loop kernel to change (default: the first one)")
    parser.add_argument(
        "--knob", required=True, help="the change, as tile options: 'stages=1' or 'bm=64 bn=64'"
    )
    parser.add_argument(
        "--base", default="", help="the configuration it applies to (default: the defaults)"
    )
    return parser


def explain_command(args: argparse.Namespace) -> None:
    """Print the CUDA diff of a knob change and, with a GPU, both sides' latency."""
    from tinyopt.backends.cuda.nvrtc import arch_of_current_device, gpu_available
    from tinyopt.passes.autotune import explain

    gpu = gpu_available()
    program = _tuning_program(args, arch_of_current_device() if gpu else "sm_90a")
    try:
        base, change = explain.parse_config(args.base), explain.parse_config(args.knob)
        if not change:
            raise ValueError("--knob names no knob (give the change, e.g. 'stages=1')")
        explain.check_config({**base, **change})
        kernel = explain.pick_kernel(program, args.kernel)
    except (ValueError, KeyError) as exc:
        raise CliError(exc.args[0]) from None
    after_config = {**base, **change}
    left, right = explain.sides(kernel, base, change)
    labels = explain.label(base), explain.label(after_config)
    before, after = explain.cuda_text(program, left), explain.cuda_text(program, right)
    diff = explain.unified_diff(before, after, *labels)
    print(diff or f"(the generated CUDA is the same with {labels[1]})")
    if not gpu:
        print("note: no CUDA GPU, so the latency of each side was not measured")
        return
    from tinyopt.passes.autotune.measure import CudaRunner, InProcessMeasurer

    outcomes = InProcessMeasurer(CudaRunner()).measure(program, [left, right])
    for text, outcome in zip(labels, outcomes, strict=True):
        print(f"{text}: {f'{outcome.ms:.4f} ms' if outcome.ms is not None else outcome.reason}")
    if outcomes[0].ms and outcomes[1].ms:
        print(f"speedup: {outcomes[0].ms / outcomes[1].ms:.2f}x")


CAPTURE_DTYPES = ("f32", "f16", "bf16", "i32", "i64")
"""Element types `tinyopt capture --inputs` accepts (integers: embedding ids, all 0)."""


def capture_parser() -> argparse.ArgumentParser:
    """Return the argument parser of `tinyopt capture`."""
    parser = argparse.ArgumentParser(
        prog="tinyopt capture",
        description="Capture a PyTorch module into the graph dialect and print the MLIR "
        "(needs PyTorch: pip install -e '.[torch]'). Its arguments are the module's inputs, "
        "then its parameters and buffers.",
    )
    parser.add_argument(
        "target",
        help="FILE.py:NAME where NAME is a torch.nn.Module, or a callable without arguments "
        "(a class, a factory) returning one",
    )
    parser.add_argument(
        "--inputs",
        help="example input shapes and dtypes, e.g. '2x16x64xf32,64xbf16' (random normal "
        "values; i32/i64 ids are 0); by default FILE's NAME_inputs() or example_inputs() "
        "gives them",
    )
    parser.add_argument("--name", default="forward", help="name of the captured func.func")
    return parser


def _example_inputs(spec: str) -> list[object]:
    """Return random tensors for a `--inputs` spec such as `2x16xf32,8xbf16`."""
    import torch

    tensors: list[object] = []
    for item in spec.split(","):
        *dims, dtype = item.strip().split("x")
        if dtype not in CAPTURE_DTYPES or not all(d.isdigit() for d in dims):
            raise CliError(
                f"bad input spec '{item}' (expected e.g. 2x16xf32; dtypes: "
                f"{', '.join(CAPTURE_DTYPES)})"
            )
        shape = [int(d) for d in dims]
        if dtype in ("i32", "i64"):  # only the shape matters to the capture
            tensors.append(torch.zeros(shape, dtype=getattr(torch, f"int{dtype[1:]}")))
            continue
        torch_dtype = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
        tensors.append(torch.randn(shape, dtype=torch_dtype[dtype]))
    return tensors


def capture_command(args: argparse.Namespace) -> None:
    """Load the module named by `FILE.py:NAME`, capture it and print its MLIR."""
    try:
        import torch
    except ImportError:
        raise CliError("tinyopt capture needs PyTorch: pip install -e '.[torch]'") from None
    from tinyopt.frontends.torch_fx import FrontendError, capture

    path, _, name = args.target.rpartition(":")
    if not path or not name:
        raise CliError(f"expected FILE.py:NAME, got '{args.target}'")
    spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    if spec is None or spec.loader is None or not Path(path).is_file():
        raise CliError(f"cannot load {path} (a Python file is expected)")
    source = importlib.util.module_from_spec(spec)
    torch.manual_seed(0)
    try:  # the user's code may raise anything
        spec.loader.exec_module(source)
        obj = getattr(source, name, None)
        if obj is None:
            raise CliError(f"{path} defines no '{name}'")
        module = obj if isinstance(obj, torch.nn.Module) else obj() if callable(obj) else None
        if not isinstance(module, torch.nn.Module):
            raise CliError(f"{path}:{name} is not a torch.nn.Module nor returns one")
        given = (getattr(source, f, None) for f in (f"{name}_inputs", "example_inputs"))
        example = next((f for f in given if callable(f)), None)
        if args.inputs is not None:
            inputs = _example_inputs(args.inputs)
        elif example is not None:
            inputs = list(example())
        else:
            raise CliError(
                f"give --inputs (e.g. 2x16xf32) or define {name}_inputs() or example_inputs() "
                f"in {path}"
            )
    except CliError:
        raise
    except SystemExit as exc:
        raise CliError(f"{path} called sys.exit({exc.code!r}) while being loaded") from None
    except Exception as exc:
        raise CliError(f"{path}: {type(exc).__name__}: {exc}") from None
    logging.disable(logging.ERROR)  # torch.export logs each failed trace before raising it
    try:
        captured = capture(module.eval(), *inputs, name=args.name)
    except FrontendError as exc:
        raise CliError(str(exc)) from None
    finally:
        logging.disable(logging.NOTSET)
    print(captured.module)


SUBCOMMANDS = {
    "run": (run_parser, run_command),
    "capture": (capture_parser, capture_command),
    "tune": (tune_parser, tune_command),
    "explain": (explain_parser, explain_command),
    "check-assoc": (check_assoc_parser, check_assoc_command),
}
"""Each subcommand's parser and command (which returns False on a failed check-assoc)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `tinyopt` command line; return its exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    _SOURCES.clear()  # another call's inputs (main may run many times in one process)
    where = "<stdin>"
    try:
        if argv[:1] and argv[0] in SUBCOMMANDS:
            make_parser, command = SUBCOMMANDS[argv[0]]
            args = make_parser().parse_args(argv[1:])
            where = args.target if argv[0] == "capture" else args.file
            if getattr(args, "seed", 0) < 0:  # numpy's generators raised a ValueError
                raise CliError(f"--seed must be at least 0, got {args.seed}")
            if command(args) is False:
                return 1
        else:
            tool = TinyoptMain(argv)
            where = tool.get_input_name()
            tool.run()
    except CliError as exc:
        print(exc if exc.located else f"tinyopt: error: {exc}", file=sys.stderr)
    except (CudaError, OSError) as exc:
        print(f"tinyopt: error: {exc}", file=sys.stderr)
    except ParseError as exc:
        print(_format_parse_error(exc), file=sys.stderr)
    except DiagnosticException as exc:
        print(_format_diagnostic(exc), file=sys.stderr)
    except UnicodeDecodeError as exc:
        print(f"tinyopt: error: {where}: not UTF-8 text ({exc.reason})", file=sys.stderr)
    except RecursionError:
        print(
            f"tinyopt: error: {where}: nested or chained too deeply for Python's recursion "
            f"limit ({sys.getrecursionlimit()})",
            file=sys.stderr,
        )
    except MemoryError:
        print(f"tinyopt: error: {where}: out of memory", file=sys.stderr)
    else:
        return 0
    return 1
