"""fp32 attention forward: tinyopt fused (the SIMT flash-attention rule, `attn=simt`) against
tinyopt unfused (`flash-attention{f32=false}`, CompiledModel's pipeline before 2026-12-03: a
scores GEMM, a row softmax and a P·V GEMM) and torch eager SDPA in fp32, in one run.

For each shape (B×H×KV×S×D, causal or not) it times tinyopt's whole program (every kernel it
launches) under

    fused    decompose,fuse,flash-attention,tile{attn=simt <knobs>},to-cuda   (per --fused-knobs)
    unfused  decompose,fuse,flash-attention{f32=false},tile,to-cuda

and torch's `scaled_dot_product_attention` on fp32 tensors (K and V repeated to the query heads
beforehand, outside the timing, as a model's `repeat_kv` does; torch picks its backend: the
memory-efficient one for fp32), and prints ms, TFLOP/s (4·B·H·S²·D FLOPs, half when causal),
the speedup over tinyopt unfused and the relative error of two heads of batch entry 0 against
float64. The default shapes are Llama-3-8B's attention at 8×512 and 8×2048 tokens (H32/KV8,
D 128, causal) and GPT-2/BERT's (H12, D 64) at S 512 and 2048, causal and not.

Usage: python benchmarks/bench_attention_f32.py [--shapes 8x32x8x2048x128/causal ...]
           [--fused-knobs "" "bm=64" "bm=64 threads=128"] [--out a.md] [--lower-only]

`--lower-only` needs no GPU (nor torch): it lowers each shape under both pipelines and prints
each kernel's plan and grid.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from attention_programs import attention  # noqa: E402

from tinyopt.compiler import apply_pipeline, lower, parse  # noqa: E402
from tinyopt.dialects import loop, tile  # noqa: E402

FUSED = "decompose,fuse,flash-attention,tile{{attn=simt{knobs}}},to-cuda"
UNFUSED = "decompose,fuse,flash-attention{f32=false},tile,to-cuda"
SHAPES = [
    "8x32x8x512x128/causal",
    "8x32x8x2048x128/causal",
    "8x12x12x512x64/causal",
    "8x12x12x512x64/plain",
    "8x12x12x2048x64/causal",
    "8x12x12x2048x64/plain",
]
CHECKED_HEADS = 2
"""Heads of batch entry 0 compared with float64 (the whole tensor would not fit)."""


def parse_shape(spec: str) -> tuple[int, int, int, int, int, bool]:
    """(B, H, KV, S, D, causal) of `BxHxKVxSxD/causal` or `.../plain`."""
    dims, _, kind = spec.partition("/")
    b, h, kv, s, d = (int(x) for x in dims.split("x"))
    if kind not in ("causal", "plain"):
        raise SystemExit(f"{spec}: end the shape with /causal or /plain")
    return b, h, kv, s, d, kind == "causal"


def program(b: int, h: int, kv: int, s: int, d: int, causal: bool) -> str:
    """`graph.attention` in fp32, K and V of `kv` heads broadcast to the `h` query heads (as the
    torch frontend captures `repeat_kv`)."""
    return attention(b, h, s, d, "f32", causal, kv_heads=kv)


def pipelines(fused_knobs: list[str]) -> list[tuple[str, str]]:
    """(row name, pipeline) of each tinyopt variant timed."""
    fused = [
        (f"tinyopt fused {knobs}".strip(), FUSED.format(knobs=f" {knobs}" if knobs else ""))
        for knobs in fused_knobs
    ]
    return [*fused, ("tinyopt unfused", UNFUSED)]


def lower_only(shapes: list[str], fused_knobs: list[str]) -> None:
    """Prints each variant's kernels in launch order with their grids and plans (no GPU)."""
    for spec in shapes:
        text = program(*parse_shape(spec))
        for name, pipeline in pipelines(fused_knobs):
            _, module = lower(text, pipeline)
            planning = pipeline.replace(",to-cuda", "").replace("tile", "plan")
            planned = apply_pipeline(parse(text), planning)
            plans = {
                op.sym_name.data: op.attributes.get("plan")
                for op in planned.walk()
                if isinstance(op, loop.KernelOp)
            }
            kernels = {
                op.sym_name.data: op for op in module.walk() if isinstance(op, tile.CudaKernelOp)
            }
            launches = [
                op.callee.root_reference.data
                for op in module.walk()
                if isinstance(op, loop.LaunchOp)
            ]
            print(f"{spec} {name}: {len(launches)} launches", flush=True)
            for callee in launches:
                kernel = kernels[callee]
                grid, block = list(kernel.grid.get_values()), list(kernel.block.get_values())
                print(f"  {callee} grid {grid} block {block} {plans.get(callee)}", flush=True)


