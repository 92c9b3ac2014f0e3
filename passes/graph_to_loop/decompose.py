"""The `decompose` pass: rewrite graph composites into graph primitives.

softmax, rms_norm, layer_norm, linear and attention become reductions, elementwise ops,
explicit broadcasts, transposes, reshapes, matmuls and `graph.constant`s, all in the element
type of the composite's inputs (but an f16 norm whose eps f16 holds only as a subnormal, or
as 0, which is computed in f32); argmax becomes compares, selects, an iota and reductions
computing the index in f32, and a cast to its integer type. gelu is a primitive and stays.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    AnyFloat,
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    ModuleOp,
    TensorType,
    bf16,
    f16,
    f32,
    i64,
)
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from xdsl.utils.exceptions import DiagnosticException

from tinyopt.dialects import graph
from tinyopt.dialects.runtime_scalar import BOUNDS_ATTR

_LOWEST: dict[Attribute, float] = {
    f32: float(np.finfo(np.float32).min),
    f16: float(np.finfo(np.float16).min),
    bf16: -3.3895313892515355e38,
}
"""The most negative finite value of each graph element type."""

MASKED_SCORE = -(2.0**127)
"""The score a boolean attention mask gives the keys it masks (f16 scores get f16's lowest
finite value, −65504, which is higher): below every score that is not masked itself, so that
only a row whose every key is masked gives them weight (the mean of v), and finite once the
tensor-core softmax multiplies it by log2 e (the lowest finite f32 or bf16 value times log2 e
is −inf, which counts as masked with −inf there: such a row gave 0). Exact in f32 and bf16."""


def _type(value: SSAValue) -> TensorType[AnyFloat]:
    assert isinstance(value.type, TensorType)
    return value.type  # pyright: ignore[reportUnknownVariableType]


def _emit(rewriter: PatternRewriter, op: Operation) -> SSAValue:
    """Insert `op` before the matched op and return its single result."""
    return rewriter.insert(op).results[0]


def _splat(rewriter: PatternRewriter, value: float, like: SSAValue) -> SSAValue:
    """Emit `value` broadcast to `like`'s type: a one-element constant, as a constant of
    `like`'s shape would hold one copy of `value` per element (a MemoryError for 2^31 rows)."""
    return _expand(rewriter, _emit(rewriter, graph.ConstantOp.scalar(value, _type(like))), like)


def _expand(rewriter: PatternRewriter, x: SSAValue, like: SSAValue) -> SSAValue:
    """Broadcast `x` to `like`'s shape."""
    return _emit(rewriter, graph.BroadcastOp(x, _type(like).get_shape()))


def _reshape(rewriter: PatternRewriter, x: SSAValue, shape: Sequence[int]) -> SSAValue:
    return _emit(rewriter, graph.ReshapeOp(x, shape))


def emit_softmax(
    rewriter: PatternRewriter, x: SSAValue, dim: int, empty_rows: bool = False
) -> SSAValue:
    """Emit the numerically stable softmax e / sum(e) with e = exp(x - max(x)) along `dim`.

    With `empty_rows` (attention under a float mask), a row that is −inf everywhere gives 0,
    not NaN, as torch's attention does: e = exp(x − max(m, lowest)) and e / max(Σe, 1), the
    same values wherever m is finite (Σe ≥ 1 there)."""
    row_max = _emit(rewriter, graph.ReduceMaxOp(x, [dim], keepdim=True))
    if empty_rows:
        lowest = _LOWEST[_type(x).element_type]
        row_max = _emit(rewriter, graph.MaxOp(row_max, _splat(rewriter, lowest, row_max)))
    shifted = _emit(rewriter, graph.SubOp(x, _expand(rewriter, row_max, x)))
    e = _emit(rewriter, graph.ExpOp(shifted))
    total = _emit(rewriter, graph.ReduceSumOp(e, [dim], keepdim=True))
    if empty_rows:
        total = _emit(rewriter, graph.MaxOp(total, _splat(rewriter, 1.0, total)))
    return _emit(rewriter, graph.DivOp(e, _expand(rewriter, total, e)))


