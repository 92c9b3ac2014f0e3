"""Decode attention with its 16-byte `cp.async` copies carrying an L2 prefetch size, end to end
against cuDNN in one process: the question the twenty-seventh session left (benchmarks/RESULTS.md:
on an H100 the partial kernel of B8 L32768 ran 1.5% faster with `.L2::128B` on its copies, the
nineteenth session's `.L2::256B` changed nothing on the H200 at three shapes and cost 3% at
1×4096).

Each of issue 20's four shapes (GQA 32/8, D 128, bf16, one query; the program compiled once for
32768 keys with L at run time, as `bench_decode.py --parts attention`) is lowered once; each
variant rewrites the printed `cp.async.cg.shared.global` of every kernel (a probe: no knob takes
it) and compiles that, checked against float64 at the first and last batch index and timed as
a bound call (`do_bench`, L2 flushed), with cuDNN's SDPA timed in the same process.

Usage: python benchmarks/probe_decode_copies.py [--variants plain,L2::128B,L2::256B]   (a GPU)
"""

from __future__ import annotations

import argparse

from bench_decode import ATTENTION_SHAPES, _reference, attention_program
from xdsl.dialects.builtin import StringAttr

from tinyopt.backends.cuda.runtime import compile_module
from tinyopt.compiler import lower
from tinyopt.dialects import tile

PIPELINE = "decompose,fuse,flash-attention,tile,to-cuda"
CAPACITY = 32768
COPY = "cp.async.cg.shared.global "
"""The printed 16-byte copy's opcode (`backends/cuda/printer.cp_async_helper`)."""


def rewritten(module, variant: str):  # noqa: ANN001, ANN201 (xDSL modules)
    """A copy of the lowered `module` whose kernels' 16-byte copies carry `.{variant}`."""
    copy = module.clone()
    for op in copy.walk():
        if isinstance(op, tile.CudaKernelOp) and variant != "plain":
            source = op.source.data
            assert COPY in source or "cp.async" not in source, "the printed copy changed"
            op.properties["source"] = StringAttr(
                source.replace(COPY, COPY.rstrip() + f".{variant} ")
            )
    return copy


def main() -> None:
    import torch
    from harness import median_ms, rel_error
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    parser = argparse.ArgumentParser()
    parser.add_argument("--variants", default="plain,L2::128B,L2::256B")
    variants = parser.parse_args().variants.split(",")
    print("| B×L | cuDNN µs | " + " | ".join(f"{v} µs (× cuDNN, err)" for v in variants) + " |")
    print("|---|---|" + "---|" * len(variants))
    lowered = {}
    for batch, keys in ATTENTION_SHAPES:
        if batch not in lowered:
            module = lower(attention_program(batch, CAPACITY), PIPELINE)[1]
            lowered[batch] = {
                name: compile_module(rewritten(module, name), poison=False, sync=False).function(
                    "decode"
                )
                for name in variants
            }
        q = torch.randn(batch, 32, 1, 128, device="cuda").bfloat16()
        k, v = (torch.randn(batch, 8, CAPACITY, 128, device="cuda").bfloat16() for _ in range(2))
        k_valid, v_valid = k[:, :, :keys].contiguous(), v[:, :, :keys].contiguous()
        checked = (slice(0, 1), slice(-1, None))
        refs = [_reference(q[i], k_valid[i], v_valid[i]) for i in checked]
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            cudnn = median_ms(lambda q=q, k=k_valid, v=v_valid: sdpa(q, k, v, enable_gqa=True))
        cells = []
        for variant in variants:
            fn = lowered[batch][variant]
            out = fn(q, k, v, keys)
            error = max(rel_error(out[i], r) for i, r in zip(checked, refs, strict=True))
            ours = median_ms(fn.bind(q, k, v, keys))
            cells.append(f"{ours * 1e3:.1f} ({cudnn / ours:.2f}, {error:.0e})")
        print(f"| {batch}×{keys} | {cudnn * 1e3:.1f} | " + " | ".join(cells) + " |", flush=True)
        del k, v, k_valid, v_valid


if __name__ == "__main__":
    main()
