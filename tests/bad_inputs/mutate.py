"""A seeded mutator of valid tinyopt programs: more hostile inputs, per class, for issue 22.

From a handful of valid graph-level programs (`SEEDS`: examples/ and tests/lit/ inputs, their
comment lines dropped) it makes mutants of each class in `CLASSES`:

- `truncate`: every seed cut after each of its lines (all of them, not a sample), and some
  cut in the middle of a line;
- `swap_type`: one element type, or every occurrence of one, replaced by another (f64, i8,
  index, complex, f8, ...);
- `shape`: one dimension, or every occurrence of one extent, made absurd (0, -1, 2^31, 2^40,
  2^63, 2^64, `?`, a 30-digit number);
- `knob`: a valid program under an absurd pipeline (`tile{bm=-3}`, `tile{bm=99999999999}`,
  unknown knobs, wrong option types, unbalanced braces, passes out of order);
- `operand`: one operand of an op deleted, duplicated, replaced by an undefined value or by
  another value of the function;
- `attribute`: one attribute's value replaced by one of the wrong type, its name changed,
  or the entry deleted;
- `lines`: a line deleted, duplicated or swapped with the next;
- `bytes`: one to four random bytes overwritten (so not always UTF-8).

Each mutant is a function of (class, index, seed) alone, so the first N of a class do not
change when N grows: `mutants(n)` makes `n` per class (every truncation whatever `n`).
`python tests/bad_inputs/mutate.py OUT_DIR [N]` writes them as files with their pipelines
in `OUT_DIR/pipelines.txt`.
"""

from __future__ import annotations

import random
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SEEDS = [
    "examples/matmul_relu.mlir",
    "examples/attention.mlir",
    "examples/layernorm.mlir",
    "tests/lit/fuse/mlp.mlir",
    "tests/lit/fuse/slice_concat_gather.mlir",
    "tests/lit/fuse/reduce_and_elementwise.mlir",
    "tests/lit/fuse/masks.mlir",
    "tests/lit/fuse/norms.mlir",
    "tests/lit/decompose/attention.mlir",
]
"""Valid programs to mutate: matmuls, attention, norms, softmax, reductions, slices, gathers,
masks and casts in f32, f16, bf16, i1 and i64."""

PIPELINE = "decompose,fuse,tile,to-cuda"
"""The pipeline every mutant but a `knob` one is lowered with."""

ELEMENT_TYPES = ["f32", "f16", "bf16", "f64", "i1", "i8", "i32", "i64", "index", "f8E4M3FN"]
ODD_TYPES = ["complex<f32>", "none", "tensor<4xf32>", "vector<4xf32>", "memref<4xf32>", "i0"]
DIMS = ["0", "-1", "1", "?", "3", str(2**31), str(2**31 - 1), str(2**32), str(2**40)]
DIMS += [str(2**62), str(2**63 - 1), str(2**63), str(2**64), "9" * 30, "0x10", "1.5"]
KNOB_VALUES = ["-3", "-1", "0", "1", "3", "99999999999", str(2**40), str(2**63), str(2**64)]
KNOB_VALUES += ["1.5", "auto", "none", "wide", '"64"', "true", "", "1e9"]
BAD_PIPELINES = [
    "tile{bm=-3}",
    "tile{bm=99999999999}",
    "tile{frobnicate=1}",
    "tile{bm=64 bm=32}",
    "tile{bm=",
    "tile{{bm=64}}",
    "tile}",
    "tile{bm=64,bn=64}",
    "tile{ bm = 64 }",
    "tile{schedule=}",
    "to-cuda,fuse",
    "tile,to-cuda",
    "fuse,to-cuda",
    "fuse,tile,tile,to-cuda",
    "fuse,,tile",
    "fuse tile",
    "",
    ",",
    "fuse{debug=2}",
    "fuse{debug=yes}",
    "decompose{x=1}",
    "to-cuda{pdl=-1}",
    "to-cuda{pdl=99999999999}",
    "flash-attention{f32=3}",
    "plan{why=-1}",
    "fuse,tile{sms=0},to-cuda",
    "fuse,tile{sms=-1},to-cuda",
    "fuse,tile{sms=99999999999},to-cuda",
    "fuse,tile{threads=0 bm=0 bn=0 bk=0},to-cuda",
]
"""Whole absurd pipelines, tried before random knob values."""
TILE_KNOBS = ["schedule", "threads", "vec", "rows", "cache", "bm", "bn", "bk", "tm", "tn"]
TILE_KNOBS += ["pad", "stages", "split", "group", "mma", "minblocks", "splitk", "splitk_mode"]
TILE_KNOBS += ["ws", "attn", "arows", "awarps", "copy", "swizzle", "store", "persistent"]
TILE_KNOBS += ["fastmath", "pairswap", "dual", "streamk", "interleave", "prefetch", "sms", "nope"]
ATTRIBUTE_VALUES = ["3 : i64", "-1 : i64", str(2**63) + " : i64", "1.5 : f32", "-0.0 : f64"]
ATTRIBUTE_VALUES += ['"x"', "true", "unit", "array<i64: 1>", "array<i64>", "array<i32: 0, 1>"]
ATTRIBUTE_VALUES += ["[1, 2]", "dense<1> : tensor<2xi64>", "f32", "@f", "{}", "0x7FC00000 : f32"]
ATTRIBUTE_VALUES += ["1.0e+40 : f32", "99999999999 : i32", "array<i64: 99999999999>"]

