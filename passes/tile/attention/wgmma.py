"""Schedule rule for flash attention on Hopper: TMA → swizzled shared memory → `wgmma`, FA3 style.

Taken for the kernels `passes/tile/attention/mma_sync.py` matches when the `attn` knob is `wgmma` or
`auto` (the default) and q, k and v are each a plain load of the element type (f16/bf16) whose
last index is the head dim (plus an offset) and whose key (or query) index appears as one whole
index, so that TMA can copy their tiles; every head dim the match takes (multiples of 16 up to
256) is scheduled (`chunks`, `keys_per_tile`). With `attn=wgmma` a kernel outside these limits
gets a diagnostic that says which one; with `attn=auto` it takes the `mma.sync` schedule.

A block has a producer warpgroup (TMA copies into two-slot K and V rings guarded by mbarriers)
and two (`aconsumers`: or three) consumer warpgroups of 64 query rows each; the score, softmax
and epilogue are those of the `mma.sync` schedule. Knobs: `aoverlap` (a tile's softmax under
the previous tile's P·V), `apingpong` (the consumer warpgroups take turns to issue their
products), `persistent` (blocks walk several (query tile, batch) items), `aqslots` (two Q
slots, so the next item's copies run ahead), `akeys` (keys per tile), `afma` (some of the
exponentials on the FMA units), `aconsumers` and `atail`. docs/flash_attention.md
(`attn=wgmma`) describes the schedule, its launch order, resources and measured effects.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from math import gcd, prod

from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import IndexType, IntegerAttr, MemRefType, ModuleOp, f32, i32, i64
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.pattern_rewriter import PatternRewriter

from tinyopt.dialects import loop, tile
from tinyopt.passes.tile.attention.attention_match import Attention, match_flash_attention
from tinyopt.passes.tile.attention.key_limit import (
    KeyLimit,
    kernel_scalar_bounds,
    key_limit,
    tile_seen_keys,
)
from tinyopt.passes.tile.attention.mma_sync import _AttentionEmitter
from tinyopt.passes.tile.emit import Emitter, Mapping, depends_on, element_bytes
from tinyopt.passes.tile.kernel import new_kernel, replace_kernel
from tinyopt.passes.tile.knobs import Knobs
from tinyopt.passes.tile.rule import Rule
from tinyopt.passes.tile.gemm.wgmma_plan import (
    ATOM,
    BK,
    CONSUMER_REGISTERS,
    PRODUCER_REGISTERS,
    SWIZZLE,
    TALL_REGISTERS,
    WARPGROUP,
)

CONSUMERS = 2
"""Consumer warpgroups per block (`aconsumers=auto`), 64 query rows each."""
REGISTERS = {2: (PRODUCER_REGISTERS, CONSUMER_REGISTERS), 3: TALL_REGISTERS}
"""`setmaxnreg` budgets (producer, consumer) by consumer warpgroups: 128·(24 + 3·160) = 64512
of the SM's 65536 registers with three."""
HELD_REGISTERS = {2: 176, 3: 128}
"""S, P and O registers a consumer thread may hold, by consumer warpgroups: with two (232
registers), 176 at D = 128 with 128 keys (64 + 32 + 64 = 160) and at D = 256 with 64 keys
(32 + 16 + 128) compile without spills; with three (160 registers), 128 at D = 64 with 128 keys
(64 + 32 + 32) does. The softmax's temporaries and the addresses take the rest."""
SLOTS = 2
"""K and V tiles are double-buffered: the producer copies tile t+1 while tile t is used."""
WIDE_HEAD_DIM = 128
"""Up to this head dim a K/V tile holds 128 keys; above it 64, so that the two-slot K and V
rings and Q fit in shared memory (at D = 256: 64 + 64 + 64 KiB) and O (D/2 registers), S
(keys/2) and P (keys/4) fit in the consumers' 232 registers."""


def keys_per_tile(head_qk: int, head_v: int) -> int:
    """Keys per K/V tile (`akeys=auto`): S is m64nBN per consumer warpgroup (BN/2 f32
    registers a thread). 192 up to `NARROW_HEAD_DIM` (S, P and O: 96 + 48 + 32 registers at
    D = 64), 128 up to `WIDE_HEAD_DIM`, 64 above."""
    widest = max(head_qk, head_v)
    return 192 if widest <= NARROW_HEAD_DIM else 128 if widest <= WIDE_HEAD_DIM else 64


NARROW_HEAD_DIM = 64
"""Up to this head dim a K/V tile holds 192 keys: a narrow head's key tile costs little of
the tensor cores per softmax, and fewer, wider tiles spread the per-tile costs (the waits, the
row max and sum, O's rescale). On the H200 (benchmarks/RESULTS.md twenty-first session run 1)
192 against 128 keys at D = 64, × cuDNN: 0.92-0.97 → 0.96-1.02 non-causal, 0.82-0.97 →
0.83-1.02 causal (S 2048 to 16384, B·S = 16384, H = 32)."""


KEY_TILES = (64, 128, 192)
"""The `akeys` values: wgmma N sizes whose S (keys/2), P (keys/4) and O (D/2) registers a
thread holds are checked against `HELD_REGISTERS`."""


def _held(keys: int, head_v: int) -> int:
    return keys // 2 + keys // 4 + head_v // 2


def _shared_bytes(keys: int, head_qk: int, head_v: int, bm: int, q_slots: int = 1) -> int:
    """Q's `bm` rows in each of `q_slots` slots and the two-slot K and V rings, in 64-column
    chunks of 16-bit elements."""
    q = q_slots * bm * chunks(head_qk)
    return 2 * BK * (q + SLOTS * keys * (chunks(head_qk) + chunks(head_v)))


