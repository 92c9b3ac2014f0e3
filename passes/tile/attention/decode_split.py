"""Split-KV (flash-decoding) as a loop-level rewrite of a decode-attention kernel.

`parallel [rows..., d] { (m, l, acc) = reduce [j < keys] {...}; epilogue }` whose rows come in
groups of R reading the same keys and values (`decode_match.py`) becomes

    partial: parallel [groups·splits, R, d] (gs, r, d) {
               rows of group gs / splits, keys of chunk gs % splits; k and v read at the
               group's first row, so the schedule loads each K/V tile once for all R rows
               (m, l, acc) = reduce [jj < chunk] {...}   (keys past the end score −inf)
               ws_m[gs, r] = m; ws_l[gs, r] = l; ws_acc[gs, r, d] = acc }
    merge:   parallel [rows..., d] { (m, l, acc) = reduce [s < splits] { ws[g·splits + s, r] }
               combined with the kernel's own (m, l, acc) combine; epilogue }

With one split the first kernel runs the epilogue itself and there is no merge. The state
(m, l, acc) is the monoid of docs/flash_attention.md, so merging partial states in split order
is exact and deterministic. `key_chunk` is the one place the number of keys a kernel visits
and the split count become a chunk length.

Where the score proves every key past a bound of the kernel's runtime scalars masked
(`key_limit.py`: a number of valid keys L), the partial kernel cuts its chunks at run time:
`seen` = the keys any row sees, `used` = the split count the plan's cost model picks for them
(at most the grid's `splits`), chunk = ⌈seen / used⌉ in whole rounds of the schedule's key
loop (at most the chunk planned for every key), block s taking keys s·chunk.. and `count` of
them (the op marked KEY_COUNT, where the schedules' loops stop); the scores of jj ≥ count are
−inf, so the loop-level kernel means the same without the early stop.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import IntegerAttr, MemRefType, ModuleOp, UnitAttr, f32, i64
from xdsl.ir import Operation, SSAValue
from xdsl.rewriter import Rewriter

from tinyopt.dialects import loop
from tinyopt.passes.loop_rewrites.flash_attention import FLASH_ATTR
from tinyopt.passes.tile.attention.decode_match import DecodeAttention
from tinyopt.passes.tile.attention.key_limit import (
    KeyLimit,
    kernel_scalar_bounds,
    key_limit,
    seen_keys,
)
from tinyopt.passes.tile.attention.mma_sync import BN
from tinyopt.passes.tile.emit import UNROLL, Emitter, Mapping
from tinyopt.passes.tile.gemm.split_k import derived_kernel, replace_kernels

DECODE_PARTIAL = "tinyopt.decode_partial"
"""Attribute of the regrouped attention kernel: its split count (the decode rule emits it)."""
DECODE_MERGE = "tinyopt.decode_merge"
"""Attribute of the kernel merging the splits' partial states: the split count."""
MERGE_UNROLL_SPLITS = 64
"""Most splits whose merge loop is unrolled, so that a thread's loads of every split's state
are in flight at once rather than one split's after another's combine. Measured on the H200
(benchmarks/RESULTS.md, 2026-12-04, nineteenth session): the rolled loop of 16 splits took
9.1 µs (ncu, L2 flushed), one load latency a split."""
KEY_COUNT = "tinyopt.key_count"
"""Attribute of the op computing how many keys a partial block takes at run time (its chunk,
cut from the keys the runtime scalars let the rows see); the schedules stop there."""


