"""Key-parallel warps for the tensor-core partial kernel of decode attention (`akwarps` = W > 1).

The `attn=sync` schedule the partial kernel otherwise runs gives a block one warp per 16 query
rows: at GQA 4 × one query, one warp, whose two 64-key K/V tiles (74 KiB) let an SM hold three
warps, too few to keep the HBM busy. Here a block of W warps owns the same (group, chunk of
keys) and every warp holds all of the group's rows (at most 16: one m16 tile):

- the chunk is walked in rounds of W tiles of WARP_KEYS (16) keys, warp w taking tile w of
  each round, so warp w sees keys w·16.., (W + w)·16.., ...; each warp copies its own tiles
  (16-byte `cp.async` from its 32 lanes) into its own ring of `aslots` slots (auto: WARP_SLOTS,
  2), so a block of four warps takes the shared memory one warp with 64-key tiles took;
- the first `aslots` rounds' copies are issued before anything else; Q's A fragments are
  loaded from global memory straight into registers while they fly (no shared copy of Q);
- per round: wait for this thread's oldest copies (`cp.async.wait_group aslots - 1`) and
  barrier; S, the online softmax and P·V on the warp's tile (the `attn=sync` emitter's own
  steps, at 16 keys a tile); barrier (every warp is done with its slot); issue the copies of
  the tile `aslots` rounds ahead into the slot just read. While a warp waits, all of its slots
  are in flight;
- each warp keeps its own (m, l, acc); after the last round the W states merge through shared
  memory in log2(W) rounds of the attention's (m, l, acc) combine (warp w + W/2 into warp w,
  then w + W/4, ...: a fixed order, so the result is deterministic), each lane combining its
  own accumulators with the same lane's of the other warp (l stays the lane's partial sum;
  the quad's lanes are summed in the epilogue, as with one warp);
- warp 0 runs the partial kernel's epilogue (its stores of m, l, acc, or with one split the
  attention's own epilogue), so the partial state's format and the merge kernel do not change.

The barriers are the block's (`__syncthreads`): warps run the same rounds, a warp past the end
of the keys skipping its tile's work. With `akwarps_sync=warp` (opt-in, not yet timed) a
round's two barriers are the warp's own (`__syncwarp`): each warp waits only for its own
copies, the block meeting again at the merge.
"""

from __future__ import annotations

from collections.abc import Iterator

from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import FloatAttr, f32
from xdsl.ir import SSAValue

from tinyopt.dialects import loop, tile
from tinyopt.passes.loop_rewrites.online_softmax import LOWEST_F32
from tinyopt.passes.tile.attention.attention_match import Attention
from tinyopt.passes.tile.attention.decode_plan import MERGE_ROW_PAD, WARP_KEYS, WARP_SLOTS
from tinyopt.passes.tile.attention.mma_sync import (
    LOG2E,
    PAD,
    WARP,
    _AttentionEmitter,
    _Side,
    copied_load,
)
from tinyopt.passes.tile.emit import Emitter, LaneEmitter, Mapping
from tinyopt.passes.tile.gemm.mma_sync import MMA_K, MMA_M, MMA_N


