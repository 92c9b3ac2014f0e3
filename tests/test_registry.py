"""The registry is the one source of which rule reads which knob: docs/knobs.md follows it."""

from dataclasses import fields
from pathlib import Path

from tinyopt.passes.tile.knobs import Knobs
from tinyopt.passes.tile.registry import RULE_TYPES

KNOBS_DOC = Path(__file__).resolve().parents[1] / "docs" / "knobs.md"


def _read_by(knob: str) -> set[str]:
    if knob == "schedule":  # `auto` walks every rule
        return {rule.name for rule in RULE_TYPES}
    return {
        rule.name
        for rule in RULE_TYPES
        if knob in (name for name, _ in rule.read_knobs())
        or (rule.selector is not None and rule.selector[0] == knob)
    }


def test_knob_table_lists_the_rules_that_read_each_knob() -> None:
    rows = {}
    for line in KNOBS_DOC.read_text().splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) == 7 and cells[1].startswith("`") and cells[1] != "`pdl`":
            rows[cells[1].strip("`")] = {r.strip() for r in cells[4].split(",") if r.strip()}
    assert set(rows) == {f.name for f in fields(Knobs)}
    for knob, listed in rows.items():
        assert listed == _read_by(knob), knob


def test_rule_names_are_unique_and_the_rule_of_last_resort_is_last() -> None:
    names = [rule.name for rule in RULE_TYPES]
    assert len(set(names)) == len(names)
    assert RULE_TYPES[-1].name == "sequential", "the rule of last resort comes last"
