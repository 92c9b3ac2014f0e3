"""Decode attention (one query per head against a KV cache, bf16) against torch's SDPA cuDNN and
flash backends, in one run.

For each batch × cache length (GQA: 32 query heads over 8 KV heads, D = 128 by default), times
`scaled_dot_product_attention(q, k, v, enable_gqa=True)` under `sdpa_kernel(CUDNN_ATTENTION)`
and `sdpa_kernel(FLASH_ATTENTION)`, and tinyopt's `decompose,fuse,flash-attention,tile,to-cuda`
(every kernel it launches: the split-KV partial kernel and the merge), and prints µs, the K+V
bytes read per second, the ratio to cuDNN and the relative error of batch entry 0 against
float64; the first line gives a device-to-device copy's bandwidth (read + write) as the ceiling.
`--valid N` compiles each shape for its cache length as a capacity and passes the count of
valid keys N at run time (`valid(%L)`), torch running on the first N keys (with `--queries`
above 64: a prefill chunk into a cache, on the wgmma schedule, whose key loop stops at N).
`--lower-only` needs no GPU (nor torch): it lowers each shape and prints the kernels, their
grids and plans (the split count `asplits`).

Usage: python benchmarks/bench_decode_attention.py [--shapes 1x4096 1x32768 8x32768 64x4096]
       [--heads 32 --kv-heads 8 --head-dim 128 --queries 1] [--knobs 'asplits=16' ...]
       [--valid N] [--out a.md] [--lower-only]
`--knobs` may be given several times: each setting is a row of its own (`tinyopt [knobs]`)
against the same cuDNN and flash times.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from attention_programs import decode_attention  # noqa: E402

from tinyopt.compiler import lower  # noqa: E402
from tinyopt.dialects import tile  # noqa: E402

PIPELINE = "decompose,fuse,flash-attention,tile{knobs},to-cuda"
SHAPES = ["1x4096", "1x32768", "8x32768", "64x4096"]
"""Batch × cache length: issue 20's references (cuDNN on the H200, 2026-12-02: 17.3, 56, 257
and 254 µs)."""


def program(args: argparse.Namespace, batch: int, keys: int) -> str:
    """The decode step of one shape: causal (aligned to the end of the keys) where a head has
    several queries, as a prefill chunk is."""
    causal = args.queries > 1
    return decode_attention(
        batch,
        args.heads,
        args.kv_heads,
        args.queries,
        keys,
        args.head_dim,
        causal=causal,
        valid=bool(args.valid),
    )


def kernels_of(text: str, knobs: str) -> list[str]:
    """Lowers `text` on the CPU; returns one line per kernel: name, grid, block, shared
    memory and plan."""
    _, tiled = lower(text, PIPELINE.format(knobs=knobs).removesuffix(",to-cuda"))
    plans = {
        op.sym_name.data: op.attributes.get(tile.PLAN)
        for op in tiled.ops
        if isinstance(op, tile.KernelOp)
    }
    _, module = lower(text, PIPELINE.format(knobs=knobs))
    return [
        f"{op.sym_name.data}: grid {list(op.grid.get_values())} block "
        f"{list(op.block.get_values())} smem {op.smem.value.data} plan {plans[op.sym_name.data]}"
        for op in module.ops
        if isinstance(op, tile.CudaKernelOp)
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes", nargs="+", default=SHAPES, help="batch x cache length")
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--kv-heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--queries", type=int, default=1, help="queries per head (Sq)")
    parser.add_argument(
        "--knobs", action="append", help="extra tile knobs, e.g. 'asplits=16' (repeatable)"
    )
    parser.add_argument("--valid", type=int, default=0, help="valid keys at run time (0: all)")
    parser.add_argument("--out", default=None)
    parser.add_argument("--lower-only", action="store_true", help="lower on the CPU and stop")
    args = parser.parse_args()
    settings = args.knobs or [""]
    if args.lower_only:
        for shape in args.shapes:
            batch, keys = (int(x) for x in shape.split("x"))
            for setting in settings:
                print(f"B{batch} L{keys}{f' [{setting}]' if setting else ''}:")
                for line in kernels_of(program(args, batch, keys), _braced(setting)):
                    print(f"  {line}")
        return
    run_on_gpu(args, settings)


def _braced(setting: str) -> str:
    """The `tile` pass's options for a knob setting ("" for none)."""
    return f"{{{setting}}}" if setting else ""