class KeyWarpEmitter(_AttentionEmitter):
    """Emits the decode partial kernel's block of `warps` key-parallel warps."""

    def __init__(
        self,
        em: Emitter,
        a: Attention,
        mapping: Mapping,
        warps: int,
        key_count: SSAValue | None,
        warp_sync: bool = False,
        slots: int = WARP_SLOTS,
        balanced: tuple[SSAValue, SSAValue, int] | None = None,
        swizzle: bool = False,
    ) -> None:
        super().__init__(em, a, mapping, 1, 1)
        self.key_count = key_count
        assert self.s_q <= MMA_M, "planning gives key-parallel warps at most 16 rows"
        self.key_warps = warps
        self.bn = WARP_KEYS
        self.warp_sync = warp_sync
        """`akwarps_sync=warp`: the rounds' barriers are the warp's, not the block's."""
        self.slots = slots
        """Tiles in each warp's ring (`aslots`)."""
        self.balanced = balanced
        """A balanced split's loop-level U and C (`decode_split.balanced_runs`) and its slots
        a group: the block walks the (group, slot) pairs its run spans."""
        self.swizzle = swizzle
        """`aswizzle=on`: the K/V rings are stored swizzled (`tile_column`), not padded."""

    def emit(self) -> None:
        em, a = self.em, self.a
        warps = self.key_warps
        tid = em.value(tile.ThreadIdOp("x"))
        lane = em.rem(tid, WARP)
        self.warp = em.div(tid, WARP)
        # `issue` spreads a tile's copies over `self.threads` (32) threads from `self.tid`:
        # each warp copies its own tiles.
        self.tid = lane
        self.g, self.t = em.div(lane, 4), em.rem(lane, 4)
        self.r8 = em.rem(lane, 8)
        self.lo8 = em.mul(em.rem(em.div(lane, 8), 2), 8)
        self.hi8 = em.mul(em.div(lane, 16), 8)
        self.q0 = self.row_w = em.index(0)
        element = a.element
        ring = warps * self.slots
        pad = 0 if self.swizzle else PAD
        k_smem = self.alloc([ring, self.bn, self.head_qk + pad], element, tile.SHARED)
        v_smem = self.alloc([ring, self.bn, self.head_v + pad], element, tile.SHARED)
        if self.swizzle:
            self.swizzled |= {k_smem, v_smem}
        row = self.head_v + MERGE_ROW_PAD
        self.merged = self.alloc([warps // 2, self.s_q, row], f32, tile.SHARED)
        k = _Side(a.ops_of(a.k_value), a.k_value, a.j, a.e, self.head_qk, k_smem)
        value = a.yielded[2]
        v = _Side(a.ops_of(value), value, a.j, a.d, self.head_v, v_smem)
        for side in (k, v):
            side.copied = copied_load(side, element)
        self.m = self.alloc([1, 2], f32, tile.REGISTERS)
        self.l = self.alloc([1, 2], f32, tile.REGISTERS)
        self.o = self.alloc([1, self.head_v // MMA_N, 4], f32, tile.REGISTERS)
        block = em.value(tile.BlockIdOp("y"))
        if self.balanced is None:
            self.at_pair(block)
            self.chunk(k, v)
            return
        # The block's run of C key tiles from b·C spans groups ⌊b·C / U⌋ to ⌊(b·C + C − 1) / U⌋
        # (none past the last); group g's slot is b − ⌊g·U / C⌋.
        units, run = (self.cloned(value) for value in self.balanced[:2])
        slots = self.balanced[2]
        groups = self.batch_extents[0] // slots
        begin = em.value(arith.MuliOp(block, run))
        first = em.value(arith.DivUIOp(begin, units))
        last = em.value(
            arith.DivUIOp(
                em.value(arith.AddiOp(begin, em.value(arith.SubiOp(run, em.index(1))))), units
            )
        )
        end = em.value(arith.MinSIOp(em.add(last, 1), em.index(groups)))
        with em.for_loop(first, end, 1) as (group, _, _):
            start = em.value(arith.DivUIOp(em.value(arith.MuliOp(group, units)), run))
            slot = em.value(arith.SubiOp(block, start))
            self.at_pair(em.add(em.mul(group, slots), slot))
            self.chunk(k, v)
            # The merge buffer is read to the end of warp 0's last combine.
            em.op(tile.BarrierOp())
            em.op(scf.YieldOp())

    def cloned(self, value: SSAValue) -> SSAValue:
        """Emits the loop-level ops computing `value` (none of the block's indices) here."""
        local = dict(self.mapping)
        for op in self.a.ops_of(value):
            self.em.op(op.clone(value_mapper=local))
        return local[value]

    def at_pair(self, flat: SSAValue) -> None:
        """Maps the partial kernel's (group, slot) index to `flat`."""
        em, a = self.em, self.a
        for iv, index in zip(a.batch, em.delinearize(flat, self.batch_extents) if a.batch else []):
            self.mapping[iv] = index

    def chunk(self, k: _Side, v: _Side) -> None:
        """Walks the keys of the (group, slot) pair the block is at and stores its state."""
        em, a = self.em, self.a
        warps, slots = self.key_warps, self.slots
        k_smem, v_smem = k.smem, v.smem
        # With a causal mask (rows 0..15 of one query tile) no key past the last row is seen.
        end = self.key_end()
        if a.causal:
            end = (
                min(end, self.bm)
                if isinstance(end, int)
                else em.value(arith.MinSIOp(end, em.index(self.bm)))
            )
        stride = warps * self.bn
        mine = em.mul(self.warp, self.bn)
        first_slot = em.mul(self.warp, slots)
        for ahead in range(slots):
            origin = em.add(mine, ahead * stride)
            with em.when([em.less(origin, end)]):
                for side in (k, v):
                    self.issue(side, origin, em.add(first_slot, ahead))
            self.commit(k, v)
        q_frags = [self.q_fragments()]
        minus_inf, fzero = em.f32(float("-inf")), em.f32(0.0)
        for h in range(2):
            self.store(minus_inf, self.m, 0, h)
            self.store(fzero, self.l, 0, h)
        for dt in range(self.head_v // MMA_N):
            for r in range(4):
                self.store(fzero, self.o, 0, dt, r)
        with em.for_loop(0, end, stride) as (round0, _, _):
            j0 = em.add(round0, mine)
            slot = em.add(first_slot, em.rem(em.div(round0, stride), slots))
            if k.copied or v.copied:
                em.op(tile.CpAsyncWaitOp(slots - 1))
            em.op(self._round_barrier())
            with em.when([em.less(j0, end)] if not isinstance(end, int) or end % stride else []):
                scores = self.scores(q_frags, k_smem, slot)
                probs = self.softmax(self.masked(scores, j0))
                self.multiply_v(probs, v_smem, slot)
            em.op(self._round_barrier())
            ahead = em.add(j0, slots * stride)
            with em.when([em.less(ahead, end)]):
                for side in (k, v):
                    self.issue(side, ahead, slot)
            self.commit(k, v)
            em.op(scf.YieldOp())
        self.merge_warps()
        with em.when([em.less(self.warp, 1)]):
            self.epilogue()

    def _round_barrier(self) -> tile.BarrierOp | tile.WarpBarrierOp:
        """The barrier before a round's tile is read and before its slot is refilled: only the
        warp's own lanes copy into and read a warp's slots, so the warp's barrier orders them
        (`akwarps_sync=warp`); the block's keeps every warp in step."""
        return tile.WarpBarrierOp() if self.warp_sync else tile.BarrierOp()

    def q_fragments(self) -> list[list[SSAValue]]:
        """Returns Q's A fragments of the block's m16 tile, one per k16 step, loaded from
        global memory into registers (rows past the group's are zero)."""
        em, a = self.em, self.a
        ops = [*a.ops_of(a.q_value), loop.YieldOp(a.q_value)]
        zero = em.value(arith.ConstantOp(FloatAttr(0.0, a.element)))  # type: ignore[arg-type]
        fragments = []
        for step in range(self.head_qk // MMA_K):
            registers = []
            for r in range(4):
                # a0a1: row g, columns 2t, 2t+1; a2a3: row g + 8; a4..a7: columns + 8.
                half = r % 2
                col = em.add(em.mul(self.t, 2), step * MMA_K + 8 * (r // 2))
                local = dict(self.mapping) | {a.i: em.add(self.g, MMA_N * half)}

                def pair(col: SSAValue = col, local: Mapping = local) -> list[SSAValue]:
                    lanes = LaneEmitter(em, a.e, col, 2).emit(ops, local)
                    return [self.narrow(lane[0]) for lane in lanes]

                values = [zero, zero]
                for guard in self.rows_of(half):
                    if guard is None:
                        values = pair()
                        continue
                    with em.if_(guard, [a.element] * 2) as (then, other, if_op):
                        with em.into(then):
                            em.op(scf.YieldOp(*pair()))
                        assert other is not None
                        with em.into(other):
                            em.op(scf.YieldOp(zero, zero))
                    values = list(if_op.results)
                registers.append(em.value(tile.PackOp(values[0], values[1], a.element)))
            fragments.append(registers)
        return fragments

    def rows_of(self, half: int) -> list[SSAValue | None]:
        """The guard of this lane's row of half `half` (g or g + 8): [] where no lane's row is
        one of the group's, [None] where every lane's is, else [row < rows]."""
        rows = self.s_q
        if MMA_N * half >= rows:
            return []
        if MMA_N * (half + 1) <= rows:
            return [None]
        return [self.em.less(self.em.add(self.g, MMA_N * half), rows)]

    def merge_warps(self) -> None:
        """Merges the warps' (m, l, acc) into warp 0's registers: rounds of half = W/2, W/4,
        ..., 1, warps [half, 2·half) writing their state to shared memory and warps [0, half)
        combining it with theirs."""
        em = self.em
        half = self.key_warps // 2
        while half >= 1:
            writers = [em.value(arith.CmpiOp(self.warp, em.index(half), "uge"))]
            if 2 * half < self.key_warps:
                writers.append(em.less(self.warp, 2 * half))
            with em.when(writers):
                self.write_state(em.value(arith.SubiOp(self.warp, em.index(half))))
            em.op(tile.BarrierOp())
            with em.when([em.less(self.warp, half)]):
                self.combine_state(self.warp)
            if half > 1:
                em.op(tile.BarrierOp())
            half //= 2

    def state_rows(self) -> Iterator[tuple[int, SSAValue]]:
        """For each half of the lane's rows that holds one of the group's rows: emits its guard
        (where some lanes' rows are past the group's) and yields (half, row) inside it."""
        em = self.em
        for half in range(2):
            for guard in self.rows_of(half):
                with em.when([guard] if guard is not None else []):
                    yield half, em.add(self.g, MMA_N * half)

    def write_state(self, slot: SSAValue) -> None:
        """Stores this lane's m, partial l and accumulators of its rows at `slot`."""
        em, head_v = self.em, self.head_v
        for half, row in self.state_rows():
            self.store_at(self.load(self.l, 0, half), slot, row, em.add(self.t, head_v))
            self.store_at(self.load(self.m, 0, half), slot, row, em.add(self.t, head_v + 4))
            for dt in range(head_v // MMA_N):
                col = em.add(em.mul(self.t, 2), dt * MMA_N)
                pair = [self.load(self.o, 0, dt, 2 * half + c) for c in range(2)]
                em.op(tile.VectorStoreOp(pair, self.merged, [slot, row, col]))

    def combine_state(self, slot: SSAValue) -> None:
        """Combines this lane's state with the one at `slot` (written by the same lane of
        another warp): M = max(m, m'), weights exp(m − max(M, lowest finite f32)) as the
        attention's combine."""
        em, head_v = self.em, self.head_v
        log2e, lowest = em.f32(LOG2E), em.f32(LOWEST_F32)
        for half, row in self.state_rows():
            mine = self.load(self.m, 0, half)
            other = self.load_at(slot, row, em.add(self.t, head_v + 4))
            new = self.f(arith.MaximumfOp(mine, other))
            floor = self.f(arith.MaximumfOp(new, lowest))
            keep = self.exp2_of_difference(mine, floor, log2e)
            take = self.exp2_of_difference(other, floor, log2e)
            total = self.load_at(slot, row, em.add(self.t, head_v))
            l_new = self.weighted(self.load(self.l, 0, half), keep, total, take)
            self.store(l_new, self.l, 0, half)
            self.store(new, self.m, 0, half)
            for dt in range(head_v // MMA_N):
                col = em.add(em.mul(self.t, 2), dt * MMA_N)
                others = em.op(tile.VectorLoadOp(self.merged, [slot, row, col], 2)).results
                for c, o in enumerate(others):
                    at = (0, dt, 2 * half + c)
                    self.store(self.weighted(self.load(self.o, *at), keep, o, take), self.o, *at)

    def weighted(self, x: SSAValue, a: SSAValue, y: SSAValue, b: SSAValue) -> SSAValue:
        return self.f(arith.AddfOp(self.f(arith.MulfOp(x, a)), self.f(arith.MulfOp(y, b))))

    def store_at(self, value: SSAValue, slot: SSAValue, row: SSAValue, col: SSAValue) -> None:
        self.em.op(memref.StoreOp.get(value, self.merged, [slot, row, col]))

    def load_at(self, slot: SSAValue, row: SSAValue, col: SSAValue) -> SSAValue:
        return self.em.value(memref.LoadOp.get(self.merged, [slot, row, col]))
