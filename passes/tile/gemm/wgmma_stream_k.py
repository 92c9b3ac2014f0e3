"""Stream-K over the last waves of a persistent wgmma GEMM (`streamk=tail`).

A persistent grid of G blocks (one per SM) walks T output tiles; when T is not a multiple of G
the last round leaves SMs idle (3000³ bf16 at 128×256: 288 tiles, 2.2 waves run as 3). With
`streamk=tail` each block first runs whole tiles, `T // G - 1` rounds of them, as before; the
last `G + T % G` tiles' K steps are then shared evenly by the G blocks (Osama et al., PPoPP
2023: "data-parallel plus one stream-K wave"), so every block runs about `T / G` tiles' worth.
A grid of fewer tiles than SMs (T < G) shares all of them: each of the G blocks runs `T / G`
of a tile's K steps, where one block per tile would leave `G - T` SMs idle, and no second
kernel adds the parts (as the split over K's fold does).

Shares are numbered against the launch order (block b holds share G - 1 - b, as in the
CUDA-core rules' `stream_k.py`): share s runs the tail of one tile (from a K step past 0 to its
end), whole tiles, then the head of another (from its first K step); a tile whose steps several
shares hold is finished by the share holding its first step, the last thing that share runs,
after it waits for the later shares' flags and adds their partial sums (each share writes at
most one, of its first piece, to its row of the workspace). A block waits only for blocks
launched before it, and the later shares' tails are their first work, so the wait is short.
The producer warpgroup walks the same pieces, so the ring's slots and phases carry over.

A grid of fewer tiles than blocks is shared with the tiles' K kept aligned (`aligned_head`):
contiguous shares of the tiles' steps start at offsets spread over the whole of K, so blocks
reading the same rows of A or columns of B read them at different times, and a GEMM whose
operands L2 holds read them from DRAM three times over (1000×2544×6032 bf16 on an H100: 126 MB
against 43, RESULTS.md thirty-third session run 3). Instead each of the T tiles has an owner
block that runs its first W = ⌈T·S / G⌉ steps, all owners in step with each other, and the
tiles' remaining steps, one after the other, are cut evenly among the other G - T blocks, the
helpers, whose pieces lie within the last S - W steps; a helper piece is written to the
workspace row `tile + helper` (the pieces, ordered by position, number their tile and helper
indices' sums, each at most once), and the owner adds them in K order. Helpers are the first
blocks launched and never wait, so an owner waits only for blocks launched before it. Measured
(H100, run 6): 1000×2544×6032 110.7 → 77.2 µs, DRAM reads 126 → 63 MB; 700×3000×4096 53.0
µs; still slower than the unshared kernel (68.4 and 45.9 µs), so `auto` leaves them whole.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from xdsl.dialects import arith, scf
from xdsl.ir import SSAValue

from tinyopt.passes.tile.emit import Emitter

INDEX_LIMIT = 2**31
"""Share boundaries are `share · units / G` in 32-bit index arithmetic."""


@dataclass
class Piece:
    """K steps `first .. first + count` of tile `tile` (its index in the walk), from ring step
    `ring`; for a shared tile (`shared`), share `share` holds them."""

    tile: SSAValue
    ring: SSAValue | int
    first: SSAValue | int
    count: SSAValue | int
    shared: bool = False
    share: SSAValue | None = None


def stream_k_refusal(tiles: int, blocks: int, steps: int) -> str | None:
    """Why a grid of `tiles` tiles of `steps` K steps on `blocks` persistent blocks does not
    share its last waves' K steps, or None."""
    if tiles < blocks and tiles * steps < blocks:
        return (
            f"streamk=tail needs a K step for each of the {blocks} blocks, got {tiles} tiles of "
            f"{steps}"
        )
    if tiles % blocks == 0:
        return f"streamk=tail has nothing to share: {tiles} tiles fill whole waves of {blocks}"
    if 2 * blocks * blocks * steps >= INDEX_LIMIT:
        return f"streamk=tail takes at most {INDEX_LIMIT // (2 * blocks * blocks)} K steps a tile"
    return None


