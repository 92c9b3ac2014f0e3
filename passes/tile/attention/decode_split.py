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

A balanced split (`Balance`, the schedule's `abalance`) cuts the keys by the grid instead of
by the group: the G groups' keys, in tiles of `key_tile` keys (U tiles a group at run time),
are laid end to end and cut into runs of C = max(⌈G·U / P⌉, least) tiles, one run per block
of a grid of P blocks (the SMs times the blocks one holds), so every block streams the same
number of tiles whatever G is and no wave is left part empty. A run may span the end of one
group and the start of the next; the partial kernel's space is (group, slot): slot s of group
g is the part of g's keys that the s-th block touching g takes, block ⌊g·U / C⌋ + s (empty
for the slots past the group's last block). The schedule walks each block's (group, slot)
pairs in order (`balanced_pairs`); the merge combines a group's first n_g slots, the blocks
its keys span, and ignores the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

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
BALANCED = "tinyopt.decode_balanced"
"""Attribute of a balanced partial kernel (and its merge): the blocks of its grid (P)."""
BALANCE_UNITS = "tinyopt.decode_units"
"""Attribute of the op computing a balanced partial kernel's key tiles a group (U)."""
BALANCE_RUN = "tinyopt.decode_run"
"""Attribute of the op computing a balanced partial kernel's key tiles a block (C)."""
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


@dataclass(frozen=True)
class Balance:
    """A balanced split: `blocks` blocks (P) each take a run of at least `least` tiles of
    `key_tile` keys."""

    blocks: int
    key_tile: int
    least: int

    def slots(self, groups: int, keys: int) -> int:
        """Slots a group has (the most blocks its keys can span): U tiles cross at most
        ⌈U / C⌉ + 1 runs of C ≥ max(G·U / P, least) tiles, and no more than U."""
        units = -(-keys // self.key_tile)
        most = min(-(-self.blocks // groups), -(-units // self.least)) + 1
        return max(1, min(most, units))

    def chunk(self, groups: int, keys: int) -> int:
        """The most keys a slot takes: a run, or a whole group's, at the most keys."""
        units = -(-keys // self.key_tile)
        run = max(-(-groups * units // self.blocks), self.least)
        return min(units, run) * self.key_tile


def balanced_runs(
    em: Emitter, seen: SSAValue, groups: int, balance: Balance
) -> tuple[SSAValue, SSAValue]:
    """Emits U (key tiles a group: those holding the `seen` keys, at least one) and C (tiles a
    block's run), marked BALANCE_UNITS and BALANCE_RUN."""
    size = balance.key_tile
    units = em.value(arith.MaxSIOp(em.div(em.add(seen, size - 1), size), em.index(1)))
    total = em.mul(units, groups)
    even = em.value(arith.DivUIOp(em.add(total, balance.blocks - 1), em.index(balance.blocks)))
    run = em.value(arith.MaxSIOp(even, em.index(balance.least)))
    units.owner.attributes[BALANCE_UNITS] = UnitAttr()
    run.owner.attributes[BALANCE_RUN] = UnitAttr()
    return units, run


def first_block(em: Emitter, group: SSAValue, units: SSAValue, run: SSAValue) -> SSAValue:
    """Emits the block whose run holds `group`'s first key tile: ⌊g·U / C⌋."""
    return em.value(arith.DivUIOp(em.value(arith.MuliOp(group, units)), run))


def balanced_values(nest: loop.ParallelOp) -> tuple[SSAValue, SSAValue] | None:
    """A balanced partial kernel's U and C (`balanced_runs`), if its nest computes them."""
    found = {}
    for op in nest.body.block.ops:
        for name in (BALANCE_UNITS, BALANCE_RUN):
            if name in op.attributes:
                found[name] = op.results[0]
    if len(found) < 2:
        return None
    return found[BALANCE_UNITS], found[BALANCE_RUN]


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
    balance: Balance | None = None,
) -> list[loop.KernelOp]:
    """Puts the regrouped (partial) kernel and, with several splits, the merge kernel in
    `kernel`'s place, with the workspace the host allocates for them; returns them. Where the
    score proves the keys past a bound of the runtime scalars masked (`key_limit.py`), the
    chunks are cut at run time from that bound, in whole tiles of `key_tile` keys, into the
    split count of its step in `steps` ((up to this many keys, splits); none: `splits`).
    With `balance` the keys are cut by the grid (`Balance`), `splits` being ignored."""
    groups = a.rows // a.group
    if balance is not None:
        chunk, splits = balance.chunk(groups, a.keys), balance.slots(groups, a.keys)
    else:
        chunk, splits = key_chunk(a.keys, splits)
    limit = key_limit(a, kernel_scalar_bounds(module, kernel))
    workspace = (
        [
            MemRefType(f32, [groups * splits, a.group]),
            MemRefType(f32, [groups * splits, a.group]),
            MemRefType(f32, [groups * splits, a.group, a.head_v]),
        ]
        if splits > 1
        else []
    )
    partial = _partial_kernel(kernel, a, splits, chunk, workspace, limit, key_tile, steps, balance)
    pieces = [partial]
    if splits > 1:
        pieces.append(_merge_kernel(kernel, a, splits, workspace, limit, balance))

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
    balance: Balance | None,
) -> loop.KernelOp:
    groups, rows = a.rows // a.group, a.nest.extents[:-1]
    new, em, mapping = derived_kernel(kernel, f"{kernel.sym_name.data}_decode", list(workspace))
    new.attributes[DECODE_PARTIAL] = IntegerAttr(splits, i64)
    if balance is not None:
        new.attributes[BALANCED] = IntegerAttr(balance.blocks, i64)
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
        cut = limit is not None or balance is not None
        if cut:
            seen = seen_keys(em, limit, mapping, a.keys) if limit else em.index(a.keys)
            if balance is not None:
                start, count = _balanced_slot(em, seen, gs, groups, splits, balance)
            else:
                used = _runtime_splits(em, seen, splits, steps)
                tile = min(key_tile, chunk)
                start, count = _runtime_chunk(em, seen, gs, splits, used, tile, chunk)
            count.owner.attributes[KEY_COUNT] = UnitAttr()
        init = [row_map.get(v, v) for v in a.reduce.init]
        reduce = loop.ReduceOp([chunk], init, combine=a.reduce.combine.clone())
        reduce.attributes[FLASH_ATTR] = a.reduce.attributes[FLASH_ATTR]
        em.op(reduce)
        with em.into(reduce.body.block):
            (jj,) = reduce.body.block.args
            if cut:
                j = em.add(start, jj)
                bounded = em.less(jj, count)
            else:
                j = em.add(em.mul(em.rem(gs, splits), chunk), jj) if splits > 1 else jj
            inside = chunk * splits == a.keys and not cut
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


def _balanced_slot(
    em: Emitter, seen: SSAValue, gs: SSAValue, groups: int, slots: int, balance: Balance
) -> tuple[SSAValue, SSAValue]:
    """Emits the first key of slot gs % slots of group gs / slots and how many keys it takes:
    the part of the group's U key tiles in the run of block ⌊g·U / C⌋ + s (none past the
    group's last block), the last tile cut at the `seen` keys."""
    units, run = balanced_runs(em, seen, groups, balance)
    group = em.div(gs, slots)
    base = em.value(arith.MuliOp(group, units))
    block = em.add(first_block(em, group, units, run), em.rem(gs, slots))
    begin = em.value(arith.MuliOp(block, run))
    lo = em.value(arith.MaxSIOp(begin, base))
    hi = em.value(
        arith.MinSIOp(em.value(arith.AddiOp(begin, run)), em.value(arith.AddiOp(base, units)))
    )
    start = em.mul(em.value(arith.SubiOp(lo, base)), balance.key_tile)
    end = em.mul(em.value(arith.SubiOp(hi, base)), balance.key_tile)
    end = em.value(arith.MinSIOp(end, seen))
    count = em.value(arith.MaxSIOp(em.value(arith.SubiOp(end, start)), em.index(0)))
    return start, count


def _balanced_slot_count(
    em: Emitter, seen: SSAValue, group: SSAValue, groups: int, balance: Balance
) -> SSAValue:
    """Emits n_g, the slots of `group` that hold keys: the blocks its key tiles span."""
    units, run = balanced_runs(em, seen, groups, balance)
    first = first_block(em, group, units, run)
    last_tile = em.value(arith.SubiOp(em.value(arith.MuliOp(em.add(group, 1), units)), em.index(1)))
    last = em.value(arith.DivUIOp(last_tile, run))
    return em.add(em.value(arith.SubiOp(last, first)), 1)


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
    kernel: loop.KernelOp,
    a: DecodeAttention,
    splits: int,
    workspace: Sequence[MemRefType],
    limit: KeyLimit | None,
    balance: Balance | None,
) -> loop.KernelOp:
    """The merge of the splits' partial states, in split order; for a balanced split, of the
    group's first n_g slots (the others' states, which no block wrote, count as empty)."""
    new, em, mapping = derived_kernel(kernel, f"{kernel.sym_name.data}_merge", list(workspace))
    new.attributes[DECODE_MERGE] = IntegerAttr(splits, i64)
    if balance is not None:
        new.attributes[BALANCED] = IntegerAttr(balance.blocks, i64)
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
        filled = None
        if balance is not None:
            seen = seen_keys(em, limit, mapping, a.keys) if limit else em.index(a.keys)
            filled = _balanced_slot_count(em, seen, g, a.rows // a.group, balance)
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
            if filled is not None:
                written = em.less(s, filled)
                empty = [em.f32(float("-inf")), em.f32(0.0), em.f32(0.0)]
                state = [em.value(arith.SelectOp(written, v, e)) for v, e in zip(state, empty)]
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
