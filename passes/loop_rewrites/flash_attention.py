"""The `flash-attention` pass: softmax(Q Kᵀ·scale + mask)·V becomes one kernel without scores.

`fuse` lowers attention to three kernels joined by two S×S buffers (scores, their row softmax,
and the sum of probs·v with an epilogue). Softmax followed by a weighted sum is one monoid over
the key index j (Dao et al., "FlashAttention", 2022) with state (m, l, acc), so the pass
replaces the three kernels by one kernel parallel over (p, i, d) holding that reduction, tagged
`tinyopt.flash_attention` for the tile rules (`passes/tile/attention/`); its output is
acc / max(l, 1). A constant causal mask becomes the comparison `j > i`. docs/flash_attention.md
gives the combine, the match and the numerics.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.builder import ImplicitBuilder
from xdsl.context import Context
from xdsl.dialects import arith, func, math, memref
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    Float16Type,
    FloatAttr,
    ModuleOp,
    UnitAttr,
    f32,
)
from xdsl.rewriter import Rewriter
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.transforms.common_subexpression_elimination import cse

from tinyopt.dialects import graph, loop
from tinyopt.passes.loop_rewrites.flash_attention_layout import fold_output_copy
from tinyopt.passes.graph_to_loop.index_eval import constant_index, on_grid
from tinyopt.passes.loop_rewrites.online_softmax import LOWEST_F32
from tinyopt.passes.loop_rewrites.reduce_match import (
    combine_block,
    element,
    f32_constant,
    scalar_monoid,
)

FLASH_ATTR = "tinyopt.flash_attention"
"""The attribute of the (m, l, acc) reduction this pass builds."""

MAX_HEAD_DIM = 256
"""Head dims (of q·k and of v) the pass fuses up to: every attention schedule stops there
(registers for O, shared memory for the K/V tiles), and a fused kernel no schedule takes would
run on the sequential rule, each output's loops serial; above it the three kernels stay, the
two products on the GEMM rules."""

CAUSAL_FLOOR = -1e30
"""A causal mask's masked entries must be at most this (e.g. the lowest finite value)."""

F16_LOWEST = -65504.0
"""f16's lowest finite value: what decompose masks f16 scores with."""


def causal_floor(scores: Attribute) -> float:
    """Returns the largest value a causal mask's masked entries may have for scores of this
    element type: CAUSAL_FLOOR, or f16's lowest for f16 scores (docs/flash_attention.md)."""
    return F16_LOWEST if isinstance(scores, Float16Type) else CAUSAL_FLOOR


def flash_combine() -> Block:
    """Return the combine of the (m, l, acc) state: rescale both to the larger maximum."""
    block = combine_block(3)
    m1, l1, a1, m2, l2, a2 = block.args
    with ImplicitBuilder(block):
        m = arith.MaximumfOp(m1, m2).result
        floor = arith.MaximumfOp(m, f32_constant(LOWEST_F32).result).result
        w1 = math.ExpOp(arith.SubfOp(m1, floor)).result
        w2 = math.ExpOp(arith.SubfOp(m2, floor)).result
        total = arith.AddfOp(arith.MulfOp(l1, w1), arith.MulfOp(l2, w2)).result
        acc = arith.AddfOp(arith.MulfOp(a1, w1), arith.MulfOp(a2, w2)).result
        loop.YieldOp(m, total, acc)
    return block


@dataclass
class _Launch:
    """A launch of a one-nest kernel: the launch, its kernel and its `loop.parallel`."""

    launch: loop.LaunchOp
    kernel: loop.KernelOp
    nest: loop.ParallelOp

    def host(self, arg: SSAValue) -> SSAValue:
        """Return the host value passed for one of the kernel's buffer arguments."""
        return self.launch.args[self.kernel.body.block.args.index(arg)]

    def buffer(self, host_value: SSAValue) -> SSAValue | None:
        """Return the kernel argument a host value is passed as (the first one), or None."""
        for arg, value in zip(self.kernel.body.block.args, self.launch.args, strict=True):
            if value is host_value:
                return arg
        return None


