"""What a call costs beyond its kernels: tinyopt's `CompiledModel` next to torch eager and
torch.compile (default mode) in one run, the measure of issue 19, item 5.

Models: a LayerNorm over 4096x768 fp32 (one kernel), Llama's RMSNorm with its fp32 upcast over
4096x4096 bf16 (one kernel), and the Llama block of examples/llama_block.py in bf16 (`block()`:
hidden 64, seq 16; its kernels are so short that the call is mostly overhead). Columns:

- kernels, kernel us: the device work of one call (kernels, copies, memsets) as the torch
  profiler records it over 100 calls: how many, and their summed GPU time;
- call us: the wall time per call of 1000 back-to-back calls synchronized once at the end
  (median of 5 runs): host work hidden behind running kernels is free, host work the GPU waits
  for is not;
- overhead us: call us - kernel us;
- host us: the CPU time of one call made while the GPU is idle (median of 200), the latency a
  call adds when nothing hides it.

Usage: python benchmarks/bench_call_overhead.py [--out overhead.md]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence

import torch
from cuda.core import Stream
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from harness import publish
from tinyopt.backends.cuda.launch import current_device
from tinyopt.backends.cuda.timing import wall_ms_per_call
from tinyopt.frontends.compiled_model import CompiledModel

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from programs import load_example  # noqa: E402

llama = load_example("llama_block.py")

PROFILED_CALLS = 100


def call_cost(
    function: Callable[..., object], inputs: Sequence[torch.Tensor]
) -> tuple[float, float, float]:
    """Return a call's device events (kernels, copies, memsets), their GPU microseconds and the
    call's microseconds back to back (the kernels, kernel us and call us columns).

    The profiler runs after the timing, as launches may be slower in a profiled process.
    """
    call = back_to_back_us(function, inputs)
    return (*device_work(function, inputs), call)


def back_to_back_us(function: Callable[..., object], inputs: Sequence[torch.Tensor]) -> float:
    """Return the wall microseconds per call of 1000 back-to-back calls (median of 5 runs)."""
    current_device()
    stream = Stream.from_handle(torch.cuda.current_stream().cuda_stream)
    return wall_ms_per_call(function, inputs, stream=stream) * 1e3


def device_work(
    function: Callable[..., object], inputs: Sequence[torch.Tensor]
) -> tuple[float, float]:
    """Return the device events per call and their GPU microseconds per call."""
    function(*inputs)
    torch.cuda.synchronize()
    # acc_events: one profiling cycle, without the warning that events of others are dropped
    with profile(activities=[ProfilerActivity.CUDA], acc_events=True) as profiled:
        for _ in range(PROFILED_CALLS):
            function(*inputs)
        torch.cuda.synchronize()
    events = [e for e in profiled.events() if e.device_type == DeviceType.CUDA]
    if not events:
        raise RuntimeError("the profiler recorded no device event: is CUPTI available?")
    busy_us = sum(e.time_range.elapsed_us() for e in events)
    return len(events) / PROFILED_CALLS, busy_us / PROFILED_CALLS


def host_us(
    function: Callable[..., object], inputs: Sequence[torch.Tensor], samples: int = 200
) -> float:
    """Return the median CPU time of one call made with the GPU idle, in microseconds."""
    times = []
    for _ in range(samples):
        torch.cuda.synchronize()
        start = time.perf_counter()
        function(*inputs)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def models() -> list[tuple[str, torch.nn.Module, tuple[torch.Tensor, ...]]]:
    """Return the benchmarked models on the GPU with their inputs."""
    torch.manual_seed(0)
    layer_norm = torch.nn.LayerNorm(768).to("cuda")
    rms_norm = llama.RMSNorm(4096).to("cuda", torch.bfloat16)
    block = llama.block_bf16().to("cuda").eval()
    return [
        ("LayerNorm fp32 4096x768", layer_norm, (torch.randn(4096, 768, device="cuda"),)),
        (
            "RMSNorm bf16 4096x4096 (fp32 upcast)",
            rms_norm,
            (torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16),),
        ),
        (
            "Llama block bf16 (hidden 64, seq 16)",
            block,
            tuple(x.to("cuda") for x in llama.block_bf16_inputs()),
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    lines = [
        f"Call overhead on {torch.cuda.get_device_name()}, {time.strftime('%Y-%m-%d')}",
        "",
        "| model | implementation | kernels | kernel us | call us | overhead us | host us |",
        "|---|---|---|---|---|---|---|",
    ]
    with torch.no_grad():
        rows = []
        for name, module, inputs in models():
            rows.append((name, "torch eager", module, inputs))
            rows.append((name, "torch.compile", torch.compile(module), inputs))
            rows.append((name, "tinyopt CompiledModel", CompiledModel(module, *inputs), inputs))
        # every row is timed before any is profiled, as launches may be slower afterwards
        timed = [(back_to_back_us(f, inputs), host_us(f, inputs)) for _, _, f, inputs in rows]
        for (name, implementation, function, inputs), (call_us, host) in zip(rows, timed):
            kernels, kernel_us = device_work(function, inputs)
            lines.append(
                f"| {name} | {implementation} | {kernels:g} | {kernel_us:.1f} | "
                f"{call_us:.1f} | {call_us - kernel_us:.1f} | {host:.1f} |"
            )
    publish(lines, args.out)


if __name__ == "__main__":
    main()