def _inv_rms(rewriter: PatternRewriter, sq: SSAValue, eps: float) -> SSAValue:
    """Emit rsqrt(mean(sq, -1) + eps) broadcast back to `sq`'s shape."""
    mean = _emit(rewriter, graph.ReduceMeanOp(sq, [_type(sq).get_num_dims() - 1], keepdim=True))
    with_eps = _emit(rewriter, graph.AddOp(mean, _splat(rewriter, eps, mean)))
    inv = _emit(rewriter, graph.RsqrtOp(with_eps))
    return _expand(rewriter, inv, sq)


def _widened(rewriter: PatternRewriter, x: SSAValue, eps: float) -> SSAValue:
    """`x` in f32 where a norm of its values with `eps` is computed in f32
    (`graph.norm_in_f32`)."""
    if graph.norm_in_f32(_type(x).element_type, eps):
        return _emit(rewriter, graph.CastOp(x, f32))
    return x


def _narrowed(rewriter: PatternRewriter, x: SSAValue, like: TensorType[AnyFloat]) -> SSAValue:
    """`x` cast back to `like`'s element type where `_widened` widened it."""
    if _type(x).element_type != like.element_type:
        return _emit(rewriter, graph.CastOp(x, like.element_type))
    return x


class DecomposeSoftmax(RewritePattern):
    """softmax(x, dim) -> e / broadcast(sum(e, dim)) with e = exp(x - broadcast(max(x, dim)))."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.SoftmaxOp, rewriter: PatternRewriter) -> None:
        rewriter.replace(op, [], [emit_softmax(rewriter, op.x, op.dim.value.data)])


class DecomposeRmsNorm(RewritePattern):
    """rms_norm(x, w) -> x * broadcast(rsqrt(mean(x * x, -1) + eps)) * broadcast(w)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.RmsNormOp, rewriter: PatternRewriter) -> None:
        eps = op.eps.value.data
        x, weight = (_widened(rewriter, v, eps) for v in (op.x, op.weight))
        inv = _inv_rms(rewriter, _emit(rewriter, graph.MulOp(x, x)), eps)
        normed = _emit(rewriter, graph.MulOp(x, inv))
        out = _emit(rewriter, graph.MulOp(normed, _expand(rewriter, weight, x)))
        rewriter.replace(op, [], [_narrowed(rewriter, out, _type(op.x))])


