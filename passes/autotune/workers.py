"""The parallel measurer: NVRTC builds in a process pool, one timing process per visible GPU.

A GPU process that times out, dies or meets a CUDA error is replaced (docs/tuning.md).
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import queue
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from multiprocessing.connection import Connection

from tinyopt.passes.autotune.measure import (
    Built,
    Candidate,
    CudaRunner,
    Gate,
    Outcome,
    Program,
    Runner,
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


def _gpu_main(conn: Connection, device: int, runner_type: type[Runner]) -> None:
    """A GPU process: ("program", Program) sets up the gate; ("measure", Built) answers."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = visible.split(",")[device] if visible else str(device)
    runner, gate = runner_type(), None
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
            conn.send(measure_built(runner, gate, payload))
            gc.collect()  # free the candidate's device buffers now, not when cycles are found


class _GpuProcess:
    """One GPU's timing process, restarted when it hangs or dies."""

    def __init__(self, device: int, timeout: float, runner_type: type[Runner]) -> None:
        self.device, self.timeout, self.runner_type = device, timeout, runner_type
        self.program: Program | None = None
        self._start()

    def _start(self) -> None:
        self.conn, child = _SPAWN.Pipe()
        self.process = _SPAWN.Process(
            target=_gpu_main, args=(child, self.device, self.runner_type), daemon=True
        )
        self.process.start()
        child.close()

    def _restart(self) -> None:
        self.process.kill()
        self.process.join()
        self.conn.close()
        self.program = None
        self._start()

    def _ask(self, message: tuple, timeout: float) -> Outcome | str:
        """Returns the process's answer, or "crashed" or "timeout"."""
        try:
            self.conn.send(message)
            if not self.conn.poll(timeout):
                return "timeout"
            return self.conn.recv()
        except (EOFError, OSError):
            return "crashed"

    def measure(self, program: Program, built: Built) -> Outcome:
        """Runs, checks and times one candidate of `program`."""
        if not self.process.is_alive():
            self._restart()
        if self.program != program:
            if not isinstance(answer := self._ask(("program", program), 1800.0), Outcome):
                self._restart()
                return Outcome(None, f"the GPU process {answer} computing the reference")
            self.program = program
        answer = self._ask(("measure", built), self.timeout)
        if not isinstance(answer, Outcome):
            self._restart()
            return Outcome(
                None, f"timeout after {self.timeout:g} s" if answer == "timeout" else "crashed"
            )
        if answer.reason is not None and answer.reason.startswith("launch error"):
            self._restart()  # the CUDA context may be unusable after a fault
        return answer

    def close(self) -> None:
        """Stops the process."""
        self.conn.close()
        self.process.join(5)
        if self.process.is_alive():
            self.process.kill()


class GpuMeasurer:
    """Measures candidates with `jobs` build processes and one process per visible GPU, each
    running a `runner_type` (the GPU's `CudaRunner`; tests pass fakes)."""

    def __init__(
        self, jobs: int | None = None, timeout: float = 60.0, runner_type: type[Runner] = CudaRunner
    ) -> None:
        self.parallelism = jobs or os.cpu_count() or 1
        self.builders = ProcessPoolExecutor(self.parallelism, mp_context=_SPAWN)
        self.gpus = [_GpuProcess(d, timeout, runner_type) for d in range(max(1, gpu_count()))]
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
        """Builds the candidates in parallel; each distinct build goes to a free GPU as soon
        as it is ready, so building and timing overlap."""
        todo = [c for c in dict.fromkeys(candidates) if (program, c) not in self.built]
        builds = {self.builders.submit(build, program, c): c for c in todo}
        timing: dict[str, Future[Outcome]] = {}
        for done in as_completed(builds):
            result = self.built[program, builds[done]] = done.result()
            fresh = isinstance(result, Built) and result.digest not in self.seen
            if fresh and result.digest not in timing:
                timing[result.digest] = self.dispatch.submit(self._on_gpu, program, result)
        self.seen.update((digest, future.result()) for digest, future in timing.items())
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