def run_on_gpu(args: argparse.Namespace, settings: list[str]) -> None:
    import torch
    from harness import compile_program, median_ms, publish, rel_error
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    h, kv, d, sq = args.heads, args.kv_heads, args.head_dim, args.queries
    copy_bytes = 1 << 30
    src, dst = (torch.empty(copy_bytes, dtype=torch.uint8, device="cuda") for _ in range(2))
    copy_gbs = 2 * copy_bytes / median_ms(lambda src=src, dst=dst: dst.copy_(src)) / 1e6
    del src, dst
    lines = [
        f"decode attention bf16, H {h} / KV {kv}, D {d}, {sq} quer{'y' if sq == 1 else 'ies'} "
        f"per head, on {torch.cuda.get_device_name()}; copy ceiling {copy_gbs:.0f} GB/s",
        "",
        "| B×L | schedule | µs | K+V GB/s | vs cuDNN | rel err |",
        "|---|---|---|---|---|---|",
    ]
    for shape in args.shapes:
        batch, keys = (int(x) for x in shape.split("x"))
        q = torch.randn(batch, h, sq, d, device="cuda").bfloat16()
        k, v = (torch.randn(batch, kv, keys, d, device="cuda").bfloat16() for _ in range(2))
        valid = args.valid or keys
        k_valid, v_valid = k[:, :, :valid].contiguous(), v[:, :, :valid].contiguous()
        causal = sq > 1
        ref = _reference(q[:1], k_valid[:1], v_valid[:1], causal)
        kv_bytes = 2 * batch * kv * valid * d * 2
        scalars = (valid,) if args.valid else ()
        rows = []
        for name, backend in (
            ("torch cuDNN", SDPBackend.CUDNN_ATTENTION),
            ("torch flash", SDPBackend.FLASH_ATTENTION),
        ):
            mask = _end_aligned_mask(sq, valid) if causal else None
            try:
                with sdpa_kernel(backend):
                    call = lambda: sdpa(q, k_valid, v_valid, attn_mask=mask, enable_gqa=True)  # noqa: E731
                    out = call()
                    ms = median_ms(call)
                rows.append((name, ms, rel_error(out[:1], ref)))
            except RuntimeError as e:
                print(f"{shape} {name}: not run ({str(e).splitlines()[0]})", flush=True)
        for setting in settings:
            pipeline = PIPELINE.format(knobs=_braced(setting))
            fn = compile_program(program(args, batch, keys), pipeline)
            out = fn(q, k, v, *scalars)
            torch.cuda.synchronize()
            ms = median_ms(fn.bind(q, k, v, *scalars))
            name = f"tinyopt [{setting}]" if setting else "tinyopt"
            rows.append((name, ms, rel_error(out[:1], ref)))
        cudnn_ms = rows[0][1] if rows[0][0] == "torch cuDNN" else float("nan")
        for name, ms, err in rows:
            lines.append(
                f"| {shape} | {name} | {ms * 1e3:.1f} | {kv_bytes / ms / 1e6:.0f} | "
                f"{cudnn_ms / ms:.2f} | {err:.1e} |"
            )
            print(lines[-1], flush=True)
    publish(lines, args.out)


def _end_aligned_mask(queries: int, keys: int):  # noqa: ANN202 (a torch tensor)
    """The causal mask aligned to the end of the keys (query i sees keys ≤ i + keys − queries),
    as `graph.attention`'s `causal` does (torch's `is_causal` aligns it to the first key)."""
    import torch

    return torch.ones(queries, keys, dtype=torch.bool, device="cuda").tril(keys - queries)


def _reference(q, k, v, causal: bool):  # noqa: ANN001, ANN202 (torch tensors)
    """Attention of the given batch entries in float64, K/V heads repeated for GQA."""
    import torch

    groups = q.shape[1] // k.shape[1]
    q, k, v = q.double(), k.double().repeat_interleave(groups, 1), v.double()
    v = v.repeat_interleave(groups, 1)
    scores = q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5
    if causal:
        scores.masked_fill_(~_end_aligned_mask(q.shape[2], k.shape[2]), -torch.inf)
    return torch.softmax(scores, -1) @ v


if __name__ == "__main__":
    main()
