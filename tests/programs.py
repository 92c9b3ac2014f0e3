"""Graph programs the kernel tests compile and run, with shapes that are not tile multiples."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import numpy as np
from attention_programs import attention, decode_attention

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load_example(name: str) -> ModuleType:
    """Import the Python example examples/`name` (e.g. `llama_block.py`) as a module."""
    path = EXAMPLES / name
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _t(shape: tuple[int, ...], dtype: str) -> str:
    return f"tensor<{'x'.join(map(str, shape))}x{dtype}>" if shape else f"tensor<{dtype}>"


def rmsnorm(shape: tuple[int, ...], dtype: str = "f32") -> str:
    x, w = _t(shape, dtype), _t(shape[-1:], dtype)
    return f"""func.func @rmsnorm(%x: {x}, %w: {w}) -> {x} {{
  %y = graph.rms_norm %x, %w {{eps = 1.0e-06 : f32}} : ({x}, {w}) -> {x}
  func.return %y : {x}
}}"""


def softmax(shape: tuple[int, ...], dtype: str = "f32") -> str:
    x = _t(shape, dtype)
    return f"""func.func @softmax(%x: {x}) -> {x} {{
  %y = graph.softmax %x {{dim = {len(shape) - 1} : i64}} : {x}
  func.return %y : {x}
}}"""


def layernorm(shape: tuple[int, ...], dtype: str = "f32") -> str:
    x, w = _t(shape, dtype), _t(shape[-1:], dtype)
    return f"""func.func @layernorm(%x: {x}, %w: {w}, %b: {w}) -> {x} {{
  %y = graph.layer_norm %x, %w, %b {{eps = 1.0e-05 : f32}} : ({x}, {w}, {w}) -> {x}
  func.return %y : {x}
}}"""


def bias_gelu(shape: tuple[int, ...], dtype: str = "f32") -> str:
    x, b = _t(shape, dtype), _t(shape[-1:], dtype)
    return f"""func.func @bias_gelu(%x: {x}, %b: {b}) -> {x} {{
  %bb = graph.broadcast %b : {b} -> {x}
  %s = graph.add %x, %bb : {x}
  %y = graph.gelu %s : {x}
  func.return %y : {x}
}}"""


def transpose_add(rows: int, cols: int) -> str:
    a, t = _t((rows, cols), "f32"), _t((cols, rows), "f32")
    return f"""func.func @transpose_add(%a: {a}, %b: {t}) -> {a} {{
  %bt = graph.transpose %b {{perm = array<i64: 1, 0>}} : {t} -> {a}
  %y = graph.add %a, %bt : {a}
  %z = graph.silu %y : {a}
  func.return %z : {a}
}}"""


STORAGE = {"f32": np.float32, "f16": np.float16, "bf16": np.float32}
"""How inputs of each element type are held in numpy (bf16 as float32 holding bf16 values)."""


def each_op(ops: Sequence[str], operands: int, dtype: str, size: int) -> str:
    """`@f` of `operands` vectors of `size` elements returning each elementwise graph op of
    `ops` applied to them, in order."""
    t = _t((size,), dtype)
    names = ["x", "y"][:operands]
    arguments = ", ".join(f"%{n}: {t}" for n in names)
    applied = ", ".join(f"%{n}" for n in names)
    lines = "\n".join(f"  %{op} = graph.{op} {applied} : {t}" for op in ops)
    results, types = ", ".join(f"%{op}" for op in ops), ", ".join([t] * len(ops))
    return (
        f"func.func @f({arguments}) -> ({types}) {{\n{lines}\n  func.return {results} : {types}\n}}"
    )


def rounding(shape: tuple[int, ...], dtype: str = "f32") -> str:
    """floor, ceil, round and trunc of x: four results, each its own kernel."""
    x = _t(shape, dtype)
    return f"""func.func @rounding(%x: {x}) -> ({x}, {x}, {x}, {x}) {{
  %f = graph.floor %x : {x}
  %c = graph.ceil %x : {x}
  %r = graph.round %x : {x}
  %t = graph.trunc %x : {x}
  func.return %f, %c, %r, %t : {x}, {x}, {x}, {x}
}}"""


def binary_math(shape: tuple[int, ...], dtype: str = "f32") -> str:
    """atan2, fmod and remainder of a and a row b broadcast over a's rows: three results, each
    its own kernel."""
    a, b = _t(shape, dtype), _t(shape[-1:], dtype)
    return f"""func.func @binary_math(%a: {a}, %b: {b}) -> ({a}, {a}, {a}) {{
  %bb = graph.broadcast %b : {b} -> {a}
  %t = graph.atan2 %a, %bb : {a}
  %f = graph.fmod %a, %bb : {a}
  %r = graph.remainder %a, %bb : {a}
  func.return %t, %f, %r : {a}, {a}, {a}
}}"""


def row_sum(rows: int, cols: int) -> str:
    x, y = _t((rows, cols), "f32"), _t((rows,), "f32")
    return f"""func.func @row_sum(%x: {x}) -> {y} {{
  %y = graph.reduce_sum %x {{dims = array<i64: 1>}} : {x} -> {y}
  func.return %y : {y}
}}"""


def reduction(op: str, shape: tuple[int, ...], dims: tuple[int, ...], dtype: str = "f32") -> str:
    """`graph.<op>` (reduce_sum, reduce_mean, reduce_max, ...) of `shape` over `dims`."""
    x, y = _t(shape, dtype), _t(tuple(n for d, n in enumerate(shape) if d not in dims), dtype)
    return f"""func.func @f(%x: {x}) -> {y} {{
  %r = graph.{op} %x {{dims = array<i64: {", ".join(map(str, dims))}>}} : {x} -> {y}
  func.return %r : {y}
}}"""


def shifted_row_max(rows: int, cols: int) -> str:
    """max over each row of x + v, v `[cols]` shared by every row: a row reduction reading x
    once beside a vector all rows read (what `evict` hints, as a GEMV's weights)."""
    x, v, y = _t((rows, cols), "f32"), _t((cols,), "f32"), _t((rows,), "f32")
    return f"""func.func @shifted_row_max(%x: {x}, %v: {v}) -> {y} {{
  %vb = graph.broadcast %v : {v} -> {x}
  %s = graph.add %x, %vb : {x}
  %y = graph.reduce_max %s {{dims = array<i64: 1>}} : {x} -> {y}
  func.return %y : {y}
}}"""


def products(shape: tuple[int, ...], dtype: str = "f32") -> str:
    """reduce_prod of exp(x / 64) over x's last dim (a row reduction) and over its other dims,
    kept (a reduction per column): factors near 1, so products of thousands stay finite."""
    x, rows = _t(shape, dtype), _t(shape[:-1], dtype)
    leading = ", ".join(map(str, range(len(shape) - 1)))
    columns = _t((*(1,) * (len(shape) - 1), shape[-1]), dtype)
    return f"""func.func @products(%x: {x}) -> ({rows}, {columns}) {{
  %c = graph.constant dense<1.562500e-02> : {x}
  %s = graph.mul %x, %c : {x}
  %e = graph.exp %s : {x}
  %r = graph.reduce_prod %e {{dims = array<i64: {len(shape) - 1}>}} : {x} -> {rows}
  %k = graph.reduce_prod %e {{dims = array<i64: {leading}>, keepdim = true}} : {x} -> {columns}
  func.return %r, %k : {rows}, {columns}
}}"""


def matmul_relu(m: int, n: int, k: int, dtype: str = "f32") -> str:
    x, b, w, y = _t((m, k), dtype), _t((k,), dtype), _t((k, n), dtype), _t((m, n), dtype)
    return f"""func.func @matmul_relu(%x: {x}, %bias: {b}, %w: {w}) -> {y} {{
  %bb = graph.broadcast %bias : {b} -> {x}
  %a = graph.add %x, %bb : {x}
  %m = graph.matmul %a, %w : ({x}, {w}) -> {y}
  %r = graph.relu %m : {y}
  func.return %r : {y}
}}"""


def batched_linear(batch: int, m: int, n: int, k: int) -> str:
    """`a @ transpose(bt)` over a batch, bt `[b, N, K]`: K-major B, as TF32 wgmma reads it."""
    a, bt, b, c = (
        _t((batch, m, k), "f32"),
        _t((batch, n, k), "f32"),
        _t((batch, k, n), "f32"),
        _t((batch, m, n), "f32"),
    )
    return f"""func.func @bmm(%a: {a}, %bt: {bt}) -> {c} {{
  %b = graph.transpose %bt {{perm = array<i64: 0, 2, 1>}} : {bt} -> {b}
  %c = graph.matmul %a, %b : ({a}, {b}) -> {c}
  func.return %c : {c}
}}"""


def batched_matmul(batch: int, m: int, n: int, k: int, dtype: str = "f32") -> str:
    a, b, c = _t((batch, m, k), dtype), _t((batch, k, n), dtype), _t((batch, m, n), dtype)
    return f"""func.func @bmm(%a: {a}, %b: {b}) -> {c} {{
  %c = graph.matmul %a, %b : ({a}, {b}) -> {c}
  func.return %c : {c}
}}"""


def masked_scores(batch: int, heads: int, seq: int, dim: int, dtype: str = "f32") -> str:
    """Attention scores `q @ kᵀ` of `[B, H, S, D]` heads plus a `[B, S]` key mask broadcast
    over heads and queries (BERT's padding mask): a contraction with two batch dims whose
    epilogue reads the first alone."""
    qk, mask = _t((batch, heads, seq, dim), dtype), _t((batch, seq), dtype)
    kt, out = _t((batch, heads, dim, seq), dtype), _t((batch, heads, seq, seq), dtype)
    m4 = _t((batch, 1, 1, seq), dtype)
    return f"""func.func @scores(%q: {qk}, %k: {qk}, %mask: {mask}) -> {out} {{
  %kt = graph.transpose %k {{perm = array<i64: 0, 1, 3, 2>}} : {qk} -> {kt}
  %s = graph.matmul %q, %kt : ({qk}, {kt}) -> {out}
  %m = graph.reshape %mask : {mask} -> {m4}
  %mb = graph.broadcast %m : {m4} -> {out}
  %r = graph.add %s, %mb : {out}
  func.return %r : {out}
}}"""


def shared_weight_batch_bias(batch: int, m: int, n: int, k: int, dtype: str = "f32") -> str:
    """`x @ w + bias[b]`: x `[B, M, K]`, one w `[K, N]` for the batch and a bias per batch
    entry, which the epilogue reads at the batch index alone."""
    x, w, wb = _t((batch, m, k), dtype), _t((k, n), dtype), _t((batch, k, n), dtype)
    bias, out = _t((batch, 1, n), dtype), _t((batch, m, n), dtype)
    return f"""func.func @shared_b(%x: {x}, %w: {w}, %bias: {bias}) -> {out} {{
  %wb = graph.broadcast %w : {w} -> {wb}
  %y = graph.matmul %x, %wb : ({x}, {wb}) -> {out}
  %bb = graph.broadcast %bias : {bias} -> {out}
  %r = graph.add %y, %bb : {out}
  func.return %r : {out}
}}"""


def shared_a_matmul(batch: int, m: int, n: int, k: int, dtype: str = "bf16") -> str:
    """`w @ x[b]`: one w `[M, K]` for every batch entry of x `[B, K, N]`, as a 1×1
    convolution's weight meets each image's `[C, H·W]` pixels (A indexed without the batch)."""
    w, wb = _t((m, k), dtype), _t((batch, m, k), dtype)
    x, out = _t((batch, k, n), dtype), _t((batch, m, n), dtype)
    return f"""func.func @shared_a(%w: {w}, %x: {x}) -> {out} {{
  %wb = graph.broadcast %w : {w} -> {wb}
  %y = graph.matmul %wb, %x : ({wb}, {x}) -> {out}
  func.return %y : {out}
}}"""


def gqa_scores(batch: int, kv: int, group: int, seq: int, dim: int, dtype: str = "f32") -> str:
    """`q @ kᵀ` with q `[B·H, S, D]` (heads merged into the batch, as Llama's f32 attention
    reaches the matmul) and k `[B, KV, S, D]` repeated to H = KV·group heads: the keys are
    read at a batch index divided down to the KV head."""
    heads = kv * group
    k, q = _t((batch, kv, seq, dim), dtype), _t((batch * heads, seq, dim), dtype)
    k5, kb = _t((batch, kv, 1, seq, dim), dtype), _t((batch, kv, group, seq, dim), dtype)
    kr, kt = _t((batch * heads, seq, dim), dtype), _t((batch * heads, dim, seq), dtype)
    out = _t((batch * heads, seq, seq), dtype)
    return f"""func.func @gqa(%q: {q}, %k: {k}) -> {out} {{
  %k5 = graph.reshape %k : {k} -> {k5}
  %kb = graph.broadcast %k5 : {k5} -> {kb}
  %kr = graph.reshape %kb : {kb} -> {kr}
  %kt = graph.transpose %kr {{perm = array<i64: 0, 2, 1>}} : {kr} -> {kt}
  %s = graph.matmul %q, %kt : ({q}, {kt}) -> {out}
  func.return %s : {out}
}}"""


def mlp(m: int | tuple[int, ...], d: int, h: int, dtype: str = "f32") -> str:
    """linear → gelu → linear on x `[m, d]`, or `[*m, d]` (a batched activation)."""
    rows = (m,) if isinstance(m, int) else m
    x, w1, b1 = _t((*rows, d), dtype), _t((h, d), dtype), _t((h,), dtype)
    w2, b2, hid = _t((d, h), dtype), _t((d,), dtype), _t((*rows, h), dtype)
    return f"""func.func @mlp(%x: {x}, %w1: {w1}, %b1: {b1}, %w2: {w2}, %b2: {b2}) -> {x} {{
  %h = graph.linear %x, %w1, %b1 : ({x}, {w1}, {b1}) -> {hid}
  %g = graph.gelu %h : {hid}
  %y = graph.linear %g, %w2, %b2 : ({hid}, {w2}, {b2}) -> {x}
  func.return %y : {x}
}}"""


def matmul_plain(
    m: int, n: int, k: int, dtype: str = "bf16", b_layout: str = "kn", relu: bool = True
) -> str:
    """`relu(x @ w)` (`x @ w` without `relu`) with w `[K, N]` (`kn`), or `linear(x, w, bias)`
    with torch-layout w `[N, K]` (`nk`): operands are plain loads, as TMA (mma=wgmma) needs."""
    x, y = _t((m, k), dtype), _t((m, n), dtype)
    if b_layout == "nk":
        w, b = _t((n, k), dtype), _t((n,), dtype)
        return f"""func.func @linear(%x: {x}, %w: {w}, %b: {b}) -> {y} {{
  %y = graph.linear %x, %w, %b : ({x}, {w}, {b}) -> {y}
  func.return %y : {y}
}}"""
    w = _t((k, n), dtype)
    if not relu:
        return f"""func.func @matmul(%x: {x}, %w: {w}) -> {y} {{
  %m = graph.matmul %x, %w : ({x}, {w}) -> {y}
  func.return %m : {y}
}}"""
    return f"""func.func @matmul(%x: {x}, %w: {w}) -> {y} {{
  %m = graph.matmul %x, %w : ({x}, {w}) -> {y}
  %r = graph.relu %m : {y}
  func.return %r : {y}
}}"""


def swiglu(m: int, d: int, h: int, dtype: str = "bf16") -> str:
    """`silu(x @ wg^T) * (x @ wu^T)`, the Llama MLP's gate: two torch-layout GEMMs sharing x,
    one kernel (a dual GEMM) where the wgmma rule takes it, else two (`dual`)."""
    x, w, y = _t((m, d), dtype), _t((h, d), dtype), _t((m, h), dtype)
    return f"""func.func @swiglu(%x: {x}, %wg: {w}, %wu: {w}) -> {y} {{
  %g = graph.linear %x, %wg : ({x}, {w}) -> {y}
  %u = graph.linear %x, %wu : ({x}, {w}) -> {y}
  %s = graph.silu %g : {y}
  %p = graph.mul %s, %u : {y}
  func.return %p : {y}
}}"""


def gated(m: int, d: int, h: int, dtype: str = "bf16") -> str:
    """`silu(x @ wg^T) * u` with `u` an input: a GEMM whose epilogue reads another buffer."""
    x, w, y = _t((m, d), dtype), _t((h, d), dtype), _t((m, h), dtype)
    return f"""func.func @gated(%x: {x}, %wg: {w}, %u: {y}) -> {y} {{
  %g = graph.linear %x, %wg : ({x}, {w}) -> {y}
  %s = graph.silu %g : {y}
  %p = graph.mul %s, %u : {y}
  func.return %p : {y}
}}"""


def swiglu_batched(batch: int, m: int, k: int, n: int, dtype: str = "bf16") -> str:
    """`silu(a @ bg) * (a @ bu)` over a batch, with `[b, K, N]` (N-major) weights."""
    a, b, c = _t((batch, m, k), dtype), _t((batch, k, n), dtype), _t((batch, m, n), dtype)
    return f"""func.func @swiglu(%a: {a}, %bg: {b}, %bu: {b}) -> {c} {{
  %g = graph.matmul %a, %bg : ({a}, {b}) -> {c}
  %u = graph.matmul %a, %bu : ({a}, {b}) -> {c}
  %s = graph.silu %g : {c}
  %p = graph.mul %s, %u : {c}
  func.return %p : {c}
}}"""


@dataclass(frozen=True)
class Case:
    """A program, the pipeline that lowers it, and a short id for test names."""

    id: str
    text: str
    pipeline: str = "fuse,tile,to-cuda"
    tolerance: float | None = None
    """The largest relative error accepted, where the output type's (check.TOLERANCES) is not
    the right one: TF32 inputs (mma=tf32) are rounded to 10 mantissa bits."""


def matmul_transposed(m: int, n: int, k: int, dtype: str = "f32") -> str:
    """Returns `transpose(xt) @ transpose(wt)`: both operands stored the other way round."""
    xt, wt = _t((k, m), dtype), _t((n, k), dtype)
    x, w, y = _t((m, k), dtype), _t((k, n), dtype), _t((m, n), dtype)
    return f"""func.func @matmul_t(%xt: {xt}, %wt: {wt}) -> {y} {{
  %x = graph.transpose %xt {{perm = array<i64: 1, 0>}} : {xt} -> {x}
  %w = graph.transpose %wt {{perm = array<i64: 1, 0>}} : {wt} -> {w}
  %y = graph.matmul %x, %w : ({x}, {w}) -> {y}
  func.return %y : {y}
}}"""


def scaled_matmul(m: int, n: int, k: int, fp8: str = "f8E4M3FN", out: str = "bf16") -> str:
    """`(a @ bᵀ) · scale` cast to `out`, with a `[M, K]` and b `[N, K]` 8-bit floats widened
    to f32 (exact) and one f32 scale (the product of the operands' per-tensor scales), the
    form torch's `_scaled_mm` computes."""
    a, b = _t((m, k), fp8), _t((n, k), fp8)
    a32, b32, bt, y, z = (_t(s, "f32") for s in ((m, k), (n, k), (k, n), (m, n), (m, n)))
    scale, result = _t((1,), "f32"), _t((m, n), out)
    cast = f"  %o = graph.cast %z : {z} -> {result}\n" if out != "f32" else ""
    return f"""func.func @scaled_mm(%a: {a}, %b: {b}, %s: {scale}) -> {result} {{
  %a32 = graph.cast %a : {a} -> {a32}
  %b32 = graph.cast %b : {b} -> {b32}
  %bt = graph.transpose %b32 {{perm = array<i64: 1, 0>}} : {b32} -> {bt}
  %y = graph.matmul %a32, %bt : ({a32}, {bt}) -> {y}
  %sb = graph.broadcast %s : {scale} -> {z}
  %z = graph.mul %y, %sb : {z}
{cast}  func.return {"%o" if out != "f32" else "%z"} : {result}
}}"""


def block_scaled_matmul(
    m: int,
    n: int,
    k: int,
    fp8: str = "f8E4M3FN",
    out: str = "bf16",
    a_rows: int = 1,
    b_rows: int = 128,
) -> str:
    """`(a · sa) @ (b · sb)ᵀ` to `out`: a `[M, K]` and b `[N, K]` 8-bit floats, each times one
    f32 scale per 128 of K and per `a_rows` (`b_rows`) rows, 1 or 128 (torch's `_scaled_mm`
    with `BlockWise1x128` / `BlockWise128x128` scales: sa `[M/a_rows, K/128]`, sb stored
    `[K/128, N/b_rows]` as torch takes it), each scale broadcast over its block."""
    kb = -(-k // 128)
    ma, nb = -(-m // a_rows), -(-n // b_rows)
    a, b, result = _t((m, k), fp8), _t((n, k), fp8), _t((m, n), out)
    sa, sb = _t((ma, kb), "f32"), _t((kb, nb), "f32")

    def f(*shape: int) -> str:
        return _t(shape, "f32")

    def spread(name: str, scale: str, rows: int, blocks: int, extent: int) -> str:
        """`%{name}` [extent, k]: the scale `[blocks, kb]` repeated over its rows and K."""
        whole, rows_cut = f(blocks * rows, kb * 128), f(extent, kb * 128)
        first = "{dim = 0 : i64, start = 0 : i64, step = 1 : i64}"
        second = "{dim = 1 : i64, start = 0 : i64, step = 1 : i64}"
        return f"""  %{name}4 = graph.reshape %{scale} : {f(blocks, kb)} -> {f(blocks, 1, kb, 1)}
  %{name}b = graph.broadcast %{name}4 : {f(blocks, 1, kb, 1)} -> {f(blocks, rows, kb, 128)}
  %{name}f = graph.reshape %{name}b : {f(blocks, rows, kb, 128)} -> {whole}
  %{name}r = graph.slice %{name}f {first} : {whole} -> {rows_cut}
  %{name} = graph.slice %{name}r {second} : {rows_cut} -> {f(extent, k)}
"""

    return f"""func.func @block_scaled_mm(%a: {a}, %sa: {sa}, %b: {b}, %sb: {sb}) -> {result} {{
  %a32 = graph.cast %a : {a} -> {f(m, k)}
{spread("sak", "sa", a_rows, ma, m)}  %ad = graph.mul %a32, %sak : {f(m, k)}
  %b32 = graph.cast %b : {b} -> {f(n, k)}
  %sbt = graph.transpose %sb {{perm = array<i64: 1, 0>}} : {sb} -> {f(nb, kb)}
{spread("sbk", "sbt", b_rows, nb, n)}  %bd = graph.mul %b32, %sbk : {f(n, k)}
  %bt = graph.transpose %bd {{perm = array<i64: 1, 0>}} : {f(n, k)} -> {f(k, n)}
  %y = graph.matmul %ad, %bt : ({f(m, k)}, {f(k, n)}) -> {f(m, n)}
{f"  %o = graph.cast %y : {f(m, n)} -> {result}" if out != "f32" else ""}
  func.return {"%o" if out != "f32" else "%y"} : {result}
}}"""


def quantize(shape: tuple[int, ...], dtype: str = "bf16") -> str:
    """x · s quantized to e4m3fn and to e5m2, and the e5m2 values read back in `dtype`."""
    x = _t(shape, dtype)
    e4, e5 = _t(shape, "f8E4M3FN"), _t(shape, "f8E5M2")
    return f"""func.func @quantize(%x: {x}, %s: {x}) -> ({e4}, {e5}, {x}) {{
  %y = graph.mul %x, %s : {x}
  %q4 = graph.cast %y : {x} -> {e4}
  %q5 = graph.cast %y : {x} -> {e5}
  %back = graph.cast %q5 : {e5} -> {x}
  func.return %q4, %q5, %back : {e4}, {e5}, {x}
}}"""


def skinny(
    m: int,
    n: int,
    k: int,
    dtype: str = "f32",
    layout: str = "nk",
    epilogue: str = "",
    batch: int = 0,
) -> str:
    """A GEMV or skinny GEMM: `x @ wᵀ` with w `[N, K]` (`nk`, as torch's linear stores it) or
    `x @ w` with w `[K, N]` (`kn`), with a weight per batch entry where `batch` > 0, then
    `epilogue`: "" none, "bias_gelu" (a bias over N, then GELU) or "relu"."""
    lead = (batch,) if batch else ()
    x, y = _t((*lead, m, k), dtype), _t((*lead, m, n), dtype)
    w = _t((*lead, n, k) if layout == "nk" else (*lead, k, n), dtype)
    args, lines = [f"%x: {x}", f"%w: {w}"], []
    rhs = "%w"
    if layout == "nk":
        perm = "0, 2, 1" if batch else "1, 0"
        wt = _t((*lead, k, n), dtype)
        lines.append(f"%wt = graph.transpose %w {{perm = array<i64: {perm}>}} : {w} -> {wt}")
        rhs = f"%wt : ({x}, {wt})"
    else:
        rhs = f"%w : ({x}, {w})"
    lines.append(f"%y = graph.matmul %x, {rhs} -> {y}")
    out = "%y"
    if epilogue == "bias_gelu":
        b = _t((n,), dtype)
        args.append(f"%b: {b}")
        lines += [
            f"%bb = graph.broadcast %b : {b} -> {y}",
            f"%s = graph.add %y, %bb : {y}",
            f"%g = graph.gelu %s : {y}",
        ]
        out = "%g"
    elif epilogue == "relu":
        lines.append(f"%r = graph.relu %y : {y}")
        out = "%r"
    body = "\n  ".join(lines)
    return f"""func.func @skinny({", ".join(args)}) -> {y} {{
  {body}
  func.return {out} : {y}
}}"""


TF32_TOLERANCE = 1e-3

FP8_TENSOR_CORE_TOLERANCE = 3e-4
"""An f32 output of FP8 wgmma products with K steps promoted: the tensor cores sum a step's 128
products in fewer bits than f32. Measured on the H200 (2026-12-04): 4096³ e4m3 1.26e-4 relative
error, as torch's `_scaled_mm` (cuBLAS without fast accumulation) in the same run; 1.26e-4 at
3000×1544×512; 8.3e-5 for e5m2 at 4096×4096×512. Summing all of K there (`promote=off`, torch's
`use_fast_accum=True`) left 1.33e-3 at 4096³."""


def tile_with(knobs: str) -> str:
    return f"fuse,tile{{{knobs}}},to-cuda"


CASES = [
    Case("fp8_scaled_mm_e4m3_200x136x264", scaled_matmul(200, 136, 264)),
    Case("fp8_scaled_mm_e5m2_f32_64x80x100", scaled_matmul(64, 80, 100, "f8E5M2", "f32")),
    # FP8 on wgmma (rows of whole 16 bytes): ragged tiles, and 512 tiles on persistent blocks.
    Case("fp8_wgmma_e4m3_300x520x384", scaled_matmul(300, 520, 384)),
    # To f32 (K steps promoted by default): the tensor cores' FP8 sums of a step keep fewer bits
    # than f32 (FP8_TENSOR_CORE_TOLERANCE).
    Case(
        "fp8_wgmma_e5m2_f32_4096x4096x512",
        scaled_matmul(4096, 4096, 512, "f8E5M2", "f32"),
        tolerance=FP8_TENSOR_CORE_TOLERANCE,
    ),
    # K steps promoted to f32: by choice to bf16 (ragged rows), by default to f32 on persistent
    # 128x192 blocks (24 x 9 tiles on 132 SMs).
    Case(
        "fp8_wgmma_promoted_e4m3_1000x776x640",
        scaled_matmul(1000, 776, 640),
        tile_with("promote=on"),
    ),
    Case(
        "fp8_wgmma_promoted_f32_3000x1544x512",
        scaled_matmul(3000, 1544, 512, out="f32"),
        tolerance=FP8_TENSOR_CORE_TOLERANCE,
    ),
    # Promoted steps overlapped (`poverlap`, two sets of products): per-tensor to bf16 on a
    # persistent grid (5 K steps: two pairs, then one), block scales of A by row and of B by
    # 128x128 with ragged tiles (4 steps: a pair, then two).
    Case(
        "fp8_wgmma_overlapped_e4m3_3000x1544x640",
        scaled_matmul(3000, 1544, 640),
        tile_with("poverlap=on"),
    ),
    Case(
        "fp8_wgmma_overlapped_block_scaled_1000x784x512",
        block_scaled_matmul(1000, 784, 512),
        tile_with("poverlap=on"),
    ),
    # Consumer warpgroups taking turns (`pturns`): block scales on persistent 128x128 blocks
    # with ragged tiles, per-tensor promoted steps to f32 with stream-K on the last wave's
    # tiles (pieces with run-time step counts).
    Case(
        "fp8_wgmma_turns_block_scaled_1000x784x640",
        block_scaled_matmul(1000, 784, 640),
        tile_with("pturns=on sms=8"),
    ),
    Case(
        "fp8_wgmma_turns_f32_streamk_3000x1544x512",
        scaled_matmul(3000, 1544, 512, out="f32"),
        tile_with("pturns=on streamk=tail"),
        tolerance=FP8_TENSOR_CORE_TOLERANCE,
    ),
    # Promoted steps in halves of 128 columns (bn=256): block scales on persistent blocks
    # with ragged tiles, per-tensor promoted steps to f32 on a grid of its own.
    Case(
        "fp8_wgmma_halves_block_scaled_1000x1032x640",
        block_scaled_matmul(1000, 1032, 640),
        tile_with("mma=wgmma bn=256 store=direct sms=8"),
    ),
    Case(
        "fp8_wgmma_halves_f32_3000x1544x512",
        scaled_matmul(3000, 1544, 512, out="f32"),
        tile_with("mma=wgmma bn=256 persistent=0"),
        tolerance=FP8_TENSOR_CORE_TOLERANCE,
    ),
    # The TMA-store epilogue (`store=tma`): a linear with a bias and ragged tiles on persistent
    # 128x256 blocks; a batch of 3 (3-D boxes) off the tiles; FP8 block scales on 128x128.
    Case(
        "bf16_wgmma_tma_store_linear_1000x4104x1000",
        matmul_plain(1000, 4104, 1000, "bf16", "nk"),
        tile_with("mma=wgmma store=tma"),
    ),
    Case(
        "bf16_wgmma_tma_store_bmm_3x1000x1000x1000",
        batched_matmul(3, 1000, 1000, 1000, "bf16"),
        tile_with("mma=wgmma store=tma"),
    ),
    Case(
        "fp8_wgmma_tma_store_block_scaled_1000x1032x640",
        block_scaled_matmul(1000, 1032, 640),
        tile_with("mma=wgmma store=tma sms=8"),
    ),
    # streamk=tail on persistent wgmma blocks: 288 tiles of 128x256 on 132 SMs, one round of
    # whole tiles, then 156 shared; FP8 with promoted steps on 128x192 blocks; fewer tiles
    # than SMs (64 rows: 63 tiles of 64x64, 2016 K steps shared by 132 blocks; 1000 rows: 4 x
    # 21 tiles of 128x128, ragged K).
    Case(
        "bf16_wgmma_streamk_tail_3000x3000x1024",
        matmul_plain(3000, 3000, 1024, "bf16"),
        tile_with("streamk=tail bm=128 bn=256"),
    ),
    Case(
        "bf16_wgmma_streamk_few_tiles_64x4000x2048",
        matmul_plain(64, 4000, 2048, "bf16", "nk"),
        tile_with("streamk=tail"),
    ),
    Case(
        "bf16_wgmma_streamk_few_tiles_relu_500x2600x1000",
        matmul_plain(500, 2600, 1000, "bf16", relu=True),
        tile_with("streamk=tail bn=128"),
    ),
    # 192-row blocks (three consumer warpgroups) by the wave choice: 256 tiles of 192x192 on
    # 132 persistent SMs, the last row and column of tiles holding 120 of 192; with a bias and
    # GELU after (the MLP's first linear), then the second linear.
    Case("bf16_wgmma_tall_3000x3000x1024", matmul_plain(3000, 3000, 1024, "bf16", "nk")),
    Case("bf16_wgmma_tall_mlp_3000x1024x3000", mlp(3000, 1024, 3000, "bf16")),
    # Rows of K (3000: 6000 bytes) 16 bytes off 32-byte sectors: B copied to aligned rows, then
    # the GEMM on 192-row blocks; a ragged K on the padded workspace's zeros.
    Case("bf16_wgmma_sector_staged_3000x3000x3000", matmul_plain(3000, 3000, 3000, "bf16", "nk")),
    # B multicast to clusters of two blocks (`multicast=b`): each block copies half of a
    # K-major B tile's rows, or half of an N-major tile's 64-column chunks, into both; a ragged
    # K; 9 rows of tiles (the last pair's second block past M); persistent pairs on 192-row
    # blocks; a batch; a bias and GELU epilogue; 8-bit floats.
    Case(
        "bf16_wgmma_multicast_1000x2048x520",
        matmul_plain(1000, 2048, 520, "bf16", "nk"),
        tile_with("multicast=b"),
    ),
    Case(
        "bf16_wgmma_multicast_odd_rows_1100x1000x264",
        matmul_plain(1100, 1000, 264, "bf16", "nk"),
        tile_with("multicast=b"),
    ),
    Case(
        "bf16_wgmma_multicast_n_major_1000x1024x520",
        matmul_plain(1000, 1024, 520, "bf16"),
        tile_with("multicast=b"),
    ),
    # 192-wide blocks of an N-major B: each block copies 32 of each of the three chunks' 64 K
    # rows into both (`k_halves`); a ragged N and K; persistent pairs of 192×192 blocks.
    Case(
        "bf16_wgmma_multicast_k_halves_1000x1000x1000",
        matmul_plain(1000, 1000, 1000, "bf16"),
        tile_with("mma=wgmma bn=192 multicast=b"),
    ),
    Case(
        "bf16_wgmma_multicast_k_halves_tall_3000x3000x3000",
        matmul_plain(3000, 3000, 3000, "bf16"),
        tile_with("mma=wgmma bm=192 bn=192 multicast=b"),
    ),
    # mma.sync's epilogue through shared memory (`store=smem`): single elements (odd N, odd
    # K: 2-byte loads too) and pairs, ragged edges.
    Case(
        "bf16_mma_sync_smem_store_1000x773x93",
        matmul_plain(1000, 773, 93, "bf16", "nk"),
        tile_with("mma=sync store=smem"),
    ),
    Case(
        "bf16_mma_sync_smem_store_small_130x72x190",
        matmul_plain(130, 72, 190, "bf16", "nk"),
        tile_with("mma=sync bm=32 bn=32 store=smem"),
    ),
    # mma.sync's K loop with the next stages - 1 steps in a ring of registers: element loads
    # (odd K) on 32×32 blocks, 7 steps ahead, K = 190 not a whole group; 64×64 blocks, 4 ahead.
    Case(
        "bf16_mma_sync_ring_8_790x72x190",
        matmul_plain(790, 72, 190, "bf16", "nk"),
        tile_with("mma=sync bm=32 bn=32 stages=8"),
    ),
    Case(
        "bf16_mma_sync_ring_5_300x201x189",
        matmul_plain(300, 201, 189, "bf16", "nk"),
        tile_with("mma=sync bm=64 bn=64 stages=5"),
    ),
    # The staged wgmma GEMM's epilogue at an odd N (773: rows of 1546 bytes), stored element by
    # element through shared memory, a warp's lanes along one row; two K steps, a ragged M.
    Case(
        "bf16_wgmma_staged_odd_n_1000x773x93",
        matmul_plain(1000, 773, 93, "bf16", "nk"),
        tile_with("align=on"),
    ),
    # Linears (with their bias) whose rows hold 2, 4 or 6 mod 8 elements (N 5470: pairs, 1100:
    # fours), stored along the rows in pieces of 4 or 8 bytes (`wgmma.narrow_rows`), by default.
    Case("bf16_wgmma_staged_pairs_693x5470x224", matmul_plain(693, 5470, 224, "bf16", "nk")),
    Case("bf16_wgmma_staged_fours_300x1100x208", matmul_plain(300, 1100, 208, "bf16", "nk")),
    # Blocks of a width off 64-column chunks: 208 columns over an N-major B (the last chunk 16
    # of 64) in a batch; 144 over a K-major one, persistent, 192 rows.
    Case(
        "bf16_wgmma_ragged_208_bmm_3x1000",
        batched_matmul(3, 1000, 1000, 1000, "bf16"),
        tile_with("mma=wgmma bn=208"),
    ),
    Case(
        "bf16_wgmma_ragged_144_tall_1000x1000x1000",
        matmul_plain(1000, 1000, 1000, "bf16", "nk"),
        tile_with("mma=wgmma bm=192 bn=144"),
    ),
    # The same widths multicast over a cluster of two: an N-major B's four chunks (two each) in
    # a batch, a K-major B's 144 rows (72 each) on persistent pairs, an N-major B's three
    # chunks (half of each chunk's K rows each), A over pairs of 208-wide columns.
    Case(
        "bf16_wgmma_ragged_208_multicast_bmm_3x1000",
        batched_matmul(3, 1000, 1000, 1000, "bf16"),
        tile_with("mma=wgmma bn=208 multicast=b"),
    ),
    Case(
        "bf16_wgmma_ragged_144_multicast_persistent_1000x1000x1000",
        matmul_plain(1000, 1000, 1000, "bf16", "nk"),
        tile_with("mma=wgmma bn=144 multicast=b persistent=1 sms=40"),
    ),
    Case(
        "bf16_wgmma_ragged_144_multicast_kn_1000x776x520",
        matmul_plain(1000, 776, 520, "bf16", "kn"),
        tile_with("mma=wgmma bn=144 multicast=b"),
    ),
    Case(
        "bf16_wgmma_ragged_208_multicast_a_1000x1000x1000",
        matmul_plain(1000, 1000, 1000, "bf16", "kn"),
        tile_with("mma=wgmma bn=208 multicast=a"),
    ),
    # The sides swapped (`swap=on`, wgmma_swap.py): an N-major B read M-major (trans-a) in a
    # batch, 208 columns of A's rows a block; a K-major B; three consumer warpgroups over B's
    # N with ragged M and N and the ReLU; the staged epilogue; persistent blocks walking tiles;
    # rows off sectors staged, then swapped.
    Case(
        "bf16_wgmma_swap_bmm_3x1000",
        batched_matmul(3, 1000, 1000, 1000, "bf16"),
        tile_with("swap=on store=direct"),
    ),
    Case(
        "bf16_wgmma_swap_nk_1000x1000x520",
        matmul_plain(1000, 1000, 520, "bf16", "nk"),
        tile_with("swap=on"),
    ),
    Case(
        "f16_wgmma_swap_tall_kn_997x776x264",
        matmul_plain(997, 776, 264, "f16", "kn"),
        tile_with("mma=wgmma swap=on bm=192"),
    ),
    Case(
        "bf16_wgmma_swap_staged_epilogue_bmm_3x1000",
        batched_matmul(3, 1000, 1000, 1000, "bf16"),
        tile_with("swap=on store=smem"),
    ),
    Case(
        "bf16_wgmma_swap_persistent_1000x776x520",
        matmul_plain(1000, 776, 520, "bf16", "kn"),
        tile_with("swap=on persistent=1 sms=40"),
    ),
    Case(
        "bf16_wgmma_swap_staged_1000x1000x1000",
        matmul_plain(1000, 1000, 1000, "bf16", "kn"),
        tile_with("swap=on align=on"),
    ),
    # The staged GEMM split over K (the staging rule's pieces planned as any GEMM): a small
    # grid, a long K off 32-byte sectors.
    Case("bf16_wgmma_staged_split_101x3024x6484", matmul_plain(101, 3024, 6484, "bf16", "nk")),
    # Tensor maps with 256-byte L2 promotion (`l2promo`), B's rows off 32-byte sectors.
    Case(
        "bf16_wgmma_l2promo_256_1000x2048x3000",
        matmul_plain(1000, 2048, 3000, "bf16", "nk"),
        tile_with("l2promo=256"),
    ),
    Case(
        "bf16_wgmma_multicast_persistent_tall_3000x3000x1024",
        matmul_plain(3000, 3000, 1024, "bf16", "nk"),
        tile_with("multicast=b"),
    ),
    Case(
        "bf16_wgmma_multicast_persistent_odd_pairs_1100x3000x512",
        matmul_plain(1100, 3000, 512, "bf16", "nk"),
        tile_with("multicast=b persistent=1"),
    ),
    Case(
        "bf16_wgmma_multicast_bmm_3x1000x1000x1000",
        batched_matmul(3, 1000, 1000, 1000, "bf16"),
        tile_with("multicast=b"),
    ),
    Case(
        "bf16_wgmma_multicast_mlp_1000x1024x4096",
        mlp(1000, 1024, 4096, "bf16"),
        tile_with("multicast=b"),
    ),
    # A multicast to two columns of tiles (`multicast=a`): 15 columns of 128 (the last pair's
    # second block past N), N-major B, persistent pairs, a split-K partial kernel of one row.
    Case(
        "bf16_wgmma_multicast_a_odd_columns_1000x1880x520",
        matmul_plain(1000, 1880, 520, "bf16", "nk"),
        tile_with("multicast=a"),
    ),
    Case(
        "bf16_wgmma_multicast_a_n_major_1000x1024x520",
        matmul_plain(1000, 1024, 520, "bf16"),
        tile_with("multicast=a"),
    ),
    Case(
        "bf16_wgmma_multicast_a_persistent_1100x3000x512",
        matmul_plain(1100, 3000, 512, "bf16", "nk"),
        tile_with("multicast=a persistent=1"),
    ),
    Case(
        "bf16_wgmma_multicast_a_split_64x1024x4096",
        matmul_plain(64, 1024, 4096, "bf16", "nk"),
        tile_with("multicast=a"),
    ),
    Case(
        "fp8_wgmma_multicast_e4m3_1024x1024x1024",
        scaled_matmul(1024, 1024, 1024),
        tile_with("multicast=b"),
    ),
    Case(
        "fp8_block_scaled_multicast_e4m3_1000x776x640",
        block_scaled_matmul(1000, 776, 640),
        tile_with("multicast=b"),
    ),
    # Four blocks sharing (`multicast=b4` / `a4`): a K-major B's quarter of rows each over 8
    # rows of tiles; 9 rows (three blocks of the last cluster past M); a batch's N-major B in
    # 208-wide blocks (one of four chunks each, as cuBLAS's 3×1000³ runs 128×200 tiles in
    # clusters of four); 192-wide N-major blocks (16 of each chunk's 64 K rows each); A over 15
    # columns of tiles (one block past N); 30 persistent clusters walking 24 rows of 12
    # columns; 8-bit floats.
    Case(
        "bf16_wgmma_multicast_b4_1000x2048x520",
        matmul_plain(1000, 2048, 520, "bf16", "nk"),
        tile_with("multicast=b4"),
    ),
    Case(
        "bf16_wgmma_multicast_b4_odd_rows_1100x1000x264",
        matmul_plain(1100, 1000, 264, "bf16", "nk"),
        tile_with("mma=wgmma bm=128 bn=128 multicast=b4"),
    ),
    Case(
        "bf16_wgmma_multicast_b4_ragged_208_bmm_3x1000",
        batched_matmul(3, 1000, 1000, 1000, "bf16"),
        tile_with("mma=wgmma bn=208 multicast=b4"),
    ),
    Case(
        "bf16_wgmma_multicast_b4_k_quarters_1000x1000x1000",
        matmul_plain(1000, 1000, 1000, "bf16"),
        tile_with("mma=wgmma bn=192 multicast=b4"),
    ),
    Case(
        "bf16_wgmma_multicast_a4_odd_columns_1000x1880x520",
        matmul_plain(1000, 1880, 520, "bf16", "nk"),
        tile_with("mma=wgmma bm=128 bn=128 multicast=a4"),
    ),
    Case(
        "bf16_wgmma_multicast_b4_persistent_3000x3000x1032",
        matmul_plain(3000, 3000, 1032, "bf16", "nk"),
        tile_with("mma=wgmma bm=128 bn=256 multicast=b4 persistent=1"),
    ),
    Case(
        "fp8_wgmma_multicast_b4_e4m3_1024x1024x1024",
        scaled_matmul(1024, 1024, 1024),
        tile_with("multicast=b4"),
    ),
    # the wave choice's 128x192 blocks, K summed in the tensor cores (bf16 out).
    Case("fp8_wgmma_bn192_e4m3_3000x3000x1024", scaled_matmul(3000, 3000, 1024)),
    Case(
        "fp8_wgmma_streamk_tail_f32_3000x3000x1024",
        scaled_matmul(3000, 3000, 1024, out="f32"),
        tile_with("streamk=tail"),
        tolerance=FP8_TENSOR_CORE_TOLERANCE,
    ),
    # Block scales (1×128 A, 128×128 B) applied per promoted K step: ragged tiles and K; a
    # persistent grid with 128×128 scales of both to f32.
    Case("fp8_block_scaled_e4m3_1000x776x640", block_scaled_matmul(1000, 776, 640)),
    Case(
        "fp8_block_scaled_f32_2000x1544x1008",
        block_scaled_matmul(2000, 1544, 1008, out="f32", a_rows=128),
        tolerance=FP8_TENSOR_CORE_TOLERANCE,
    ),
    # 192-column blocks: two B scales a step, the last block past N (776 = 4·192 + 8).
    Case(
        "fp8_block_scaled_bn192_e4m3_1000x776x640",
        block_scaled_matmul(1000, 776, 640),
        tile_with("mma=wgmma bn=192"),
    ),
    Case("fp8_quantize_bf16_7x33", quantize((7, 33))),
    Case("fp8_quantize_f32_3x1000", quantize((3, 1000), "f32")),
    Case("rmsnorm_64x4096", rmsnorm((64, 4096))),
    Case("rmsnorm_3x4095", rmsnorm((3, 4095))),
    Case("rmsnorm_bf16_3x5x1000", rmsnorm((3, 5, 1000), "bf16")),
    Case("rmsnorm_bf16_16x4096", rmsnorm((16, 4096), "bf16")),
    Case("softmax_2x3x7x2048", softmax((2, 3, 7, 2048))),
    Case("softmax_1000x1000", softmax((1000, 1000))),
    Case("softmax_5x4095", softmax((5, 4095))),
    Case("softmax_bf16_9x2048", softmax((9, 2048), "bf16")),
    Case("softmax_f16_4x300", softmax((4, 300), "f16")),
    Case("layernorm_3x100x768", layernorm((3, 100, 768))),
    Case("layernorm_7x1000", layernorm((7, 1000))),
    Case("bias_gelu_1000x1000", bias_gelu((1000, 1000))),
    Case("bias_gelu_3x4095", bias_gelu((3, 4095))),
    Case("bias_gelu_bf16_64x256", bias_gelu((64, 256), "bf16")),
    Case("transpose_add_33x65", transpose_add(33, 65)),
    Case("row_sum_3x1000", row_sum(3, 1000)),
    # passes/tile/split_reduction.py: few long rows, a prime length, strided reductions.
    Case("sum_of_all_2_20", reduction("reduce_sum", (1 << 20,), (0,))),
    Case("max_3_rows_of_prime_100003", reduction("reduce_max", (3, 100003), (1,))),
    Case("mean_of_all_bf16_300x257", reduction("reduce_mean", (300, 257), (0, 1), "bf16")),
    Case("sum_over_dim0_5000x96", reduction("reduce_sum", (5000, 96), (0,))),
    Case("mean_over_batch_seq_4x300x200", reduction("reduce_mean", (4, 300, 200), (0, 1))),
    Case("max_over_middle_bf16_3x1001x40", reduction("reduce_max", (3, 1001, 40), (1,), "bf16")),
    Case("sum_over_dim0_thread_per_row_3x300000", reduction("reduce_sum", (3, 300000), (0,))),
    Case("products_33x1000", products((33, 1000))),
    Case("products_f16_7x4096", products((7, 4096), "f16")),
    Case("products_bf16_3x5x130", products((3, 5, 130), "bf16")),
    Case("rounding_33x65", rounding((33, 65))),
    Case("rounding_f16_7x1000", rounding((7, 1000), "f16")),
    Case("rounding_bf16_3x5x130", rounding((3, 5, 130), "bf16")),
    Case("binary_math_33x65", binary_math((33, 65))),
    Case("binary_math_f16_7x1000", binary_math((7, 1000), "f16")),
    Case("binary_math_bf16_3x5x130", binary_math((3, 5, 130), "bf16")),
    Case("masked_scores_2x3x100x64", masked_scores(2, 3, 100, 64)),
    Case("masked_scores_bf16_3x2x130x64", masked_scores(3, 2, 130, 64, "bf16")),
    Case("batch_into_rows_3x37x20x24", shared_weight_batch_bias(3, 37, 20, 24)),
    Case("batch_into_rows_bf16_3x530x264x136", shared_weight_batch_bias(3, 530, 264, 136, "bf16")),
    Case("gqa_scores_2x2x3x130x64", gqa_scores(2, 2, 3, 130, 64)),
    Case("matmul_relu_1000", matmul_relu(1000, 1000, 1000)),
    Case("matmul_relu_129x257x33", matmul_relu(129, 257, 33)),
    Case("matmul_relu_bf16_128x96x64", matmul_relu(128, 96, 64, "bf16")),
    Case("bmm_3x65x33x47", batched_matmul(3, 65, 33, 47)),
    # Past the launch limits (passes/tile/limits.py): a batch of 100000 in grid.z, and batch ×
    # heads = 131072 in the attention rule's grid.y (y and z stop at 65535), both folded into x.
    Case("bmm_batch_100000_4x4x4", batched_matmul(100000, 4, 4, 4)),
    Case(
        "attention_heads_131072_bf16",
        attention(1024, 128, 16, 16, "bf16"),
        "decompose,fuse,flash-attention,tile,to-cuda",
    ),
    # Decode attention (attn=decode, passes/tile/attention/decode.py): split-KV blocks per KV
    # head and chunk of keys, then the merge of the chunks' (m, l, acc); GQA 32/8 at D = 128
    # (32 chunks of 128 keys at batch 1), a chunk of 4 causal queries with a padding mask,
    # Dv ≠ D, D of 32 and 256 in f16, one chunk (no merge), and f32 (CUDA cores).
    Case(
        "decode_attention_gqa4_b1_s4096_bf16",
        decode_attention(1, 32, 8, 1, 4096, 128),
        "decompose,fuse,flash-attention,tile,to-cuda",
    ),
    # the same cut by the chunk count (abalance=off) rather than by the grid, and the grid's
    # cut where each block's run spans several groups (batch 64 of 300 keys) and where one
    # group spans several blocks unevenly (batch 3 of 5000 keys, 8 KV heads).
    Case(
        "decode_attention_unbalanced_gqa4_b1_s4096_bf16",
        decode_attention(1, 32, 8, 1, 4096, 128),
        "decompose,fuse,flash-attention,tile{abalance=off},to-cuda",
    ),
    Case(
        "decode_attention_balanced_b64_s300_bf16",
        decode_attention(64, 32, 8, 1, 300, 128),
        "decompose,fuse,flash-attention,tile{abalance=on},to-cuda",
    ),
    Case(
        "decode_attention_balanced_b3_s5000_bf16",
        decode_attention(3, 32, 8, 1, 5000, 128),
        "decompose,fuse,flash-attention,tile{abalance=on},to-cuda",
    ),
    # the same with each key-parallel warp on its own barriers (akwarps_sync=warp), with rings
    # of three tiles, and with a causal chunk and mask over two splits.
    Case(
        "decode_attention_warp_sync_gqa4_b1_s4096_bf16",
        decode_attention(1, 32, 8, 1, 4096, 128),
        "decompose,fuse,flash-attention,tile{akwarps_sync=warp},to-cuda",
    ),
    Case(
        "decode_attention_warp_sync_3_slots_gqa4_b1_s4096_bf16",
        decode_attention(1, 32, 8, 1, 4096, 128),
        "decompose,fuse,flash-attention,tile{akwarps_sync=warp aslots=3},to-cuda",
    ),
    Case(
        "decode_attention_warp_sync_sq4_causal_mask_b2_s1000_bf16",
        decode_attention(2, 32, 8, 4, 1000, 128, mask=((2, 1, 1, 1000), "i1"), causal=True),
        "decompose,fuse,flash-attention,tile{akwarps_sync=warp asplits=2},to-cuda",
    ),
    Case(
        "decode_attention_sq4_causal_mask_b2_s1000_bf16",
        decode_attention(2, 32, 8, 4, 1000, 128, mask=((2, 1, 1, 1000), "i1"), causal=True),
        "decompose,fuse,flash-attention,tile,to-cuda",
    ),
    Case(
        "decode_attention_gqa8_sq8_dv64_s1000_bf16",
        decode_attention(1, 32, 4, 8, 1000, 128, 64),
        "decompose,fuse,flash-attention,tile,to-cuda",
    ),
    Case(
        "decode_attention_d256_s1000_f16",
        decode_attention(1, 8, 2, 1, 1000, 256, dtype="f16"),
        "decompose,fuse,flash-attention,tile,to-cuda",
    ),
    Case(
        "decode_attention_d32_one_split_s300_bf16",
        decode_attention(3, 4, 4, 2, 300, 32),
        "decompose,fuse,flash-attention,tile{asplits=1},to-cuda",
    ),
    Case(
        "decode_attention_f32_gqa4_s1000",
        decode_attention(2, 8, 2, 1, 1000, 64, dtype="f32"),
        "decompose,fuse,flash-attention,tile,to-cuda",
    ),
    # f32 decode on CUDA cores (passes/tile/attention/decode_simt.py), a row tile of the
    # group's rows: GQA 32/8 at D = 128 (4 rows, 64 threads), one row at D = 256 (four rows of
    # 16 lanes), 3 causal queries × GQA 4 with an additive mask (12 rows in a 16-row tile),
    # MQA 32 heads × 2 queries (64 rows, 4 a thread), and bf16 at D = 40 (no tensor cores).
    Case(
        "decode_attention_f32_gqa4_b1_s4096_d128",
        decode_attention(1, 32, 8, 1, 4096, 128, dtype="f32"),
        "decompose,fuse,flash-attention,tile,to-cuda",
    ),
    Case(
        "decode_attention_f32_mha_d256_s1000",
        decode_attention(2, 4, 4, 1, 1000, 256, dtype="f32"),
        "decompose,fuse,flash-attention,tile,to-cuda",
    ),
    Case(
        "decode_attention_f32_sq3_causal_additive_mask_s777",
        decode_attention(
            2, 8, 2, 3, 777, 64, dtype="f32", causal=True, mask=((2, 8, 3, 777), "f32")
        ),
        "decompose,fuse,flash-attention,tile,to-cuda",
    ),
    Case(
        "decode_attention_f32_mqa_sq2_s1000_dv48",
        decode_attention(1, 32, 1, 2, 1000, 64, 48, dtype="f32"),
        "decompose,fuse,flash-attention,tile,to-cuda",
    ),
    Case(
        "decode_attention_bf16_d40_gqa4_s1000",
        decode_attention(2, 8, 2, 1, 1000, 40),
        "decompose,fuse,flash-attention,tile,to-cuda",
    ),
    # FP32 flash attention on CUDA cores (attn=simt, passes/tile/attention/simt.py), taken by
    # attn=auto for f32 and for f16/bf16 head dims the tensor cores refuse: causal GQA at D =
    # 128 (Llama), heads stored side by side (GPT-2/BERT), a causal chunk with a padding mask
    # and Dv ≠ D, D = 256 (64-row blocks), bf16 at D = 40, and the other knob values.
    Case(
        "attention_simt_f32_causal_gqa4_s1000_d128",
        attention(2, 8, 1000, 128, "f32", causal=True, kv_heads=2),
        "decompose,fuse,flash-attention,tile,to-cuda",
    ),
    Case(
        "attention_simt_f32_s300_d64_heads_last",
        attention(2, 12, 300, 64, "f32", heads_last=True),
        "decompose,fuse,flash-attention,tile,to-cuda",
    ),
    Case(
        "attention_simt_f32_chunk_causal_mask_sq100_s1000_dv80",
        decode_attention(
            2, 8, 2, 100, 1000, 64, 80, dtype="f32", causal=True, mask=((2, 1, 1, 1000), "i1")
        ),
        "decompose,fuse,flash-attention,tile,to-cuda",
    ),
    Case(
        "attention_simt_f32_d256_s500",
        attention(1, 4, 500, 256, "f32"),
        "decompose,fuse,flash-attention,tile,to-cuda",
    ),
    Case(
        "attention_simt_bf16_d40_causal_s300",
        attention(2, 4, 300, 40, "bf16", causal=True),
        "decompose,fuse,flash-attention,tile,to-cuda",
    ),
    Case(
        "attention_simt_f32_bm64_bn32_threads128_s333_d96",
        attention(1, 4, 333, 96, "f32", causal=True),
        "decompose,fuse,flash-attention,tile{attn=simt bm=64 bn=32 threads=128},to-cuda",
    ),
    Case("mlp_100x128x256", mlp(100, 128, 256)),
    # [batch, seq, hidden] and rank-4 activations: each linear one GEMM over all rows.
    Case("mlp_3x37x100x72", mlp((3, 37), 100, 72)),
    Case("mlp_2x3x17x64x40", mlp((2, 3, 17), 64, 40)),
    Case("mlp_bf16_3x129x64x96", mlp((3, 129), 64, 96, "bf16")),
    Case("mlp_7x1x33x5", mlp((7, 1), 33, 5)),
    Case("mlp_bf16_2x127x97x61", mlp((2, 127), 97, 61, "bf16")),
    # Knob coverage: each knob away from its default at least once.
    Case("softmax_sequential", softmax((7, 100)), tile_with("schedule=sequential")),
    Case("matmul_sequential", matmul_relu(33, 17, 9), tile_with("schedule=sequential")),
    Case("rmsnorm_threads32_rows4", rmsnorm((8, 1000)), tile_with("threads=32 rows=4")),
    Case("rmsnorm_vec1_nocache", rmsnorm((6, 4096)), tile_with("vec=1 cache=0")),
    Case("softmax_threads1024", softmax((3, 4096)), tile_with("threads=1024")),
    Case("bias_gelu_vec2_threads128", bias_gelu((10, 1000)), tile_with("vec=2 threads=128")),
    Case(
        "matmul_tiles_64x32x16_4x2",
        matmul_relu(200, 100, 300),
        tile_with("bm=64 bn=32 bk=16 tm=4 tn=2 pad=0"),
    ),
    Case(
        "matmul_tiles_128_8x8_vec1",
        matmul_relu(257, 260, 129),
        tile_with("bm=128 bn=128 tm=8 tn=8 vec=1"),
    ),
    # Tensor cores (mma=sync): odd shapes pad M, N and K with zeros. B is staged [K][N] and
    # read by ldmatrix.trans where N allows 16-byte vectors (1000, 136), else staged [N][K]
    # like the MLP's torch-layout weights and read plainly.
    Case("matmul_relu_bf16_mma_1000", matmul_relu(1000, 1000, 1000, "bf16"), tile_with("mma=sync")),
    Case("matmul_relu_f16_mma_129x257x33", matmul_relu(129, 257, 33, "f16"), tile_with("mma=sync")),
    Case(
        "matmul_relu_bf16_mma_513x257x129",
        matmul_relu(513, 257, 129, "bf16"),
        tile_with("mma=sync"),
    ),
    Case(
        "matmul_relu_f16_mma_bm64_bn128_bk64",
        matmul_relu(200, 136, 48, "f16"),
        tile_with("mma=sync bm=64 bn=128 bk=64"),
    ),
    Case("bmm_bf16_mma_3x65x33x47", batched_matmul(3, 65, 33, 47, "bf16"), tile_with("mma=sync")),
    Case("mlp_bf16_mma_100x128x256", mlp(100, 128, 256, "bf16"), tile_with("mma=sync")),
    # Hopper (mma=wgmma): TMA zero-fills the tile edges of M, N and K; B [K, N] is read
    # N-major, torch-layout [N, K] weights K-major; batches are 3-D tensor maps.
    Case("matmul_bf16_wgmma_1000", matmul_plain(1000, 1000, 1000), tile_with("mma=wgmma")),
    # Split K on wgmma in chunks of whole boxes whose last reaches past K (TMA's zeros there):
    # K = 13080 auto-split (204.4 boxes) with a bias in the fold, K = 200 in 64, 64, 64, 8.
    Case(
        "linear_bf16_wgmma_auto_split_past_k_96x80x13080",
        matmul_plain(96, 80, 13080, "bf16", "nk"),
    ),
    # 108 blocks of 64×64 cannot split within a wave: K (124.25 boxes) split in 4 on 128×128.
    Case(
        "linear_bf16_wgmma_square_split_200x1728x7952",
        matmul_plain(200, 1728, 7952, "bf16", "nk"),
    ),
    Case(
        "matmul_bf16_wgmma_split_past_k_130x192x200",
        matmul_plain(130, 192, 200, "bf16", "kn"),
        tile_with("mma=wgmma splitk=4"),
    ),
    # Split K over a thread-block cluster (splitk_mode=cluster, wgmma_cluster.py): the k/v
    # linear of a 64-row decode step in clusters of 8 (half the threads of each block sum its
    # share); ragged M, N and K (the last chunk past K) with a bias and ReLU in clusters of 2;
    # two consumer warpgroups and two 64-column chunks a block, in clusters of 4; a batch.
    Case(
        "linear_bf16_wgmma_cluster8_64x1024x4096",
        matmul_plain(64, 1024, 4096, "bf16", "nk", relu=False),
        tile_with("splitk_mode=cluster"),
    ),
    Case(
        "linear_bf16_wgmma_cluster2_130x200x1000",
        matmul_plain(130, 200, 1000, "bf16", "nk"),
        tile_with("mma=wgmma splitk=2 splitk_mode=cluster"),
    ),
    Case(
        "linear_bf16_wgmma_cluster4_bm128_300x384x3000",
        matmul_plain(300, 384, 3000, "bf16", "nk"),
        tile_with("bm=128 bn=128 splitk=4 splitk_mode=cluster"),
    ),
    Case(
        "bmm_bf16_wgmma_cluster4_3x100x200x3000",
        batched_matmul(3, 100, 200, 3000, "bf16"),
        tile_with("mma=wgmma splitk=4 splitk_mode=cluster"),
    ),
    # One row of 64×64 blocks, fewer than the SMs: the deepest ring shared memory holds.
    Case(
        "linear_bf16_wgmma_deep_ring_48x2944x14256",
        matmul_plain(48, 2944, 14256, "bf16", "nk", relu=False),
    ),
    Case(
        "matmul_f16_wgmma_513x264x136",
        matmul_plain(513, 264, 136, "f16"),
        tile_with("mma=wgmma bn=128 stages=3"),
    ),
    Case(
        "linear_bf16_wgmma_256x512x64",
        matmul_plain(256, 512, 64, "bf16", "nk"),
        tile_with("mma=wgmma"),
    ),
    Case(
        "linear_bf16_wgmma_ws0_200x320x72",
        matmul_plain(200, 320, 72, "bf16", "nk"),
        tile_with("mma=wgmma ws=0 bm=64 bn=64 stages=2"),
    ),
    Case(
        "bmm_bf16_wgmma_3x65x64x40",
        batched_matmul(3, 65, 64, 40, "bf16"),
        tile_with("mma=wgmma ws=0"),
    ),
    Case("mlp_bf16_wgmma_100x128x256", mlp(100, 128, 256, "bf16"), tile_with("mma=wgmma")),
    # store=smem: accumulators staged through shared memory, then the epilogue on 8 columns
    # per thread (16-byte accesses); N=330 falls back to 2-column vectors, the gated GEMM
    # reads `u` in its epilogue, bn=256 stages four 64-column chunks.
    Case(
        "matmul_bf16_wgmma_smem_1000",
        matmul_plain(1000, 1000, 1000),
        tile_with("mma=wgmma store=smem"),
    ),
    Case(
        "matmul_f16_wgmma_smem_513x264x136",
        matmul_plain(513, 264, 136, "f16"),
        tile_with("mma=wgmma bn=128 stages=3 store=smem"),
    ),
    Case(
        "linear_bf16_wgmma_smem_256x512x64",
        matmul_plain(256, 512, 64, "bf16", "nk"),
        tile_with("mma=wgmma store=smem"),
    ),
    Case(
        "linear_bf16_wgmma_smem_ws0_200x330x72",
        matmul_plain(200, 330, 72, "bf16", "nk"),
        tile_with("mma=wgmma ws=0 bm=64 bn=64 stages=2 store=smem"),
    ),
    Case(
        "bmm_bf16_wgmma_smem_3x65x64x40",
        batched_matmul(3, 65, 64, 40, "bf16"),
        tile_with("mma=wgmma ws=0 store=smem"),
    ),
    Case(
        "mlp_bf16_wgmma_smem_100x128x256",
        mlp(100, 128, 256, "bf16"),
        tile_with("mma=wgmma store=smem"),
    ),
    # dual GEMM (gate and up in one kernel, the gate's accumulators beside the up's): the
    # default 128×256 tile (128 output columns), bn=128 without a producer warpgroup, the
    # fragment epilogue, N-major weights of a batch, persistent blocks; dual=off and f32 split
    # it into two kernels through an f32 workspace.
    Case("swiglu_bf16_dual_1000x264x1000", swiglu(1000, 264, 1000)),
    Case(
        "swiglu_bf16_dual_bn128_ws0_130x136x520",
        swiglu(130, 136, 520),
        tile_with("dual=on bn=128 ws=0 stages=2"),
    ),
    Case(
        "swiglu_bf16_dual_direct_200x72x330",
        swiglu(200, 72, 330),
        tile_with("dual=on store=direct"),
    ),
    Case(
        "swiglu_bf16_dual_batched_kn_3x260x136x264",
        swiglu_batched(3, 260, 136, 264),
        tile_with("dual=on"),
    ),
    Case(
        "swiglu_bf16_dual_persistent_1100x136x2104",
        swiglu(1100, 136, 2104),
        tile_with("dual=on persistent=1"),
    ),
    Case(
        "swiglu_bf16_dual_off_130x136x520",
        swiglu(130, 136, 520),
        tile_with("mma=wgmma dual=off"),
    ),
    Case("swiglu_f32_unpaired_100x72x264", swiglu(100, 72, 264, "f32")),
    Case(
        "gated_bf16_wgmma_smem_100x136x264",
        gated(100, 136, 264),
        tile_with("mma=wgmma store=smem"),
    ),
    Case(
        "gated_bf16_wgmma_smem_bn256_130x136x520",
        gated(130, 136, 520),
        tile_with("mma=wgmma bn=256 store=smem"),
    ),
    # bn=192: three 64-column chunks of an N-major B, 192 rows of a K-major one, 96
    # accumulators a consumer thread; ragged last column and row tiles, an epilogue reading u.
    Case(
        "matmul_bf16_wgmma_bn192_300x520x200",
        matmul_plain(300, 520, 200),
        tile_with("mma=wgmma bn=192"),
    ),
    Case(
        "linear_bf16_wgmma_bn192_bm64_136x400x264",
        matmul_plain(136, 400, 264, b_layout="nk"),
        tile_with("mma=wgmma bm=64 bn=192"),
    ),
    Case(
        "gated_bf16_wgmma_bn192_direct_200x392x136",
        gated(200, 136, 392),
        tile_with("mma=wgmma bn=192 store=direct"),
    ),
    # persistent=1: 132 blocks walk the tiles (272, 405 and 153 here, so blocks take 1 to 4),
    # the ring's slots and phases carrying on from one tile to the next.
    Case(
        "matmul_bf16_wgmma_persistent_2000x2104x136",
        matmul_plain(2000, 2104, 136),
        tile_with("mma=wgmma bn=128 persistent=1"),
    ),
    Case(
        "bmm_bf16_wgmma_persistent_direct_9x520x264x72",
        batched_matmul(9, 520, 264, 72, "bf16"),
        tile_with("mma=wgmma bm=64 bn=64 persistent=1 store=direct"),
    ),
    Case(
        "gated_bf16_wgmma_persistent_1100x136x2104",
        gated(1100, 136, 2104),
        tile_with("mma=wgmma bn=128 persistent=1"),
    ),
    # persistent=auto: 9 x 18 = 162 tiles of 128 x 64 for the first linear (more than the
    # SMs, so 132 persistent blocks), its bias loaded once for a thread's rows, then GELU; the
    # second linear's 18 x 3 tiles of 64 x 64 launch one block each.
    Case(
        "mlp_bf16_wgmma_auto_persistent_1100x136x1096",
        mlp(1100, 136, 1096, "bf16"),
        tile_with("mma=wgmma bn=64"),
    ),
    # group: tiles launched in groups of block rows, down a group's rows first (14 rows of
    # tiles in groups of 8 and 6; with persistent=1, per batch).
    Case(
        "matmul_bf16_wgmma_group8_1700x520x64",
        matmul_plain(1700, 520, 64),
        tile_with("mma=wgmma bn=128 group=8"),
    ),
    Case(
        "bmm_bf16_wgmma_persistent_group4_9x520x264x72",
        batched_matmul(9, 520, 264, 72, "bf16"),
        tile_with("mma=wgmma bm=64 bn=64 persistent=1 group=4"),
    ),
    Case("matmul_splitk4_33x40x1000", matmul_relu(33, 40, 1000), tile_with("splitk=4")),
    Case(
        "bmm_splitk8_twopass_3x65x33x517",
        batched_matmul(3, 65, 33, 517),
        tile_with("splitk=8 splitk_mode=twopass"),
    ),
    # Atomic split-K: a zeroing kernel, then each chunk's partial sums red.add into the output
    # (`auto` takes it for these epilogue-free products; relu above falls back to two passes).
    Case("bmm_splitk4_auto_3x65x33x517", batched_matmul(3, 65, 33, 517), tile_with("splitk=4")),
    Case(
        "matmul_splitk8_atomic_1000",
        matmul_plain(1000, 1000, 1000, "f32", relu=False),
        tile_with("splitk=8 splitk_mode=atomic"),
    ),
    Case(
        "matmul_transposed_splitk4_atomic_4095x4097x513",
        matmul_transposed(4095, 4097, 513),
        tile_with("splitk=4 splitk_mode=atomic"),
    ),
    Case("matmul_4095x4097x513", matmul_relu(4095, 4097, 513)),
    Case("matmul_transposed_257x129x65", matmul_transposed(257, 129, 65)),
    Case(
        "matmul_transposed_bf16_mma_130x66x48",
        matmul_transposed(130, 66, 48, "bf16"),
        tile_with("mma=sync"),
    ),
    Case("matmul_f16_200x136x1000", matmul_relu(200, 136, 1000, "f16")),
    Case(
        "matmul_knobs_stages1_split1_pad0_group2_minblocks1",
        matmul_relu(300, 260, 70),
        tile_with("bm=64 bn=64 tm=8 tn=8 stages=1 split=1 pad=0 group=2 minblocks=1"),
    ),
    Case(
        "matmul_knobs_bk32_vec2",
        matmul_relu(100, 90, 130),
        tile_with("bk=32 vec=2 bm=32 bn=32 tm=2 tn=2"),
    ),
    # pairswap (B's columns staged pairwise swapped, on by default) off, and on with B staged
    # along K (torch-layout `linear`, one column per store) and with a 2-wide B staging.
    Case("matmul_pairswap0_257x129x65", matmul_relu(257, 129, 65), tile_with("pairswap=0")),
    Case("linear_f32_pairswap_130x260x70", matmul_plain(130, 260, 70, "f32", "nk")),
    Case("matmul_pairswap_vec2_70x90x66", matmul_relu(70, 90, 66), tile_with("vec=2")),
    # copy=cp_async: operands copied global -> shared by cp.async into a `stages` ring. A [M, K]
    # and B [N, K] are copied K-major, A [K, M] and B [K, N] as they lie; rows that are not
    # 16-byte multiples (K=513, N=4097, 65, 47) take 4-byte copies; edges are zero-filled.
    Case(
        "matmul_f32_cp_async_1000",
        matmul_plain(1000, 1000, 1000, "f32"),
        tile_with("copy=cp_async"),
    ),
    Case(
        "matmul_f32_cp_async_stages4_4095x4097x513",
        matmul_plain(4095, 4097, 513, "f32"),
        tile_with("copy=cp_async stages=4"),
    ),
    Case(
        "matmul_transposed_cp_async_stages2_257x129x65",
        matmul_transposed(257, 129, 65),
        tile_with("copy=cp_async stages=2"),
    ),
    Case(
        "linear_f32_cp_async_129x257x68",
        matmul_plain(129, 257, 68, "f32", "nk"),
        tile_with("copy=cp_async bk=16"),
    ),
    Case(
        "bmm_cp_async_3x65x33x47",
        batched_matmul(3, 65, 33, 47),
        tile_with("copy=cp_async bm=32 bn=32 tm=2 tn=2 bk=16"),
    ),
    Case(
        "matmul_f32_cp_async_vec1_split1_pad0_300x260x72",
        matmul_plain(300, 260, 72, "f32"),
        tile_with("copy=cp_async vec=1 split=1 pad=0 bk=32 bm=64 bn=64 tm=8 tn=8"),
    ),
    # mma=3xtf32: f32 as three TF32 wgmma products a K step, promoted to f32 accumulators
    # (f32 tolerance): ragged edges, K split, an N-major B with an epilogue, a batch of them.
    Case(
        "linear_3xtf32_257x132x68",
        matmul_plain(257, 132, 68, "f32", "nk"),
        tile_with("mma=3xtf32"),
    ),
    # 33-64 rows starved on the CUDA cores, swap=off: the auto split on 3xTF32, its last chunk
    # past K.
    Case(
        "linear_3xtf32_auto_split_past_k_48x72x1496",
        matmul_plain(48, 72, 1496, "f32", "nk"),
        tile_with("swap=off"),
    ),
    # 17 rows and more (swap=auto): the weights' rows are the product's A, split in registers; the
    # block's columns are the rows, ragged; K split (the last chunk past K) or not, 64-row blocks.
    Case("linear_3xtf32_swap_auto_20x200x1000", matmul_plain(20, 200, 1000, "f32", "nk")),
    Case(
        "linear_3xtf32_swap_61x136x4100_splitk4",
        matmul_plain(61, 136, 4100, "f32", "nk"),
        tile_with("mma=3xtf32 swap=on splitk=4"),
    ),
    Case(
        "linear_3xtf32_swap_bm64_bn32_17x72x264",
        matmul_plain(17, 72, 264, "f32", "nk"),
        tile_with("mma=3xtf32 swap=on bm=64 bn=32 splitk=1"),
    ),
    Case(
        "linear_3xtf32_splitk4_300x260x1024",
        matmul_plain(300, 260, 1024, "f32", "nk"),
        tile_with("mma=3xtf32 splitk=4 swap=off"),
    ),
    # Past 128 rows with a full 128-row block of B (swap=auto): three ragged blocks of x's rows.
    Case("linear_3xtf32_swap_auto_300x260x1024", matmul_plain(300, 260, 1024, "f32", "nk")),
    Case(
        "matmul_relu_3xtf32_kn_257x132x68",
        matmul_plain(257, 132, 68, "f32", "kn"),
        tile_with("mma=3xtf32"),
    ),
    Case(
        "bmm_3xtf32_kn_3x200x136x96",
        batched_matmul(3, 200, 136, 96, "f32"),
        tile_with("mma=3xtf32"),
    ),
    # mma=tf32: f32 inputs rounded to TF32 on tensor cores (m16n8k8), f32 accumulators; about
    # 3e-4 relative error (tests/test_tf32.py), so these check against 1e-3.
    Case(
        "matmul_relu_tf32_1000",
        matmul_relu(1000, 1000, 1000),
        tile_with("mma=tf32"),
        TF32_TOLERANCE,
    ),
    Case(
        "matmul_tf32_bk16_4095x4097x513",
        matmul_plain(4095, 4097, 513, "f32"),
        tile_with("mma=tf32 bk=16"),
        TF32_TOLERANCE,
    ),
    Case(
        "matmul_transposed_tf32_257x129x65",
        matmul_transposed(257, 129, 65),
        tile_with("mma=tf32 bk=8"),
        TF32_TOLERANCE,
    ),
    Case(
        "linear_f32_tf32_129x257x68",
        matmul_plain(129, 257, 68, "f32", "nk"),
        tile_with("mma=tf32 bm=128 bn=128"),
        TF32_TOLERANCE,
    ),
    Case(
        "bmm_tf32_3x65x33x47",
        batched_matmul(3, 65, 33, 47),
        tile_with("mma=tf32 bm=64 bn=64 bk=16"),
        TF32_TOLERANCE,
    ),
    # swizzle=1: the cp.async ring is XOR-swizzled instead of padded (16-byte chunks permuted
    # inside 128-byte lines); 4-byte copies (K=513, N=4097, 47) keep their place in a chunk.
    Case(
        "linear_f32_cp_async_swizzle_bk16_129x257x68",
        matmul_plain(129, 257, 68, "f32", "nk"),
        tile_with("copy=cp_async swizzle=1 bk=16"),
    ),
    Case(
        "matmul_transposed_cp_async_swizzle_4095x4097x513",
        matmul_transposed(4095, 4097, 513),
        tile_with("copy=cp_async swizzle=1 stages=4"),
    ),
    Case(
        "matmul_f32_cp_async_swizzle_bk4_1000",
        matmul_plain(1000, 1000, 1000, "f32"),
        tile_with("copy=cp_async swizzle=1 bk=4"),
    ),
    Case(
        "bmm_cp_async_swizzle_3x65x33x47",
        batched_matmul(3, 65, 33, 47),
        tile_with("copy=cp_async swizzle=1 bm=32 bn=32 tm=2 tn=2 bk=16"),
    ),
    # copy=tma: TMA boxes into an mbarrier ring, zero-filled past M, N and K; rows must be
    # multiples of 16 bytes (K, N, and M for a transposed A, multiples of 4). ws=1 (default):
    # a producer warp issues the copies; ws=0: thread 0 does.
    Case("matmul_f32_tma_1000", matmul_plain(1000, 1000, 1000, "f32"), tile_with("copy=tma")),
    Case(
        "matmul_f32_tma_ws0_stages4_bk16_4095x4100x516",
        matmul_plain(4095, 4100, 516, "f32"),
        tile_with("copy=tma ws=0 stages=4 bk=16"),
    ),
    Case(
        "matmul_transposed_tma_stages2_260x129x68",
        matmul_transposed(260, 129, 68),
        tile_with("copy=tma stages=2"),
    ),
    Case(
        "linear_f32_tma_ws0_129x257x68",
        matmul_plain(129, 257, 68, "f32", "nk"),
        tile_with("copy=tma ws=0 bk=4"),
    ),
    Case(
        "bmm_tma_3x65x36x44",
        batched_matmul(3, 65, 36, 44),
        tile_with("copy=tma bm=32 bn=32 tm=2 tn=2 bk=16 stages=6"),
    ),
    Case(
        "bmm_tma_ws0_3x65x36x44",
        batched_matmul(3, 65, 36, 44),
        tile_with("copy=tma ws=0 bm=64 bn=32 tm=4 tn=2 split=1"),
    ),
    # copy=auto (the default) takes TMA with a 64x64x32 tile on grids this small; the last
    # falls back to register staging (rows of 1001 floats are not 16-byte multiples).
    Case("matmul_f32_auto_tma_1000", matmul_plain(1000, 1000, 1000, "f32", relu=False)),
    Case("linear_f32_auto_tma_1000x1004x1000", matmul_plain(1000, 1004, 1000, "f32", "nk")),
    Case("bmm_auto_tma_3x520x268x72", batched_matmul(3, 520, 268, 72)),
    Case("bmm_auto_tma_1x1000x1004x72", batched_matmul(1, 1000, 1004, 72)),
    Case("matmul_f32_auto_fallback_1000x1000x1001", matmul_plain(1000, 1000, 1001, "f32")),
    # streamk=on: one wave of blocks shares the K steps; pieces of a tile meet through the
    # workspace and flags. 32×64 tiles with 132 blocks (K ragged), 128×128 tiles with 264
    # (an odd M and N, relu after the sum), a batch, streamk=auto's own choice (400 tiles,
    # 1.52 waves; an odd step count, so steps go one at a time), and K spread over up to 6
    # blocks per tile (helpers holding a tile's middle).
    Case(
        "matmul_f32_streamk_1000x1000x1032",
        matmul_plain(1000, 1000, 1032, "f32", relu=False),
        tile_with("copy=ld streamk=on"),
    ),
    Case(
        "matmul_f32_streamk_relu_4095x4097x513",
        matmul_relu(4095, 4097, 513),
        tile_with("streamk=on"),
    ),
    Case(
        "bmm_f32_streamk_3x520x268x1000",
        batched_matmul(3, 520, 268, 1000),
        tile_with("copy=ld streamk=on"),
    ),
    Case(
        "matmul_f32_streamk_auto_2560x2560x1032",
        matmul_plain(2560, 2560, 1032, "f32", relu=False),
    ),
    Case(
        "matmul_f32_streamk_spread_256x256x8192",
        matmul_plain(256, 256, 8192, "f32", relu=False),
        tile_with("copy=ld streamk=on"),
    ),
    # The default's 128×128 tiles over fewer tiles than SMs (112 of them, each shared by about
    # two blocks): a torch-layout linear with ragged M and K.
    Case("linear_f32_streamk_few_tiles_500x3584x1000", skinny(500, 3584, 1000)),
    # 33-64 rows on the CUDA cores (swap=off; auto takes them on 3xTF32): one 64×128 block of
    # 8×8 register tiles over all rows (row_block), stream-K.
    Case(
        "linear_f32_row_block_48x4096x4096",
        skinny(48, 4096, 4096),
        tile_with("swap=off"),
    ),
    Case(
        "linear_f32_row_block_relu_33x2056x4104",
        skinny(33, 2056, 4104, epilogue="relu"),
        tile_with("swap=off"),
    ),
    # Fewer tiles of 8×8 register tiles than the SMs, mostly rows and columns: stream-K over
    # 128×128 tiles (229 rows, 64 tiles) and 64×64 tiles (170 rows, ragged K).
    Case("linear_f32_streamk_128x128_229x4000x4096", skinny(229, 4000, 4096)),
    Case("linear_f32_streamk_64x64_relu_170x2000x4099", skinny(170, 2000, 4099, epilogue="relu")),
    # interleave=on: A's next K slice copied during the first half of the step's FMAs, B's
    # during the second; where `auto` leaves it off (ragged tiles, a batch).
    Case(
        "matmul_f32_interleave_relu_4095x4097x513",
        matmul_relu(4095, 4097, 513),
        tile_with("interleave=on"),
    ),
    Case(
        "bmm_f32_interleave_3x520x268x1000",
        batched_matmul(3, 520, 268, 1000),
        tile_with("copy=ld interleave=on"),
    ),
    # The ladder's stream-K step at 65×136×2056: 2 tiles of 129 K steps, 132 shares of one or
    # two steps, a tile's first share adding 65 partial sums in a loop.
    Case(
        "matmul_f32_streamk_many_shares_65x136x2056",
        matmul_relu(65, 136, 2056),
        tile_with(
            "bm=128 bn=128 bk=16 tm=8 tn=8 split=2 group=8 minblocks=2 vec=4 stages=2 "
            "pairswap=1 streamk=on"
        ),
    ),
    # streamk=tail: the tiles past the last whole wave shared, the others one block each:
    # 272 tiles on 264 slots (8 shared, one K step per block, up to 32 blocks per tile; relu
    # after the sum), and a batch of 5 with 180 tiles on 132 slots (48 shared, across batches).
    Case(
        "matmul_f32_streamk_tail_relu_2100x2000x520",
        matmul_relu(2100, 2000, 520),
        tile_with("streamk=tail"),
    ),
    Case(
        "bmm_f32_streamk_tail_5x700x700x300",
        batched_matmul(5, 700, 700, 300),
        tile_with("copy=ld streamk=tail"),
    ),
    # The next tile's first K steps prefetched into L2 (`prefetch`): auto's choice on a batch
    # of 360 tiles (96 prefetching blocks) ragged in M, N and K (interleaved too) and the same
    # with prefetch=off; asked for on a grouped unbatched launch with relu, and on operands
    # stored the other way round.
    Case("bmm_f32_prefetch_auto_40x260x270x100", batched_matmul(40, 260, 270, 100)),
    Case(
        "bmm_f32_prefetch_off_40x260x270x100",
        batched_matmul(40, 260, 270, 100),
        tile_with("prefetch=off"),
    ),
    Case(
        "matmul_f32_prefetch_relu_4095x4097x513",
        matmul_relu(4095, 4097, 513),
        tile_with("prefetch=on"),
    ),
    Case(
        "matmul_f32_prefetch_transposed_2100x2000x520",
        matmul_transposed(2100, 2000, 520),
        tile_with("mma=none prefetch=on"),
    ),
    Case("softmax_online_2x3x7x2048", softmax((2, 3, 7, 2048)), "fuse,online-softmax,tile,to-cuda"),
    Case("softmax_online_1000x1000", softmax((1000, 1000)), "fuse,online-softmax,tile,to-cuda"),
    Case("softmax_online_5x4095", softmax((5, 4095)), "fuse,online-softmax,tile,to-cuda"),
    Case("softmax_online_3x131072", softmax((3, 131072)), "fuse,online-softmax,tile,to-cuda"),
    Case(
        "softmax_online_bf16_9x2048",
        softmax((9, 2048), "bf16"),
        "fuse,online-softmax,tile,to-cuda",
    ),
    Case("softmax_online_f16_4x300", softmax((4, 300), "f16"), "fuse,online-softmax,tile,to-cuda"),
    Case(
        "softmax_online_warp_16x96",
        softmax((16, 96)),
        "fuse,online-softmax,tile{threads=32 rows=4},to-cuda",
    ),
    Case(
        "softmax_online_cache0_3x4096",
        softmax((3, 4096)),
        "fuse,online-softmax,tile{threads=1024 cache=0},to-cuda",
    ),
    Case(
        "softmax_online_sequential_7x100",
        softmax((7, 100)),
        "fuse,online-softmax,tile{schedule=sequential},to-cuda",
    ),
    Case("layernorm_welford_3x100x768", layernorm((3, 100, 768)), "fuse,welford,tile,to-cuda"),
    Case("layernorm_welford_7x1000", layernorm((7, 1000)), "fuse,welford,tile,to-cuda"),
    Case(
        "layernorm_welford_bf16_5x4096", layernorm((5, 4096), "bf16"), "fuse,welford,tile,to-cuda"
    ),
    Case(
        "layernorm_welford_warp_64x64",
        layernorm((64, 64)),
        "fuse,welford,tile{threads=32},to-cuda",
    ),
    Case(
        "layernorm_welford_sequential_5x300",
        layernorm((5, 300)),
        "fuse,welford,tile{schedule=sequential},to-cuda",
    ),
    # The skinny-GEMM rule (GEMV, M <= 64): torch-layout decode linears, the k/v width split
    # over K (partial sums, then a fold applying bias + GELU), x @ w layouts, ragged shapes.
    Case("skinny_gemv_bf16_1x4096x4096", skinny(1, 4096, 4096, "bf16"), tile_with("skinny=on")),
    Case(
        "skinny_split_bf16_1x1024x4096_bias_gelu",
        skinny(1, 1024, 4096, "bf16", "nk", "bias_gelu"),
        tile_with("skinny=on"),
    ),
    Case(
        "skinny_bf16_8x4096x4096_relu",
        skinny(8, 4096, 4096, "bf16", "nk", "relu"),
        tile_with("skinny_mma=off"),
    ),
    Case("skinny_f32_16x4096x1000_bias_gelu", skinny(16, 4096, 1000, "f32", "nk", "bias_gelu")),
    Case(
        "skinny_split_f32_kn_64x4096x4096",
        skinny(64, 4096, 4096, "f32", "kn"),
        tile_with("skinny=on"),
    ),
    Case("skinny_bf16_kn_3x2056x1031", skinny(3, 2056, 1031, "bf16", "kn")),
    Case("skinny_batched_f32_4x1x1000x1030", skinny(1, 1000, 1030, "f32", "nk", batch=4)),
    # The row rule's GEMV asking L2 for its weight rows before its grid dependency wait
    # (`prefetch=on`), launched with programmatic dependent launch: a warp per row in blocks of
    # 8 rows, and f32 with the relu epilogue.
    Case(
        "row_gemv_prefetch_pdl_bf16_1x1000x4096",
        skinny(1, 1000, 4096, "bf16"),
        "fuse,tile{prefetch=on threads=32 rows=8},to-cuda{pdl=1}",
    ),
    Case(
        "row_gemv_prefetch_pdl_f32_1x1000x1024_relu",
        skinny(1, 1000, 1024, "f32", "nk", "relu"),
        "fuse,tile{prefetch=on},to-cuda{pdl=1}",
    ),
    # The tensor-core skinny rule (skinny_mma, f16/bf16 [N, K] weights): the decode linears at
    # 4, 8 and 16 rows on the auto plan (16 warps splitting K, stages=2; gate/up's 14336
    # columns 4 warps along K), ragged M, N and K, a weight per batch entry; forced
    # (`skinny_mma=on`) at 17 and 64 rows (4 warps, stages=1), the stages=1 loop without
    # kwarps, and M = 1.
    Case("skinny_mma_bf16_8x4096x4096_relu", skinny(8, 4096, 4096, "bf16", "nk", "relu")),
    Case("skinny_mma_bf16_4x14336x4096", skinny(4, 14336, 4096, "bf16")),
    Case(
        "skinny_mma_bf16_16x1024x4096_bias_gelu", skinny(16, 1024, 4096, "bf16", "nk", "bias_gelu")
    ),
    Case(
        "skinny_mma_bf16_8x4096x4096_stages1",
        skinny(8, 4096, 4096, "bf16"),
        tile_with("skinny_mma=on threads=128 kwarps=1 stages=1"),
    ),
    Case(
        "skinny_mma_bf16_64x14336x4096", skinny(64, 14336, 4096, "bf16"), tile_with("skinny_mma=on")
    ),
    Case(
        "skinny_mma_f16_17x1000x1030_bias_gelu",
        skinny(17, 1000, 1030, "f16", "nk", "bias_gelu"),
        tile_with("skinny_mma=on"),
    ),
    Case("skinny_mma_batched_bf16_2x9x1000x520", skinny(9, 1000, 520, "bf16", "nk", batch=2)),
    Case(
        "skinny_mma_gemv_bf16_1x4096x4096",
        skinny(1, 4096, 4096, "bf16"),
        tile_with("skinny_mma=on"),
    ),
]

EXAMPLE_CASES = [Case(f"example_{p.stem}", p.read_text()) for p in sorted(EXAMPLES.glob("*.mlir"))]
