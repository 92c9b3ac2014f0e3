"""Two-layer MLPs, linear → tanh-GELU → linear on a [batch, seq, hidden] activation: tinyopt vs
torch eager and torch.compile (default mode) in one run, fp32 and bf16.

The shapes are issue 19's (batch, seq, hidden, ffn); each row's references run in the same
process, the error is against the same module in float64 (on the GPU), and the kernel table
names tinyopt's slowest kernel with its share and whether its SASS has HGMMA (wgmma) or HMMA.
Usage: python benchmarks/bench_mlp.py [--shape 2,128,768,3072 ...] [--dtype bf16 ...]
       [--out mlp.md]
"""

from __future__ import annotations

import argparse
import copy
import os
import subprocess
import tempfile
import time

import torch

from harness import median_ms, publish, rel_error
from tinyopt.frontends.compiled_model import CompiledModel

SHAPES = ((2, 128, 768, 3072), (4, 1000, 1024, 4096), (8, 2048, 4096, 14336))
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}


class MLP(torch.nn.Module):
    def __init__(self, hidden: int, ffn: int) -> None:
        super().__init__()
        self.up = torch.nn.Linear(hidden, ffn)
        self.down = torch.nn.Linear(ffn, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.nn.functional.gelu(self.up(x), approximate="tanh"))


def tensor_core_ops(cubin: bytes) -> str:
    """Which tensor-core instructions the kernel's SASS holds (cuobjdump), or '-'."""
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(cubin)
    try:
        sass = subprocess.run(
            ["cuobjdump", "--dump-sass", f.name], capture_output=True, text=True
        ).stdout
    finally:
        os.unlink(f.name)
    found = [op for op in ("HGMMA", "HMMA") if op in sass]
    return found[0] if found else "-"


def run(shape: tuple[int, int, int, int], dtype: str) -> list[str]:
    batch, seq, hidden, ffn = shape
    torch.manual_seed(0)
    model = MLP(hidden, ffn).to("cuda", DTYPES[dtype]).eval()
    x = torch.randn(batch, seq, hidden, device="cuda").to(DTYPES[dtype])
    with torch.no_grad():
        exact = copy.deepcopy(model).double()(x.double())
        compiled = torch.compile(model)
        compiled(x)
        start = time.perf_counter()
        ours = CompiledModel(model, x)
        build_s = time.perf_counter() - start
        eager_ms = median_ms(lambda: model(x))
        compile_ms = median_ms(lambda: compiled(x))
        ours_ms = median_ms(lambda: ours(x))
        errors = [rel_error(f(x), exact) for f in (model, compiled, ours)]
    stream = torch.cuda.current_stream().cuda_stream
    kernels = [
        (launch, median_ms(lambda lc=launch: lc(stream), 10, 50)) for launch in ours.call.launches
    ]
    total = sum(ms for _, ms in kernels)
    slowest, slowest_ms = max(kernels, key=lambda k: k[1])
    cubins = {s.kernel.name: s.kernel.cubin for s in ours.function.steps if hasattr(s, "kernel")}
    cores = ",".join(sorted({tensor_core_ops(c) for c in cubins.values()}))
    name = f"{dtype} {batch}x{seq}x{hidden}x{ffn}"
    return [
        f"| {name} | {eager_ms:.3f} | {compile_ms:.3f} | {ours_ms:.3f} | "
        f"{eager_ms / ours_ms:.2f}x | {compile_ms / ours_ms:.2f}x | "
        f"{errors[0]:.1e} / {errors[1]:.1e} / {errors[2]:.1e} | {len(kernels)} ({total:.3f} ms) | "
        f"{slowest.name} {slowest_ms / total:.0%} | {cores} | {build_s:.1f} |"
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", action="append", help="batch,seq,hidden,ffn (repeatable)")
    parser.add_argument("--dtype", action="append", choices=sorted(DTYPES))
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    shapes = [tuple(map(int, s.split(","))) for s in args.shape] if args.shape else SHAPES
    lines = [
        f"MLP linear → tanh-GELU → linear on {torch.cuda.get_device_name()}, "
        f"torch {torch.__version__}",
        "",
        "| dtype, batch×seq×hidden×ffn | eager ms | torch.compile ms | tinyopt ms | vs eager "
        "| vs torch.compile | rel err eager / compile / tinyopt | kernels (sum) | slowest "
        "kernel | SASS | build s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for dtype in args.dtype or ["f32", "bf16"]:
        for shape in shapes:
            lines += run(shape, dtype)  # type: ignore[arg-type]
            print(lines[-1], flush=True)
    publish(lines, args.out)


if __name__ == "__main__":
    main()
