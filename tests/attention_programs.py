"""Attention programs in the graph dialect, shared by the flash-attention tests and benchmarks."""

from __future__ import annotations


def attention(
    b: int,
    h: int,
    s: int,
    d: int,
    dtype: str = "f32",
    causal: bool = False,
    kv_heads: int | None = None,
    scale: float | None = None,
    heads_last: bool = False,
) -> str:
    """Returns `graph.attention` on `[b, h, s, d]` q; with `kv_heads`, k and v have that many
    heads, each shared by h / kv_heads query heads (GQA, repeated as the torch frontend does);
    with `heads_last`, the result is transposed and reshaped to `[b, s, h·d]`, the layout an
    output projection reads (Llama's `attn.transpose(1, 2).view(b, s, h·d)`)."""
    kv = kv_heads or h
    scale = d**-0.5 if scale is None else scale
    t = f"tensor<{b}x{h}x{s}x{d}x{dtype}>"
    kv_t = f"tensor<{b}x{kv}x{s}x{d}x{dtype}>"
    out = f"tensor<{b}x{s}x{h * d}x{dtype}>" if heads_last else t
    lines = [f"func.func @attention(%q: {t}, %k: {kv_t}, %v: {kv_t}) -> {out} {{"]
    k, v = "%k", "%v"
    if kv != h:
        five = f"tensor<{b}x{kv}x1x{s}x{d}x{dtype}>"
        spread = f"tensor<{b}x{kv}x{h // kv}x{s}x{d}x{dtype}>"
        for x in ("k", "v"):
            lines += [
                f"  %{x}5 = graph.reshape %{x} : {kv_t} -> {five}",
                f"  %{x}b = graph.broadcast %{x}5 : {five} -> {spread}",
                f"  %{x}r = graph.reshape %{x}b : {spread} -> {t}",
            ]
        k, v = "%kr", "%vr"
    flag = ", causal = true" if causal else ""
    lines += [
        f"  %y = graph.attention %q, {k}, {v} {{scale = {scale!r} : f32{flag}}}"
        f" : ({t}, {t}, {t}) -> {t}",
    ]
    if heads_last:
        moved = f"tensor<{b}x{s}x{h}x{d}x{dtype}>"
        lines += [
            f"  %t = graph.transpose %y {{perm = array<i64: 0, 2, 1, 3>}} : {t} -> {moved}",
            f"  %y2 = graph.reshape %t : {moved} -> {out}",
        ]
    lines += [f"  func.return {'%y2' if heads_last else '%y'} : {out}", "}"]
    return "\n".join(lines)


def attention_spelled_out(bh: int, s: int, d: int, dtype: str = "f32", scale: float = 0.5) -> str:
    """Returns softmax(q kᵀ · scale + mask) v written with graph matmul, softmax and matmul on
    `[bh, s, d]` operands and an `[s, s]` mask input (which may hold −inf)."""
    x = f"tensor<{bh}x{s}x{d}x{dtype}>"
    kt = f"tensor<{bh}x{d}x{s}x{dtype}>"
    sc = f"tensor<{bh}x{s}x{s}x{dtype}>"
    mask = f"tensor<{s}x{s}x{dtype}>"
    return f"""func.func @attention(%q: {x}, %k: {x}, %v: {x}, %mask: {mask}) -> {x} {{
  %kt = graph.transpose %k {{perm = array<i64: 0, 2, 1>}} : {x} -> {kt}
  %s = graph.matmul %q, %kt : ({x}, {kt}) -> {sc}
  %c = graph.constant dense<{scale!r}> : {sc}
  %scaled = graph.mul %s, %c : {sc}
  %m = graph.broadcast %mask : {mask} -> {sc}
  %masked = graph.add %scaled, %m : {sc}
  %p = graph.softmax %masked {{dim = 2 : i64}} : {sc}
  %y = graph.matmul %p, %v : ({sc}, {x}) -> {x}
  func.return %y : {x}
}}"""


def decode_attention(
    b: int,
    h: int,
    kv: int,
    sq: int,
    skv: int,
    d: int,
    dv: int | None = None,
    dtype: str = "bf16",
    causal: bool = False,
    mask: tuple[tuple[int, ...], str] | None = None,
    valid: bool = False,
) -> str:
    """Returns `graph.attention` of a decode step or a short chunk: q `[b, h, sq, d]` against
    k `[b, kv, skv, d]` and v `[b, kv, skv, dv]` read in place (GQA: h a multiple of kv), the
    causal diagonal aligned to the end of the keys, a mask input of (shape, element type)
    broadcast to `[b, h, sq, skv]` (i1: true keeps a key; a float type: added), and with
    `valid` a last input %L, the runtime count of valid keys (`valid(%L)`)."""
    dv = dv or d

    def t(*dims: int, element: str = dtype) -> str:
        return f"tensor<{'x'.join(map(str, dims))}x{element}>"

    q, k, v, out = t(b, h, sq, d), t(b, kv, skv, d), t(b, kv, skv, dv), t(b, h, sq, dv)
    args, operands, types = f"%q: {q}, %k: {k}, %v: {v}", "%q, %k, %v", f"{q}, {k}, {v}"
    if mask is not None:
        m = t(*mask[0], element=mask[1])
        args, operands, types = f"{args}, %m: {m}", f"{operands}, %m", f"{types}, {m}"
    if valid:
        args, operands = f"{args}, %L: tensor<i64>", f"{operands} valid(%L : tensor<i64>)"
    flag = ", causal = true" if causal else ""
    return (
        f"func.func @decode({args}) -> {out} {{\n"
        f"  %y = graph.attention {operands} {{scale = {d**-0.5!r} : f32{flag}}}"
        f" : ({types}) -> {out}\n"
        f"  func.return %y : {out}\n}}"
    )