def _launch(op: loop.LaunchOp, symbols: dict[str, Operation]) -> _Launch | None:
    kernel = symbols.get(op.callee.root_reference.data)
    if not isinstance(kernel, loop.KernelOp):
        return None
    ops = list(kernel.body.block.ops)
    if len(ops) != 1 or not isinstance(ops[0], loop.ParallelOp):
        return None
    return _Launch(op, kernel, ops[0])


def _load_of(value: SSAValue) -> memref.LoadOp | None:
    """Return the load a value is, possibly widened by `arith.extf`."""
    if isinstance(value.owner, arith.ExtFOp):
        value = value.owner.input
    return value.owner if isinstance(value.owner, memref.LoadOp) else None


def _at(access: memref.LoadOp | memref.StoreOp, ivs: Sequence[SSAValue]) -> bool:
    """Tell whether an access indexes its buffer by exactly `ivs`, after dropping the constant
    0 indices of the buffer's size-1 dimensions (`fuse` leaves those out of its nests)."""
    shape = access.memref.type.get_shape()  # type: ignore[attr-defined]
    kept = [
        index
        for index, size in zip(access.indices, shape, strict=True)
        if not (size == 1 and constant_index(index) == 0)
    ]
    return kept == list(ivs)


def _stores(block: Block) -> list[memref.StoreOp]:
    return [o for op in block.ops for o in op.walk() if isinstance(o, memref.StoreOp)]


def _only_store(nest: loop.ParallelOp) -> memref.StoreOp | None:
    """Return the store ending a nest's body at the nest's own index, if it is its only one."""
    stores = _stores(nest.body.block)
    last = nest.body.block.last_op
    if stores != [last] or not isinstance(last, memref.StoreOp):
        return None
    return last if _at(last, nest.body.block.args) else None


def _contraction(nest: loop.ParallelOp) -> loop.ReduceOp | None:
    """Return the one top-level sum reduction of a nest's body."""
    reduces = [op for op in nest.body.block.ops if isinstance(op, loop.ReduceOp)]
    if len(reduces) != 1 or scalar_monoid(reduces[0]) != ("arith.addf", 0.0):
        return None
    return reduces[0] if len(reduces[0].extents) == 1 else None


@dataclass
class _Attention:
    """The three launches of one attention and what the fused kernel takes from them."""

    scores: _Launch
    softmax: _Launch
    pv: _Launch
    scores_host: SSAValue
    probs_host: SSAValue
    score_value: SSAValue
    """The value the score kernel stores (before rounding to the buffer's type)."""
    pv_reduce: loop.ReduceOp
    value: SSAValue
    """The operand of the PV product that is not the probability: v_jd."""


def _score_kernel(launch: _Launch) -> SSAValue | None:
    """Return the stored score of a kernel `scores[p.., i, j] = f(Σ_e q·k, i, j)`."""
    store = _only_store(launch.nest)
    if store is None or _contraction(launch.nest) is None or len(launch.nest.extents) < 2:
        return None
    value = store.value
    if isinstance(value.owner, arith.TruncFOp):
        value = value.owner.input
    return value


