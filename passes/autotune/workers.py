"""The parallel measurer: NVRTC builds in a process pool, one timing process per visible GPU.

Builds (lowering and NVRTC, no GPU) run on every CPU. Each GPU gets its own process, pinned
with CUDA_VISIBLE_DEVICES, that computes the program's reference once and then runs, checks
and times one compiled candidate at a time. A candidate that does not answer within
`timeout` seconds is recorded as a timeout and its process replaced; so is one whose process
died, and after a CUDA error the process is replaced too (its context may be unusable).
Identical generated code is measured once per measurer, across searches.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from multiprocessing.connection import Connection

from tinyopt.passes.autotune.measure import (
    Built,
    Candidate,
    CudaRunner,
    Gate,
    Outcome,
    Program,
    build,
    measure_built,
)

_SPAWN = multiprocessing.get_context("spawn")


def gpu_count() -> int:
    """Returns the number of visible GPUs (0 without a driver)."""
    from cuda.bindings import driver

    from tinyopt.backends.cuda.nvrtc import gpu_available

    if not gpu_available():
        return 0
    _, count = driver.cuDeviceGetCount()
    return int(count)


def _gpu_main(conn: Connection, device: int) -> None:
    """A GPU process: ("program", Program) sets up the gate; ("measure", Built) answers."""
    os.environ["CUDA_VISIBLE_DEVICES"] = str(device)
    runner, gate = CudaRunner(), None
    while True:
        try:
            request, payload = conn.recv()
        except EOFError:
            return
        if request == "program":
            gate = Gate(payload)
            conn.send(Outcome(None))
        else:
            assert gate is not None
            outcome = measure_built(runner, gate, payload)
            conn.send(outcome)
            if outcome.reason and outcome.reason.startswith("launch error"):
                return


class _GpuProcess:
    """One GPU's timing process, restarted when it hangs or dies."""

    def __init__(self, device: int, timeout: float) -> None:
        self.device, self.timeout = device, timeout
        self.program: Program | None = None
        self._start()

    def _start(self) -> None:
        self.conn, child = _SPAWN.Pipe()
        self.process = _SPAWN.Process(target=_gpu_main, args=(child, self.device), daemon=True)
        self.process.start()
        child.close()

    def _restart(self) -> None:
        self.process.kill()
        self.process.join()
        self.conn.close()
        self.program = None
        self._start()

    def _ask(self, message: tuple, timeout: float) -> Outcome | None:
        try:
            self.conn.send(message)
            if self.conn.poll(timeout):
                return self.conn.recv()
        except (EOFError, OSError):
            pass
        return None

    def measure(self, program: Program, built: Built) -> Outcome:
        """Runs, checks and times one candidate of `program`."""
        if not self.process.is_alive():
            self._restart()
        if self.program != program:
            if self._ask(("program", program), 1800.0) is None:
                self._restart()
                return Outcome(None, "the GPU process failed to compute the reference")
            self.program = program
        outcome = self._ask(("measure", built), self.timeout)
        if outcome is None:
            alive = self.process.is_alive()
            self._restart()
            return Outcome(None, f"timeout after {self.timeout:g} s" if alive else "crashed")
        return outcome

    def close(self) -> None:
        """Stops the process."""
        self.conn.close()
        self.process.join(5)
        if self.process.is_alive():
            self.process.kill()


class GpuMeasurer:
    """Measures candidates with `jobs` build processes and one process per visible GPU."""

    def __init__(self, jobs: int | None = None, timeout: float = 60.0) -> None:
        self.parallelism = jobs or os.cpu_count() or 1
        self.builders = ProcessPoolExecutor(self.parallelism, mp_context=_SPAWN)
        self.gpus = [_GpuProcess(d, timeout) for d in range(max(1, gpu_count()))]
        self.idle: queue.Queue[_GpuProcess] = queue.Queue()
        for gpu in self.gpus:
            self.idle.put(gpu)
        self.dispatch = ThreadPoolExecutor(len(self.gpus))
        self.seen: dict[str, Outcome] = {}
        self.built: dict[tuple[Program, Candidate], Built | Outcome] = {}

    def _on_gpu(self, program: Program, built: Built) -> Outcome:
        gpu = self.idle.get()
        try:
            return gpu.measure(program, built)
        finally:
            self.idle.put(gpu)

    def measure(self, program: Program, candidates: Sequence[Candidate]) -> list[Outcome]:
        """Builds the candidates in parallel, then times each distinct one on a free GPU."""
        todo = [c for c in dict.fromkeys(candidates) if (program, c) not in self.built]
        for candidate, result in zip(
            todo, self.builders.map(build, [program] * len(todo), todo), strict=True
        ):
            self.built[program, candidate] = result
        fresh = {
            b.digest: b
            for c in candidates
            if isinstance(b := self.built[program, c], Built) and b.digest not in self.seen
        }
        timed = self.dispatch.map(lambda b: self._on_gpu(program, b), fresh.values())
        self.seen.update(zip(fresh, timed, strict=True))
        results = [self.built[program, c] for c in candidates]
        return [self.seen[r.digest] if isinstance(r, Built) else r for r in results]

    def close(self) -> None:
        """Stops the build and GPU processes."""
        self.builders.shutdown(cancel_futures=True)
        self.dispatch.shutdown()
        for gpu in self.gpus:
            gpu.close()

    def __enter__(self) -> GpuMeasurer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
