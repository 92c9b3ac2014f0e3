"""The plan of the SIMT (CUDA-core) flash-attention schedule: its knobs, the thread layout and
shared memory they imply, the limits a plan must meet, and the default choice.

A block of `threads` threads owns `bm` query rows and walks the keys in tiles of `bn`. Its
threads form a grid of TY rows × TX columns, TX = bn / KEYS_PER_THREAD (the lanes sharing a
query row, in one warp): thread (ty, tx) holds the scores of rows ty + TY·r (r < tm = bm / TY)
and keys tx + TX·c (c < KEYS_PER_THREAD), and O of the same rows at columns
vw·tx + vw·TX·g + w (w < vw, g < groups). Q, K, V and P are f32 in dynamic shared memory, rows
padded so that the 16-byte reads of a warp hit distinct banks.
"""

from __future__ import annotations

from dataclasses import dataclass

from tinyopt.passes.tile.target import Target

KEYS_PER_THREAD = 4
"""Keys of a key tile whose scores one thread computes (one 16-byte read of P per row)."""
WARP = 32
REGISTER_BUDGET = 128
"""Most f32 accumulators (O and S) a thread may hold: past it the hot loops spill."""
SMEM_ALIGN = 1024
"""Each dynamic shared buffer starts 1024-byte aligned (`tile.alloc dynamic`)."""
SM_SHARED = 228 * 1024
"""Shared memory of one SM (sm_90), 1 KiB of it reserved per resident block."""
DEFAULT_BN = 64
DEFAULT_THREADS = 256
TALL_BM = 128
"""Query rows per block where they fit (8 per thread: twice the FMAs per shared read of 4)."""
SHORT_BM = 64


@dataclass(frozen=True)
class SimtAttentionPlan:
    bm: int
    """Query rows per block."""
    bn: int
    """Keys per shared-memory K/V tile (KEYS_PER_THREAD per thread along a row)."""
    threads: int
    """Threads per block."""


def _width(extent: int) -> int:
    """The widest vector (4, 2 or 1 floats) that divides `extent`."""
    return next(w for w in (4, 2, 1) if extent % w == 0)


def _round_up(x: int, to: int) -> int:
    return -(-x // to) * to


@dataclass(frozen=True)
class Geometry:
    """What a plan implies for one kernel's head dims: thread grid, register tiles, strides."""

    plan: SimtAttentionPlan
    head_qk: int
    head_v: int

    @property
    def tx(self) -> int:
        return self.plan.bn // KEYS_PER_THREAD

    @property
    def ty(self) -> int:
        return self.plan.threads // self.tx

    @property
    def tm(self) -> int:
        """Query rows per thread."""
        return self.plan.bm // self.ty

    @property
    def qw(self) -> int:
        """Floats of q and k read at once along the head dim."""
        return _width(self.head_qk)

    @property
    def q_stride(self) -> int:
        """Floats per shared row of Q and K: a multiple of qw, an odd number of qw-vectors (the
        TX lanes reading TX different K rows hit distinct banks)."""
        stride = _round_up(self.head_qk, self.qw) + self.qw
        return stride if (stride // self.qw) % 2 else stride + self.qw

    @property
    def vw(self) -> int:
        """Consecutive O columns per thread group (the width of V's shared reads)."""
        return next((w for w in (4, 2) if self.head_v % (w * self.tx) == 0), 1)

    @property
    def padded_v(self) -> int:
        """O columns computed: head_v rounded up to whole groups (the rest are not stored)."""
        return _round_up(self.head_v, self.vw * self.tx)

    @property
    def groups(self) -> int:
        return self.padded_v // (self.vw * self.tx)

    @property
    def v_stride(self) -> int:
        return _round_up(self.padded_v, 4) + 4

    @property
    def p_stride(self) -> int:
        """Floats per shared row of P: the TY rows of one warp land TX banks apart."""
        return self.plan.bn + self.tx

    def buffers(self) -> dict[str, tuple[int, int]]:
        """Shape of each shared buffer (rows, floats per row)."""
        bm, bn = self.plan.bm, self.plan.bn
        return {
            "q": (bm, self.q_stride),
            "k": (bn, self.q_stride),
            "v": (bn, self.v_stride),
            "p": (bm, self.p_stride),
        }

    @property
    def shared_bytes(self) -> int:
        return sum(_round_up(r * c * 4, SMEM_ALIGN) for r, c in self.buffers().values())

    @property
    def accumulators(self) -> int:
        """f32 accumulators per thread: O and the scores of one key tile."""
        return self.tm * self.vw * self.groups + self.tm * KEYS_PER_THREAD

    @property
    def blocks_per_sm(self) -> int:
        return SM_SHARED // (self.shared_bytes + 1024)


def refusal(g: Geometry, target: Target) -> str | None:
    """Why a plan cannot run the kernel, or None."""
    p = g.plan
    if p.bn % KEYS_PER_THREAD or WARP % g.tx or g.tx < 4:
        lanes = f"{KEYS_PER_THREAD} keys a lane, 4 to {WARP} lanes a row"
        return f"bn must be 16, 32, 64 or 128 ({lanes}), got {p.bn}"
    if p.threads % WARP or p.threads % g.tx:
        return f"threads must be a multiple of {WARP}, got {p.threads}"
    if p.bm % g.ty or g.tm < 1:
        return f"bm ({p.bm}) must be a multiple of threads / (bn / {KEYS_PER_THREAD}) = {g.ty}"
    if g.accumulators > REGISTER_BUDGET:
        return (
            f"O and the scores would take {g.accumulators} registers a thread "
            f"(at most {REGISTER_BUDGET}): fewer rows per thread (bm) or a narrower head dim"
        )
    if g.shared_bytes > target.dynamic_shared:
        return (
            f"Q, K, V and P take {g.shared_bytes} bytes of shared memory at head dims "
            f"{g.head_qk}/{g.head_v} (at most {target.dynamic_shared}): a smaller bm or bn"
        )
    return None


def auto_plan(
    knobs: tuple[int, int, int], head_qk: int, head_v: int, rows: int, target: Target
) -> SimtAttentionPlan:
    """Fills the knobs (bm, bn, threads) left at 0: 64-key tiles, 256 threads, 128 query rows
    where the query rows fill them and two such blocks still fit an SM, else 64. Measured on
    the H200 (2026-12-03, run 2, `bench_attention_f32.py`): at D = 128, where a 128-row block
    is alone on its SM (224 registers, 173 KiB), 64 rows ran twice as fast (Llama B8 S2048
    causal 8.41 ms against 16.72); at D = 64 (two blocks an SM) 128 rows ran 0.88x-1.14x the
    time of 64."""
    bm, bn, threads = knobs
    bn, threads = bn or DEFAULT_BN, threads or DEFAULT_THREADS
    if bm:
        return SimtAttentionPlan(bm, bn, threads)
    tall = Geometry(SimtAttentionPlan(TALL_BM, bn, threads), head_qk, head_v)
    fits = (
        rows > SHORT_BM
        and tall.accumulators <= REGISTER_BUDGET
        and tall.shared_bytes <= target.dynamic_shared
        and tall.blocks_per_sm >= 2
    )
    return SimtAttentionPlan(TALL_BM if fits else SHORT_BM, bn, threads)