_TENSOR = re.compile(r"tensor<([^<>]*)>")
_ELEMENT = re.compile(r"(?<=[x<])(f32|f16|bf16|i1|i32|i64)(?=>)")
_ATTRIBUTE = re.compile(r"(?<=[{,] )(\w+) = ((?:array<[^>]*>|\"[^\"]*\"|[^,}])+?)(?=,|})")
_OPERANDS = re.compile(r"(= [\w.]+ )(%\w+(?:, %\w+)*)")


@dataclass(frozen=True)
class Mutant:
    """One hostile input: `text` (bytes: a byte flip need not leave UTF-8) for `pipeline`."""

    kind: str
    index: int
    seed: str
    text: bytes
    pipeline: str = PIPELINE
    note: str = ""

    @property
    def name(self) -> str:
        return f"{self.kind}-{self.index}"


def seed_text(path: str) -> str:
    """Return a seed program without its comment lines (RUN and CHECK lines)."""
    lines = (ROOT / path).read_text().splitlines()
    return "\n".join(line for line in lines if not line.lstrip().startswith("//")).strip() + "\n"


def _replace_one(rng: random.Random, pattern: re.Pattern[str], text: str, group: int, new: str):
    """Replace group `group` of one random match of `pattern`; None when there is none."""
    matches = list(pattern.finditer(text))
    if not matches:
        return None
    m = rng.choice(matches)
    return text[: m.start(group)] + new + text[m.end(group) :]


def truncations() -> list[Mutant]:
    """Every seed cut after each of its lines (the empty prefix included)."""
    out = []
    for seed in SEEDS:
        lines = seed_text(seed).splitlines(keepends=True)
        for n in range(len(lines)):
            text = "".join(lines[:n]).encode()
            out.append(Mutant("truncate", len(out), seed, text, note=f"first {n} lines"))
    return out


def mid_line_cut(rng: random.Random, text: str) -> tuple[str, str]:
    cut = rng.randrange(1, len(text))
    return text[:cut], f"cut at offset {cut}"


def swap_type(rng: random.Random, text: str) -> tuple[str, str] | None:
    new = rng.choice(ELEMENT_TYPES + ODD_TYPES if rng.random() < 0.3 else ELEMENT_TYPES)
    if rng.random() < 0.4:  # every occurrence of one type: often a valid program again
        old = rng.choice(sorted(set(_ELEMENT.findall(text))))
        return re.sub(rf"(?<=[x<]){old}(?=>)", new, text), f"every {old} -> {new}"
    swapped = _replace_one(rng, _ELEMENT, text, 1, new)
    return None if swapped is None else (swapped, f"one element type -> {new}")


def absurd_shape(rng: random.Random, text: str) -> tuple[str, str] | None:
    new = rng.choice(DIMS)
    if rng.random() < 0.15:
        return text.replace("tensor<", f"tensor<{new}x", 1), f"a leading {new} dimension"
    dims = [
        (m.start(1) + d.start(), d.group())
        for m in _TENSOR.finditer(text)
        for d in re.finditer(r"\d+(?=x)", m.group(1))
    ]
    if not dims:
        return None
    start, old = rng.choice(dims)
    if rng.random() < 0.5:  # every extent `old`: the shapes stay consistent
        pattern = rf"(?<=[<x]){old}(?=x)"
        return re.sub(pattern, new, text), f"every dimension {old} -> {new}"
    return text[:start] + new + text[start + len(old) :], f"one dimension {old} -> {new}"


