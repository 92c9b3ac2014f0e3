"""Time GPU work with CUDA events."""

import statistics
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