class DecomposeLayerNorm(RewritePattern):
    """layer_norm(x, w, b) -> c * broadcast(rsqrt(mean(c * c) + eps)) * w + b, c = x - mean(x)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.LayerNormOp, rewriter: PatternRewriter) -> None:
        eps = op.eps.value.data
        x, weight, bias = (_widened(rewriter, v, eps) for v in (op.x, op.weight, op.bias))
        last = _type(x).get_num_dims() - 1
        mean = _emit(rewriter, graph.ReduceMeanOp(x, [last], keepdim=True))
        centered = _emit(rewriter, graph.SubOp(x, _expand(rewriter, mean, x)))
        sq = _emit(rewriter, graph.MulOp(centered, centered))
        normed = _emit(rewriter, graph.MulOp(centered, _inv_rms(rewriter, sq, eps)))
        scaled = _emit(rewriter, graph.MulOp(normed, _expand(rewriter, weight, x)))
        out = _emit(rewriter, graph.AddOp(scaled, _expand(rewriter, bias, x)))
        rewriter.replace(op, [], [_narrowed(rewriter, out, _type(op.x))])


class DecomposeLinear(RewritePattern):
    """linear(x, w, b) -> matmul(x, transpose(w)) + broadcast(b).

    A rank-2 x is one GEMM. A higher-rank x is a batched GEMM against the weight broadcast
    over its leading dims: planning collapses the batch and row loops into one row loop
    (`collapse_dims`), so the kernel is one GEMM over all rows, and an elementwise consumer
    of the `[.., N]` result stays its epilogue.
    """

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.LinearOp, rewriter: PatternRewriter) -> None:
        x_shape = _type(op.x).get_shape()
        n, k = _type(op.weight).get_shape()
        w_t = _emit(rewriter, graph.TransposeOp(op.weight, [1, 0]))
        x = op.x if len(x_shape) > 1 else _reshape(rewriter, op.x, [1, k])
        if len(x_shape) > 2:
            w_t = _emit(rewriter, graph.BroadcastOp(w_t, [*x_shape[:-2], k, n]))
        y = _emit(rewriter, graph.MatmulOp(x, w_t))
        if op.bias is not None:
            y = _emit(rewriter, graph.AddOp(y, _expand(rewriter, op.bias, y)))
        if _type(y).get_shape() != _type(op.result).get_shape():
            y = _reshape(rewriter, y, _type(op.result).get_shape())
        rewriter.replace(op, [], [y])


class DecomposeArgmax(RewritePattern):
    """argmax(x, dim) -> the least index along `dim` whose element equals the maximum, in f32
    (exact: the verifier caps `dim` at 2^24 elements), cast to the result's integer type.

    NaN counts as the largest element: the maximum is taken with every NaN as +inf, and the
    least index of the elements equal to it (a tie: the first wins) is a `reduce_min` of
    `select(hit, iota, n)`. Where a row holds a NaN its maximum is +inf, so a +inf before the
    first NaN would hit too; a NaN's index enters the min as `index - n` instead, below every
    other, and the result is shifted back by n where it is negative: the first NaN wins."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.ArgmaxOp, rewriter: PatternRewriter) -> None:
        x, dim = op.x, op.dim.value.data
        shape = _type(x).get_shape()
        n = float(shape[dim])
        nan = _emit(rewriter, graph.CompareOp(x, x, "ne"))
        key = _emit(rewriter, graph.SelectOp(nan, _splat(rewriter, float("inf"), x), x))
        top = _expand(rewriter, _emit(rewriter, graph.ReduceMaxOp(key, [dim], keepdim=True)), x)
        hit = _emit(rewriter, graph.CompareOp(key, top, "eq"))
        iota = _emit(rewriter, graph.IotaOp(TensorType(f32, shape), dim))
        extent = _splat(rewriter, n, iota)
        first = _emit(rewriter, graph.SelectOp(hit, iota, extent))
        below = _emit(rewriter, graph.SubOp(iota, extent))
        first = _emit(rewriter, graph.SelectOp(nan, below, first))
        least = _emit(rewriter, graph.ReduceMinOp(first, [dim], bool(op.keepdim.value.data)))
        shifted = _emit(rewriter, graph.AddOp(least, _splat(rewriter, n, least)))
        negative = _emit(rewriter, graph.CompareOp(least, _splat(rewriter, 0.0, least), "lt"))
        index = _emit(rewriter, graph.SelectOp(negative, shifted, least))
        element = _type(op.result).element_type
        rewriter.replace(op, [], [_emit(rewriter, graph.CastOp(index, element))])