def absurd_pipeline(rng: random.Random, index: int) -> str:
    if index < len(BAD_PIPELINES):
        return BAD_PIPELINES[index]
    knobs = " ".join(
        f"{rng.choice(TILE_KNOBS)}={rng.choice(KNOB_VALUES)}" for _ in range(rng.randint(1, 3))
    )
    return f"decompose,fuse,tile{{{knobs}}},to-cuda"


def operand(rng: random.Random, text: str) -> tuple[str, str] | None:
    matches = list(_OPERANDS.finditer(text))
    if not matches:
        return None
    m = rng.choice(matches)
    names = m.group(2).split(", ")
    values = sorted(set(re.findall(r"%\w+", text)))
    i = rng.randrange(len(names))
    how = rng.choice(["delete", "duplicate", "undefined", "other"])
    if how == "delete":
        del names[i]
    elif how == "duplicate":
        names.insert(i, names[i])
    elif how == "undefined":
        names[i] = "%nope"
    else:
        names[i] = rng.choice(values)
    new = ", ".join(names)
    return text[: m.start(2)] + new + text[m.end(2) :], f"{how} operand {i}: {new}"


def attribute(rng: random.Random, text: str) -> tuple[str, str] | None:
    matches = list(_ATTRIBUTE.finditer(text))
    if not matches:
        return None
    m = rng.choice(matches)
    how = rng.choice(["value", "value", "value", "name", "delete", "extra"])
    if how == "value":
        new = f"{m.group(1)} = {rng.choice(ATTRIBUTE_VALUES)}"
    elif how == "name":
        new = f"{m.group(1)}_x = {m.group(2)}"
    elif how == "delete":
        new = ""
    else:
        new = f"{m.group(0)}, frob = {rng.choice(ATTRIBUTE_VALUES)}"
    return text[: m.start()] + new + text[m.end() :], f"{how}: {m.group(0)!r} -> {new!r}"


def lines(rng: random.Random, text: str) -> tuple[str, str]:
    rows = text.splitlines(keepends=True)
    i = rng.randrange(len(rows))
    how = rng.choice(["delete", "duplicate", "swap"])
    if how == "delete":
        del rows[i]
    elif how == "duplicate":
        rows.insert(i, rows[i])
    elif i + 1 < len(rows):
        rows[i], rows[i + 1] = rows[i + 1], rows[i]
    return "".join(rows), f"{how} line {i + 1}"


def flip_bytes(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    out = bytearray(data)
    where = []
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(out))
        out[i] = rng.choice([rng.randrange(256), rng.randrange(32, 127)])
        where.append(i)
    return bytes(out), f"bytes at {where}"


TextMutation = Callable[[random.Random, str], "tuple[str, str] | None"]
TEXT_CLASSES: dict[str, TextMutation] = {
    "truncate": mid_line_cut,
    "swap_type": swap_type,
    "shape": absurd_shape,
    "operand": operand,
    "attribute": attribute,
    "lines": lines,
}
CLASSES = [*TEXT_CLASSES, "knob", "bytes"]


def mutant(kind: str, index: int, seed: int = 0) -> Mutant:
    """Return mutant `index` of class `kind` (not `truncate`'s every-line cuts)."""
    rng = random.Random(f"{seed}:{kind}:{index}")
    for _ in range(100):  # a seed program the mutation does not apply to: draw another
        path = rng.choice(SEEDS)
        text = seed_text(path)
        if kind == "knob":
            return Mutant(kind, index, path, text.encode(), absurd_pipeline(rng, index))
        if kind == "bytes":
            data, note = flip_bytes(rng, text.encode())
            return Mutant(kind, index, path, data, note=note)
        made = TEXT_CLASSES[kind](rng, text)
        if made is not None and made[0] != text:
            return Mutant(kind, index, path, made[0].encode(), note=made[1])
    raise ValueError(f"no {kind} mutant applies")


def mutants(n: int, seed: int = 0) -> list[Mutant]:
    """Every line truncation of every seed, and `n` mutants of each class."""
    out = truncations()
    first = len(out)
    out += [replace(mutant("truncate", i, seed), index=first + i) for i in range(n)]
    for kind in CLASSES:
        if kind != "truncate":
            out += [mutant(kind, i, seed) for i in range(n)]
    return out


def main(argv: list[str]) -> None:
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    made = mutants(int(argv[1]) if len(argv) > 1 else 20)
    for m in made:
        (out / f"{m.name}.mlir").write_bytes(m.text)
    (out / "pipelines.txt").write_text("".join(f"{m.name}.mlir {m.pipeline}\n" for m in made))
    print(f"{len(made)} mutants in {out}")


if __name__ == "__main__":
    main(sys.argv[1:])