def aligned_head(tiles: int, blocks: int, steps: int) -> int:
    """The steps W each owner runs of its tile where fewer tiles than blocks are shared with K
    aligned, or 0 where they are not: W = ⌈T·S / G⌉ leaves each tile a tail and each helper at
    least one step of the tails (so an owner waits only for helpers holding some of its tile),
    and the tails are at least half a head long (so a helper's share spans few of them: at 128
    tiles of 64 steps on 132 blocks, tails of one step, each helper ran 32 pieces and the
    kernel 3.1 times as long as contiguous shares would; H100, RESULTS.md thirty-third session
    run 6)."""
    if tiles >= blocks:
        return 0
    head = -(-tiles * steps // blocks)
    tail = steps - head
    if tail < 1 or tiles * tail < blocks - tiles or 2 * tail < head:
        return 0
    return head


def shared_tiles(tiles: int, blocks: int) -> int:
    """The tiles whose K steps the blocks share: the last `G + T % G`, or all of them where
    they are fewer than the blocks."""
    return tiles if tiles < blocks else blocks + tiles % blocks


class StreamKWalk:
    """Emits the walk of one persistent block over its whole tiles, then its share."""

    def __init__(self, em: Emitter, tiles: int, blocks: int, steps: int) -> None:
        self.em, self.blocks, self.steps = em, blocks, steps
        self.shared = shared_tiles(tiles, blocks)
        self.rounds = (tiles - self.shared) // blocks
        """Rounds of whole tiles before the shared ones."""
        self.units = self.shared * steps
        self.head = aligned_head(tiles, blocks, steps)
        """With K aligned (`aligned_head`): the steps an owner runs of its tile, else 0."""
        self.helpers_count = blocks - tiles
        self.tail = steps - self.head
        """A tile's steps past its owner's."""

    def walk(self, block: SSAValue, body: Callable[[Piece], None]) -> None:
        """Runs `body` on each piece of `block`'s work, in order."""
        em, steps = self.em, self.steps
        if self.head:
            self._aligned_walk(block, body)
            return
        if self.rounds:
            with em.for_loop(0, self.rounds, 1) as (turn, _, _):
                tile = em.add(block, em.mul(turn, self.blocks))
                body(Piece(tile, em.mul(turn, steps), 0, steps))
                em.op(scf.YieldOp())
        share = self.counterpart(block)
        start, end = self.first_unit(share), self.first_unit(em.add(share, 1))
        first_tile, last_tile = em.div(start, steps), em.div(em.add(end, steps - 1), steps)
        base = self.rounds * steps  # ring steps of the whole tiles before
        with em.for_loop(first_tile, last_tile, 1) as (index, _, _):
            begin = em.mul(index, steps)
            low = em.value(arith.MaxSIOp(start, begin))
            high = em.value(arith.MinSIOp(end, em.add(begin, steps)))
            ring = em.add(em.value(arith.SubiOp(low, start)), base)
            first = em.value(arith.SubiOp(low, begin))
            count = em.value(arith.SubiOp(high, low))
            tile = em.add(index, self.rounds * self.blocks)
            body(Piece(tile, ring, first, count, shared=True, share=share))
            em.op(scf.YieldOp())

    def _aligned_walk(self, block: SSAValue, body: Callable[[Piece], None]) -> None:
        """The K-aligned walk: helper `block` (below G - T) runs its share of the tails, owner
        `block` its tile's first `head` steps."""
        em, helpers = self.em, self.helpers_count
        with em.when([em.less(block, helpers)]):
            tails = self.shared * self.tail
            start = em.div(em.mul(block, tails), helpers)
            end = em.div(em.mul(em.add(block, 1), tails), helpers)
            first_tile = em.div(start, self.tail)
            last_tile = em.div(em.add(end, self.tail - 1), self.tail)
            with em.for_loop(first_tile, last_tile, 1) as (index, _, _):
                begin = em.mul(index, self.tail)
                low = em.value(arith.MaxSIOp(start, begin))
                high = em.value(arith.MinSIOp(end, em.add(begin, self.tail)))
                ring = em.value(arith.SubiOp(low, start))
                first = em.add(em.value(arith.SubiOp(low, begin)), self.head)
                count = em.value(arith.SubiOp(high, low))
                body(Piece(index, ring, first, count, shared=True, share=block))
                em.op(scf.YieldOp())
        with em.when([em.value(arith.CmpiOp(block, em.index(helpers), "sge"))]):
            owned = em.value(arith.SubiOp(block, em.index(helpers)))
            body(Piece(owned, 0, 0, self.head, shared=True, share=block))

    def slot(self, piece: Piece) -> SSAValue:
        """The workspace row and flag a piece that does not start its tile writes: its block's
        (the one partial sum a contiguous share writes), or with K aligned its tile's and
        helper's indices summed."""
        assert piece.share is not None
        if self.head:
            return self.em.add(piece.tile, piece.share)
        return self.counterpart(piece.share)

    def partials(self, piece: Piece) -> tuple[SSAValue, SSAValue]:
        """The range of the pieces holding the rest of `piece`'s tile (which it starts), in K
        order: shares after its own, or with K aligned the helpers holding the tile's tail."""
        if not self.head:
            return self.helpers(piece)
        em, tails = self.em, self.shared * self.tail

        def holder(unit: SSAValue) -> SSAValue:  # the helper whose bounds hold tail step `unit`
            return em.div(em.add(em.mul(em.add(unit, 1), self.helpers_count), -1), tails)

        begin = em.mul(piece.tile, self.tail)
        return holder(begin), em.add(holder(em.add(begin, self.tail - 1)), 1)

    def partial_slot(self, piece: Piece, index: SSAValue) -> SSAValue:
        """The workspace row and flag of the `index`-th of `partials(piece)`."""
        return self.em.add(piece.tile, index) if self.head else self.counterpart(index)

    def first_unit(self, share: SSAValue) -> SSAValue:
        """The first K step (of the shared tiles' sequence) share `share` holds."""
        return self.em.div(self.em.mul(share, self.units), self.blocks)

    def share_holding(self, unit: SSAValue) -> SSAValue:
        """The share holding K step `unit` of the shared tiles' sequence."""
        em = self.em
        return em.div(em.add(em.mul(em.add(unit, 1), self.blocks), -1), self.units)

    def helpers(self, piece: Piece) -> tuple[SSAValue, SSAValue]:
        """The shares after `piece`'s holding the rest of its tile: `range(first, last)`."""
        em = self.em
        shared_index = em.value(arith.SubiOp(piece.tile, em.index(self.rounds * self.blocks)))
        tile_end = em.mul(em.add(shared_index, 1), self.steps)
        assert piece.share is not None
        return em.add(piece.share, 1), em.add(self.share_holding(em.add(tile_end, -1)), 1)

    def counterpart(self, index: SSAValue) -> SSAValue:
        """The share block `index` holds, or the block holding share `index`: G - 1 - index
        (shares are numbered against the launch order)."""
        return self.em.value(arith.SubiOp(self.em.index(self.blocks - 1), index))
