"""Who may act: the operator's enforce list, the level a fire acts at, and shadow.

The seed's authority line: a rule may hold or stop a harness only when the
operator names it in ``[memory.rules] enforce`` of the global ``harness.toml``
(by name, or ``name@<hash prefix>`` to pin one version); anything else is
capped at notify, with the reason. :class:`Authority` is that list as read
from :class:`engine.config.RulesConfig` only, :func:`decide_level` the cap,
:func:`shadow_decision` whether a new or changed version still only records.
Pure functions of their inputs, so live evaluation and a backtest decide alike.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from engine.config import HarnessConfig, RulesConfig
from engine.durations import format_duration_ms
from engine.timefmt import iso_ms
from engine.vocab import ANNOTATE, CAP_LEVEL, ENFORCED_LEVELS, HOLD, LEVELS, NOTIFY, STOP

MIN_PIN_PREFIX = 4
_PIN = re.compile(r"^([A-Za-z0-9._:-]{1,256})@([0-9a-fA-F]+)$")
_NAME = re.compile(r"^[A-Za-z0-9._:-]{1,256}$")


class RuleLike(Protocol):
    """The parts of :class:`engine.rules.language.model.Rule` a decision reads."""

    @property
    def name(self) -> str: ...
    @property
    def hash(self) -> str: ...
    @property
    def level(self) -> str: ...
    @property
    def source_kind(self) -> str: ...
    @property
    def cooldown_ms(self) -> int: ...


@dataclass(frozen=True, slots=True)
class EnforceEntry:
    """One ``enforce`` entry: a bare name, or ``name@<hash prefix>`` pinning one version."""

    raw: str
    name: str
    prefix: str | None = None

    def matches_name(self, name: str) -> bool:
        return self.name == name


def parse_enforce(entries: tuple[str, ...]) -> tuple[tuple[EnforceEntry, ...], tuple[str, ...]]:
    """Split entries into valid ones and problems (invalid entries grant nothing)."""
    good: list[EnforceEntry] = []
    problems: list[str] = []
    for raw in entries:
        text = raw.strip()
        pin = _PIN.match(text)
        if pin:
            prefix = pin.group(2).lower()
            if len(prefix) < MIN_PIN_PREFIX:
                problems.append(
                    f"enforce entry {raw!r}: hash prefix must have at least "
                    f"{MIN_PIN_PREFIX} hex digits; entry ignored"
                )
                continue
            good.append(EnforceEntry(raw, pin.group(1), prefix))
        elif _NAME.match(text) and text == raw:
            good.append(EnforceEntry(raw, text))
        else:
            problems.append(
                f"enforce entry {raw!r} is neither a rule name nor name@<hex hash prefix>; "
                "entry ignored"
            )
    return tuple(good), tuple(problems)


@dataclass(frozen=True, slots=True)
class Authority:
    """What the operator's global config grants: enforce, disable, shadow period, actions."""

    enforce: tuple[EnforceEntry, ...] = ()
    disable: frozenset[str] = frozenset()
    shadow_period_ms: int = 72 * 3_600_000
    actions: tuple[tuple[str, tuple[str, ...]], ...] = ()
    source: str = "global harness.toml"
    problems: tuple[str, ...] = ()

    @classmethod
    def from_rules_config(cls, rules: RulesConfig, source: Path | str | None = None) -> Authority:
        enforce, problems = parse_enforce(rules.enforce)
        return cls(
            enforce=enforce,
            disable=frozenset(rules.disable),
            shadow_period_ms=rules.shadow_period_ms,
            actions=tuple(sorted(rules.actions.items())),
            source=str(source) if source else "global harness.toml (absent)",
            problems=problems,
        )

    @classmethod
    def from_config(cls, config: HarnessConfig) -> Authority:
        return cls.from_rules_config(config.rules, config.source)

    def action(self, name: str) -> tuple[str, ...] | None:
        return dict(self.actions).get(name)

    def enforcement(self, name: str, hash_: str) -> tuple[bool, str]:
        """Is this (name, hash) enforced, and why (or why not)?"""
        entries = [e for e in self.enforce if e.matches_name(name)]
        if not entries:
            return False, f"`{name}` is not in [memory.rules] enforce of {self.source}"
        for entry in entries:
            if entry.prefix is None:
                return True, f"`{name}` is in [memory.rules] enforce of {self.source}"
            if hash_.lower().startswith(entry.prefix):
                return True, (
                    f"`{name}` is enforced by the pin `{entry.raw}` in [memory.rules] "
                    f"enforce of {self.source}"
                )
        pins = ", ".join(f"`{e.raw}`" for e in entries)
        return False, (
            f"[memory.rules] enforce pins {pins} but this version's hash is {hash_[:12]}; "
            "re-pin it to enforce"
        )


def decide_level(rule: RuleLike, authority: Authority) -> tuple[str, list[str]]:
    """The level a rule may act at under ``authority`` and the reasons for it."""
    level = rule.level if rule.level in LEVELS else ANNOTATE
    reasons: list[str] = []
    if rule.level not in LEVELS:
        reasons.append(f"unknown level {rule.level!r} treated as {ANNOTATE}")
    if level in ENFORCED_LEVELS:
        enforced, why = authority.enforcement(rule.name, rule.hash)
        if enforced:
            reasons.append(f"level {level}: {why}")
        else:
            reasons.append(f"level {level} capped at {CAP_LEVEL}: {why}")
            level = CAP_LEVEL
    else:
        reasons.append(f"level {level}")
    if level in (NOTIFY, HOLD):
        if authority.action(NOTIFY):
            reasons.append("notify action configured in [memory.rules.actions]")
        else:
            reasons.append("no notify action configured: recorded only")
    if level == HOLD:
        reasons.append("rule_hold: new runs of the target are refused until released")
    if level == STOP:
        reasons.append(
            "rule_stop: "
            + (
                "stop action configured"
                if authority.action(STOP)
                else "no stop action configured: recorded only"
            )
        )
    return level, reasons


def shadow_decision(
    rule: RuleLike, first_seen_at: int | None, now_ms: int, period_ms: int
) -> tuple[bool, str]:
    """Is this version still in shadow at ``now_ms``? Starter rules never are."""
    if rule.source_kind == "starter":
        return False, "starter rule: skips shadow"
    seen = now_ms if first_seen_at is None else first_seen_at
    until = seen + period_ms
    period = format_duration_ms(period_ms)
    if now_ms < until:
        return True, (
            f"shadow until {iso_ms(until)}: version {rule.hash[:12]} of `{rule.name}` first "
            f"evaluated at {iso_ms(seen)}, shadow_period {period}; shadow fires never act"
        )
    return False, (
        f"served shadow: version {rule.hash[:12]} first evaluated at {iso_ms(seen)}, "
        f"shadow_period {period} ended {iso_ms(until)}"
    )
