"""Tests of the arena plan that lets a host function's intermediates share memory."""

import random

from tinyopt.backends.cuda.buffer_plan import ALIGNMENT, Lifetime, plan


def _collisions(lifetimes: list[Lifetime], offsets: dict) -> list[tuple[object, object]]:
    """Return the pairs of buffers live together whose bytes overlap."""
    pairs = []
    for i, a in enumerate(lifetimes):
        for b in lifetimes[i + 1 :]:
            a_end, b_end = offsets[a.key] + a.nbytes, offsets[b.key] + b.nbytes
            if a.overlaps(b) and offsets[a.key] < b_end and offsets[b.key] < a_end:
                pairs.append((a.key, b.key))
    return pairs


def test_a_chain_reuses_the_buffer_two_steps_back() -> None:
    # t0 -> t1 -> t2 -> t3: t2 may take t0's bytes, t3 t1's.
    chain = [Lifetime(f"t{i}", 1000, i, i + 1) for i in range(4)]
    offsets, size = plan(chain)
    assert size == 2 * 1024
    assert offsets["t0"] == offsets["t2"] and offsets["t1"] == offsets["t3"]
    assert offsets["t0"] != offsets["t1"]


def test_without_sharing_every_buffer_has_its_own_bytes() -> None:
    chain = [Lifetime(f"t{i}", 1000, i, i + 1) for i in range(4)]
    offsets, size = plan(chain, share=False)
    assert size == 4 * 1024
    assert len(set(offsets.values())) == 4


def test_random_plans_never_overlap_live_buffers_and_stay_aligned() -> None:
    rng = random.Random(0)
    for _ in range(200):
        lifetimes = []
        for key in range(rng.randint(1, 12)):
            first = rng.randint(0, 10)
            lifetimes.append(Lifetime(key, rng.randint(1, 5000), first, first + rng.randint(0, 4)))
        offsets, size = plan(lifetimes)
        assert not _collisions(lifetimes, offsets)
        assert all(offset % ALIGNMENT == 0 for offset in offsets.values())
        assert all(offsets[t.key] + t.nbytes <= size for t in lifetimes)
        assert size <= sum(-(-t.nbytes // ALIGNMENT) * ALIGNMENT for t in lifetimes)


def test_an_empty_plan_needs_no_arena() -> None:
    assert plan([]) == ({}, 0)
