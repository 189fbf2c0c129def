"""Record (engine.record): the value semantics the fast commands rely on instead of dataclasses."""

from __future__ import annotations

import pytest

from engine.config import HarnessConfig, RulesConfig
from engine.rules.authority.holds import Hold


def test_replace_changes_only_the_named_fields() -> None:
    base = HarnessConfig(retention_days=7)
    changed = base.replace(rules=RulesConfig(enforce=("r",)))
    assert changed.rules.enforce == ("r",) and changed.retention_days == 7
    assert base.rules.enforce == ()  # the original is untouched
    assert changed == HarnessConfig(retention_days=7, rules=RulesConfig(enforce=("r",)))


def test_replace_refuses_an_unknown_field() -> None:
    with pytest.raises(TypeError, match="'retention'"):
        HarnessConfig().replace(retention=3)


def test_defaults_are_not_shared_between_instances() -> None:
    # A dict default must be per instance, as a dataclass default_factory made it.
    assert RulesConfig().actions is not RulesConfig().actions


def test_records_of_different_classes_never_compare_equal() -> None:
    hold = Hold(1, "h01", None, "r", "x", 1, 1, 0, "why")
    assert hold == Hold(1, "h01", None, "r", "x", 1, 1, 0, "why")
    assert hold != Hold(2, "h01", None, "r", "x", 1, 1, 0, "why")
    assert hold != (1, "h01", None, "r", "x", 1, 1, 0, "why")
    assert hash(hold) == hash(Hold(1, "h01", None, "r", "x", 1, 1, 0, "why"))