def _softmax_kernel(launch: _Launch, scores: SSAValue, probs: SSAValue) -> bool:
    """Tell whether a kernel writes `probs = softmax(scores)` along the last index.

    Its nest over (p.., i) holds `m = max_j x_j`, `l = Σ_j exp(x_j − m)` and a nest over j
    storing `exp(x_j − m) / l`, where x_j loads scores[p.., i, j] (possibly widened); or the
    form of attention under a float mask, whose rows −inf everywhere give 0 (decompose's
    `emit_softmax` with `empty_rows`): m floored at a lowest finite value and l at 1, as the
    fused kernel's combine and its acc / max(l, 1) do.
    """
    body = launch.nest.body.block
    ops = [op for op in body.ops if not isinstance(op, arith.ConstantOp)]
    if len(ops) == 5:
        first, floor, second, at_least_one, out = ops
        if not (
            _floored(floor, first, lambda c: c <= F16_LOWEST)
            and _floored(at_least_one, second, lambda c: c == 1.0)
        ):
            return False
        shift, total = floor.results[0], at_least_one.results[0]
    elif len(ops) == 3:
        first, second, out = ops
        shift, total = (first.results[0], second.results[0])
    else:
        return False
    if not isinstance(first, loop.ReduceOp) or not isinstance(second, loop.ReduceOp):
        return False
    if not isinstance(out, loop.ParallelOp) or first.extents != second.extents:
        return False
    if scalar_monoid(first) != ("arith.maximumf", float("-inf")):
        return False
    if scalar_monoid(second) != ("arith.addf", 0.0):
        return False
    if out.extents != first.extents or len(first.extents) != 1:
        return False

    def row_load(value: SSAValue, iv: SSAValue) -> bool:
        load = _load_of(value)
        return load is not None and load.memref is scores and _at(load, [*body.args, iv])

    def shifted_exp(value: SSAValue, iv: SSAValue) -> bool:
        exp = value.owner
        if not isinstance(exp, math.ExpOp) or not isinstance(exp.operand.owner, arith.SubfOp):
            return False
        x, m = exp.operand.owner.operands
        return m is shift and row_load(x, iv)

    if not row_load(element(first), first.body.block.args[0]):
        return False
    if not shifted_exp(element(second), second.body.block.args[0]):
        return False
    store = out.body.block.last_op
    if _stores(out.body.block) != [store] or not isinstance(store, memref.StoreOp):
        return False
    if store.memref is not probs or not _at(store, [*body.args, *out.body.block.args]):
        return False
    value = store.value
    if isinstance(value.owner, arith.TruncFOp):
        value = value.owner.input
    div = value.owner
    return (
        isinstance(div, arith.DivfOp)
        and div.rhs is total
        and shifted_exp(div.lhs, out.body.block.args[0])
    )


def _floored(op: Operation, reduce: Operation, bound: Callable[[float], bool]) -> bool:
    """Whether `op` is `maximumf(reduce's result, c)` with a constant c that `bound` accepts."""
    if not isinstance(op, arith.MaximumfOp) or not isinstance(reduce, loop.ReduceOp):
        return False
    value, floor = op.operands
    c = _float_constant(floor)
    return value is reduce.results[0] and c is not None and bound(c)


def _pv_kernel(launch: _Launch, probs: SSAValue) -> tuple[loop.ReduceOp, SSAValue] | None:
    """Return (the reduction, v_jd) of a kernel `out[p.., i, d] = g(Σ_j probs[p.., i, j]·v)`."""
    nest = launch.nest
    reduce = _contraction(nest)
    if reduce is None or _only_store(nest) is None:
        return None
    product = element(reduce).owner
    if not isinstance(product, arith.MulfOp):
        return None
    j = reduce.body.block.args[0]
    for p, v in ((product.lhs, product.rhs), (product.rhs, product.lhs)):
        load = _load_of(p)
        if load is None or load.memref is not probs:
            continue
        if not _at(load, [*nest.body.block.args[:-1], j]):
            return None
        if any(
            isinstance(o, memref.LoadOp) and o.memref is probs
            for o in backward_slice([v], reduce.body.block.ops)
        ):
            return None
        return reduce, v
    return None


def backward_slice(
    values: Iterable[SSAValue], ops: Iterable[Operation], given: Iterable[SSAValue] = ()
) -> list[Operation]:
    """Return the ops of `ops` (in order) that the values depend on, nested ones included,
    not looking past the `given` values."""
    ops = list(ops)
    stop = set(given)
    needed = {v.owner for v in values if isinstance(v.owner, Operation) and v not in stop}
    for op in reversed(ops):
        if op in needed:
            for inner in op.walk():
                needed.update(
                    o.owner
                    for o in inner.operands
                    if isinstance(o.owner, Operation) and o not in stop
                )
    return [op for op in ops if op in needed]


