"""Foundation benchmark: RMSNorm, softmax and SGEMM against PyTorch, in one GPU run.

Each row: tinyopt's median time (triton.testing.do_bench), the reference measured in the same
run, the ratio, and the relative error of tinyopt's output against a float64 torch result.
Usage: python benchmarks/bench_foundation.py [--quick] [--out results.md]
"""

from __future__ import annotations

import argparse
import sys
import time

import torch
import torch.nn.functional as F


sys.path.insert(
    0, __import__("os").path.join(__import__("os").path.dirname(__file__), "..", "tests")
)
from programs import batched_matmul, matmul_relu, rmsnorm, softmax  # noqa: E402
from harness import compile_program, median_ms, publish, rel_error  # noqa: E402


def rms_ref(x, w, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.manual_seed(0)
    rows: list[tuple] = []
    gpu = torch.cuda.get_device_name()

    src = torch.randn(1 << 28, device="cuda")
    copy_ms = median_ms(lambda: src.clone())
    copy_gbs = 2 * src.numel() * 4 / copy_ms / 1e6

    def row(name, ms, ref_name, ref_ms, metric, err, unit):
        rows.append(
            (name, ms, metric(ms), ref_name, ref_ms, metric(ref_ms), ref_ms / ms, err, unit)
        )
        print(rows[-1], flush=True)

    for dtype, tdt in (("f32", torch.float32), ("bf16", torch.bfloat16)):
        R, C = 32768, 4096
        x = torch.randn(R, C, device="cuda", dtype=tdt)
        w = torch.randn(C, device="cuda", dtype=tdt)
        fn = compile_program(rmsnorm((R, C), dtype))
        out = fn(x, w)
        err = rel_error(out, rms_ref(x.double(), w.double()))
        nbytes = (2 * R * C + C) * x.element_size()
        gbs = lambda ms, n=nbytes: n / ms / 1e6  # noqa: E731
        ms = median_ms(fn.bind(x, w))
        compiled = torch.compile(lambda a, b: rms_ref(a.float(), b.float()).to(a.dtype))
        compiled(x, w)
        row(
            f"rmsnorm {dtype} {R}x{C}",
            ms,
            "torch.compile",
            median_ms(lambda: compiled(x, w)),
            gbs,
            err,
            "GB/s",
        )
        row(
            f"rmsnorm {dtype} {R}x{C}",
            ms,
            "F.rms_norm",
            median_ms(lambda: F.rms_norm(x, (C,), w, 1e-6)),
            gbs,
            err,
            "GB/s",
        )
        row(
            f"rmsnorm {dtype} {R}x{C}",
            ms,
            "torch eager",
            median_ms(lambda: rms_ref(x, w)),
            gbs,
            err,
            "GB/s",
        )

    shape = (1, 28, 2048, 2048)
    x = torch.randn(*shape, device="cuda")
    fn = compile_program(softmax(shape))
    out = fn(x)
    err = rel_error(out, torch.softmax(x.double(), -1))
    nbytes = 2 * x.numel() * 4
    gbs = lambda ms, n=nbytes: n / ms / 1e6  # noqa: E731
    ms = median_ms(fn.bind(x))
    compiled = torch.compile(lambda a: torch.softmax(a, -1))
    compiled(x)
    row(
        "softmax f32 1x28x2048x2048",
        ms,
        "torch eager",
        median_ms(lambda: torch.softmax(x, -1)),
        gbs,
        err,
        "GB/s",
    )
    row(
        "softmax f32 1x28x2048x2048",
        ms,
        "torch.compile",
        median_ms(lambda: compiled(x)),
        gbs,
        err,
        "GB/s",
    )

    torch.backends.cuda.matmul.allow_tf32 = False
    for n in (4096, 1024):
        a = torch.randn(n, n, device="cuda")
        b = torch.randn(n, n, device="cuda")
        bias = torch.zeros(n, device="cuda")
        fn = compile_program(matmul_relu(n, n, n))
        out = fn(a, bias, b)
        err = rel_error(out, torch.relu(a.double() @ b.double()))
        tflops = lambda ms, n=n: 2 * n**3 / ms / 1e9  # noqa: E731
        row(
            f"sgemm+relu f32 {n}^3",
            median_ms(fn.bind(a, bias, b)),
            "cuBLAS (relu(a@b))",
            median_ms(lambda: torch.relu(a @ b)),
            tflops,
            err,
            "TFLOP/s",
        )
    B, n = 256, 256
    a = torch.randn(B, n, n, device="cuda")
    b = torch.randn(B, n, n, device="cuda")
    fn = compile_program(batched_matmul(B, n, n, n))
    out = fn(a, b)
    err = rel_error(out, a.double() @ b.double())
    tflops = lambda ms: 2 * B * n**3 / ms / 1e9  # noqa: E731
    row(
        f"bmm f32 {B}x{n}^3",
        median_ms(fn.bind(a, b)),
        "cuBLAS",
        median_ms(lambda: torch.bmm(a, b)),
        tflops,
        err,
        "TFLOP/s",
    )

    lines = [
        f"GPU: {gpu}; date: {time.strftime('%Y-%m-%d')}; torch {torch.__version__}; "
        f"device copy ceiling measured: {copy_gbs:.0f} GB/s",
        "",
        "| workload | tinyopt ms | tinyopt | reference | ref ms | reference "
        "| ref/tinyopt time | rel err |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, ms, m, ref_name, ref_ms, ref_m, ratio, err, unit in rows:
        lines.append(
            f"| {name} | {ms:.4f} | {m:.0f} {unit} | {ref_name} | {ref_ms:.4f} "
            f"| {ref_m:.0f} {unit} "
            f"| {ratio:.2f}x | {err:.1e} |"
        )
    publish(lines, args.out)


if __name__ == "__main__":
    main()
