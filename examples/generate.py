"""Greedy generation with a Llama-style model of random weights, on the GPU with tinyopt.

    python examples/generate.py --model tiny --steps 64
    python examples/generate.py --model 8b --layers 2 --dtype bf16 --steps 64 --batch 8

A prefill of the prompt, then `--steps − 1` decode steps, each one CUDA graph replay of the
same compiled step with the position advanced (examples/llama_decode.py). Prints the
decode loop's tokens/s (a progress bar while it runs, on a terminal) and, unless `--no-check`,
compares the tokens with the same torch model's greedy generation: fp32 must give the same
tokens (a step where torch's two largest logits are closer than 1e-4 is reported, not failed:
either token is a correct greedy choice); bf16 reports the first step where they differ.
Exit status 1 if fp32 tokens differ at a step that is not such a tie.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
import llama_decode  # noqa: E402

from tinyopt.progress import Progress  # noqa: E402

TIE = 1e-4
"""Torch's top-2 logit gap below which a step's greedy token is ambiguous."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("tiny", "8b"), default="tiny")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--prompt", type=int, default=16, help="prompt tokens")
    parser.add_argument("--steps", type=int, default=64, help="tokens to generate")
    parser.add_argument("--capacity", type=int, default=0, help="KV cache length (0: enough)")
    parser.add_argument("--knobs", default="", help="a tile{...} setting for every kernel")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-check", action="store_true", help="skip the torch comparison")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("generate.py: error: needs a CUDA GPU", file=sys.stderr)
        return 1
    capacity = args.capacity or args.prompt + args.steps
    if capacity < args.prompt + args.steps - 1:
        parser.error(f"--capacity {capacity} holds fewer than prompt + steps − 1 tokens")
    make = llama_decode.tiny if args.model == "tiny" else llama_decode.llama3_8b
    config = make(layers=args.layers, capacity=capacity)
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[args.dtype]
    model = llama_decode.random_model(config, dtype, args.seed, device="cuda")
    prompt = torch.randint(
        0, config.vocab, (args.batch, args.prompt), generator=torch.Generator().manual_seed(1)
    )
    print(
        f"{args.model} ({config.layers} layers, hidden {config.hidden}, vocabulary "
        f"{config.vocab}), {args.dtype}, batch {args.batch}, prompt {args.prompt}, "
        f"{args.steps} steps, cache {capacity}"
    )
    start = time.perf_counter()
    generator = llama_decode.Generator(model, args.batch, args.prompt, args.knobs)
    print(f"compiled prefill and step in {time.perf_counter() - start:.1f} s")

    generator.run_prefill(prompt)
    generator.run_decode(args.steps - 1)  # warm-up: loads the kernels, fills the caches
    torch.cuda.synchronize()
    generator.run_prefill(prompt)
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    with Progress("decode", args.steps - 1, after=0.0) as progress:
        generator.run_decode(args.steps - 1, progress)
    end.record()
    torch.cuda.synchronize()
    seconds = begin.elapsed_time(end) / 1e3
    ours = generator.tokens(args.steps)
    per_second = args.batch * (args.steps - 1) / seconds
    print(
        f"decode: {args.steps - 1} steps in {seconds * 1e3:.1f} ms, "
        f"{seconds / (args.steps - 1) * 1e6:.0f} µs a step, {per_second:.0f} tokens/s"
    )
    print("tokens:", ours[0].tolist())
    if args.no_check:
        return 0
    theirs, gaps = llama_decode.torch_generate(model, prompt.cuda(), args.steps)
    return report(ours.tolist(), theirs.cpu().tolist(), gaps, args.dtype)


def report(ours: list[list[int]], theirs: list[list[int]], gaps: list[float], dtype: str) -> int:
    """Print how tinyopt's tokens compare with torch's; 1 for an fp32 mismatch not at a tie."""
    first = llama_decode.first_difference(ours, theirs)
    if first is None:
        print(f"same tokens as torch for all {len(gaps)} steps")
        return 0
    tie = gaps[first] < TIE
    print(
        f"tokens differ from torch's first at step {first} (torch's top-2 logit gap there "
        f"{gaps[first]:.2e}{', a tie' if tie else ''})"
    )
    return 0 if dtype == "bf16" or tie else 1


if __name__ == "__main__":
    sys.exit(main())