def _single_use_alloc(value: SSAValue, users: Sequence[loop.LaunchOp]) -> bool:
    """Tell whether a host buffer is a `memref.alloc` used by exactly the given launches."""
    if not isinstance(value.owner, memref.AllocOp):
        return False
    return sorted(id(u.operation) for u in value.uses) == sorted(
        id(launch) for launch in users for a in launch.args if a is value
    )


def _match(pv_launch: _Launch, launches: dict[SSAValue, list[_Launch]]) -> _Attention | None:
    """Match the attention whose PV product is `pv_launch`, by following its buffers back."""
    for probs_host in pv_launch.launch.args:
        writers = [w for w in launches.get(probs_host, []) if w is not pv_launch]
        if len(writers) != 1:
            continue
        softmax = writers[0]
        probs = pv_launch.buffer(probs_host)
        assert probs is not None
        found = _pv_kernel(pv_launch, probs)
        if found is None:
            continue
        for scores_host in softmax.launch.args:
            if scores_host is probs_host:
                continue
            score_writers = [w for w in launches.get(scores_host, []) if w is not softmax]
            if len(score_writers) != 1:
                continue
            scores = score_writers[0]
            kernel_scores = softmax.buffer(scores_host)
            kernel_probs = softmax.buffer(probs_host)
            assert kernel_scores is not None and kernel_probs is not None
            if not _softmax_kernel(softmax, kernel_scores, kernel_probs):
                continue
            score_value = _score_kernel(scores)
            store = _only_store(scores.nest)
            if score_value is None or store is None or scores.host(store.memref) is not scores_host:
                continue
            if not _single_use_alloc(scores_host, [scores.launch, softmax.launch]):
                continue
            if not _single_use_alloc(probs_host, [softmax.launch, pv_launch.launch]):
                continue
            *batch, s_q, s_k = scores.nest.extents
            rows = (*batch, s_q)
            if softmax.nest.extents != rows or pv_launch.nest.extents[:-1] != rows:
                continue
            if found[0].extents != (s_k,):
                continue
            qk = _contraction(scores.nest)
            head_dims = (qk.extents[0] if qk else 0, pv_launch.nest.extents[-1])
            if max(head_dims) > MAX_HEAD_DIM:
                continue
            return _Attention(
                scores, softmax, pv_launch, scores_host, probs_host, score_value, *found
            )
    return None


def _causal_mask(value: SSAValue, symbols: dict[str, Operation], floor: float) -> float | None:
    """Return the masked value of a host buffer holding a constant causal mask, else None."""
    get = value.owner
    if not isinstance(get, memref.GetGlobalOp):
        return None
    glob = symbols.get(get.name_.root_reference.data)
    if not isinstance(glob, memref.GlobalOp):
        return None
    init = glob.initial_value
    shape = glob.type.get_shape()  # type: ignore[union-attr]
    if not isinstance(init, DenseIntOrFPElementsAttr) or len(shape) != 2 or graph.is_splat(init):
        return None
    values = np.array(init.get_values(), dtype=np.float64).reshape(shape)
    above = np.triu(np.ones(shape, dtype=bool), 1)
    if not above.any() or np.any(values[~above] != 0.0):
        return None
    masked = values[above]
    if np.any(masked != masked[0]) or masked[0] > floor:
        return None
    return float(masked[0])


GRID_ROWS = 256
"""Rows of the (i, j) grid evaluated at once when testing a mask for causality."""


def _is_causal(
    condition: SSAValue, masked_when: bool, i: SSAValue, j: SSAValue, rows: int, cols: int
) -> bool:
    """Tell whether an i1 index expression of (i, j) equals `masked_when` exactly where j > i,
    on the whole [rows, cols] grid (evaluated a few rows at a time)."""
    keys = np.arange(cols, dtype=np.int64)[None, :]
    for start in range(0, rows, GRID_ROWS):
        queries = np.arange(start, min(start + GRID_ROWS, rows), dtype=np.int64)[:, None]
        grid = on_grid(condition, {i: queries, j: keys})
        if grid is None:
            return False
        masked = np.broadcast_to(grid, (len(queries), cols)) == masked_when
        if not np.array_equal(masked, keys > queries):
            return False
    return True


