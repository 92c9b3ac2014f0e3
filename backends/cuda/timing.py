"""Time GPU work with CUDA events."""

import statistics
import time
from collections.abc import Callable, Sequence

from cuda.core import EventOptions, Stream

from tinyopt.backends.cuda.launch import current_device, synchronize


def time_function(
    function: Callable[..., object],
    args: Sequence[object],
    warmup: int = 10,
    reps: int = 100,
    stream: Stream | None = None,
) -> float:
    """Return the median time in milliseconds of `function(*args)`, measured by CUDA events.

    Events are recorded on `stream` (default: the device's default stream) around each
    call; the work must be ordered on that stream for the timing to cover it.
    """
    stream = stream or current_device().default_stream
    for _ in range(warmup):
        function(*args)
    timed = EventOptions(timing_enabled=True)
    pairs = []
    for _ in range(reps):
        start = stream.record(options=timed)
        function(*args)
        pairs.append((start, stream.record(options=timed)))
    synchronize(stream, "timed function")
    return statistics.median(end - start for start, end in pairs)


def wall_ms_per_call(
    function: Callable[..., object],
    args: Sequence[object] = (),
    calls: int = 1000,
    repeats: int = 5,
    stream: Stream | None = None,
) -> float:
    """Return the wall time in milliseconds per call of `calls` back-to-back calls of
    `function(*args)`, the median over `repeats` runs.

    `stream` is synchronized before each run and once after its calls, so this is what a
    caller sees: a call's host work that hides behind kernels still running costs nothing,
    host work the device has to wait for shows, and so do copies a call queues.
    """
    stream = stream or current_device().default_stream
    function(*args)
    runs = []
    for _ in range(repeats):
        synchronize(stream, "timed function")
        start = time.perf_counter()
        for _ in range(calls):
            function(*args)
        synchronize(stream, "timed function")
        runs.append((time.perf_counter() - start) * 1e3 / calls)
    return statistics.median(runs)