def chunks(head_dim: int) -> int:
    """64-column chunks (128-byte swizzle rows) that hold `head_dim` columns. Every head dim the
    flash-attention match takes (multiples of 16 up to 256) is copied in such chunks; where it
    is not a multiple of 64, no wgmma reads the last chunk's tail (S's K steps stop at the head
    dim, P·V's N is the head dim), so what TMA puts there (zeros past the tensor, or the next
    head's columns) does not matter."""
    return -(-head_dim // BK)


def _fail(message: str) -> str:
    return f"attn=wgmma {message}"


@dataclass
class _TmaSide:
    """An operand TMA copies: the loop-level ops computing its load's indices, the load, the
    position of its row index (i or j) and its kernel argument."""

    ops: list[Operation]
    load: memref.LoadOp
    row_iv: SSAValue
    col_iv: SSAValue
    row_position: int
    arg: int
    cols: int

    def box(self, rows: int) -> tuple[int, ...]:
        """The TMA box: `rows` rows, one 64-column chunk, 1 along every other dimension."""
        rank = len(self.load.indices)
        return tuple(
            rows if p == self.row_position else BK if p == rank - 1 else 1 for p in range(rank)
        )


def _tma_side(
    a: Attention, value: SSAValue, row_iv: SSAValue, col_iv: SSAValue, cols: int, what: str
) -> _TmaSide | str:
    """Returns how TMA copies operand `what`, else the sentence that says why not."""
    ops = a.ops_of(value)
    loads = [op for op in ops if isinstance(op, memref.LoadOp)]
    if len(loads) != 1 or (load := loads[0]).res.type != a.element:
        return _fail(f"needs {what} to be one load of {a.element} (TMA copies raw bytes)")
    widened = value == load.res or (
        isinstance(value.owner, arith.ExtFOp) and value.owner.input == load.res
    )
    index_math = all(
        op is load or op is value.owner or all(isinstance(r.type, IndexType) for r in op.results)
        for op in ops
    )
    if not widened or not index_math:
        return _fail(f"needs {what} to be a plain load, with no math on the loaded value")
    indices = list(load.indices)
    moving = depends_on(ops, [row_iv, col_iv])
    if not _column(indices[-1], col_iv, moving) or indices.count(row_iv) != 1:
        return _fail(
            f"needs {what}'s last index to be its head-dim index (plus an offset) and its "
            "sequence index to be one whole index"
        )
    row_position = indices.index(row_iv)
    if any(v in moving for p, v in enumerate(indices) if p not in (row_position, len(indices) - 1)):
        return _fail(f"needs {what}'s other indices to be independent of the sequence and head dim")
    args = list(a.nest.parent_block().args)  # type: ignore[union-attr]
    if load.memref not in args:
        return _fail(f"needs {what} to be read from a kernel argument")
    return _TmaSide(ops, load, row_iv, col_iv, row_position, args.index(load.memref), cols)


def _tma_sides(a: Attention) -> tuple[_TmaSide, _TmaSide, _TmaSide] | str:
    """Returns how TMA copies q, k and v, else the sentence that says why it cannot."""
    head_qk, head_v = a.qk.extents[0], a.nest.extents[-1]
    q = _tma_side(a, a.q_value, a.i, a.e, head_qk, "q")
    k = _tma_side(a, a.k_value, a.j, a.e, head_qk, "k")
    v = _tma_side(a, a.yielded[2], a.j, a.d, head_v, "v")
    for side in (q, k, v):
        if isinstance(side, str):
            return side
    assert not isinstance(q, str) and not isinstance(k, str) and not isinstance(v, str)
    if len({q.arg, k.arg, v.arg}) != 3:
        return _fail("needs q, k and v in three different buffers (one tensor map each)")
    return q, k, v


def _column(index: SSAValue, col_iv: SSAValue, moving: set[SSAValue]) -> bool:
    """Whether `index` is the head-dim index, or it plus an offset independent of the sequence
    and head-dim indices (heads side by side in a row, as a projection writes them)."""
    if index is col_iv:
        return True
    add = index.owner
    if not isinstance(add, arith.AddiOp) or col_iv not in (add.lhs, add.rhs):
        return False
    offset = add.rhs if add.lhs is col_iv else add.lhs
    return offset not in moving


@dataclass(frozen=True)
class _LastTile:
    """How a consumer warpgroup runs an item's key tiles (`whole_tiles`): `whole` of them at
    the ring's width, then the last one `narrow`ed or not. `keys` are the last tile's keys its
    rows see (0 where none), `cut` the tiles narrowing takes off the whole ones (1 or 0). All
    None where the kernel has no narrowed widths (`tail_widths`)."""

    whole: SSAValue
    keys: SSAValue | None = None
    narrow: SSAValue | None = None
    cut: SSAValue | None = None


@dataclass(frozen=True)
class AttentionWgmmaPlan:
    heads_first: int
    """1: the grid runs heads fastest (every head's longest query tiles first; causal kernels
    whose K and V fit in `HEADS_FIRST_BYTES`), 0: query tiles fastest."""
    overlap: int = 1
    """1 (`aoverlap=auto` or `on`): a tile's softmax runs while the previous tile's P·V is in
    flight (`overlapped_key_loop`); 0 (`off`): each product is waited for before the softmax
    or the next tile (`key_loop`)."""
    pingpong: int = 1
    """1 (`apingpong=auto` or `on`, with the overlap): the two consumer warpgroups take turns
    to issue their products (FA3's ping-pong), so one's softmax runs while the other's
    products hold the tensor cores; 0: each issues when it is ready."""
    keys: int = 0
    """Keys per K/V tile (`akeys`; 0 before planning: `keys_per_tile`)."""
    persistent: int = 1
    """1 (`persistent` 1, or auto: `CAUSAL_PERSISTENT_ROUNDS`, `CAUSAL_PERSISTENT_TILES`): one
    block per SM (at most one per work item) walks the (query tile, batch) items in launch
    order, its producer copying the next item's Q and first K/V tiles while the consumers
    finish the last one; 0: one block per item."""
    fma: int = 0
    """`afma`: of every 8 of S's n8 column tiles, this many take their exp2 on the FMA units
    (`exp2_on_fma`, spread evenly: `fma_tiles`), the others on MUFU; 0 (auto): none."""
    consumers: int = CONSUMERS
    """`aconsumers`: consumer warpgroups, each 64 query rows of an item (2, or 3: 192 rows, 160
    registers a consumer thread, no ping-pong)."""
    tail: int = 1
    """1 (`atail` auto or on): each consumer warpgroup computes an item's last key tile only
    as wide as the keys of it its rows see (`tail_widths`), where the key count is known when
    compiling; 0: every tile is computed whole, the keys no row sees masked."""
    q_slots: int = 1
    """`aqslots`: Q's slots in shared memory. 2 (auto on a persistent grid where they fit):
    the producer copies the next item's Q, and then its first K/V tiles, while the consumers
    still run the current item; 1: the next item's copies wait until the consumers release
    Q after their last S."""

    @property
    def bm(self) -> int:
        """Query rows of a work item."""
        return self.consumers * tile.WGMMA_M


class AttentionWgmma(Rule[Attention, AttentionWgmmaPlan]):
    """Schedules a flash-attention kernel with f16/bf16 operands on wgmma, fed by TMA."""

    name = "attention_wgmma"
    reads = "attn aoverlap apingpong akeys afma aconsumers atail aqslots persistent"
    plan_type = AttentionWgmmaPlan
    selector = ("attn", "wgmma")

    def match(self, kernel: loop.KernelOp) -> Attention | str:
        return match_flash_attention(kernel)

    def plan(self, kernel: loop.KernelOp, a: Attention, knobs: Knobs) -> AttentionWgmmaPlan | str:
        if isinstance(sides := _tma_sides(a), str):
            return sides
        _, k, v = sides
        fits = _bytes(kernel, k.arg) + _bytes(kernel, v.arg) <= HEADS_FIRST_BYTES
        overlap = knobs.aoverlap != "off"
        if knobs.apingpong == "on" and not overlap:
            return _fail(
                "apingpong=on takes turns over the overlapped key loop: not with aoverlap=off"
            )
        consumers = knobs.aconsumers or CONSUMERS
        if not knobs.aconsumers and not knobs.akeys and knobs.apingpong != "on":
            consumers = auto_consumers(a, k.cols, v.cols, self.target.sms)
        if knobs.apingpong == "on" and consumers != 2:
            return _fail("apingpong=on takes turns between two consumer warpgroups")
        pingpong = overlap and knobs.apingpong != "off" and consumers == 2
        budget = HELD_REGISTERS[consumers]
        keys = knobs.akeys or max(
            (n for n in KEY_TILES if n <= keys_per_tile(k.cols, v.cols)),
            key=lambda n: (_held(n, v.cols) <= budget, n),
        )
        if (held := _held(keys, v.cols)) > budget:
            return _fail(
                f"akeys={keys} at head dim {v.cols} holds {held} registers of S, P and O a "
                f"thread, more than {budget} with {consumers} consumer warpgroups"
            )
        bm = consumers * tile.WGMMA_M
        if (smem := _shared_bytes(keys, k.cols, v.cols, bm)) > self.target.dynamic_shared:
            return _fail(
                f"akeys={keys} at head dims {k.cols}/{v.cols} needs {smem} bytes of shared "
                f"memory, more than {self.target.dynamic_shared}"
            )
        if knobs.atail == "on" and _runtime_limit(kernel, a) is not None:
            return _fail(
                "atail=on narrows an item's last key tile to the keys it holds: here the keys "
                "end at a bound of the runtime scalars, not known when the kernel is compiled"
            )
        if knobs.persistent == "auto":
            rounds = CAUSAL_PERSISTENT_ROUNDS * self.target.sms
            longest = -(-a.reduce.extents[0] // keys)  # key tiles of the longest item
            short = longest <= CAUSAL_PERSISTENT_TILES
            persistent = int(not a.causal or _items(a, bm) <= rounds or short)
        else:
            persistent = int(knobs.persistent)
        two = _shared_bytes(keys, k.cols, v.cols, bm, 2)  # one slot fits: checked above
        if knobs.aqslots == 2 and two > self.target.dynamic_shared:
            return _fail(
                f"aqslots=2 at head dims {k.cols}/{v.cols} with akeys={keys} needs {two} bytes "
                f"of shared memory, more than {self.target.dynamic_shared}"
            )
        # auto: two where the grid is persistent and they fit
        q_slots = knobs.aqslots or (2 if persistent and two <= self.target.dynamic_shared else 1)
        return AttentionWgmmaPlan(
            int(a.causal and fits),
            int(overlap),
            int(pingpong),
            keys,
            persistent,
            knobs.afma,
            consumers,
            int(knobs.atail != "off"),
            q_slots,
        )

    def check(self, kernel: loop.KernelOp, a: Attention, plan: AttentionWgmmaPlan) -> str | None:
        if plan.heads_first not in (0, 1):
            return f"heads_first must be 0 or 1, got {plan.heads_first}"
        if plan.overlap not in (0, 1):
            return f"overlap must be 0 or 1, got {plan.overlap}"
        if plan.pingpong not in (0, plan.overlap):
            return f"pingpong must be 0 or, with overlap = 1, 1; got {plan.pingpong}"
        if plan.keys not in KEY_TILES:
            return f"keys must be one of {KEY_TILES}, got {plan.keys}"
        if plan.persistent not in (0, 1):
            return f"persistent must be 0 or 1, got {plan.persistent}"
        if plan.fma not in range(5):
            return f"fma must be in [0, 4], got {plan.fma}"
        if plan.consumers not in REGISTERS or (plan.pingpong and plan.consumers != 2):
            return f"consumers must be 2 or 3 (3 without pingpong), got {plan.consumers}"
        if plan.tail not in (0, 1):
            return f"tail must be 0 or 1, got {plan.tail}"
        if plan.q_slots not in (1, 2):
            return f"q_slots must be 1 or 2, got {plan.q_slots}"
        sides = _tma_sides(a)
        return sides if isinstance(sides, str) else None

    def emit(
        self,
        kernel: loop.KernelOp,
        a: Attention,
        plan: AttentionWgmmaPlan,
        rewriter: PatternRewriter,
    ) -> None:
        sides = _tma_sides(a)
        assert not isinstance(sides, str)
        q, k, v = sides
        items = _items(a, plan.bm)
        blocks = _persistent_blocks(a, plan, self.target.sms) if plan.persistent else items
        threads = (1 + plan.consumers) * WARPGROUP
        new, em, mapping = new_kernel(kernel, (blocks, 1, 1), (threads, 1, 1))
        new.attributes["tile.min_blocks"] = IntegerAttr(1, i64)
        bn = plan.keys
        tile.set_tensor_maps(
            new,
            [
                tile.TensorMapArg(q.arg, q.box(plan.bm), SWIZZLE),
                tile.TensorMapArg(k.arg, k.box(bn), SWIZZLE),
                tile.TensorMapArg(v.arg, v.box(bn), SWIZZLE),
            ],
        )
        limit = _runtime_limit(kernel, a)
        emitter = _WgmmaAttentionEmitter(em, a, mapping, [q, k, v], plan, items, blocks, limit)
        emitter.emit()
        replace_kernel(rewriter, kernel, new)


def _runtime_limit(kernel: loop.KernelOp, a: Attention) -> KeyLimit | None:
    """Where the score proves the keys past a bound of the runtime scalars masked, the bound
    (`key_limit.py`), else None."""
    module = kernel.get_toplevel_object()
    assert isinstance(module, ModuleOp)
    return key_limit(a, kernel_scalar_bounds(module, kernel))


TAIL_STEPS = (tile.WGMMA_K, BK)
"""The key counts a narrowed last tile's width is rounded up to (`tail_widths`): a wgmma K
step (P·V's), or where that gives more than `TAIL_WIDTHS` widths, 64."""

TAIL_WIDTHS = 2
"""The most narrowed widths above 0 a kernel has: each is one more copy of the key loop's last
step and P·V in the consumers' code (0, a tile passed, is a short one)."""


def tail_widths(s_q: int, s_k: int, bm: int, keys: int, causal: bool) -> tuple[int, ...]:
    """The widths under `keys` that a consumer warpgroup narrows an item's last key tile to
    (`atail`): the keys past the item's last whole tile that its rows see (all of them, or
    under a causal mask those up to its own last row; 0 where it sees none), rounded up to a
    step of `TAIL_STEPS`. An item of one tile keeps it whole. Under a causal mask with 128-row
    items and 192-key tiles (D ≤ 64) the last tiles hold 64, 128 or 192 keys: the second
    warpgroup computes that many, the first 64 fewer (it passes a tile of 64): at S = 2048,
    7.8% fewer scores and products than whole tiles (at D 128, 128-key tiles, 2.8%)."""
    lasts = set()
    for q0 in range(0, s_q, bm):
        end = min(s_k, q0 + bm) if causal else s_k
        if end <= keys:
            continue
        before = (-(-end // keys) - 1) * keys
        for first in range(q0, min(q0 + bm, s_q), tile.WGMMA_M) if causal else [q0]:
            seen = min(end, first + tile.WGMMA_M) if causal else end
            lasts.add(max(seen - before, 0))
    for step in TAIL_STEPS:
        widths = sorted({-(-last // step) * step for last in lasts} - {keys})
        if len([w for w in widths if w]) <= TAIL_WIDTHS:
            return tuple(widths)
    raise AssertionError(f"{keys} keys a tile: more than {TAIL_WIDTHS} widths of 64 below it")


CAUSAL_PERSISTENT_ROUNDS = 8
"""`persistent=auto` takes persistent blocks for every non-causal kernel, and for a causal one
whose items fill at most this many rounds of the SMs. Causal items differ in length, so blocks
that each take every `blocks`-th item drift apart over many rounds, and the items in flight
spread over more heads' K and V than one block per item (scheduled by the hardware as SMs free
up) keeps in L2. On the H200 (RESULTS.md twentieth session run 4), × cuDNN, one block per item
→ persistent: non-causal 0.79-1.03 → 0.90-1.03 (never lower); causal with 3-6 rounds 0.79-0.96
→ 0.92-1.01, with 31 rounds (4096 items) 0.86-1.06 → 0.78-0.96. Those ran 132 blocks, before
`_persistent_blocks` made the causal count prime to the query tiles."""

CAUSAL_PERSISTENT_TILES = 32
"""`persistent=auto` also takes persistent blocks for a causal kernel, at any number of rounds,
whose longest item (its last query tile) runs at most this many key tiles: there each item's
fixed costs (loading Q, storing O), which a persistent block overlaps with its next item's,
weigh more than the imbalance of blocks that each take every `blocks`-th item, an imbalance that
grows with the spread of the items' lengths. On an H100 (RESULTS.md thirty-ninth session run
5), 4096 items (31 rounds of 131 blocks), × cuDNN, one block per item → persistent: D 64 S 2048
(11 tiles of 192 keys) 0.84 → 0.93, S 4096 (22) 0.91 → 1.00; D 128 S 2048 (16 of 128) 0.95 →
1.03, S 4096 (32) 1.01 → 1.05; D 96 S 4096 (32) 1.10 → 1.11; and past 32 tiles: D 64 S 8192
(43) 0.99 → 0.91, D 128 S 8192 (64) 1.03 → 0.93, D 192 S 4096 (64 of 64 keys) 0.89 → 0.80,
S 16384 (86 and 128) 1.06 → 0.83."""

THREE_CONSUMER_GAIN = 1.06
"""How much more work three consumer warpgroups (192-row items, 128 keys a tile, no ping-pong)
do in the time two do (128-row items, 192 keys, ping-pong) at head dims 48 and 64, non-causal:
`aconsumers=auto` takes three where their rounds of items cost less than this times two's
(`auto_consumers`). On the H200 (RESULTS.md forty-first session, × cuDNN, two → three), where
the rounds of items cost the same or 1.6-3% more with three: D 64 S 1536-16384 at B·S 16384 and
H 32 0.96-1.04 → 0.99-1.08, B 8 H 16 S 2048 0.95 → 1.00, D 48 S 2048 and 4096 1.08-1.10 →
1.12-1.13; where they cost more: 2×8×4096 (352 items of 192 rows in 3 rounds against 512 of 128
in 4, 12% more) 0.98 → 0.91, 8×12×512 (50% more) 0.81 → 0.72, 16×32×1024 (12.5%) 0.90 →
0.90. At D 32 (4×32×4096) three ran 1.24 → 1.21; causal kernels ran slower with three at every
shape (0.93-1.19 → 0.79-1.08)."""


def auto_consumers(a: Attention, head_qk: int, head_v: int, sms: int) -> int:
    """Consumer warpgroups for `aconsumers=auto`: three for a non-causal kernel without a mask
    (q, k and v its only loads) whose head dims are 48 to 64 where its rounds of 192-row items
    cost less than `THREE_CONSUMER_GAIN` times the rounds of 128-row ones, else two."""
    widest = max(head_qk, head_v)
    loads = {op.memref for op in a.program if isinstance(op, memref.LoadOp)}
    if a.causal or len(loads) > 3 or not 32 < widest <= NARROW_HEAD_DIM:
        return CONSUMERS

    def cost(consumers: int) -> int:
        rows = consumers * tile.WGMMA_M
        return -(-_items(a, rows) // sms) * rows

    return 3 if cost(3) < THREE_CONSUMER_GAIN * cost(CONSUMERS) else CONSUMERS


HEADS_FIRST_BYTES = 16 << 20
"""A causal grid runs heads fastest (all heads' longest query tiles first) when K and V fit
in this much of the 50 MB L2 (measured 2026-11-29: benchmarks/RESULTS.md, "Run 6 (6 stages
for 128×128 wgmma tiles; …"; docs/flash_attention.md, launch order)."""


def _items(a: Attention, bm: int) -> int:
    """Work items of a kernel: (query tile of `bm` rows, batch index) pairs."""
    *batch, s_q, _ = a.nest.extents
    return -(-s_q // bm) * prod(batch)


def fma_tiles(fma: int, keys: int) -> frozenset[int]:
    """The n8 tiles of S (of `keys` keys) whose exp2 runs on the FMA units: `fma` of every 8,
    spread evenly (n with (n·fma) mod 8 < fma: 2 of 8 are tiles 0 and 4), so the FFMAs
    interleave with the MUFU exponentials around them."""
    return frozenset(n for n in range(keys // 8) if n * fma % 8 < fma)


def _persistent_blocks(a: Attention, plan: AttentionWgmmaPlan, sms: int) -> int:
    """Persistent blocks: one per SM, at most one per item. Under a causal mask with query
    tiles fastest, items' lengths repeat with the query tiles' count Q, and block b takes items
    b + blocks·r: with blocks and Q sharing a factor g, block b only ever sees the Q/g lengths
    of its residue (132 blocks, Q = 16: a quarter of them, the longest quarter's blocks doing
    28 key tiles per 4 items at S = 2048 and 192 keys a tile where the shortest's do 20). So
    the count is the largest one prime to Q: each block then walks every query tile in turn."""
    items = _items(a, plan.bm)
    if items <= sms or not a.causal or plan.heads_first:
        return min(items, sms)
    query_tiles = -(-a.nest.extents[-2] // plan.bm)
    return next(n for n in range(sms, 0, -1) if gcd(n, query_tiles) == 1)


def _bytes(op: loop.KernelOp, arg: int) -> int:
    t = op.body.block.args[arg].type
    assert isinstance(t, MemRefType)
    return prod(t.get_shape()) * element_bytes(t.element_type)


class _WgmmaAttentionEmitter(_AttentionEmitter):
    """Emits the producer and consumer warpgroups of one block."""

    def __init__(
        self,
        em: Emitter,
        a: Attention,
        mapping: Mapping,
        sides: list[_TmaSide],
        plan: AttentionWgmmaPlan,
        items: int,
        blocks: int,
        limit: KeyLimit | None,
    ) -> None:
        super().__init__(em, a, mapping, warps=4 * plan.consumers, m_tiles=1)
        self.consumers = plan.consumers
        self.consumer_threads = plan.consumers * WARPGROUP
        """The `empty` barriers' count, and (with two consumers) the turns' named barriers'."""
        self.limit = limit
        """Where the score proves the keys past a bound of the runtime scalars masked (a cache
        of L valid keys), each item's key loop stops at the bound (`key_limit.py`)."""
        self.bn = self.ring_keys = plan.keys
        self.tail_widths = (
            tail_widths(self.s_q, self.s_k, self.bm, self.bn, a.causal)
            if plan.tail and limit is None
            else ()
        )
        """The widths an item's last key tile may be narrowed to (`atail`)."""
        self.q_side, self.k_side, self.v_side = sides
        self.heads_first, self.overlap = bool(plan.heads_first), bool(plan.overlap)
        self.pingpong = bool(plan.pingpong)
        self.fma_tiles = fma_tiles(plan.fma, self.bn)
        self.q_slots = plan.q_slots
        self.items, self.blocks = items, blocks
        """Work items ((query tile, batch index) pairs) and blocks: block b takes items b,
        b + blocks, ..."""

    def o_index(self, mt: int, dt: int, r: int) -> tuple[int, ...]:
        return (4 * dt + r,)

    def emit(self) -> None:
        em, a = self.em, self.a
        self.tid = em.value(tile.ThreadIdOp("x"))
        element, shared = a.element, tile.SHARED
        bn = self.bn
        self.q_smem = self.alloc([self.q_slots, chunks(self.head_qk), self.bm, BK], element, shared)
        self.k_smem = self.alloc([SLOTS, chunks(self.head_qk), bn, BK], element, shared)
        self.v_smem = self.alloc([SLOTS, chunks(self.head_v), bn, BK], element, shared)
        counts = {"q_full": self.q_slots, "q_empty": self.q_slots}
        counts |= {f"{s}_{kind}": SLOTS for kind in ("full", "empty") for s in "kv"}
        self.bars = bars = {
            name: em.value(tile.AllocOp(tile.memref_in([count], i64, shared)))
            for name, count in counts.items()
        }
        first = em.value(arith.CmpiOp(self.tid, em.index(0), "eq"))
        with em.if_(first) as (then_block, _, _), em.into(then_block):
            for s in range(self.q_slots):
                em.op(tile.MbarrierInitOp(bars["q_full"], em.index(s), 1))
                em.op(tile.MbarrierInitOp(bars["q_empty"], em.index(s), self.consumer_threads))
            for s in range(SLOTS):
                for side in ("k", "v"):
                    em.op(tile.MbarrierInitOp(bars[f"{side}_full"], em.index(s), 1))
                    em.op(
                        tile.MbarrierInitOp(
                            bars[f"{side}_empty"], em.index(s), self.consumer_threads
                        )
                    )
            em.op(tile.FenceProxyAsyncOp())
        em.op(tile.BarrierOp())
        warpgroup = em.value(tile.WarpUniformOp(em.div(self.tid, WARPGROUP)))
        producer = em.value(arith.CmpiOp(warpgroup, em.index(0), "eq"))
        then_block, else_block = Block(), Block()
        em.op(scf.IfOp(producer, [], Region(then_block), Region(else_block)))
        with em.into(then_block):
            em.op(tile.SetMaxNRegOp(REGISTERS[self.consumers][0], inc=False))
            with em.if_(first) as (first_block, _, _), em.into(first_block):
                self.produce()
            em.op(scf.YieldOp())
        with em.into(else_block):
            em.op(tile.SetMaxNRegOp(REGISTERS[self.consumers][1], inc=True))
            self.consume(em.value(arith.SubiOp(warpgroup, em.index(1))))
            em.op(scf.YieldOp())

    @contextmanager
    def each_item(self):
        """Emits the loop over the block's work items, each item's query rows (`q0`), batch
        indices (`mapping`) and key tiles (`tiles`) set inside; yields the item's number in
        the block (the parity of its Q barriers) and the number of key tiles the block ran
        before it (where its tiles fall in the K/V rings)."""
        em = self.em
        zero = em.index(0)
        block = em.value(tile.BlockIdOp("x"))
        with em.for_loop(block, self.items, self.blocks, [zero, zero]) as (w, (k, t0), _):
            self.assign_item(w)
            yield k, t0
            em.op(scf.YieldOp(em.add(k, 1), em.add(t0, self.tiles)))

    def assign_item(self, w: SSAValue) -> None:
        """Work item `w` in launch order: query tiles fastest (heads first: batch indices
        fastest), and under a causal mask the longest (last) query tiles first."""
        em, a = self.em, self.a
        query_tiles = -(-self.s_q // self.bm)
        batches = self.items // query_tiles
        if self.heads_first:
            flat, query_tile = em.rem(w, batches), em.div(w, batches)
        else:
            query_tile, flat = em.rem(w, query_tiles), em.div(w, query_tiles)
        if a.causal:
            query_tile = em.value(arith.SubiOp(em.index(query_tiles - 1), query_tile))
        self.q0 = em.mul(query_tile, self.bm)
        for iv, index in zip(a.batch, em.delinearize(flat, self.batch_extents) if a.batch else []):
            self.mapping[iv] = index
        end = em.index(self.s_k)
        if self.limit is not None:
            end = tile_seen_keys(em, self.limit, a, self.mapping, self.q0, self.bm)
        if a.causal:
            end = em.value(arith.MinSIOp(end, em.add(self.q0, self.bm)))
        self.end = end
        self.tiles = em.div(em.add(end, self.bn - 1), self.bn)

    def copy(self, side: _TmaSide, row: SSAValue, smem: SSAValue, slot: list, bar: str) -> None:
        """Issues the TMA copies of `side`'s rows from `row`, one per 64-column chunk, into
        `smem[*slot, chunk]`, completing on barrier `bar[slot or 0]`."""
        em = self.em
        zero = em.index(0)
        for chunk in range(chunks(side.cols)):
            local = dict(self.mapping) | {side.row_iv: row, side.col_iv: em.index(chunk * BK)}
            for op in side.ops:
                if op is side.load:
                    break
                em.op(op.clone(value_mapper=local))
            coords = [local.get(i, i) for i in side.load.indices]
            src = local[side.load.memref]
            at = [*slot, em.index(chunk), zero, zero]
            bar_index = slot[0] if slot else zero
            em.op(tile.TmaLoadOp(src, coords, smem, at, self.bars[bar], bar_index))

    def produce(self) -> None:
        em = self.em
        elements = 2  # bytes of f16/bf16
        # TMA counts every byte of a box, those it fills past the tensor's end too.
        q_bytes = self.bm * chunks(self.head_qk) * BK * elements
        with self.each_item() as (k, t0):
            q_slot = em.rem(k, self.q_slots)
            q_free = em.ring_parity(k, self.q_slots, flip=True)
            em.op(tile.MbarrierWaitOp(self.bars["q_empty"], q_slot, q_free))
            em.op(tile.MbarrierArriveExpectTxOp(self.bars["q_full"], q_slot, q_bytes))
            self.copy(self.q_side, self.q0, self.q_smem, [q_slot], "q_full")
            with em.for_loop(0, self.tiles, 1) as (t, _, _):
                ring = em.add(t0, t)
                slot = em.rem(ring, SLOTS)
                free = em.ring_parity(ring, SLOTS, flip=True)
                j0 = em.mul(t, self.bn)
                for side, smem, name in (
                    (self.k_side, self.k_smem, "k"),
                    (self.v_side, self.v_smem, "v"),
                ):
                    em.op(tile.MbarrierWaitOp(self.bars[f"{name}_empty"], slot, free))
                    tile_bytes = self.bn * chunks(side.cols) * BK * elements
                    em.op(
                        tile.MbarrierArriveExpectTxOp(self.bars[f"{name}_full"], slot, tile_bytes)
                    )
                    self.copy(side, j0, smem, [slot], f"{name}_full")
                em.op(scf.YieldOp())

    def consume(self, group: SSAValue) -> None:
        """Consumer warpgroup `group` (query rows 64·group of each item): per work item, the
        key loop, then the epilogue. With `pingpong` the warpgroups take turns to issue their
        products across all of the block's items: warpgroup g waits at named barrier 1 + g
        before issuing and arrives at the other's after; the second warpgroup lets the first
        start, and the first takes the second's last arrival at the end, so every barrier phase
        completes (a turn per item would let the second run a whole phase ahead)."""
        em = self.em
        local = em.value(arith.SubiOp(self.tid, em.index(WARPGROUP)))
        lane, warp = em.rem(local, 32), em.div(local, 32)
        self.g, self.t = em.div(lane, 4), em.rem(lane, 4)
        self.row_w = em.mul(warp, 16)
        self.wg_row = em.mul(group, tile.WGMMA_M)
        self.m = self.alloc([1, 2], f32, tile.REGISTERS)
        self.l = self.alloc([1, 2], f32, tile.REGISTERS)
        self.o = self.alloc([self.head_v // 2], f32, tile.REGISTERS)
        self.s_accs = {
            keys: self.alloc([keys // 2], f32, tile.REGISTERS)
            for keys in (self.ring_keys, *self.tail_widths)
            if keys
        }
        """S's accumulators (m64nN: N/2 a thread) of a whole tile and of each narrowed width."""
        self.s_acc = self.s_accs[self.ring_keys]
        self.p_regs = self.alloc([self.bn // tile.WGMMA_K, 4], i32, tile.REGISTERS)
        zero, one = em.index(0), em.index(1)
        self.my_turn = em.add(group, 1)
        self.their_turn = em.value(arith.SubiOp(em.index(2), group))
        if self.pingpong:
            second = em.value(arith.CmpiOp(group, one, "eq"))
            with em.if_(second) as (then_block, _, _), em.into(then_block):
                em.op(tile.NamedBarrierOp(one, self.consumer_threads, arrive=True))
        minus_inf, f_zero = em.f32(float("-inf")), em.f32(0.0)
        with self.each_item() as (k, t0):
            for h in range(2):
                self.store(minus_inf, self.m, 0, h)
                self.store(f_zero, self.l, 0, h)
            for r in range(self.head_v // 2):
                self.store(f_zero, self.o, r)
            self.q_slot = em.rem(k, self.q_slots)
            q_parity = em.ring_parity(k, self.q_slots, flip=False)
            em.op(tile.MbarrierWaitOp(self.bars["q_full"], self.q_slot, q_parity))
            if self.idle_rows:
                first_row = em.add(self.q0, self.wg_row)
                with em.when([em.less(first_row, self.s_q)]):
                    self.run_item(t0)
                with em.when([em.value(arith.CmpiOp(first_row, em.index(self.s_q), "uge"))]):
                    self.pass_item(t0)
            else:
                self.run_item(t0)
        if self.pingpong:
            first_group = em.value(arith.CmpiOp(group, zero, "eq"))
            with em.if_(first_group) as (then_block, _, _), em.into(then_block):
                em.op(tile.NamedBarrierOp(one, self.consumer_threads))

    @property
    def idle_rows(self) -> bool:
        """Whether some consumer warpgroup's 64 rows of an item (the last query tile's) lie
        wholly past the queries: S = 200 in 128-row items, S = 2048 in 192-row ones."""
        return any(g * tile.WGMMA_M >= self.s_q % self.bm > 0 for g in range(self.consumers))

    def run_item(self, t0: SSAValue) -> None:
        """The item's key loop and epilogue."""
        if self.overlap:
            self.overlapped_key_loop(t0)
        else:
            self.key_loop(t0)
        self.epilogue()

    def pass_item(self, t0: SSAValue) -> None:
        """An item whose rows for this warpgroup all lie past the queries: no products, no
        softmax, no epilogue, only the protocol the other warpgroups and the producer count on.
        Each key tile's K and V slots are waited for and released, and with `pingpong` the
        warpgroup takes its turn for each tile after the first, as `overlapped_key_loop` does;
        then Q is released. The other consumers get the tensor cores to themselves for it."""
        em = self.em
        with em.for_loop(0, self.tiles, 1) as (t, _, _):
            slot, parity = self.ring(t0, t)
            em.op(tile.MbarrierWaitOp(self.bars["k_full"], slot, parity))
            if self.pingpong:
                with em.when([em.less(em.index(0), t)]):
                    em.op(tile.NamedBarrierOp(self.my_turn, self.consumer_threads))
                    em.op(tile.NamedBarrierOp(self.their_turn, self.consumer_threads, arrive=True))
            em.op(tile.MbarrierArriveOp(self.bars["k_empty"], slot))
            em.op(tile.MbarrierWaitOp(self.bars["v_full"], slot, parity))
            em.op(tile.MbarrierArriveOp(self.bars["v_empty"], slot))
            em.op(scf.YieldOp())
        em.op(tile.MbarrierArriveOp(self.bars["q_empty"], self.q_slot))

    def ring(self, t0: SSAValue, t: SSAValue | int) -> tuple[SSAValue, SSAValue]:
        """The K/V ring slot of the item's key tile `t` (the block's tile t0 + t) and the
        parity of its `full` barriers' phase."""
        em = self.em
        step = em.add(t0, t)
        return em.rem(step, SLOTS), em.ring_parity(step, SLOTS, flip=False)

    @contextmanager
    def narrowed(self, keys: int):
        """Inside, the tile computed is `keys` keys wide: S's wgmma N and accumulators, its
        columns in the softmax, P's fragments and P·V's K steps (the ring's slots keep their
        layout)."""
        self.bn, self.s_acc = keys, self.s_accs.get(keys, self.s_accs[self.ring_keys])
        try:
            yield
        finally:
            self.bn, self.s_acc = self.ring_keys, self.s_accs[self.ring_keys]

    def whole_tiles(self) -> _LastTile:
        """The item's key tiles this warpgroup computes whole: all of them, or all but the last
        where it is narrowed (more than one tile, and the keys of it that the warpgroup's rows
        see within the widest of `tail_widths`; under a causal mask it sees keys up to its own
        last row)."""
        em = self.em
        if not self.tail_widths:
            return _LastTile(self.tiles)
        end = self.end
        if self.a.causal:
            last_row = em.add(self.q0, em.add(self.wg_row, tile.WGMMA_M))
            end = em.value(arith.MinSIOp(end, last_row))
        before = em.value(arith.SubiOp(self.tiles, em.index(1)))
        seen = em.value(arith.SubiOp(end, em.mul(before, self.ring_keys)))
        keys = em.value(arith.MaxSIOp(seen, em.index(0)))
        narrow = em.all_of(
            [em.less(em.index(1), self.tiles), em.less(keys, self.tail_widths[-1] + 1)]
        )
        cut = em.value(arith.SelectOp(narrow, em.index(1), em.index(0)))
        return _LastTile(em.value(arith.SubiOp(self.tiles, cut)), keys, narrow, cut)

    def each_last_width(self, last: _LastTile, body: Callable[[], None], whole: bool) -> None:
        """Emits `body` for the item's last key tile once per width of `tail_widths`, each
        `narrowed` to it and run where `last` is narrowed to it; with `whole`, once more at
        the ring's width, run where it is not narrowed."""
        em = self.em
        if last.cut is None:
            if whole:
                body()
            return
        low = None
        for width in self.tail_widths:
            within = [last.narrow, em.less(last.keys, width + 1)]
            if low is not None:
                within.append(em.less(em.index(low), last.keys))
            with em.when(within), self.narrowed(width):
                body()
            low = width
        if whole:
            with em.when([em.value(arith.CmpiOp(last.cut, em.index(0), "eq"))]):
                body()

    def key_loop(self, t0: SSAValue) -> None:
        """Per key tile: S = Q·Kᵀ, wait, softmax (rescaling O), O += P·V, wait; Q is released
        after the last S."""
        em = self.em

        def step(t: SSAValue) -> None:
            slot, parity = self.ring(t0, t)
            if not self.bn:  # a last tile this warpgroup's rows see none of: released unread
                for side in "kv":
                    em.op(tile.MbarrierWaitOp(self.bars[f"{side}_full"], slot, parity))
                    em.op(tile.MbarrierArriveOp(self.bars[f"{side}_empty"], slot))
                return
            self.scores_and_release(slot, parity)
            probs = self.softmax(self.masked(self.scores(), em.mul(t, self.ring_keys)))
            self.multiply_v_and_release(lambda: self.p_fragments(probs), slot, parity)

        tiles = self.whole_tiles()
        with em.for_loop(0, tiles.whole, 1) as (t, _, _):
            step(t)
            em.op(scf.YieldOp())
        last = em.value(arith.SubiOp(self.tiles, em.index(1)))
        self.each_last_width(tiles, lambda: step(last), whole=False)
        em.op(tile.MbarrierArriveOp(self.bars["q_empty"], self.q_slot))

    def overlapped_key_loop(self, t0: SSAValue) -> None:
        """FA3's intra-warpgroup overlap: tile t's S = Q·Kᵀ and tile t−1's O += P·V are issued
        together, and tile t's softmax runs while the P·V product is in flight; O is rescaled
        by tile t's factors once that product is done. P waits in registers between tiles.
        With `pingpong` each tile's products are issued in the warpgroup's turn (`consume`).
        Q is released once the last S is done, before the last P·V. The first tile is
        computed whole; a narrowed last one (`whole_tiles`) runs its step and P·V at its
        width."""
        em = self.em
        zero, one = em.index(0), em.index(1)
        p_regs = self.p_regs
        self.scores_and_release(*self.ring(t0, 0))
        first = self.softmax(self.masked(self.scores(), zero), alphas=[])  # O is still 0
        self.keep(self.p_fragments(first), p_regs)
        tiles = self.whole_tiles()
        with em.for_loop(1, tiles.whole, 1) as (t, _, _):
            self.overlapped_step(t0, t)
            em.op(scf.YieldOp())
        last = em.value(arith.SubiOp(self.tiles, one))
        self.each_last_width(tiles, lambda: self.overlapped_step(t0, last), whole=False)
        em.op(tile.MbarrierArriveOp(self.bars["q_empty"], self.q_slot))
        last_slot, last_parity = self.ring(t0, last)
        self.each_last_width(
            tiles,
            lambda: self.multiply_v_and_release(
                lambda: self.kept(p_regs, self.bn), last_slot, last_parity
            ),
            whole=True,
        )

    def overlapped_step(self, t0: SSAValue, t: SSAValue) -> None:
        """Tile t's S with tile t−1's P·V (tile t−1 is whole), tile t's softmax while P·V
        runs, O rescaled, tile t's P kept; narrowed to 0 keys (a last tile the warpgroup's rows
        see none of), only tile t−1's P·V, and tile t's K released unread."""
        em = self.em
        p_regs = self.p_regs
        slot, parity = self.ring(t0, t)
        before = em.value(arith.SubiOp(t, em.index(1)))
        before_slot, before_parity = self.ring(t0, before)
        em.op(tile.MbarrierWaitOp(self.bars["k_full"], slot, parity))
        em.op(tile.MbarrierWaitOp(self.bars["v_full"], before_slot, before_parity))
        frags = self.kept(p_regs, self.ring_keys)
        if self.pingpong:
            em.op(tile.NamedBarrierOp(self.my_turn, self.consumer_threads))
        em.op(tile.WgmmaFenceOp())
        if self.bn:
            self.issue_scores(slot)
        self.issue_pv(frags, before_slot)
        if self.pingpong:
            em.op(tile.NamedBarrierOp(self.their_turn, self.consumer_threads, arrive=True))
        if not self.bn:
            em.op(tile.MbarrierArriveOp(self.bars["k_empty"], slot))
            em.op(tile.WgmmaWaitOp(0))
            em.op(tile.MbarrierArriveOp(self.bars["v_empty"], before_slot))
            return
        em.op(tile.WgmmaWaitOp(1))  # S is done; P·V may still run
        em.op(tile.MbarrierArriveOp(self.bars["k_empty"], slot))
        alphas: list[SSAValue] = []
        probs = self.softmax(self.masked(self.scores(), em.mul(t, self.ring_keys)), alphas)
        em.op(tile.WgmmaWaitOp(0))
        em.op(tile.MbarrierArriveOp(self.bars["v_empty"], before_slot))
        for h, alpha in enumerate(alphas):
            self.rescale_o(0, h, alpha)
        self.keep(self.p_fragments(probs), p_regs)

    def scores_and_release(self, slot: SSAValue, parity: SSAValue) -> None:
        """Waits for K in `slot`, computes S = Q·Kᵀ, waits for it and releases the slot."""
        em = self.em
        em.op(tile.MbarrierWaitOp(self.bars["k_full"], slot, parity))
        em.op(tile.WgmmaFenceOp())
        self.issue_scores(slot)
        em.op(tile.WgmmaWaitOp(0))
        em.op(tile.MbarrierArriveOp(self.bars["k_empty"], slot))

    def multiply_v_and_release(
        self, fragments: Callable[[], list[list[SSAValue]]], slot: SSAValue, parity: SSAValue
    ) -> None:
        """Waits for V in `slot`, emits P's fragments (`fragments`), then O += P·V; waits for
        the product and releases the slot."""
        em = self.em
        em.op(tile.MbarrierWaitOp(self.bars["v_full"], slot, parity))
        frags = fragments()
        if frags:  # none for a last tile narrowed to 0 keys: V is released unread
            em.op(tile.WgmmaFenceOp())
            self.issue_pv(frags, slot)
            em.op(tile.WgmmaWaitOp(0))
        em.op(tile.MbarrierArriveOp(self.bars["v_empty"], slot))

    def issue_scores(self, slot: SSAValue) -> None:
        """Issues and commits S = Q·Kᵀ for the key tile in `slot` (the first wgmma overwrites
        S)."""
        em = self.em
        for kk in range(0, self.head_qk, tile.WGMMA_K):
            chunk, column = em.index(kk // BK), em.index(kk % BK)
            em.op(
                tile.WgmmaOp(
                    self.s_acc,
                    self.q_smem,
                    [self.q_slot, chunk, self.wg_row, column],
                    self.k_smem,
                    [slot, chunk, em.index(0), column],
                    self.bn,
                    a_sbo=ATOM,
                    b_lbo=16,  # unused for K-major swizzled layouts
                    b_sbo=ATOM,
                    b_mn_major=False,
                    overwrite=kk == 0,
                )
            )
        em.op(tile.WgmmaCommitOp())

    def scores(self) -> list[list[list[SSAValue]]]:
        """S's accumulators as the `mma.sync` schedule's [m-tile][n8 tile][4] lists."""
        return [[[self.load(self.s_acc, 4 * n + r) for r in range(4)] for n in range(self.bn // 8)]]

    def p_fragments(self, probs: list[list[list[SSAValue]]]) -> list[list[SSAValue]]:
        """P packed to the element type, one 4-register A fragment per 16 keys."""
        (p,) = probs
        return [self.p_fragment(p, kk) for kk in range(self.bn // tile.WGMMA_K)]

    def keep(self, frags: list[list[SSAValue]], regs: SSAValue) -> None:
        for kk, frag in enumerate(frags):
            for r, value in enumerate(frag):
                self.store(value, regs, kk, r)

    def kept(self, regs: SSAValue, keys: int) -> list[list[SSAValue]]:
        """The fragments `keep` put in `regs` of a tile of `keys` keys."""
        steps = keys // tile.WGMMA_K
        return [[self.load(regs, kk, r) for r in range(4)] for kk in range(steps)]

    def issue_pv(self, frags: list[list[SSAValue]], slot: SSAValue) -> None:
        """Issues and commits O += P·V: keys/16 wgmma with P's packed registers as A and V
        N-major from `v_smem[slot]`."""
        em = self.em
        zero = em.index(0)
        for kk, frag in enumerate(frags):
            em.op(
                tile.WgmmaRegisterAOp(
                    self.o,
                    frag,
                    self.v_smem,
                    [slot, zero, em.index(kk * tile.WGMMA_K), zero],
                    self.head_v,
                    b_lbo=self.ring_keys * BK * 2,  # the next 64-column chunk of the head dim
                    b_sbo=ATOM,
                    b_mn_major=True,
                )
            )
        em.op(tile.WgmmaCommitOp())