def causal_select(
    op: Operation, i: SSAValue, j: SSAValue, rows: int, cols: int, floor: float
) -> tuple[float, SSAValue | None] | None:
    """Match a causal mask made by a select whose condition is computed from i and j alone.

    Returns (c, None) when `op` selects a constant c ≤ floor exactly where j > i and 0
    elsewhere (an additive mask), (c, s) when it selects c where j > i and the score s
    elsewhere (`masked_fill(mask, -inf)`), else None.
    """
    if not isinstance(op, arith.SelectOp):
        return None
    values = [_float_constant(v) for v in (op.lhs, op.rhs)]
    for masked, kept, masked_when in (
        (values[0], op.rhs, True),
        (values[1], op.lhs, False),
    ):
        if masked is None or masked > floor:
            continue
        if not _is_causal(op.cond, masked_when, i, j, rows, cols):
            return None
        kept_value = _float_constant(kept)
        if kept_value is None:
            return masked, kept
        return (masked, None) if kept_value == 0.0 else None
    return None


def _float_constant(value: SSAValue) -> float | None:
    owner = value.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, FloatAttr):
        return owner.value.value.data
    return None


class _FusedBuilder:
    """Builds the fused kernel and its launch arguments from the three matched kernels."""

    def __init__(self, match: _Attention, symbols: dict[str, Operation]) -> None:
        self.match = match
        self.floor = causal_floor(match.scores_host.type.element_type)  # type: ignore[attr-defined]
        self.host_args: list[SSAValue] = []
        self.arg_types: list[Attribute] = []
        self.causal: dict[SSAValue, float] = {}
        """Host mask buffers replaced by a comparison, with their masked value."""
        internal = (match.scores_host, match.probs_host)
        for part in (match.scores, match.pv):
            for arg, host in zip(part.kernel.body.block.args, part.launch.args, strict=True):
                if host in self.host_args or host in self.causal or host in internal:
                    continue
                if part is match.scores and (masked := self._causal(arg, host, symbols)):
                    self.causal[host] = masked
                    continue
                self.host_args.append(host)
                self.arg_types.append(arg.type)

    def _causal(self, arg: SSAValue, host: SSAValue, symbols: dict[str, Operation]) -> float:
        """The masked value when every use of `arg` loads a causal mask at the score's (i, j),
        else 0."""
        masked = _causal_mask(host, symbols, self.floor)
        i, j = self.match.scores.nest.body.block.args[-2:]
        for use in arg.uses:
            load = use.operation
            if not isinstance(load, memref.LoadOp) or list(load.indices) != [i, j]:
                return 0.0
        return masked or 0.0

    def build(self, name: str) -> loop.KernelOp:
        """Return the fused kernel: a nest over (p.., i, d) holding the (m, l, acc) reduce."""
        m = self.match
        kernel = loop.KernelOp(name, self.arg_types)
        hosts = dict(zip(self.host_args, kernel.body.block.args, strict=True))
        nest = loop.ParallelOp(m.pv.nest.extents)
        kernel.body.block.add_op(nest)
        outer = nest.body.block
        *batch, i, _ = outer.args
        pv_map = dict(zip(m.pv.nest.body.block.args, outer.args)) | self._buffers(m.pv, hosts)
        pv_ops = list(m.pv.nest.body.block.ops)
        split = pv_ops.index(m.pv_reduce)
        init = m.pv_reduce.init[0]
        for op in pv_ops[:split]:
            # The P·V sum's init is replaced by the state's; a constant it shares with the
            # epilogue (`where(mask, attention, 0.0)`) is still cloned for the epilogue.
            if op is not init.owner or not init.has_one_use():
                outer.add_op(op.clone(value_mapper=pv_map))
        minus_inf, zero, one = (f32_constant(v) for v in (float("-inf"), 0.0, 1.0))
        for op in (minus_inf, zero, one):
            outer.add_op(op)
        reduce = loop.ReduceOp(
            m.pv_reduce.extents, [minus_inf, zero, zero], combine=Region(flash_combine())
        )
        reduce.attributes[FLASH_ATTR] = UnitAttr()
        body = reduce.body.block
        j = body.args[0]
        score_map = dict(zip(m.scores.nest.body.block.args, [*batch, i, j]))
        score_map |= self._buffers(m.scores, hosts)
        for op in m.scores.nest.body.block.ops:
            if isinstance(op, memref.StoreOp):
                continue
            if isinstance(op, memref.LoadOp) and m.scores.host(op.memref) in self.causal:
                score_map[op.res] = self._mask(body, op, score_map)
            else:
                body.add_op(op.clone(value_mapper=score_map))
        self._canonical_causal(body, i, j, score_map)
        value_map = pv_map | {m.pv_reduce.body.block.args[0]: j}
        for op in backward_slice([m.value], m.pv_reduce.body.block.ops):
            body.add_op(op.clone(value_mapper=value_map))
        unit = f32_constant(1.0)
        body.add_op(unit)
        body.add_op(loop.YieldOp(score_map[m.score_value], unit, value_map[m.value]))
        outer.add_op(reduce)
        # l is 0 (and acc 0) for a fully masked row, else at least 1: max(l, 1) defines 0/0 as 0.
        denominator = arith.MaximumfOp(reduce.res[1], one)
        out = arith.DivfOp(reduce.res[2], denominator)
        outer.add_op(denominator)
        outer.add_op(out)
        pv_map[m.pv_reduce.res[0]] = out.result
        for op in pv_ops[split + 1 :]:
            outer.add_op(op.clone(value_mapper=pv_map))
        return kernel

    def _canonical_causal(
        self, body: Block, i: SSAValue, j: SSAValue, mapping: dict[SSAValue, SSAValue]
    ) -> None:
        """Replace a causal mask computed from (i, j) in any form by `j > i ? c : 0` (added to
        the score when the mask was a fill of the score)."""
        *_, rows, cols = self.match.scores.nest.extents
        for op in list(body.ops):
            if (match := causal_select(op, i, j, rows, cols, self.floor)) is None:
                continue
            masked, score = match
            new_ops = _causal_ops(i, j, masked, op.results[0].type)
            if score is not None:  # s where kept, c where masked: s + c is c (c ≤ floor)
                new_ops.append(arith.AddfOp(score, new_ops[-1].results[0]))
            for new in new_ops:
                body.insert_op_before(new, op)
            select = new_ops[-1].results[0]
            op.results[0].replace_all_uses_with(select)
            for key, value in mapping.items():
                if value is op.results[0]:
                    mapping[key] = select
            _erase_dead(op)

    @staticmethod
    def _buffers(part: _Launch, hosts: dict[SSAValue, SSAValue]) -> dict[SSAValue, SSAValue]:
        return {
            arg: hosts[host]
            for arg, host in zip(part.kernel.body.block.args, part.launch.args, strict=True)
            if host in hosts
        }

    def _mask(
        self, body: Block, load: memref.LoadOp, mapping: dict[SSAValue, SSAValue]
    ) -> SSAValue:
        """Append `j > i ? masked : 0` in the mask's element type in place of its load."""
        i, j = (mapping[v] for v in load.indices)
        ops = _causal_ops(i, j, self.causal[self.match.scores.host(load.memref)], load.res.type)
        body.add_ops(ops)
        return ops[-1].results[0]


