"""Integer bounds of common model patterns, refused before as integers that may leave the range
f32 holds exactly although their values are provably small or only moved:

- `repeat`, `tile`, `cat`, `stack`, `roll`, `flip`, `repeat_interleave` of integer inputs
  ("computes integers unbounded"; `expand` was taken): data movement of integer inputs now
  keeps their own type (i64/i32: concat, slices; a flip by slices of the dim's prime factors),
  exact whatever the values, and bounded results keep the bounds of their inputs;
- `input_ids.argmax(-1)` (CLIP's pooler: "argmax of integers beyond 2^24"), and arithmetic
  on ids: an integer input that the program looks up whole (`F.embedding`, `x[ids]`,
  `index_select`, `gather`, through views, copies, `neg`) into a dim of n is bounded by n,
  as torch raises for an id outside [-n, n);
- `index`/`index_select` of an integer tensor (an IR that failed to verify: a gather of an i64
  table): taken in f32 with the tensor's bound, refused as unbounded otherwise.

HF position ids from a padding mask, `mask.long().cumsum(-1) - 1`, stay refused for an int64
mask input (any int64 values: the sum may pass 2^24 and round to a wrong, in-range index) with
a hint to take it `.bool()` first; from a boolean mask, or `ids.ne(pad)`, they are bounded by
the length (n · the bound of the terms). Each taken case is checked against torch in float64
at the graph and the loop level, through lookups where a wrong index would show."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from test_frontend_survey28 import assert_matches_float64  # noqa: E402
from test_frontend_torch import Fn  # noqa: E402
from tinyopt.frontends.torch_fx import FrontendError, capture  # noqa: E402
from torch import Tensor, nn  # noqa: E402

IDS = torch.tensor([[3, 0, 2, 1, 4, 5], [0, 1, 2, 3, 5, 4]])
MASK = torch.tensor([[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]])


def _moved(m: nn.Module, ids: Tensor) -> tuple[Tensor, ...]:
    """Moved copies of unbounded ids, returned as they are (no lookup bounds the input)."""
    rows = ids[:, :4]
    return (
        rows.repeat(2, 1),
        rows.tile(1, 2),
        torch.cat([rows, ids], 1),
        torch.stack([rows, rows.roll(1, -1)], 1),
        rows.flip(0, 1),
        ids.flip(-1),
        rows.repeat_interleave(2, dim=0),
    )


def _gathered(m: nn.Module, x: Tensor, ids: Tensor) -> tuple[Tensor, ...]:
    """Moved copies of a slice of the ids used as `gather` indices (MAE's unshuffle), so no
    lookup bounds the input."""
    rows = ids[:, :4]
    return (
        torch.gather(x, 1, rows.unsqueeze(-1).repeat(1, 1, 3)),
        torch.gather(x, 1, rows.flip(-1).unsqueeze(-1).expand(-1, -1, 3)),
        torch.gather(
            x, 1, torch.cat([rows[:, :2], rows.roll(1, -1)], 1).unsqueeze(-1).repeat(1, 1, 3)
        ),
        *_moved(m, ids),
    )


def test_data_movement_of_integer_inputs_keeps_their_type() -> None:
    """Exact whatever the values: ids past 2^24 come back as they are."""
    torch.manual_seed(0)
    assert_matches_float64(Fn(_moved), IDS + 2**40 + 1)
    assert_matches_float64(Fn(_gathered), torch.randn(2, 4, 3), IDS % 4)


@pytest.mark.parametrize("length", [1, 2, 6, 7, 12, 97, 128])
def test_flip_of_integer_inputs_by_slices(length: int) -> None:
    """The dim split into its prime factors, each reversed (a prime 97: 97 slices)."""
    ids = torch.arange(length).reshape(1, length) * 3 + 2**33
    assert_matches_float64(Fn(lambda m, ids: (ids.flip(-1), ids.flip(0, 1))), ids)


def test_flip_of_a_long_prime_dim_of_an_input_stays_refused() -> None:
    ids = torch.arange(257).reshape(1, 257)
    with pytest.raises(FrontendError, match="aten.flip computes integers unbounded"):
        capture(Fn(lambda m, ids: ids.flip(-1)), ids)


def _lookups(m: nn.Module, ids: Tensor) -> tuple[Tensor, ...]:
    """Input ids looked up whole (so bounded by the table's rows), then moved, negated and
    combined before lookups: a wrong index picks a wrong row."""
    h = m.table[ids]  # bounds ids by 8
    return (
        h,
        m.table[ids.repeat(1, 2)],
        m.table[torch.cat([ids, ids.flip(-1)], 1)],
        m.table[torch.stack([ids, ids.roll(2, -1)])],
        m.table[-ids - 1],
        m.table[ids.tile(2, 1).flip(0)],
        m.table[(ids * 3 + 1) % 8],
        h[torch.arange(2), ids.argmax(-1)],  # CLIP's end-of-text pooler
        h[torch.arange(2), ids.argmin(-1)],
        (ids.unsqueeze(-1) == ids.unsqueeze(-2)).float(),
    )


def test_ids_looked_up_whole_are_bounded_by_the_table() -> None:
    torch.manual_seed(0)
    assert_matches_float64(Fn(_lookups, table=torch.randn(8, 3)), IDS)


@pytest.mark.parametrize(
    "lookup",
    [
        lambda m, ids: nn.functional.embedding(ids.view(-1), m.table),
        lambda m, ids: m.table.index_select(0, ids.reshape(-1)),
        lambda m, ids: torch.gather(m.table[:, 0].expand(2, 8), 1, ids.repeat(1, 1)),
        lambda m, ids: m.table[torch.cat([ids, ids])],
        lambda m, ids: m.table[-ids.t()],
    ],
    ids=["embedding_of_a_view", "index_select", "gather_of_a_repeat", "index_of_cat", "neg"],
)
def test_each_lookup_bounds_its_input(lookup) -> None:
    """An argmax of the ids is taken beside each lookup of all of them (one row of the ids
    holds the largest, so argmax's ties would show), the lookup's rows added."""
    torch.manual_seed(0)

    def pooled(m: nn.Module, ids: Tensor) -> tuple[Tensor, ...]:
        return lookup(m, ids), m.table[ids.argmax(-1)], m.table[(ids * 2).max(-1).values // 2]

    assert_matches_float64(Fn(pooled, table=torch.randn(8, 3)), IDS)


@pytest.mark.parametrize(
    "partial",
    [
        lambda m, ids: m.table[ids[:, :3]],  # a slice: the rest of the ids may be anything
        lambda m, ids: m.table[ids.clamp(0, 7)],  # a clamp changes the values
        lambda m, ids: m.table[ids.index_select(1, torch.tensor([0, 1]))],
    ],
    ids=["slice", "clamp", "index_select"],
)
def test_ids_not_looked_up_whole_stay_unbounded(partial) -> None:
    """A lookup of part of the ids, or of values computed from them, bounds nothing: an argmax
    of the ids stays refused beside it."""

    def pooled(m: nn.Module, ids: Tensor) -> tuple[Tensor, ...]:
        return ids.argmax(-1).float(), partial(m, ids)

    with pytest.raises(FrontendError, match="argmax of integers beyond 2\\^24"):
        capture(Fn(pooled, table=torch.randn(8, 3)), IDS)


def test_argmax_and_arithmetic_of_ids_not_looked_up_stay_refused() -> None:
    with pytest.raises(FrontendError, match="argmax of integers beyond 2\\^24"):
        capture(Fn(lambda m, ids: m.table[ids.argmax(-1)], table=torch.randn(8, 3)), IDS)
    with pytest.raises(FrontendError, match="aten.neg computes integers unbounded"):
        capture(Fn(lambda m, x, ids: torch.gather(x, 1, -ids[:, :4])), torch.randn(2, 4), IDS)
    with pytest.raises(FrontendError, match="aten.cat computes integers unbounded"):
        mixed = Fn(lambda m, ids: torch.cat([ids, ids.clamp(0, 3)]))  # one in f32: not exact
        capture(mixed, IDS)


def test_a_lookup_into_a_dim_past_2_24_bounds_nothing() -> None:
    """A dim of 2^24 + 2 (of a broadcast, no memory) bounds ids by 2^24 + 2: not exact."""
    big = 2**24 + 2

    def far(m: nn.Module, ids: Tensor) -> Tensor:
        shifted = (ids + 0).float()
        return torch.zeros(1).expand(big)[ids] + shifted

    with pytest.raises(FrontendError, match="aten.add computes integers up to 16777218"):
        capture(Fn(far), IDS)


def test_index_of_an_integer_tensor() -> None:
    """Bounded: taken in f32 with the tensor's bound; an input's: refused by name (it was an
    IR that did not verify)."""
    torch.manual_seed(0)
    bounded = Fn(
        lambda m, ids: m.table[ids.clamp(0, 7).index_select(1, m.pick)][:, ids.clamp(0, 2)[0]],
        table=torch.randn(8, 3),
        pick=torch.tensor([5, 0, 2]),
    )
    assert_matches_float64(bounded, IDS)
    with pytest.raises(FrontendError, match="aten.index computes integers unbounded"):
        capture(Fn(lambda m, ids: ids[:, torch.tensor([1, 0])]), IDS)


def _positions(m: nn.Module, ids: Tensor, mask: Tensor) -> tuple[Tensor, ...]:
    """HF Llama/OPT position ids from a boolean padding mask (BLOOM/OPT's masked_fill), and
    RoBERTa's `create_position_ids_from_input_ids` from the ids."""
    position_ids = mask.long().cumsum(-1) - 1
    filled = position_ids.masked_fill(mask == 0, 1)
    marks = ids.ne(1).int()
    roberta = (torch.cumsum(marks, dim=1).type_as(marks) * marks).long() + 1
    return m.table[filled], m.table[position_ids.clamp(min=0)], m.table[roberta]


def test_position_ids_from_a_mask_are_bounded_by_its_length() -> None:
    torch.manual_seed(0)
    assert_matches_float64(Fn(_positions, table=torch.randn(8, 3)), IDS, MASK.bool())
    from_int = Fn(lambda m, ids, mask: _positions(m, ids, mask.bool()), table=torch.randn(8, 3))
    assert_matches_float64(from_int, IDS, MASK)


def test_position_ids_from_an_int64_mask_input_stay_refused() -> None:
    """Its values may be anything: the sum may pass 2^24 and round to a wrong in-range row."""

    def llama(m: nn.Module, mask: Tensor) -> Tensor:
        return m.table[(mask.long().cumsum(-1) - 1).masked_fill(mask == 0, 1)]

    with pytest.raises(FrontendError, match=r"cumsum of integers whose .* `mask.bool\(\)`"):
        capture(Fn(llama, table=torch.randn(8, 3)), MASK)


def test_cumsum_past_2_24_stays_refused() -> None:
    """n terms bounded by b sum to at most n·b: 257 · 2^16 and 17 · 2^20 pass 2^24."""
    wide = Fn(lambda m, mask: (mask.long() * 65536).cumsum(-1).float())
    with pytest.raises(FrontendError, match="aten.cumsum computes integers up to 16842752"):
        capture(wide, torch.ones(257, dtype=torch.bool))
    assert_matches_float64(wide, torch.ones(255, dtype=torch.bool))  # 2^24 - 2^16: exact
    bounded = Fn(lambda m, ids: (ids.clamp(0, 2**20).cumsum(-1)).float())
    with pytest.raises(FrontendError, match="aten.cumsum computes integers up to 17825792"):
        capture(bounded, torch.zeros(1, 17, dtype=torch.long))
