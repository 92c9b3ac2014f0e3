"""Random torch modules through the PyTorch frontend against torch in float64 (needs torch).

    python tests/fuzz/frontend_fuzz.py [-n 500] [--seed 0]

Each case is a module of 2 to 6 steps over two inputs (shapes with unit dims, broadcasting
against each other), each step applying to an earlier value a random unary op, binary op (a
second value broadcast, or summed to a scalar where the shapes cannot broadcast), reduction
or layout change from the tables below, in f32 or bf16. The module is captured, lowered by
`decompose,fuse` and run by the loop-level executor, every f32 op rounded to f32 as torch
rounds it (`round_f32`); its output is compared with the same
module run by torch in float64 on the same (rounded) inputs, relative to the output's largest
magnitude (at least 1e-2): at most 1e-4 in f32 and 3e-2 in bf16, or four times torch eager's own
error in the input dtype where that is larger. A module torch cannot run is skipped, one the
frontend refuses is counted, and any other exception is a failure. Each failure
prints the seed and case that rebuild it, the steps and the error; the exit status is 1 when
any case failed.
"""

from __future__ import annotations

import argparse
import random
import sys
import warnings
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tinyopt.backends.loop_reference import run_loop_module
from tinyopt.compiler import apply_pipeline
from tinyopt.frontends.torch_fx import FrontendError, capture

UNARY: list[Callable[[Tensor], Tensor]] = [
    torch.relu, torch.sigmoid, torch.tanh, torch.exp, torch.sin, torch.abs, torch.neg,
    torch.floor, torch.round, torch.erf, torch.atan, torch.sign, F.gelu, F.silu, F.softplus,
    lambda x: torch.log(x.abs() + 1), lambda x: x * x, lambda x: torch.clamp(x, -0.5, 0.7),
    lambda x: torch.rsqrt(x.abs() + 0.1), lambda x: F.leaky_relu(x, 0.1),
    lambda x: torch.where(x > 0, x, x * 0.3), lambda x: torch.expm1(x.clamp(max=3)),
    lambda x: torch.fmod(x, 0.7), lambda x: x % 0.9, lambda x: x.to(torch.bfloat16).to(x.dtype),
    lambda x: (x > 0.3).to(x.dtype), lambda x: torch.nan_to_num(torch.log(x)),
    lambda x: F.pad(x, (1, 2)), lambda x: F.pad(x, (2, 0), mode="replicate") if x.dim() >= 2 else x,
    lambda x: torch.cummax(x, -1).values, lambda x: x.masked_fill(x < -0.5, 1.5),
    lambda x: torch.topk(x, 1, -1).values, lambda x: x.sort(-1).values,
    lambda x: x.argmax(-1).to(x.dtype), lambda x: torch.signbit(x).to(x.dtype),
    lambda x: torch.take_along_dim(x, x.argsort(-1).flip(-1), -1),
    lambda x: torch.cummin(x, -1).indices.to(x.dtype), lambda x: torch.round(x, decimals=1),
    lambda x: x.diagonal_scatter(x.diagonal(0, -2, -1) * 2, 0, -2, -1) if x.dim() >= 2 else x,
]  # fmt: skip
BINARY: list[Callable[[Tensor, Tensor], Tensor]] = [
    torch.add, torch.sub, torch.mul, torch.maximum, torch.minimum, torch.atan2, torch.hypot,
    torch.fmax, torch.fmin,
    lambda a, b: a / (b.abs() + 0.5), lambda a, b: torch.where(a > b, a, b * 2),
    lambda a, b: torch.lerp(a, b, 0.3), lambda a, b: torch.logaddexp(a, b),
    # copysign from a NaN-free source: a computed NaN's sign bit is the hardware's (x86 sets it
    # for 0/0, CUDA does not), so torch on this CPU and the GPU disagree there by design.
    lambda a, b: torch.xlogy(a, b.abs()), lambda a, b: torch.copysign(a, torch.nan_to_num(b)),
    lambda a, b: a @ b.transpose(-1, -2) if a.dim() >= 2 and a.shape[-1] == b.shape[-1] else a + b,
]  # fmt: skip
REDUCTIONS: list[Callable[[Tensor, int, bool], Tensor]] = [
    lambda t, d, k: t.sum(d, keepdim=k), lambda t, d, k: t.mean(d, keepdim=k),
    lambda t, d, k: t.amax(d, keepdim=k), lambda t, d, k: t.amin(d, keepdim=k),
    lambda t, d, k: t.softmax(d), lambda t, d, k: t.log_softmax(d), lambda t, d, k: t.cumsum(d),
    lambda t, d, k: t.std(d, keepdim=k), lambda t, d, k: t.logsumexp(d, keepdim=k),
    lambda t, d, k: t.norm(dim=d, keepdim=k), lambda t, d, k: t.var(d, correction=0, keepdim=k),
    lambda t, d, k: torch.linalg.vector_norm(t, 3, d, keepdim=k),
]  # fmt: skip
SHAPES = [(3, 5), (2, 3, 4), (7,), (1, 6), (4, 1, 3)]