def _causal_ops(i: SSAValue, j: SSAValue, masked: float, type_: Attribute) -> list[Operation]:
    """Return the ops of `j > i ? masked : 0` in float type `type_`, the select last."""
    above = arith.CmpiOp(j, i, "ugt")
    values = [arith.ConstantOp(FloatAttr(v, type_)) for v in (masked, 0.0)]  # type: ignore[arg-type]
    return [above, *values, arith.SelectOp(above, values[0], values[1])]


def _erase_dead(op: Operation) -> None:
    """Erase an unused pure op and then whatever only it used."""
    if any(r.uses for r in op.results) or op.regions:
        return
    operands = list(op.operands)
    Rewriter.erase_op(op)
    for value in operands:
        if isinstance(value.owner, Operation) and value.owner.parent is not None:
            _erase_dead(value.owner)


def _fuse_one(module: ModuleOp, f32: bool) -> bool:
    """Replace the first matched attention in the module's host functions (f32 ones only with
    `f32`); tell whether any."""
    symbols = {
        op.properties["sym_name"].data: op  # type: ignore[union-attr]
        for op in module.ops
        if "sym_name" in op.properties
    }
    for function in (op for op in module.ops if isinstance(op, func.FuncOp)):
        launches: dict[SSAValue, list[_Launch]] = {}
        ordered: list[_Launch] = []
        for op in function.body.walk():
            if isinstance(op, loop.LaunchOp) and (found := _launch(op, symbols)) is not None:
                ordered.append(found)
                for arg in dict.fromkeys(op.args):
                    launches.setdefault(arg, []).append(found)
        for candidate in ordered:
            match = _match(candidate, launches)
            if match is not None and (f32 or not _in_f32(match)):
                _replace(module, match, symbols)
                return True
    return False


