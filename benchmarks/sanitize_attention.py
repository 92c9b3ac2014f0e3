"""Runs every flash-attention kernel variant once on small shapes, for compute-sanitizer.

Usage (from the repo root):
  compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 1 \
      python benchmarks/sanitize_attention.py
  compute-sanitizer --tool racecheck --report-api-errors no --error-exitcode 1 \
      python benchmarks/sanitize_attention.py
`--report-api-errors no`: cuda.core probes each kernel's parameter count with driver calls that
fail by design (Kernel.bind); those host API errors are not errors of the kernels.
Each output is also checked against the float64 numpy reference.
"""

from __future__ import annotations

import os
import sys

from tinyopt.backends.check import device_inputs, errors_against_reference, graph_function
from tinyopt.backends.cuda.runtime import compile_module
from tinyopt.compiler import lower

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from attention_programs import attention, attention_spelled_out, decode_attention  # noqa: E402

PIPELINE = "decompose,fuse,flash-attention,tile{attn=sync},to-cuda"
WGMMA = PIPELINE.replace("attn=sync", "attn=wgmma")
TOLERANCE = 1e-2


def programs() -> list[tuple[str, str, str]]:
    """Returns (name, program, pipeline): head dims 64/128, causal, GQA, odd S, f16/bf16, on
    the mma.sync schedule (`attn=sync`) and again on the TMA + wgmma one (`attn=wgmma`), which
    also runs head dims 32, 96, 192 and 256, more work items than SMs, the opt-in `afma` and
    `aconsumers=3`, and a prefill chunk at a runtime count of valid keys."""
    sync = _sync_programs()
    wgmma = [
        (f"{name} attn=wgmma", text, pipeline.replace("tile{attn=sync},", "tile{attn=wgmma},"))
        for name, text, pipeline in sync
    ]
    head_dims = [
        (
            f"d{d} bf16{' causal' if causal else ''} s{s} attn=wgmma",
            attention(1, 2, s, d, "bf16", causal),
            WGMMA,
        )
        for d, causal, s in ((32, False, 130), (96, True, 200), (192, True, 150), (256, False, 100))
    ]
    # 2 query tiles x 140 heads: more items than SMs, so persistent blocks walk several.
    persistent = [
        ("d64 bf16 causal s200 h140 attn=wgmma", attention(1, 140, 200, 64, "bf16", True), WGMMA)
    ]
    knobs = [
        (f"d64 bf16 causal s300 {k}", attention(1, 2, 300, 64, "bf16", True), _wgmma_with(k))
        for k in ("afma=2", "aconsumers=3", "aconsumers=3 afma=4")
    ]
    # A prefill chunk into a cache of L valid keys: each query tile stops at its own last key.
    chunk = [
        (
            "d64 bf16 causal chunk s200 of 512 valid attn=wgmma",
            decode_attention(1, 4, 2, 200, 512, 64, causal=True, valid=True),
            WGMMA,
        )
    ]
    return sync + wgmma + head_dims + persistent + knobs + chunk


def _wgmma_with(knobs: str) -> str:
    return WGMMA.replace("tile{attn=wgmma}", f"tile{{attn=wgmma {knobs}}}")


def _sync_programs() -> list[tuple[str, str, str]]:
    return [
        ("d64 bf16 s130", attention(1, 2, 130, 64, "bf16"), PIPELINE),
        ("d128 bf16 causal s97", attention(1, 2, 97, 128, "bf16", causal=True), PIPELINE),
        ("d128 bf16 causal s300", attention(1, 2, 300, 128, "bf16", causal=True), PIPELINE),
        ("d64 f16 gqa causal s77", attention(1, 4, 77, 64, "f16", True, kv_heads=2), PIPELINE),
        ("d128 f16 s64", attention(2, 1, 64, 128, "f16"), PIPELINE),
        (
            "mask input bf16 s70",
            attention_spelled_out(2, 70, 64, "bf16", scale=0.125),
            "fuse,flash-attention,tile{attn=sync},to-cuda",
        ),
    ]


def main() -> None:
    failures = 0
    for name, text, pipeline in programs():
        program, module = lower(text, pipeline)
        graph = graph_function(program)
        inputs, arrays = device_inputs(graph, seed=3)
        outputs = compile_module(module).function(graph.sym_name.data)(*arrays)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        errors = errors_against_reference(graph, outputs, inputs)
        ok = all(e <= TOLERANCE for e in errors)
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {max(errors):.1e}", flush=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