def key_chunk(keys: int, splits: int) -> tuple[int, int]:
    """Returns (keys per split, splits) for `splits` asked over `keys` keys: one split takes
    every key; several take chunks of whole key tiles (BN), as many as hold keys."""
    if splits <= 1:
        return keys, 1
    chunk = -(-(-(-keys // splits)) // BN) * BN
    return chunk, -(-keys // chunk)


def key_count(nest: loop.ParallelOp) -> SSAValue | None:
    """The value a partial kernel's nest computes as its block's number of keys at run time
    (`KEY_COUNT`), if the keys are bounded by runtime scalars."""
    for op in nest.body.block.ops:
        if KEY_COUNT in op.attributes:
            return op.results[0]
    return None


def split_decode(
    module: ModuleOp,
    kernel: loop.KernelOp,
    a: DecodeAttention,
    splits: int,
    key_tile: int,
    steps: Sequence[tuple[int, int]] = (),
) -> list[loop.KernelOp]:
    """Puts the regrouped (partial) kernel and, with several splits, the merge kernel in
    `kernel`'s place, with the workspace the host allocates for them; returns them. Where the
    score proves the keys past a bound of the runtime scalars masked (`key_limit.py`), the
    chunks are cut at run time from that bound, in whole tiles of `key_tile` keys, into the
    split count of its step in `steps` ((up to this many keys, splits); none: `splits`)."""
    chunk, splits = key_chunk(a.keys, splits)
    limit = key_limit(a, kernel_scalar_bounds(module, kernel))
    groups = a.rows // a.group
    workspace = (
        [
            MemRefType(f32, [groups * splits, a.group]),
            MemRefType(f32, [groups * splits, a.group]),
            MemRefType(f32, [groups * splits, a.group, a.head_v]),
        ]
        if splits > 1
        else []
    )
    partial = _partial_kernel(kernel, a, splits, chunk, workspace, limit, key_tile, steps)
    pieces = [partial] if splits == 1 else [partial, _merge_kernel(kernel, a, splits, workspace)]

    def with_workspace(args: list[SSAValue]) -> tuple[list[Operation], list[list[SSAValue]]]:
        allocs = [memref.AllocOp([], [], t) for t in workspace]
        return allocs, [[*args, *(w.memref for w in allocs)]] * len(pieces)

    replace_kernels(module, kernel, pieces, with_workspace)
    return pieces


def _kv_only(a: DecodeAttention) -> set[Operation]:
    """The ops computing k and v that nothing else uses (cloned at the group's first row only)."""
    kv, ends = set(a.kv_ops), {a.k_value, a.v_value}
    only: set[Operation] = set()
    for op in reversed(a.program):
        if op in kv and all(
            r in ends or all(u.operation in only for u in r.uses) for r in op.results
        ):
            only.add(op)
    return only


class _TwoMaps:
    """Clones loop-level ops twice where needed: at the row's indices (q, the score, the
    epilogue) and at the group's first row (k and v, shared by the group)."""

    def __init__(self, a: DecodeAttention, em: Emitter, row: Mapping, first: Mapping) -> None:
        self.em, self.row, self.first = em, row, first
        self.kv, self.kv_only = set(a.kv_ops), _kv_only(a)
        self.ends = (a.k_value, a.v_value)

    def bind(self, old: SSAValue, new: SSAValue) -> None:
        self.row[old] = self.first[old] = new

    def clone(self, op: Operation) -> None:
        if op in self.kv:
            self.em.op(op.clone(value_mapper=self.first))
            for end in self.ends:
                if end in op.results:
                    self.row[end] = self.first[end]
        if op not in self.kv_only:
            self.em.op(op.clone(value_mapper=self.row))


def _partial_kernel(
    kernel: loop.KernelOp,
    a: DecodeAttention,
    splits: int,
    chunk: int,
    workspace: Sequence[MemRefType],
    limit: KeyLimit | None,
    key_tile: int,
    steps: Sequence[tuple[int, int]],
) -> loop.KernelOp:
    groups, rows = a.rows // a.group, a.nest.extents[:-1]
    new, em, mapping = derived_kernel(kernel, f"{kernel.sym_name.data}_decode", list(workspace))
    new.attributes[DECODE_PARTIAL] = IntegerAttr(splits, i64)
    nest = loop.ParallelOp([groups * splits, a.group, a.head_v])
    em.op(nest)
    with em.into(nest.body.block):
        gs, r, d = nest.body.block.args
        g = em.div(gs, splits)
        first = em.mul(g, a.group)
        row_map = mapping | dict(zip(a.row_ivs, em.delinearize(em.add(first, r), rows)))
        first_map = mapping | dict(zip(a.row_ivs, em.delinearize(first, rows)))
        maps = _TwoMaps(a, em, row_map, first_map)
        maps.bind(a.nest.body.block.args[-1], d)
        nest_ops = list(a.nest.body.block.ops)
        at = nest_ops.index(a.reduce)
        for op in nest_ops[:at]:
            maps.clone(op)
        bounded = None
        if limit is not None:
            seen = seen_keys(em, limit, mapping, a.keys)
            used = _runtime_splits(em, seen, splits, steps)
            start, count = _runtime_chunk(em, seen, gs, splits, used, min(key_tile, chunk), chunk)
            count.owner.attributes[KEY_COUNT] = UnitAttr()
        init = [row_map.get(v, v) for v in a.reduce.init]
        reduce = loop.ReduceOp([chunk], init, combine=a.reduce.combine.clone())
        reduce.attributes[FLASH_ATTR] = a.reduce.attributes[FLASH_ATTR]
        em.op(reduce)
        with em.into(reduce.body.block):
            (jj,) = reduce.body.block.args
            if limit is not None:
                j = em.add(start, jj)
                bounded = em.less(jj, count)
            else:
                j = em.add(em.mul(em.rem(gs, splits), chunk), jj) if splits > 1 else jj
            inside = chunk * splits == a.keys and limit is None
            # Past the last key (the last chunk's tail) k and v are read at the last key, and
            # the score is −inf below.
            key = j if inside else em.value(arith.MinSIOp(j, em.index(a.keys - 1)))
            maps.bind(a.reduce.body.block.args[0], key)
            for op in a.reduce.body.block.ops:
                if op is a.qk:
                    _clone_dot_product(a, em, maps)
                elif not isinstance(op, loop.YieldOp):
                    maps.clone(op)
            score, one, value = a.reduce.body.block.last_op.operands  # type: ignore[union-attr]
            score = row_map[score]
            if not inside:
                minus_inf = em.f32(float("-inf"))
                in_chunk = bounded if bounded is not None else em.less(j, a.keys)
                score = em.value(arith.SelectOp(in_chunk, score, minus_inf))
            em.op(loop.YieldOp(score, row_map.get(one, one), first_map[value]))
        row_map.update(zip(a.reduce.res, reduce.res))
        if splits == 1:
            for op in nest_ops[at + 1 :]:
                em.op(op.clone(value_mapper=row_map))
        else:
            ws_m, ws_l, ws_acc = new.body.block.args[-3:]
            m, total, acc = reduce.res
            em.op(memref.StoreOp.get(m, ws_m, [gs, r]))
            em.op(memref.StoreOp.get(total, ws_l, [gs, r]))
            em.op(memref.StoreOp.get(acc, ws_acc, [gs, r, d]))
    _erase_unused(new)
    return new


def _runtime_splits(
    em: Emitter, seen: SSAValue, splits: int, steps: Sequence[tuple[int, int]]
) -> SSAValue:
    """Emits the split count for `seen` keys: that of the first step reaching them (a chain
    of selects), `splits` past the last."""
    used = em.index(splits)
    for most, count in reversed(steps):
        if count != splits:
            within = em.value(arith.CmpiOp(seen, em.index(most), "ule"))
            used = em.value(arith.SelectOp(within, em.index(count), used))
    return used


def _runtime_chunk(
    em: Emitter,
    seen: SSAValue,
    gs: SSAValue,
    splits: int,
    used: SSAValue,
    key_tile: int,
    most: int,
) -> tuple[SSAValue, SSAValue]:
    """Emits the first key of this block's chunk and how many keys it takes: the `seen` keys
    cut into `used` (at most `splits`) chunks of whole `key_tile`-key tiles, of at most
    `most` keys (the chunk for every key, which the partial kernel's loop spans); the blocks
    of the other splits, and the last ones where the keys are few, take none."""
    if splits == 1:
        return em.index(0), seen
    more = em.add(seen, em.value(arith.SubiOp(used, em.index(1))))
    per_split = em.value(arith.DivUIOp(more, used))
    tiles = em.div(em.add(per_split, key_tile - 1), key_tile)
    chunk = em.value(arith.MinSIOp(em.mul(tiles, key_tile), em.index(most)))
    start = em.mul(em.rem(gs, splits), chunk)
    left = em.value(arith.MaxSIOp(em.value(arith.SubiOp(seen, start)), em.index(0)))
    return start, em.value(arith.MinSIOp(left, chunk))


def _clone_dot_product(a: DecodeAttention, em: Emitter, maps: _TwoMaps) -> None:
    """Clones the q·k reduction, q at the row and k at the group's first row."""
    qk = a.qk
    init = [maps.row.get(v, v) for v in qk.init]
    new = loop.ReduceOp(qk.extents, init, combine=qk.combine.clone())
    new.attributes.update(qk.attributes)
    em.op(new)
    with em.into(new.body.block):
        maps.bind(qk.body.block.args[0], new.body.block.args[0])
        for op in qk.body.block.ops:
            if isinstance(op, loop.YieldOp):
                em.op(loop.YieldOp(*[maps.row[v] for v in op.arguments]))
            else:
                maps.clone(op)
    maps.row.update(zip(qk.res, new.res))


def _merge_kernel(
    kernel: loop.KernelOp, a: DecodeAttention, splits: int, workspace: Sequence[MemRefType]
) -> loop.KernelOp:
    new, em, mapping = derived_kernel(kernel, f"{kernel.sym_name.data}_merge", list(workspace))
    new.attributes[DECODE_MERGE] = IntegerAttr(splits, i64)
    ws_m, ws_l, ws_acc = new.body.block.args[-3:]
    nest = loop.ParallelOp(a.nest.extents)
    em.op(nest)
    with em.into(nest.body.block):
        *ivs, d = nest.body.block.args
        mapping.update(zip(a.nest.body.block.args, nest.body.block.args))
        row: SSAValue | int = 0
        for iv, extent in zip(ivs, a.nest.extents[:-1]):
            row = em.add(em.mul(row, extent), iv)
        assert not isinstance(row, int)
        g, r = em.div(row, a.group), em.rem(row, a.group)
        nest_ops = list(a.nest.body.block.ops)
        at = nest_ops.index(a.reduce)
        for op in nest_ops[:at]:
            em.op(op.clone(value_mapper=mapping))
        init = [mapping.get(v, v) for v in a.reduce.init]
        reduce = loop.ReduceOp([splits], init, combine=a.reduce.combine.clone())
        if splits <= MERGE_UNROLL_SPLITS:
            reduce.attributes[UNROLL] = UnitAttr()
        em.op(reduce)
        with em.into(reduce.body.block):
            (s,) = reduce.body.block.args
            gs = em.add(em.mul(g, splits), s)
            state = [
                em.value(memref.LoadOp.get(ws_m, [gs, r])),
                em.value(memref.LoadOp.get(ws_l, [gs, r])),
                em.value(memref.LoadOp.get(ws_acc, [gs, r, d])),
            ]
            em.op(loop.YieldOp(*state))
        mapping.update(zip(a.reduce.res, reduce.res))
        for op in nest_ops[at + 1 :]:
            em.op(op.clone(value_mapper=mapping))
    _erase_unused(new)
    return new


def _erase_unused(kernel: loop.KernelOp) -> None:
    """Erases the pure ops whose results nothing uses (clones one of the two maps, or the
    merge's copy of the nest's prologue, did not need), users before what they use."""
    for op in reversed(list(kernel.walk())):
        pure = op.dialect_name() in ("arith", "math") or isinstance(op, memref.LoadOp)
        if pure and not any(r.uses for r in op.results):
            Rewriter.erase_op(op)