def _replace(module: ModuleOp, match: _Attention, symbols: dict[str, Operation]) -> None:
    """Swap the three launches for one launch of the fused kernel; drop what became unused."""
    builder = _FusedBuilder(match, symbols)
    name = match.pv.kernel.sym_name.data
    kernel = builder.build(name)
    # The cloned index arithmetic of the score and PV kernels repeats itself.
    cse(kernel)
    module.body.block.insert_op_before(kernel, match.pv.kernel)
    block = match.pv.launch.parent_block()
    assert block is not None
    launch = loop.LaunchOp(name, builder.host_args)
    block.insert_op_before(launch, match.pv.launch)
    hosts = [*match.scores.launch.args, *match.softmax.launch.args]
    for part in (match.pv, match.softmax, match.scores):
        Rewriter.erase_op(part.launch)
    launched = {
        o.callee.root_reference.data
        for o in module.walk()
        if isinstance(o, loop.LaunchOp) and o is not launch
    }
    for part in (match.pv, match.softmax, match.scores):
        if part.kernel.sym_name.data not in launched:
            Rewriter.erase_op(part.kernel)
    for host in dict.fromkeys(hosts):
        if isinstance(host.owner, memref.AllocOp | memref.GetGlobalOp) and not host.uses:
            Rewriter.erase_op(host.owner)
    used = {o.name_.root_reference.data for o in module.walk() if isinstance(o, memref.GetGlobalOp)}
    for op in list(module.ops):
        if isinstance(op, memref.GlobalOp) and op.sym_name.data not in used:
            Rewriter.erase_op(op)
    fold_output_copy(module, launch)


@dataclass(frozen=True)
class FlashAttentionPass(ModulePass):
    """Fuse attention's score, softmax and PV kernels into one (m, l, acc) reduction kernel.

    `f32=false` leaves attention with an f32 output as its three kernels (two FP32 GEMMs and a
    row softmax). The tile rules run the fused kernel on tensor cores for f16/bf16 and, in f32,
    on CUDA cores (`attn=simt`, passes/tile/attention/simt.py), which ran 1.13-2.13x faster than
    the three on the H200 (benchmarks/bench_attention_f32.py, RESULTS.md 2026-12-03).
    """

    name = "flash-attention"
    f32: bool = True

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Rewrite every matching attention of the module."""
        while _fuse_one(op, self.f32):
            pass


def _in_f32(match: _Attention) -> bool:
    """Whether the attention's output is f32 (its q, k and v are, in every captured model)."""
    return match.pv.launch.args[-1].type.element_type == f32  # type: ignore[attr-defined]