class DecomposeAttention(RewritePattern):
    """attention(q, k, v) -> softmax(q k^T * scale + causal mask) v, batched over B*H."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: graph.AttentionOp, rewriter: PatternRewriter) -> None:
        b, h, sq, d = _type(op.q).get_shape()
        skv, dv = _type(op.k).get_shape()[2], _type(op.v).get_shape()[3]
        k, v = (self._repeat_heads(rewriter, x, op.groups) for x in (op.k, op.v))
        q = _reshape(rewriter, op.q, [b * h, sq, d])
        k = _reshape(rewriter, k, [b * h, skv, d])
        v = _reshape(rewriter, v, [b * h, skv, dv])
        k_t = _emit(rewriter, graph.TransposeOp(k, [0, 2, 1]))
        scores = _emit(rewriter, graph.MatmulOp(q, k_t))
        scale = _emit(rewriter, graph.ConstantOp.scalar(op.scale.value.data, _type(scores)))
        scores = _emit(rewriter, graph.MulOp(scores, _expand(rewriter, scale, scores)))
        if op.mask is not None:
            scores = self._masked(rewriter, scores, op.mask, [b, h, sq, skv])
        if op.valid is not None:
            scores = self._valid_keys(rewriter, op, scores)
        elif op.causal.value.data:
            # After the mask, and -inf with one: a key past the causal bound must score below
            # what a mask gives (`MASKED_SCORE`, or a float mask's lowest finite value), or a
            # row whose visible keys are all masked would average in keys it must not see
            # (and that the tiled kernels never load). Without a mask the lowest finite value
            # does, as every row has a visible key.
            past = float("-inf") if op.mask is not None else None
            causal = self._causal_mask(rewriter, scores, past)
            scores = _emit(rewriter, graph.AddOp(scores, causal))
        float_mask = op.mask is not None and _type(op.mask).element_type != graph.BOOL
        probs = emit_softmax(rewriter, scores, 2, empty_rows=float_mask)
        out = _emit(rewriter, graph.MatmulOp(probs, v))
        rewriter.replace(op, [], [_reshape(rewriter, out, [b, h, sq, dv])])

    @staticmethod
    def _repeat_heads(rewriter: PatternRewriter, x: SSAValue, groups: int) -> SSAValue:
        """`[B, KV, S, D]` as `[B, KV·groups, S, D]`, each head repeated `groups` times by a
        broadcast (an index map: `fuse` reads the KV head at h // groups, nothing is
        copied)."""
        if groups == 1:
            return x
        b, kv, s, d = _type(x).get_shape()
        spread = _emit(
            rewriter,
            graph.BroadcastOp(_reshape(rewriter, x, [b, kv, 1, s, d]), [b, kv, groups, s, d]),
        )
        return _reshape(rewriter, spread, [b, kv * groups, s, d])

    @staticmethod
    def _masked(
        rewriter: PatternRewriter, scores: SSAValue, mask: SSAValue, full: list[int]
    ) -> SSAValue:
        """Apply `graph.attention`'s mask to the `[B·H, Sq, Skv]` scores: a float mask is
        added, a boolean one keeps the scores where true and gives `MASKED_SCORE` elsewhere
        (a row masked everywhere averages v, where torch's math backend gives NaN; with
        `causal`, v of the keys the row sees: the causal mask, applied after this one, is
        −inf)."""
        if list(_type(mask).get_shape()) != full:
            mask = _emit(rewriter, graph.BroadcastOp(mask, full))
        mask = _reshape(rewriter, mask, _type(scores).get_shape())
        if _type(mask).element_type == graph.BOOL:
            fill = max(MASKED_SCORE, _LOWEST[_type(scores).element_type])
            masked = _splat(rewriter, fill, scores)
            return _emit(rewriter, graph.SelectOp(mask, scores, masked))
        return _emit(rewriter, graph.AddOp(scores, mask))

    @staticmethod
    def _valid_keys(rewriter: PatternRewriter, op: graph.AttentionOp, scores: SSAValue) -> SSAValue:
        """Give the keys past the valid ones (j ≥ L; with `causal`, j > L − Sq + i) a score of
        −inf, after the mask, as the causal mask does without L.

        L enters as the offset of a window of an iota: `u[j] = j + L`, so that `j < L` is
        `2j < u[j]` and `j ≤ L − Sq + i` is `2j + Sq − i ≤ u[j]`, all index maps `fuse`
        inlines (L passed to the kernel by value), compared in f32 (exact: refused past 2^24).
        The window's offset bounds give L ≤ Skv; the function argument's `tinyopt.bounds`
        keeps the lower bound (1, or Sq with `causal`: every query sees a key)."""
        sq, skv = _type(scores).get_shape()[-2:]
        if 2 * skv + sq >= EXACT_F32:
            raise DiagnosticException(
                f"decompose: {op.name} with valid keys over {skv} keys and {sq} queries: "
                f"its mask compares indices up to {2 * skv + sq}, past f32's exact integers"
            )
        valid = op.valid
        assert isinstance(valid, BlockArgument)
        _bound_argument(valid, *op.valid_bounds())
        table = _emit(rewriter, graph.IotaOp(TensorType(f32, [2 * skv]), 0))
        shifted = _emit(rewriter, graph.DynamicSliceOp(table, valid, 0, skv))
        grid = TensorType(f32, [sq, skv])
        keys = _emit(rewriter, graph.IotaOp(grid, 1))
        lhs = _emit(rewriter, graph.AddOp(keys, keys))
        if op.causal.value.data:
            rows = _emit(rewriter, graph.IotaOp(grid, 0))
            ahead = _emit(rewriter, graph.SubOp(_splat(rewriter, float(sq), rows), rows))
            lhs = _emit(rewriter, graph.AddOp(lhs, ahead))
        rhs = _emit(rewriter, graph.BroadcastOp(shifted, [sq, skv]))
        predicate = "le" if op.causal.value.data else "lt"
        kept = _emit(rewriter, graph.CompareOp(lhs, rhs, predicate))
        kept = _emit(rewriter, graph.BroadcastOp(kept, _type(scores).get_shape()))
        past = _splat(rewriter, float("-inf"), scores)
        return _emit(rewriter, graph.SelectOp(kept, scores, past))

    @staticmethod
    def _causal_mask(
        rewriter: PatternRewriter, scores: SSAValue, past: float | None = None
    ) -> SSAValue:
        """Emit an [Sq, Skv] mask (0 where key j ≤ i + Skv − Sq, `past` past it: by default
        "-inf", below) broadcast to scores.

        The mask is built from two one-element constants by index maps alone, so `fuse`
        inlines it into the score kernel (no constant buffer, and no constant of the
        sequence's length: a causal Sq of 2^40 ran out of memory): row `a` of the mask is the
        window
        `q[Sq-1-a : Sq-1-a+Skv]` of `q = [0] * Skv ++ [-inf] * Sq`. Broadcasting `q` to
        [Sq, N] (N = Sq + Skv) and reading the flat result with a row length of N - 1 shifts
        each row one step left, which is that window.

        "-inf" is the element type's lowest finite value: adding it to a score still yields
        an exp of exactly 0 after the max shift (next to a visible key's score: every row has
        one). An attention with a mask passes a true −inf, which stays below the mask's fill.
        """
        scores_type = _type(scores)
        sq, skv = scores_type.get_shape()[-2:]
        n = sq + skv
        element = scores_type.element_type
        zeros, lowest = (
            _emit(
                rewriter,
                graph.BroadcastOp(
                    _emit(rewriter, graph.ConstantOp.splat(value, TensorType(element, [1]))),
                    [length],
                ),
            )
            for value, length in ((0.0, skv), (_LOWEST[element] if past is None else past, sq))
        )
        q = _emit(rewriter, graph.ConcatOp([zeros, lowest], 0))
        rows = _reshape(rewriter, _emit(rewriter, graph.BroadcastOp(q, [sq, n])), [sq * n])
        shifted = _emit(rewriter, graph.SliceOp(rows, 0, 0, sq * (n - 1)))
        windows = _reshape(rewriter, shifted, [sq, n - 1])
        mask = _emit(rewriter, graph.SliceOp(windows, 1, sq - 1, skv))
        return _expand(rewriter, mask, scores)


EXACT_F32 = 2**24
"""Integers up to this are exact in f32."""


def _bound_argument(arg: BlockArgument, lo: int, hi: int) -> None:
    """Record on its function that a runtime scalar argument lies in `lo ..= hi` (intersected
    with bounds recorded before): what a decomposed op demanded of it (docs/ir.md)."""
    function = arg.block.parent_op()
    assert isinstance(function, func.FuncOp)
    count = len(function.args)
    attrs = list(function.arg_attrs.data) if function.arg_attrs else [DictionaryAttr({})] * count
    entries = dict(attrs[arg.index].data)
    if BOUNDS_ATTR in entries:
        old_lo, old_hi = entries[BOUNDS_ATTR].get_values()  # type: ignore[attr-defined]
        lo, hi = max(lo, old_lo), min(hi, old_hi)
    entries[BOUNDS_ATTR] = DenseArrayBase.from_list(i64, [lo, hi])
    attrs[arg.index] = DictionaryAttr(entries)
    function.arg_attrs = ArrayAttr(attrs)


@dataclass(frozen=True)
class DecomposePass(ModulePass):
    """Rewrite every graph composite op into graph primitives."""

    name = "decompose"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Decompose all composites in `op` in place."""
        patterns = GreedyRewritePatternApplier(
            [
                DecomposeSoftmax(),
                DecomposeRmsNorm(),
                DecomposeLayerNorm(),
                DecomposeLinear(),
                DecomposeAttention(),
                DecomposeArgmax(),
            ]
        )
        PatternRewriteWalker(patterns).rewrite_module(op)
