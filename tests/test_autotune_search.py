"""The searches on synthetic reward functions: no GPU, no compiler."""

from __future__ import annotations

import itertools
import time

import pytest

from tinyopt.passes.autotune.search import (
    REFUSED,
    SEARCHES,
    Budget,
    Config,
    default_config,
    exhaustive,
    key,
    mcts,
    random_search,
    space_size,
)


class Grid:
    """Knobs k0..k{n-1}, each over `values` (prior order); `extra` only when k0 == 3."""

    def __init__(self, n: int, values: tuple[int, ...]) -> None:
        self.names = [f"k{i}" for i in range(n)]
        self.values = values

    def next(self, partial: Config):
        for name in self.names:
            if name not in partial:
                return name, self.values
        if partial["k0"] == 3 and "extra" not in partial:
            return "extra", (0, 1)
        return None


def bowl(config: Config) -> float:
    """A separable bowl with its minimum 1.0 at k_i = 3, extra = 1."""
    return (
        1.0
        + sum(0.1 * (v - 3) ** 2 for k, v in config.items() if k != "extra")
        + (0.0 if config.get("extra", 1) else 0.5)
    )


def batched(f):
    calls = []

    def measure(configs: list[Config]) -> list[float | None]:
        calls.append(len(configs))
        return [f(c) for c in configs]

    measure.calls = calls
    return measure


def test_space_size_and_default() -> None:
    space = Grid(2, (0, 1, 2, 3))
    assert space_size(space) == 4 * 4 + 4  # k0 == 3 doubles its four leaves
    assert default_config(space) == {"k0": 0, "k1": 0}


@pytest.mark.parametrize("method", sorted(SEARCHES))
def test_known_optimum_found_in_small_space(method: str) -> None:
    space = Grid(2, (0, 1, 2, 3, 4))
    result = SEARCHES[method](space, batched(bowl), Budget(trials=40))
    best, ms = result.best
    assert best == {"k0": 3, "k1": 3, "extra": 1} and ms == 1.0


def test_exhaustive_measures_each_config_once_and_stops_when_exhausted() -> None:
    space = Grid(2, (0, 1, 2, 3))
    result = exhaustive(space, batched(bowl), Budget(trials=1000), batch=3)
    configs = [key(c) for c, _ in result.history]
    assert len(configs) == len(set(configs)) == space_size(space)
    assert result.history[0][0] == default_config(space)


@pytest.mark.parametrize("method", sorted(SEARCHES))
@pytest.mark.parametrize("batch", [1, 4])
def test_trial_budget_respected(method: str, batch: int) -> None:
    measure = batched(bowl)
    result = SEARCHES[method](Grid(6, (0, 1, 2, 3, 4, 5)), measure, Budget(trials=21), batch=batch)
    assert len(result.history) == sum(measure.calls) == 21
    assert max(measure.calls) <= batch


def test_time_and_patience_budgets() -> None:
    def slow(config: Config) -> float:
        time.sleep(0.01)
        return bowl(config)

    start = time.monotonic()
    result = mcts(Grid(6, (0, 1, 2, 3, 4, 5)), batched(slow), Budget(trials=10**6, seconds=0.3))
    assert time.monotonic() - start < 1.0 and 5 < len(result.history) < 60
    flat = mcts(Grid(6, (0, 1, 2, 3, 4, 5)), batched(lambda c: 1.0), Budget(patience=7))
    assert len(flat.history) == 8  # the first trial, then seven without improvement


@pytest.mark.parametrize("method", sorted(SEARCHES))
def test_failing_candidates_never_win(method: str) -> None:
    """The fastest-looking configurations fail (None) and are never reported best."""

    def measure(c: Config) -> float | None:
        return None if c["k0"] >= 2 else bowl(c)

    result = SEARCHES[method](Grid(2, (0, 1, 2, 3, 4)), batched(measure), Budget(trials=100))
    best, ms = result.best
    assert best["k0"] < 2 and ms == min(bowl(c) for c, t in result.history if t is not None)
    assert any(t is None for _, t in result.history)


def test_all_failing_gives_no_best() -> None:
    result = mcts(Grid(2, (0, 1)), batched(lambda c: None), Budget(trials=10))
    assert result.best is None and len(result.history) == 4


def test_mcts_beats_random_on_a_large_space() -> None:
    """Six knobs of eight values (262144 configurations), 64 trials, averaged over seeds; the
    prior (0) is the worst value, so the tree has to find its way by the rewards."""
    space = Grid(6, tuple(range(8)))

    def ratio(search, seed: int) -> float:
        return 1.0 / search(space, batched(bowl), Budget(trials=64), seed=seed).best[1]

    tree = sum(ratio(mcts, s) for s in range(10)) / 10
    rand = sum(ratio(random_search, s) for s in range(10)) / 10
    assert tree >= rand and tree > 0.55


def test_grid_enumerates_like_itertools() -> None:
    space = Grid(3, (0, 1))
    configs = {key(c) for c, _ in exhaustive(space, batched(bowl), Budget(trials=99)).history}
    assert configs == {
        key(dict(zip(["k0", "k1", "k2"], p))) for p in itertools.product((0, 1), repeat=3)
    }


@pytest.mark.parametrize("method", sorted(SEARCHES))
def test_refused_configurations_are_not_trials(method: str) -> None:
    """Configurations the rules refuse are recorded apart and do not use up the budget."""

    def measure(c: Config):
        return REFUSED if c["k1"] % 2 else bowl(c)

    result = SEARCHES[method](Grid(3, (0, 1, 2, 3, 4, 5)), batched(measure), Budget(trials=20))
    assert len(result.history) == 20 and all(c["k1"] % 2 == 0 for c, _ in result.history)
    assert result.refused and all(c["k1"] % 2 for c in result.refused)


def test_a_space_that_is_all_refused_ends() -> None:
    result = mcts(Grid(6, tuple(range(8))), batched(lambda c: REFUSED), Budget(trials=5))
    assert result.history == [] and len(result.refused) == 50


def test_a_selector_value_the_planner_refuses_is_not_searched() -> None:
    """The space of a bf16 prefill attention kernel tries `attn` settings whose own rules take
    it, not `decode` (whose rule refuses 128 query rows a K/V head, so the planner refuses the
    setting: its trials would all fail)."""
    from attention_programs import attention

    from tinyopt.compiler import apply_pipeline, parse
    from tinyopt.dialects import loop
    from tinyopt.passes.autotune.space import KernelSpace

    module = apply_pipeline(
        parse(attention(1, 2, 256, 128, "bf16")), "decompose,fuse,flash-attention"
    )
    (kernel,) = loop.kernels(module)
    space = KernelSpace(kernel)
    assert (space.rule, space.selector) == ("attention_wgmma", "attn")
    assert space.choices == ("auto", "sync", "wgmma", "simt", "none")
