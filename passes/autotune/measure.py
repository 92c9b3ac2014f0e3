"""Measuring one candidate: lower and compile it (`build`, no GPU), run it, check it against
the float64 reference (`Gate`), and only then time it, so a fast wrong kernel never wins. The
`Runner` is injectable: `CudaRunner` on a GPU, a fake one in tests.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import DiagnosticException

from tinyopt.backends import check
from tinyopt.backends.cuda.errors import CudaCompileError, CudaError
from tinyopt.backends.reference import run_reference
from tinyopt.compiler import apply_pipeline, context, parse
from tinyopt.dialects import loop, tile
from tinyopt.passes.autotune.cache import kernel_key
from tinyopt.passes.autotune.search import Config
from tinyopt.passes.tile.knobs import Knobs
from tinyopt.passes.tile.planner import checked, plan_kernels
from tinyopt.passes.tile.target import H200
from tinyopt.passes.tile.tile_pass import TilePass

if TYPE_CHECKING:
    from tinyopt.backends.cuda.runtime import HostFunction


@dataclass(frozen=True)
class Program:
    """What is tuned: a graph function of an MLIR file, lowered by `prefix` before `tile`."""

    text: str
    func: str
    prefix: str = "fuse"
    arch: str = "sm_90a"
    seed: int = 0

    def loop_module(self) -> ModuleOp:
        """Returns the program lowered to loop kernels (by `prefix`)."""
        return apply_pipeline(parse(self.text), self.prefix)


@dataclass(frozen=True)
class Candidate:
    """The knobs of each kernel, by kernel key; kernels not named take the defaults."""

    configs: tuple[tuple[str, tuple[tuple[str, int | str], ...]], ...]

    @staticmethod
    def of(configs: dict[str, Config]) -> Candidate:
        """Builds a candidate from {kernel key: config}."""
        return Candidate(tuple(sorted((k, tuple(sorted(c.items()))) for k, c in configs.items())))

    def knobs(self, kernel: loop.KernelOp) -> Knobs:
        """Returns the knobs this candidate gives `kernel`."""
        return Knobs(**dict(dict(self.configs).get(kernel_key(kernel), ())))


@dataclass(frozen=True)
class Outcome:
    """A measured time in ms, or why the candidate failed (then it can never win)."""

    ms: float | None
    reason: str | None = None


@dataclass(frozen=True)
class Built:
    """A candidate lowered to a `to-cuda` module whose kernels are compiled (in the cubin cache)."""

    text: str
    digest: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "digest", hashlib.sha256(self.text.encode()).hexdigest())


def tile_with(module: ModuleOp, knobs_for: Callable[[loop.KernelOp], Knobs]) -> None:
    """Plans each loop kernel of the module with the knobs `knobs_for` gives it (raising the
    rules' diagnostic where they refuse them), then emits every kernel from its plan (`tile`)."""
    for kernel in list(loop.kernels(module)):
        plan_kernels(module, kernel, checked(knobs_for(kernel)), H200)
    TilePass().apply(context(), module)


REFUSAL = "does not lower: "
"""How the reason of a candidate the schedule rules refuse starts."""


def build(program: Program, candidate: Candidate) -> Built | Outcome:
    """Lowers the program with the candidate's knobs and compiles every kernel with NVRTC."""
    from tinyopt.backends.cuda.cache import cached_compile

    module = program.loop_module()
    try:
        tile_with(module, candidate.knobs)
        apply_pipeline(module, "to-cuda")
    except DiagnosticException as e:
        return Outcome(None, f"{REFUSAL}{e}")
    except Exception as e:  # a bug in a rule: a failure on record, not the end of the search
        return Outcome(None, f"lowering crashed: {type(e).__name__}: {_first_line(e)}")
    for op in module.ops:
        if isinstance(op, tile.CudaKernelOp):
            try:
                cached_compile(op.source.data, op.sym_name.data, program.arch)
            except CudaCompileError as e:
                first = next((line for line in e.log.splitlines() if "error" in line), e.log)
                return Outcome(None, f"compile error: {first.strip()[:200]}")
            except CudaError as e:
                return Outcome(None, f"compile error: {_first_line(e)}")
    return Built(str(module))


def _first_line(error: Exception) -> str:
    return (str(error).splitlines() or [""])[0][:200]


class Gate:
    """The program's random inputs and float64 reference outputs, and the tolerance. The error
    ‖out − ref‖ / ‖ref‖ is taken in float32 against the reference rounded once (docs/tuning.md)."""

    def __init__(self, program: Program) -> None:
        graph = check.graph_function(parse(program.text), program.func)
        self.name = program.func
        self.inputs, self.device_inputs = check.device_inputs(graph, program.seed)
        self.references = run_reference(graph, *self.inputs)
        self.types = [check.element_type(t) for t in graph.function_type.outputs]
        self._references32 = [r.astype(np.float32) for r in self.references]
        self._scales = [float(np.linalg.norm(r)) or 1.0 for r in self.references]

    def wrong(self, outputs: Sequence[np.ndarray]) -> str | None:
        """Returns why the outputs are wrong, or None when each is within its tolerance."""
        expected = zip(self._references32, self._scales, self.types, strict=True)
        for i, (out, (ref, scale, t)) in enumerate(zip(outputs, expected, strict=True)):
            out = np.asarray(out)
            if out.dtype != np.float32:
                out = check.from_storage(out, t).astype(np.float32)
            error = float(np.linalg.norm(out - ref)) / scale
            if not error <= check.TOLERANCES[t]:
                return f"wrong result: output {i} rel error {error:.2e} > {check.TOLERANCES[t]:.0e}"
        return None


class Runner(Protocol):
    """Runs a compiled candidate: its outputs, and a call that returns its time in ms."""

    def run(
        self, built: Built, name: str, inputs: Sequence[np.ndarray]
    ) -> tuple[Sequence[np.ndarray], Callable[[], float]]: ...


SHORT_MS = 0.02
"""Kernels faster than this are timed as CUDA-graph replays, which hide the launch overhead."""


def time_host_function(function: HostFunction, inputs: Sequence[np.ndarray]) -> float:
    """Returns the median time in ms of a host function's kernels (inputs uploaded once): the
    one place the tuner times a kernel (a window of about 20 ms, docs/tuning.md)."""
    from tinyopt.backends.cuda.timing import time_function

    bound = function.bind(*inputs)
    probe = time_function(bound, [], warmup=2, reps=3)
    launch = bound.graph() if probe < SHORT_MS else bound
    reps = int(min(100, max(5, 20.0 / max(probe, 1e-3))))
    return time_function(launch, [], warmup=2, reps=reps)


class CudaRunner:
    """Runs candidates on the current GPU."""

    def run(
        self, built: Built, name: str, inputs: Sequence[np.ndarray]
    ) -> tuple[Sequence[np.ndarray], Callable[[], float]]:
        from tinyopt.backends.cuda.runtime import compile_module

        function = compile_module(parse(built.text)).function(name)
        outputs = function(*inputs)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        return outputs, lambda: time_host_function(function, inputs)


def measure_built(runner: Runner, gate: Gate, built: Built) -> Outcome:
    """Runs a compiled candidate, rejects wrong outputs, and only then times it."""
    try:
        outputs, timer = runner.run(built, gate.name, gate.device_inputs)
        if (wrong := gate.wrong(outputs)) is not None:
            return Outcome(None, wrong)
        return Outcome(timer())
    except CudaError as e:
        return Outcome(None, f"launch error: {_first_line(e)}")
    except Exception as e:  # a failing candidate must not end the search; its reason is kept
        return Outcome(None, f"error: {type(e).__name__}: {_first_line(e)}")


class Measurer(Protocol):
    """Measures candidates of a program (in parallel where it can)."""

    parallelism: int

    def measure(self, program: Program, candidates: Sequence[Candidate]) -> list[Outcome]: ...


class InProcessMeasurer:
    """Builds and runs candidates one after another in this process (tests, small jobs)."""

    parallelism = 1

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self.gates: dict[Program, Gate] = {}
        self.seen: dict[str, Outcome] = {}

    def measure(self, program: Program, candidates: Sequence[Candidate]) -> list[Outcome]:
        """Measures each candidate; identical generated code is measured once."""
        gate = self.gates.get(program) or self.gates.setdefault(program, Gate(program))
        outcomes = []
        for candidate in candidates:
            built = build(program, candidate)
            if isinstance(built, Built):
                if built.digest not in self.seen:
                    self.seen[built.digest] = measure_built(self.runner, gate, built)
                built = self.seen[built.digest]
            outcomes.append(built)
        return outcomes
