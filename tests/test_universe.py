"""The universe tinyopt registers with xDSL: its names, its getters, and no clash with xDSL."""

import pytest
from xdsl.universe import XDSL_UNIVERSE, Universe

from tinyopt.universe import TINYOPT_UNIVERSE

REGISTRIES = ("all_dialects", "all_passes", "all_targets", "all_frontends")


@pytest.mark.parametrize("registry", REGISTRIES)
def test_no_name_clashes_with_xdsl(registry: str) -> None:
    """A name also registered by xDSL would make every xdsl-opt in the environment fail."""
    ours = set(getattr(TINYOPT_UNIVERSE, registry))
    theirs = set(getattr(XDSL_UNIVERSE, registry))
    assert not ours & theirs


def test_entry_point_is_discovered() -> None:
    """The `xdsl.universe` entry point makes tinyopt's names part of xDSL's multiverse."""
    multiverse = Universe.get_multiverse()
    for registry in REGISTRIES:
        assert set(getattr(TINYOPT_UNIVERSE, registry)) <= set(getattr(multiverse, registry))


def test_exported_names() -> None:
    """The universe exports tinyopt's three dialects, its passes and the cuda target."""
    assert set(TINYOPT_UNIVERSE.all_dialects) == {"graph", "loop", "tile"}
    assert set(TINYOPT_UNIVERSE.all_passes) == {
        "decompose",
        "fuse",
        "online-softmax",
        "welford",
        "flash-attention",
        "check-assoc",
        "plan",
        "apply-tuned",
        "tile",
        "to-cuda",
    }
    assert set(TINYOPT_UNIVERSE.all_targets) == {"cuda"}


def test_getters_return_what_their_names_say() -> None:
    """Each getter imports its module and returns the dialect, pass or target of that name."""
    for name, get_dialect in TINYOPT_UNIVERSE.all_dialects.items():
        assert get_dialect().name == name
    for name, get_pass in TINYOPT_UNIVERSE.all_passes.items():
        assert get_pass().name == name
    for name, get_target in TINYOPT_UNIVERSE.all_targets.items():
        assert get_target().name == name
