"""A slice of tests/fuzz/plan_fuzz.py in CI: random GEMM and attention programs under random
schedule knobs, where every plan `plan` prints must be emitted by `tile` (seed SEED), and the
case that found `attn=sync` planning more shared memory than a block may use (D 256 with 8
warps of 32 rows: `plan` printed it, `tile` refused it) and the one that found the skinny rule
planning 64 rows, past the `rows` knob's domain. `python tests/fuzz/plan_fuzz.py -n 400 --seed
N` runs more.
"""

from __future__ import annotations

from attention_programs import attention
from fuzz.plan_fuzz import Case, check, run
from programs import skinny

SEED, COUNT = 41, 40
ATTENTION = "decompose,fuse,flash-attention"


def test_random_plans_are_emitted_by_tile() -> None:
    outcomes, failures = run(SEED, COUNT)
    assert not failures, "\n".join(failures)
    assert outcomes["ok"] >= COUNT // 2, outcomes


def test_attention_sync_beyond_shared_memory_is_refused_by_plan() -> None:
    # 256 query rows (8 warps of 32) and two 64-key K and V tiles at D 256: 271360 bytes
    text = attention(1, 2, 64, 256, "f16")
    knobs = "attn=sync awarps=8 akeys=192 apingpong=off"
    assert check(Case("attention_1x2x64x256", text, knobs, ATTENTION)) == "refused"


def test_skinny_rows_stay_within_the_knobs_domain() -> None:
    # [K, N] f32 weights of 33 columns (one vector lane): 64 accumulators a thread allow 64
    # rows, the `rows` knob 32 at most
    c = Case("skinny_kn_64x33x255", skinny(64, 33, 255, layout="kn"), "skinny=on", "fuse")
    assert check(c) == "ok"
