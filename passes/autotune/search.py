"""Search over knob decisions: SP-MCTS, random search and exhaustive enumeration.

The searches see only a `Space` and the measured times of configurations, so they are tested
on synthetic reward functions and driven by the GPU measurer alike.
"""

from __future__ import annotations

import itertools
import math
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

Value = int | str
Config = dict[str, Value]


class Refused:
    """The answer for a configuration the schedule rules refuse: it never reaches the GPU,
    so it is recorded but does not count as a trial."""

    def __repr__(self) -> str:
        return "REFUSED"


REFUSED = Refused()

Measure = Callable[[list[Config]], list[float | None | Refused]]
"""Measures a batch of complete configurations: a time in ms each, None when one failed, or
REFUSED when the rules refuse it."""

REFUSALS_PER_TRIAL = 10
"""A search stops after this many refused configurations per trial of its budget."""


class Space(Protocol):
    """A tree of knob decisions."""

    def next(self, partial: Config) -> tuple[str, Sequence[Value]] | None:
        """Returns the next knob to decide and its values (prior order), or None when done."""
        ...


def key(config: Config) -> tuple[tuple[str, Value], ...]:
    """Returns a hashable, order-independent form of a configuration."""
    return tuple(sorted(config.items()))


def default_config(space: Space) -> Config:
    """Returns the configuration that takes the first (prior) value of every decision."""
    config: Config = {}
    while (decision := space.next(config)) is not None:
        config[decision[0]] = decision[1][0]
    return config


@dataclass(frozen=True)
class Budget:
    """When a search stops: after `trials` measurements, `seconds`, or `patience` trials
    without a better time (each limit off when None), or when the space is exhausted."""

    trials: int = 64
    seconds: float | None = None
    patience: int | None = None


@dataclass
class SearchResult:
    """Every configuration measured (a trial), in order, with its time (None: failed), and
    the configurations the rules refused."""

    history: list[tuple[Config, float | None]] = field(default_factory=list)
    refused: list[Config] = field(default_factory=list)

    @property
    def best(self) -> tuple[Config, float] | None:
        """The fastest configuration that did not fail, with its time."""
        timed = [(c, ms) for c, ms in self.history if ms is not None]
        return min(timed, key=lambda t: t[1]) if timed else None

    def best_after(self, trials: int) -> float | None:
        """The best time among the first `trials` measurements."""
        times = [ms for _, ms in self.history[:trials] if ms is not None]
        return min(times) if times else None


class _Run:
    """The bookkeeping every search shares: the budget, the measured set, batching."""

    def __init__(self, measure: Measure, budget: Budget, batch: int) -> None:
        self.measure, self.budget, self.batch = measure, budget, max(1, batch)
        self.result = SearchResult()
        self.known: dict[tuple, float | None] = {}
        self.start = time.monotonic()
        self.since_best = 0

    def left(self) -> int:
        """Returns how many more trials the budget allows now (0: stop)."""
        b = self.budget
        if b.seconds is not None and time.monotonic() - self.start >= b.seconds:
            return 0
        if b.patience is not None and self.since_best >= b.patience:
            return 0
        if len(self.result.refused) >= REFUSALS_PER_TRIAL * b.trials:
            return 0
        return max(0, min(self.batch, b.trials - len(self.result.history)))

    def run(self, configs: list[Config]) -> list[float | None]:
        """Measures the configurations not measured before; returns every one's time."""
        fresh = list({key(c): c for c in configs if key(c) not in self.known}.values())
        if fresh:
            for config, ms in zip(fresh, self.measure(fresh), strict=True):
                if isinstance(ms, Refused):
                    self.known[key(config)] = None
                    self.result.refused.append(config)
                    continue
                best = self.result.best
                self.known[key(config)] = ms
                self.result.history.append((config, ms))
                improved = ms is not None and (best is None or ms < best[1])
                self.since_best = 0 if improved else self.since_best + 1
        return [self.known[key(c)] for c in configs]


def leaves(space: Space, partial: Config | None = None) -> Iterator[Config]:
    """Yields every complete configuration below `partial`, in prior order (depth first)."""
    partial = partial or {}
    decision = space.next(partial)
    if decision is None:
        yield partial
        return
    for value in decision[1]:
        yield from leaves(space, {**partial, decision[0]: value})


def space_size(space: Space, limit: int = 10**6) -> int:
    """Returns the number of complete configurations, counting no further than `limit`."""
    return sum(1 for _ in itertools.islice(leaves(space), limit))


def exhaustive(space: Space, measure: Measure, budget: Budget, batch: int = 1) -> SearchResult:
    """Measures every configuration in prior order (depth first) until the budget ends."""
    state = _Run(measure, budget, batch)
    pending = leaves(space)
    while (n := state.left()) and (configs := [c for _, c in zip(range(n), pending)]):
        state.run(configs)
    return state.result


def random_search(
    space: Space, measure: Measure, budget: Budget, batch: int = 1, seed: int = 0
) -> SearchResult:
    """Measures the default configuration, then random distinct ones (each decision uniform)."""
    state, rng = _Run(measure, budget, batch), random.Random(seed)
    state.run([default_config(space)])
    draws = _draws(space, rng, state.known)
    while (n := state.left()) and (configs := [c for _, c in zip(range(n), draws)]):
        state.run(configs)
    return state.result


