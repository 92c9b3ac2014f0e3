"""Schedule rule for decode attention (flash-decoding): split-KV, one K/V load per GQA group.

Taken for flash-attention kernels whose query rows reading one K/V head are few (at most 64:
the queries of a decode step or a short chunk, times the query heads of a KV head), where the
64- and 128-row tiles of `attn=wgmma`, `attn=sync` and `attn=simt` would be mostly empty.
Planning rewrites the kernel (`decode_split.py`): a block owns one group of rows (all query
heads of one (batch, KV head), each of their queries) and one chunk of the keys, and the
partial states (m, l, acc) of the chunks merge in a second kernel with the attention's own
combine (one thread per output element, in split order: deterministic). The partial kernel is
a flash-attention kernel of R rows per batch index:

- f16/bf16 at head dims that are multiples of 16: the `attn=sync` schedule's steps, S = Q·Kᵀ
  and P·V by `mma.sync`, the online softmax in registers, K and V tiles copied once by 16-byte
  `cp.async`: with `akwarps` = W > 1 (at most 16 rows, head dims up to 128) a block of W warps
  that each hold all of the group's rows and walk every W-th 16-key tile of the chunk through
  their own ring, merged in the block (`decode_warps.py`); with `akwarps` = 1 one warp per 16
  rows on the block's 64-key tiles, the next tile in flight;
- f32, and f16/bf16 at other head dims: the `attn=simt` schedule with a row tile of the
  group's rows and its lanes across the keys and head dim (`decode_simt.py`): K and V tiles
  copied once per block (16-byte `cp.async` for f32), FMAs in registers.

The split count (knob `asplits`) and the key-parallel warps (knob `akwarps`) come from the
shape: keys, groups, the block's shared memory and registers and the SM count
(`decode_plan.py`). How those warps meet each round (`akwarps_sync`) and how deep their rings
are (`aslots`) are knobs whose auto values keep the block's barrier and two slots. With
`abalance=on` (opt-in) the keys are cut by the grid instead of by a split count: one run of
16-key tiles per block of a one-wave grid, over the groups end to end (`decode_split.Balance`).
docs/flash_attention.md, "Decode".
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.pattern_rewriter import PatternRewriter

from tinyopt.dialects import loop
from tinyopt.passes.tile.attention.attention_match import (
    Attention,
    match_attention,
    match_flash_attention,
)
from tinyopt.passes.tile.attention.decode_match import DecodeAttention, match_decode_attention
from tinyopt.passes.tile.attention.decode_plan import (
    MAX_SPLITS,
    MERGE_COST_PER_SPLIT,
    WARP_KEYS,
    WARP_SLOTS,
    auto_key_warps,
    auto_splits,
    blocks_per_sm,
    key_warps_refusal,
    resident_blocks,
    runtime_splits,
    warps_for,
)
from tinyopt.passes.tile.attention.decode_simt import decode_simt_geometry
from tinyopt.passes.tile.attention.decode_split import (
    BALANCED,
    DECODE_MERGE,
    DECODE_PARTIAL,
    Balance,
    balanced_values,
    key_chunk,
    key_count,
    split_decode,
)
from tinyopt.passes.tile.attention.decode_warps import KeyWarpEmitter
from tinyopt.passes.tile.attention.mma_sync import BN, SWIZZLE_CHUNKS, WARP, _AttentionEmitter
from tinyopt.passes.tile.attention.simt import ELEMENTS
from tinyopt.passes.tile.attention.simt_emit import SimtAttentionEmitter
from tinyopt.passes.tile.kernel import new_kernel, replace_kernel
from tinyopt.passes.tile.knobs import Knobs
from tinyopt.passes.tile.rule import Rule
from tinyopt.passes.tile.sequential import Sequential, SequentialPlan
from tinyopt.passes.tile.target import Target

MERGE_THREADS = 128
"""Threads per block of the merge kernel (one thread per output element)."""


@dataclass(frozen=True)
class DecodePlan:
    asplits: int
    """Chunks the keys are split into (1: no merge kernel)."""
    akwarps: int
    """Warps of a tensor-core partial block that split its chunk of keys (1: one warp per 16
    query rows; always 1 for the CUDA-core partial kernel and the merge)."""
    akwarps_sync: str = "block"
    """How the key-parallel warps (`akwarps` > 1) wait for their K/V copies and free their
    slots: "block" (`__syncthreads`, every warp in step) or "warp" (`__syncwarp`, each warp
    on its own ring); "block" for every other decode kernel, whatever the knob says."""
    aslots: int = WARP_SLOTS
    """Tiles in each key-parallel warp's K/V ring, `aslots` - 1 of them in flight while one is
    read (2 for every other decode kernel)."""
    abalance: str = "off"
    """"on": the keys are cut by the grid, one run of key tiles per block of a grid that
    fills the SMs once (`decode_split.Balance`); `asplits` is then the slots a group has.
    Only for key-parallel warps."""
    aswizzle: str = "off"
    """"on": the key-parallel warps' K/V rings are stored swizzled, not padded
    (`mma_sync.SWIZZLE_CHUNKS`): every row 32-byte aligned, so each sector a `cp.async` copies
    is fetched from L2 once. Head dims that are multiples of 64 only."""


def _warps_plan(
    splits: int, warps: int, knobs: Knobs, heads: tuple[int, int], balance: str = "off"
) -> DecodePlan | str:
    """The plan of `splits` chunks (slots, balanced) on blocks of `warps` warps: the
    key-parallel warps' barriers, ring depth and ring layout from the knobs and the head dims
    `heads` (for one warp per 16 rows, the block's barrier, two padded slots)."""
    if warps == 1:
        return DecodePlan(splits, 1)
    sync = "warp" if knobs.akwarps_sync == "warp" else "block"
    swizzle = swizzle_refusal(*heads)
    if knobs.aswizzle == "on" and swizzle:
        return swizzle
    layout = "on" if knobs.aswizzle != "off" and swizzle is None else "off"
    return DecodePlan(splits, warps, sync, knobs.aslots or WARP_SLOTS, balance, layout)


def swizzle_refusal(head_qk: int, head_v: int) -> str | None:
    """Why the key rings of these head dims cannot be stored swizzled (`aswizzle`), or None:
    a row must hold whole groups of `SWIZZLE_CHUNKS` 16-byte chunks."""
    width = SWIZZLE_CHUNKS * 8
    if head_qk % width or head_v % width:
        return (
            f"aswizzle=on needs head dims that are multiples of {width} (the swizzle permutes "
            f"{SWIZZLE_CHUNKS} 16-byte chunks of a row), got {head_qk} and {head_v}"
        )
    return None


def balance_for(warps: int, slots: int, resident: int, target: Target) -> Balance:
    """The balanced split of key-parallel blocks of `warps` warps with rings of `slots` tiles:
    a grid of the SMs times the blocks one holds, each block's run at least one ring of 16-key
    tiles per warp."""
    return Balance(target.sms * resident, WARP_KEYS, warps * slots)


@dataclass
class DecodePiece:
    """A kernel the decode rewrite built: the regrouped attention (`attention` set), or the
    merge of the partial states."""

    splits: int
    attention: Attention | None
    tensor_cores: bool
    """Whether the regrouped attention suits the tensor cores (else it runs on CUDA cores)."""
    nest: loop.ParallelOp
    balanced: bool = False
    """Whether the keys are cut by the grid (`decode_split.Balance`)."""


DecodeMatch = DecodeAttention | DecodePiece


class AttentionDecode(Rule[DecodeMatch, DecodePlan]):
    """Schedules decode attention as split-KV blocks per (K/V group, chunk of keys)."""

    name = "attention_decode"
    reads = "attn asplits akwarps akwarps_sync aslots abalance aswizzle"
    plan_type = DecodePlan
    selector = ("attn", "decode")

    def match(self, kernel: loop.KernelOp) -> DecodeMatch | str:
        nest = next(iter(kernel.body.block.ops), None)
        balanced = BALANCED in kernel.attributes
        for attribute in (DECODE_PARTIAL, DECODE_MERGE):
            splits = kernel.attributes.get(attribute)
            if not isinstance(splits, IntegerAttr) or not isinstance(nest, loop.ParallelOp):
                continue
            count = splits.value.data
            if attribute == DECODE_MERGE:
                return DecodePiece(count, None, False, nest, balanced)
            tensor_cores = match_flash_attention(kernel)
            if not isinstance(tensor_cores, str):
                return DecodePiece(count, tensor_cores, True, nest, balanced)
            simt = match_attention(kernel, ELEMENTS)
            if simt is None:
                return "the partial kernel is not a flash-attention kernel any more"
            return DecodePiece(count, simt, False, nest, balanced)
        return match_decode_attention(kernel)

    def plan(self, kernel: loop.KernelOp, m: DecodeMatch, knobs: Knobs) -> DecodePlan | str:
        slots = knobs.aslots or WARP_SLOTS
        if isinstance(m, DecodePiece):
            if m.attention is None or not m.tensor_cores:
                return DecodePlan(m.splits, 1, abalance="on" if m.balanced else "off")
            rows, head_v = m.nest.extents[1:]
            head_qk, chunk = m.attention.qk.extents[0], m.attention.reduce.extents[0]
            warps = knobs.akwarps or auto_key_warps(rows, head_qk, head_v, chunk, slots)
            balance = "on" if m.balanced else "off"
            return key_warps_refusal(warps, rows, head_qk, head_v, slots) or _warps_plan(
                m.splits, warps, knobs, (head_qk, head_v), balance
            )
        groups = m.rows // m.group
        if m.on_tensor_cores:
            warps = knobs.akwarps or auto_key_warps(m.group, m.head_qk, m.head_v, m.keys, slots)
            if reason := key_warps_refusal(warps, m.group, m.head_qk, m.head_v, slots):
                return reason
        elif knobs.akwarps > 1:
            return (
                f"akwarps={knobs.akwarps} needs the tensor-core partial kernel (f16/bf16, "
                "head dims multiples of 16); the CUDA-core one takes akwarps=1"
            )
        else:
            warps = 1
        costs = self._split_costs(m, warps, slots if warps > 1 else WARP_SLOTS)
        if isinstance(costs, str):
            return costs
        resident, per_split = costs
        if knobs.abalance == "on" and (warps == 1 or knobs.asplits):
            return (
                "abalance=on needs key-parallel warps (akwarps > 1: f16/bf16, at most 16 rows a "
                "group, head dims up to 128) and asplits=0 (the grid sets the split)"
            )
        if knobs.abalance == "on":
            balance = balance_for(warps, slots, resident, self.target)
            heads = (m.head_qk, m.head_v)
            return _warps_plan(balance.slots(groups, m.keys), warps, knobs, heads, "on")
        asked = knobs.asplits or auto_splits(
            groups, m.keys, resident, self.target, warps, per_split
        )
        chunk, splits = key_chunk(m.keys, asked)
        if not knobs.akwarps and m.on_tensor_cores:
            warps = auto_key_warps(m.group, m.head_qk, m.head_v, chunk, slots)
        return _warps_plan(splits, warps, knobs, (m.head_qk, m.head_v))

    def _split_costs(self, m: DecodeAttention, warps: int, slots: int) -> tuple[int, float] | str:
        """The partial blocks one SM holds and the merge's cost per split (`auto_splits`'s
        inputs) for `warps` key-parallel warps with rings of `slots` tiles, or why no CUDA-core
        tile fits the group."""
        if m.on_tensor_cores:
            resident = resident_blocks(m.group, m.head_qk, m.head_v, warps, slots)
            return resident, MERGE_COST_PER_SPLIT
        geometry = decode_simt_geometry(m.group, m.head_qk, m.head_v, self.target)
        if isinstance(geometry, str):
            return geometry
        return blocks_per_sm(geometry.shared_bytes), 0

    def check(self, kernel: loop.KernelOp, m: DecodeMatch, plan: DecodePlan) -> str | None:
        if not isinstance(m, DecodePiece):
            return (
                "the attention kernel is not split yet: the plan pass puts the split kernels "
                "in its place (plan{attn=decode asplits=N})"
            )
        if plan.asplits != m.splits:
            return (
                f"asplits is {m.splits} in the kernel's shape (planning split it); plan the "
                "attention kernel again to change it"
            )
        if not 1 <= plan.asplits <= MAX_SPLITS:
            return f"asplits must be in [1, {MAX_SPLITS}], got {plan.asplits}"
        if plan.akwarps_sync not in ("block", "warp"):
            return f"akwarps_sync must be block or warp, got {plan.akwarps_sync}"
        if plan.akwarps == 1 and (plan.akwarps_sync, plan.aslots) != ("block", WARP_SLOTS):
            return "akwarps_sync=warp and aslots other than 2 need key-parallel warps (akwarps > 1)"
        if plan.abalance not in ("on", "off"):
            return f"abalance must be on or off, got {plan.abalance}"
        if plan.aswizzle not in ("on", "off"):
            return f"aswizzle must be on or off, got {plan.aswizzle}"
        if plan.akwarps == 1 and plan.aswizzle == "on":
            return "aswizzle=on needs key-parallel warps (akwarps > 1)"
        if (plan.abalance == "on") != m.balanced:
            return (
                f"abalance is {'on' if m.balanced else 'off'} in the kernel's shape (planning "
                "cut it); plan the attention kernel again to change it"
            )
        if m.balanced and m.attention is not None and plan.akwarps == 1:
            return "abalance=on needs key-parallel warps (akwarps > 1)"
        if m.attention is None:
            return None
        if not m.tensor_cores:
            if plan.akwarps != 1:
                return f"akwarps must be 1 for this decode kernel, got {plan.akwarps}"
            return None
        rows, head_v = m.nest.extents[1:]
        head_qk = m.attention.qk.extents[0]
        if plan.aswizzle == "on" and (reason := swizzle_refusal(head_qk, head_v)):
            return reason
        return key_warps_refusal(plan.akwarps, rows, head_qk, head_v, plan.aslots)

    def rewrite(
        self, module: ModuleOp, kernel: loop.KernelOp, m: DecodeMatch, plan: DecodePlan
    ) -> list[loop.KernelOp]:
        if isinstance(m, DecodePiece):
            return []
        # The runtime chunks are cut in whole rounds of the partial block's key loop, into the
        # split count the cost model picks for the step's number of keys.
        key_parallel = m.on_tensor_cores and plan.akwarps > 1
        round_keys = plan.akwarps * WARP_KEYS if key_parallel else BN
        costs = self._split_costs(m, plan.akwarps, plan.aslots)
        assert not isinstance(costs, str), "planning refuses a group no tile fits"
        resident, per_split = costs
        if plan.abalance == "on":
            balance = balance_for(plan.akwarps, plan.aslots, resident, self.target)
            return split_decode(module, kernel, m, plan.asplits, round_keys, balance=balance)
        _, splits = key_chunk(m.keys, plan.asplits)
        steps = runtime_splits(
            m.rows // m.group, m.keys, resident, self.target, plan.akwarps, per_split, splits
        )
        return split_decode(module, kernel, m, plan.asplits, round_keys, steps)

    def emit(
        self, kernel: loop.KernelOp, m: DecodeMatch, plan: DecodePlan, rewriter: PatternRewriter
    ) -> None:
        assert isinstance(m, DecodePiece), "planning splits a decode kernel before it is emitted"
        if m.attention is None:
            Sequential(self.target).emit(kernel, m.nest, SequentialPlan(MERGE_THREADS), rewriter)
            return
        groups_splits, rows, head_v = m.nest.extents
        if m.tensor_cores and plan.akwarps > 1:
            warps = plan.akwarps
            balanced = balanced_values(m.nest) if m.balanced else None
            grid = groups_splits
            if balanced is not None:
                blocks = kernel.attributes[BALANCED]
                assert isinstance(blocks, IntegerAttr)
                grid = blocks.value.data
            new, em, mapping = new_kernel(kernel, (1, grid, 1), (warps * WARP, 1, 1))
            head_qk = m.attention.qk.extents[0]
            resident = resident_blocks(rows, head_qk, head_v, warps, plan.aslots)
            new.attributes["tile.min_blocks"] = IntegerAttr(resident, i64)
            KeyWarpEmitter(
                em,
                m.attention,
                mapping,
                warps,
                key_count(m.nest),
                plan.akwarps_sync == "warp",
                plan.aslots,
                (*balanced, m.splits) if balanced is not None else None,
                plan.aswizzle == "on",
            ).emit()
        elif m.tensor_cores:
            warps = warps_for(rows)
            new, em, mapping = new_kernel(kernel, (1, groups_splits, 1), (warps * WARP, 1, 1))
            emitter = _AttentionEmitter(em, m.attention, mapping, warps, 1)
            emitter.key_count = key_count(m.nest)
            emitter.emit()
        else:
            geometry = decode_simt_geometry(rows, m.attention.qk.extents[0], head_v, self.target)
            assert not isinstance(geometry, str), "planning refuses a group no tile fits"
            threads = geometry.plan.threads
            new, em, mapping = new_kernel(kernel, (1, groups_splits, 1), (threads, 1, 1))
            SimtAttentionEmitter(em, m.attention, mapping, geometry).emit()
        replace_kernel(rewriter, kernel, new)