def reference(q, k, v, causal: bool):  # noqa: ANN001, ANN201 (torch tensors)
    """Attention of heads 0..CHECKED_HEADS-1 of batch entry 0 in float64 (k, v repeated)."""
    import torch

    q, k, v = (t[0, :CHECKED_HEADS].double() for t in (q, k, v))
    scores = q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5
    if causal:
        s = scores.shape[-1]
        mask = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
        scores.masked_fill_(mask, -torch.inf)
    return torch.softmax(scores, -1) @ v


def run(shapes: list[str], fused_knobs: list[str], out: str | None) -> None:
    import torch
    from harness import compile_program, median_ms, publish, rel_error
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    lines = [f"attention forward fp32 on {torch.cuda.get_device_name()}", ""]
    lines += [
        "| B×H×KV×S×D | causal | schedule | ms | TFLOP/s | vs unfused | rel err |",
        "|---|---|---|---|---|---|---|",
    ]
    for spec in shapes:
        b, h, kv, s, d, causal = parse_shape(spec)
        q = torch.randn(b, h, s, d, device="cuda")
        k, v = (torch.randn(b, kv, s, d, device="cuda") for _ in range(2))
        k_rep, v_rep = (t.repeat_interleave(h // kv, 1) for t in (k, v))
        ref = reference(q, k_rep, v_rep, causal)
        flops = 4 * b * h * s * s * d / (2 if causal else 1)
        rows = []
        text = program(b, h, kv, s, d, causal)
        for name, pipeline in pipelines(fused_knobs):
            fn = compile_program(text, pipeline)
            result = fn(q, k, v)
            torch.cuda.synchronize()
            ms = median_ms(fn.bind(q, k, v))
            rows.append((name, ms, rel_error(result[0, :CHECKED_HEADS], ref)))
            del fn, result
            torch.cuda.empty_cache()
        result = sdpa(q, k_rep, v_rep, is_causal=causal)
        ms = median_ms(lambda q=q, k=k_rep, v=v_rep: sdpa(q, k, v, is_causal=causal))
        rows.append(("torch eager SDPA", ms, rel_error(result[0, :CHECKED_HEADS], ref)))
        unfused_ms = next(ms for name, ms, _ in rows if name == "tinyopt unfused")
        for name, ms, err in rows:
            lines.append(
                f"| {spec.partition('/')[0]} | {'yes' if causal else 'no'} | {name} | "
                f"{ms:.3f} | {flops / ms / 1e9:.1f} | {unfused_ms / ms:.2f} | {err:.1e} |"
            )
            print(lines[-1], flush=True)
        del q, k, v, k_rep, v_rep, result
        torch.cuda.empty_cache()
    publish(lines, out)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes", nargs="+", default=SHAPES)
    parser.add_argument(
        "--fused-knobs",
        nargs="+",
        default=[""],
        help="tile knobs of each fused variant timed, e.g. '' 'bm=64' 'bm=64 threads=128'",
    )
    parser.add_argument("--out", default=None)
    parser.add_argument("--lower-only", action="store_true")
    args = parser.parse_args()
    if args.lower_only:
        lower_only(args.shapes, args.fused_knobs)
    else:
        run(args.shapes, args.fused_knobs, args.out)


if __name__ == "__main__":
    main()