def _draws(space: Space, rng: random.Random, known: dict) -> Iterator[Config]:
    """Yields random configurations not in `known` (nor yielded before): sampled while that
    finds new ones quickly, then from a shuffled enumeration of the rest (a small space)."""
    taken = set(known)
    misses = 0
    while misses < 200:
        config = _complete(space, {}, rng, 0.0)
        if key(config) in taken:
            misses += 1
            continue
        misses = 0
        taken.add(key(config))
        yield config
    rest = [c for c in leaves(space) if key(c) not in taken and key(c) not in known]
    rng.shuffle(rest)
    yield from rest


def _complete(space: Space, partial: Config, rng: random.Random, greed: float) -> Config:
    """Completes a configuration: each decision takes the prior's value with probability
    `greed` and a uniformly random one otherwise."""
    config = dict(partial)
    while (decision := space.next(config)) is not None:
        name, values = decision
        config[name] = values[0] if rng.random() < greed else rng.choice(list(values))
    return config


class _Node:
    """A node of the search tree: a partial configuration."""

    def __init__(self, config: Config, space: Space) -> None:
        self.config = config
        decision = space.next(config)
        self.knob = decision[0] if decision else None
        self.untried = list(decision[1]) if decision else []
        self.children: list[_Node] = []
        self.visits = 0
        self.best_ms = math.inf
        self.closed = False

    def update_closed(self) -> None:
        """A node is closed when nothing below it is left to measure."""
        self.closed = self.knob is None or (
            not self.untried and all(c.closed for c in self.children)
        )


def mcts(
    space: Space,
    measure: Measure,
    budget: Budget,
    batch: int = 1,
    seed: int = 0,
    exploration: float = 0.2,
    greed: float = 0.5,
) -> SearchResult:
    """Single-player Monte-Carlo tree search over the knob decisions (docs/tuning.md, "Search").

    A rollout takes each remaining decision's prior value with probability `greed`.
    """
    state, rng = _Run(measure, budget, batch), random.Random(seed)
    root = _Node({}, space)
    state.run([default_config(space)])
    while (n := state.left()) and not root.closed:
        picks: list[tuple[list[_Node], Config]] = []
        for _ in range(n):
            if (pick := _select(root, space, state, rng, exploration, greed, picks)) is None:
                break
            picks.append(pick)
        if not picks:
            break
        times = state.run([config for _, config in picks])
        for (path, _), ms in zip(picks, times, strict=True):
            for node in path:
                node.best_ms = min(node.best_ms, math.inf if ms is None else ms)
            for node in reversed(path):
                node.update_closed()
    return state.result


def _select(
    root: _Node,
    space: Space,
    state: _Run,
    rng: random.Random,
    exploration: float,
    greed: float,
    picks: list[tuple[list[_Node], Config]],
) -> tuple[list[_Node], Config] | None:
    """Descends to a new leaf and returns its path and a fresh configuration below it."""
    taken = {key(config) for _, config in picks} | set(state.known)
    best = state.result.best
    best_ms = best[1] if best else math.inf
    for _ in range(1000):
        if root.closed:
            return None
        path, node = [root], root
        while not node.untried and node.knob is not None:
            open_children = [c for c in node.children if not c.closed]
            if not open_children:
                node.update_closed()
                break
            node = max(open_children, key=lambda c: _ucb(c, node.visits, best_ms, exploration))
            path.append(node)
        else:
            if node.untried:
                child = _Node({**node.config, node.knob: node.untried.pop(0)}, space)
                node.children.append(child)
                node, path = child, [*path, child]
            config = _rollout(node, space, taken, rng, greed)
            if config is not None:
                for visited in path:
                    visited.visits += 1
                return path, config
            if node.knob is None:  # a measured leaf: credit its time (it closes below)
                ms = state.known.get(key(node.config))
                for visited in path:
                    visited.best_ms = min(visited.best_ms, ms if ms is not None else math.inf)
            for visited in reversed(path):
                visited.update_closed()
    return None


def _rollout(
    node: _Node, space: Space, taken: set, rng: random.Random, greed: float
) -> Config | None:
    """Completes `node` leaning on the prior; None when no untaken completion was found."""
    for _ in range(20 if node.knob is not None else 1):
        config = _complete(space, node.config, rng, greed)
        if key(config) not in taken:
            return config
    return None


def _ucb(child: _Node, parent_visits: int, best_ms: float, exploration: float) -> float:
    """The child's best reward (best time seen / best time below it) plus exploration."""
    reward = best_ms / child.best_ms if math.isfinite(child.best_ms) else 0.0
    return reward + exploration * math.sqrt(math.log(max(parent_visits, 1)) / max(child.visits, 1))


SEARCHES: dict[str, Callable[..., SearchResult]] = {
    "mcts": mcts,
    "random": random_search,
    "exhaustive": exhaustive,
}
"""The search methods by the names `tinyopt tune --method` takes."""