def _layout(r: random.Random, x: Tensor) -> Tensor:
    choice = r.randrange(6)
    if choice == 0 and x.dim() >= 2:
        return x.transpose(0, -1)
    if choice == 1:
        return x.flip(r.randrange(x.dim()))
    if choice == 2 and x.shape[-1] > 2:
        return x[..., 1:]
    if choice == 3:
        return torch.cat([x, x * 2], r.randrange(x.dim()))
    if choice == 4 and x.numel() > 1:
        return x.reshape(-1)[: x.numel() // 2].reshape(-1, 1)
    return x.unsqueeze(0).expand(2, *x.shape).contiguous()


class RandomSteps(nn.Module):
    """`steps` random steps over (x, y) drawn from `seed` (the same ones at every call)."""

    def __init__(self, steps: list[str], seed: int):
        super().__init__()
        self.steps, self.seed = steps, seed

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        r = random.Random(self.seed)
        values = [x, y]
        for kind in self.steps:
            a = r.choice(values)
            if kind == "unary":
                out = r.choice(UNARY)(a)
            elif kind == "binary":
                b = r.choice(values)
                try:
                    torch.broadcast_shapes(a.shape, b.shape)
                except RuntimeError:
                    b = b.sum()
                out = r.choice(BINARY)(a, b)
            elif kind == "reduce":
                out = r.choice(REDUCTIONS)(a, r.randrange(a.dim()), r.random() < 0.5)
            else:
                out = _layout(r, a)
            values.append(out)
        return values[-1]


def run_case(r: random.Random) -> tuple[str, str]:
    """Draw and check one case: ("ok" | "refused" | "skipped" | "failed", what it was)."""
    steps = [r.choice(["unary", "binary", "reduce", "layout"]) for _ in range(r.randint(2, 6))]
    seed, shape = r.randrange(10**9), r.choice(SHAPES)
    other = r.choice([shape, shape[-1:], (1,) * len(shape)])
    dtype = r.choice([torch.float32, torch.float32, torch.bfloat16])
    generator = torch.Generator().manual_seed(seed)
    x, y = (torch.randn(s, generator=generator).to(dtype) for s in (shape, other))
    module = RandomSteps(steps, seed)
    what = f"steps {steps}, module seed {seed}, shapes {shape} and {other}, {dtype}"
    try:
        with torch.no_grad():
            exact = module(x.double(), y.double()).numpy()
            eager = module(x, y).double().numpy()
    except (RuntimeError, ValueError, IndexError):  # torch (or the drawing) cannot run it
        return "skipped", what
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            captured = capture(module, x, y)
    except FrontendError:
        return "refused", what
    except Exception as exc:  # the frontend must refuse with a FrontendError, never crash
        return "failed", f"{what}: capture raised {type(exc).__name__}: {exc}"
    try:
        lowered = apply_pipeline(captured.module.clone(), "decompose,fuse")
        (got,) = run_loop_module(lowered, "forward", *captured.arguments(x, y), round_f32=True)
    except Exception as exc:  # a crash past the capture is a failure, whatever it raises
        return "failed", f"{what}: {type(exc).__name__}: {exc}"
    got = np.asarray(got, np.float64)
    if got.shape != exact.shape:
        return "failed", f"{what}: shape {got.shape}, torch's {exact.shape}"
    finite = np.isfinite(exact)
    if (
        not (np.isfinite(got) == finite).all()
        and not (np.isfinite(got) == np.isfinite(eager)).all()
    ):
        return "failed", f"{what}: {np.isfinite(got).sum()} finite values, torch's {finite.sum()}"
    scale = max(float(np.abs(exact[finite]).max(initial=0)), 1e-2)
    error = float(np.abs(got[finite] - exact[finite]).max(initial=0)) / scale
    eager_error = float(np.abs(eager[finite] - exact[finite]).max(initial=0)) / scale
    tolerance = max(1e-4 if dtype == torch.float32 else 3e-2, 4 * eager_error)
    if error > tolerance:
        return "failed", f"{what}: error {error:.2e} (torch eager {eager_error:.2e})"
    return "ok", what


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # torch's about its own edge cases (std of one element)
    r = random.Random(args.seed)
    counts = {"ok": 0, "refused": 0, "skipped": 0, "failed": 0}
    for case in range(args.n):
        outcome, what = run_case(r)
        counts[outcome] += 1
        if outcome == "failed":
            print(f"FAILED case {case} of --seed {args.seed}: {what}", flush=True)
    print(", ".join(f"{n} {k}" for k, n in counts.items()))
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
