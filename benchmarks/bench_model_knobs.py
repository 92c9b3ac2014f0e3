"""One model through `CompiledModel` under several `tile` settings, against torch.compile, in
one process: the A/B probe behind a default's change (e.g. `persistent=auto` against
`persistent=0`), where separate `bench_zoo.py` runs would differ by the clock more than the
setting does.

Each setting prints the call's time, its ratio to torch.compile (default mode) and the six
slowest kernels alone, so a regression is traced to its kernels.
Usage: python benchmarks/bench_model_knobs.py --model bert|gpt2|t5|vit|llama3|mlp
       [--size 8x2048] [--dtype bf16|fp32] [--knobs "persistent=0" ...]
(`--model mlp`: bench_mlp.py's linear → tanh-GELU → linear, hidden 4096, ffn 14336; an empty
`--knobs ""` is the default pipeline.)
"""

from __future__ import annotations

import argparse

import torch
from bench_mlp import MLP
from bench_zoo import DTYPES, batch_tokens, zoo
from harness import median_ms

from tinyopt.frontends.compiled_model import PIPELINE, CompiledModel


def pipeline(knobs: str) -> str:
    """The CompiledModel pipeline with `knobs` as the tile pass's options."""
    return PIPELINE.replace(",tile,", f",tile{{{knobs}}},") if knobs else PIPELINE


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--size", default="8x2048", help="batch x tokens")
    parser.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    parser.add_argument("--knobs", action="append", help="a tile{...} setting (repeatable)")
    args = parser.parse_args()
    batch, tokens = batch_tokens(args.size)
    dtype = DTYPES[args.dtype]
    if args.model == "mlp":
        module = MLP(4096, 14336)
        inputs: tuple[torch.Tensor, ...] = (torch.randn(batch, tokens, 4096),)
    else:
        module, inputs = zoo(args.model).example(batch, tokens)
    module = module.to("cuda", dtype)
    inputs = tuple(x.to("cuda", dtype) for x in inputs)
    stream = torch.cuda.current_stream().cuda_stream
    with torch.no_grad():
        compiled = torch.compile(module)
        compiled(*inputs)
        built = {
            knobs: CompiledModel(module, *inputs, pipeline=pipeline(knobs))
            for knobs in args.knobs or [""]
        }
        reference = median_ms(lambda: compiled(*inputs))
        for knobs, ours in built.items():
            ms = median_ms(lambda ours=ours: ours(*inputs))
            kernels = [
                (launch.name, median_ms(lambda lc=launch: lc(stream), 10, 50))
                for launch in ours.call.launches
            ]
            slowest = sorted(kernels, key=lambda k: -k[1])[:6]
            print(
                f"{args.model} {args.dtype} {args.size} `{knobs or 'default'}`: call {ms:.3f} ms, "
                f"torch.compile {reference:.3f} ({reference / ms:.3f}x); kernels "
                + ", ".join(f"{name} {t:.3f}" for name, t in slowest),
                flush=True,
            )


if __name__ == "__main__":
    main()
