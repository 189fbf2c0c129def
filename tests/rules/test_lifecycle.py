"""Shadow, cooldown and level decisions, all in journal time (``now`` = the row's ``at``)."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.config import RulesConfig
from engine.config_text import parse_config
from engine.errors import InputError
from engine.rules.authority.enforcement import Authority, parse_enforce
from engine.rules.authority.lifecycle import (
    ACTIVE,
    DISABLED,
    SHADOW,
    SUPPRESSED,
    Lifecycle,
    LifecycleState,
)
from engine.store.db import connect
from engine.store.migrations import migrate

H = 3_600_000
T0 = 1_780_000_000_000


@dataclass(frozen=True)
class R:
    name: str = "r"
    hash: str = "aaaa1111" * 8
    level: str = "notify"
    source_kind: str = "policy"
    cooldown_ms: int = 0


def auth(**kw: object) -> Authority:
    return Authority.from_rules_config(RulesConfig(**kw), "/cfg/harness.toml")  # type: ignore[arg-type]


def test_policy_rule_shadows_for_its_period_in_journal_time() -> None:
    lc = Lifecycle(auth(shadow_period_ms=72 * H))
    rule = R()
    first = lc.decide_fire(rule, "h1", seq=1, now_ms=T0)
    assert first.status == SHADOW
    assert any("shadow until" in r for r in first.reasons)
    assert lc.decide_fire(rule, "h1", seq=2, now_ms=T0 + 72 * H - 1).status == SHADOW
    served = lc.decide_fire(rule, "h1", seq=3, now_ms=T0 + 72 * H)
    assert served.status == ACTIVE
    assert any("served shadow" in r for r in served.reasons)


def test_starter_rule_skips_shadow_but_an_override_of_it_shadows() -> None:
    lc = Lifecycle(auth())
    starter = R(name="restart_same_error", source_kind="starter")
    d = lc.decide_fire(starter, "h1", 1, T0)
    assert d.status == ACTIVE and "starter rule: skips shadow" in d.reasons
    override = replace(starter, source_kind="policy")  # same name and even the same hash
    assert lc.decide_fire(override, "h2", 2, T0 + 100 * H).status == SHADOW


def test_changed_hash_shadows_again_even_when_enforced_and_revert_is_not_punished() -> None:
    lc = Lifecycle(auth(enforce=("r",), shadow_period_ms=10 * H))
    v1 = R(level="hold")
    v2 = replace(v1, hash="bbbb2222" * 8)
    assert lc.decide_fire(v1, "h", 1, T0).status == SHADOW
    active = lc.decide_fire(v1, "h", 2, T0 + 10 * H)
    assert active.status == ACTIVE and active.effective_level == "hold"
    changed = lc.decide_fire(v2, "h", 3, T0 + 11 * H)
    assert changed.status == SHADOW and changed.effective_level == "hold"
    back = lc.decide_fire(v1, "h", 4, T0 + 12 * H)
    assert back.status == ACTIVE, back.reasons


def test_rename_keeping_the_text_starts_a_new_shadow() -> None:
    lc = Lifecycle(auth(shadow_period_ms=H))
    lc.decide_fire(R(name="a"), "h", 1, T0)
    assert lc.decide_fire(R(name="a"), "h", 2, T0 + 2 * H).status == ACTIVE
    assert lc.decide_fire(R(name="b"), "h", 3, T0 + 3 * H).status == SHADOW


def test_cooldown_suppresses_per_target_and_counts() -> None:
    lc = Lifecycle(auth())
    rule = R(source_kind="starter", cooldown_ms=30 * 60_000)
    assert lc.decide_fire(rule, "h1", 1, T0).status == ACTIVE
    s1 = lc.decide_fire(rule, "h1", 2, T0 + 60_000)
    s2 = lc.decide_fire(rule, "h1", 3, T0 + 29 * 60_000)
    assert (s1.status, s2.status) == (SUPPRESSED, SUPPRESSED)
    assert "suppressed 2 since the last fire" in s2.reasons[0]
    assert lc.decide_fire(rule, "h2", 4, T0 + 29 * 60_000).status == ACTIVE  # other target
    again = lc.decide_fire(rule, "h1", 5, T0 + 30 * 60_000)
    assert again.status == ACTIVE
    assert "suppressed 2 since the last fire" in again.reasons
    # the count restarts after a fire; the total keeps growing
    lc.decide_fire(rule, "h1", 6, T0 + 31 * 60_000)
    cool = lc.state.cooldowns[("r", "h1")]
    assert (cool.suppressed, cool.suppressed_total) == (1, 3)


def test_cooldown_zero_never_suppresses() -> None:
    lc = Lifecycle(auth())
    rule = R(source_kind="starter")
    assert all(lc.decide_fire(rule, "h", i, T0).status == ACTIVE for i in range(5))


@pytest.mark.parametrize("level", ["hold", "stop"])
def test_hold_and_stop_are_capped_at_notify_unless_enforced(level: str) -> None:
    rule = R(level=level, source_kind="starter")
    capped = Lifecycle(auth()).decide_fire(rule, "h", 1, T0)
    assert capped.effective_level == "notify"
    assert any(
        "capped at notify" in r and "not in [memory.rules] enforce" in r for r in capped.reasons
    )
    enforced = Lifecycle(auth(enforce=("r",))).decide_fire(rule, "h", 1, T0)
    assert enforced.effective_level == level
    assert any(f"rule_{level}" in r for r in enforced.reasons)


def test_pinned_enforce_entry_grants_only_that_version() -> None:
    rule = R(level="stop", source_kind="starter", hash="abcdef12" + "0" * 56)
    ok = Lifecycle(auth(enforce=("r@ABCDEF",))).decide_fire(rule, "h", 1, T0)
    assert ok.effective_level == "stop"
    other = replace(rule, hash="ffff" + "0" * 60)
    lost = Lifecycle(auth(enforce=("r@abcdef",))).decide_fire(other, "h", 1, T0)
    assert lost.effective_level == "notify"
    assert any("re-pin" in r for r in lost.reasons)


def test_bad_enforce_entries_grant_nothing_and_are_reported() -> None:
    good, problems = parse_enforce(("r@ab", "r@", " r", "r@xyz1", "*", "ok", "ok@1234"))
    assert [e.raw for e in good] == ["ok", "ok@1234"]
    assert len(problems) == 5


def test_disable_silences_by_name() -> None:
    lc = Lifecycle(auth(disable=("r",)))
    d = lc.decide_fire(R(source_kind="starter"), "h", 1, T0)
    assert d.status == DISABLED and not d.acts


def test_notify_action_reason_depends_on_config() -> None:
    rule = R(source_kind="starter")
    plain = Lifecycle(auth()).decide_fire(rule, "h", 1, T0)
    assert "no notify action configured: recorded only" in plain.reasons
    act = Lifecycle(auth(actions={"notify": ("echo", "{rule}")})).decide_fire(rule, "h", 1, T0)
    assert "notify action configured in [memory.rules.actions]" in act.reasons


def test_state_survives_restart_and_gives_the_same_decisions(tmp_path: Path) -> None:
    rules = [R(cooldown_ms=5 * 60_000), R(name="s", source_kind="starter", cooldown_ms=60_000)]
    times = [T0 + i * 45_000 for i in range(200)]

    def run(split: int | None) -> list[tuple[str, str]]:
        conn = connect(tmp_path / f"s{split}.db")
        lc = Lifecycle(auth(shadow_period_ms=H))
        out = []
        for i, now in enumerate(times):
            if split is not None and i == split:
                conn.execute("BEGIN")
                lc.flush(conn)
                conn.execute("COMMIT")
                lc = Lifecycle(auth(shadow_period_ms=H), LifecycleState.load(conn))
            for rule in rules:
                d = lc.decide_fire(rule, f"h{i % 3}", i, now)
                out.append((d.status, d.effective_level))
        return out

    continuous = run(None)
    assert {s for s, _ in continuous} == {SHADOW, ACTIVE, SUPPRESSED}
    assert run(77) == continuous


def test_reload_keeps_the_last_good_config(tmp_path: Path) -> None:
    lc = Lifecycle(auth(enforce=("r",)))
    good = parse_config('[memory.rules]\nenforce = ["x"]\n')
    assert lc.reload(lambda: good) is None
    assert [e.name for e in lc.authority.enforce] == ["x"]

    def broken() -> object:
        return parse_config('[memory.rules]\nenforce = "x"\n', "bad.toml")

    err = lc.reload(broken)
    assert err is not None and "bad.toml" in err and "enforce" in err
    assert [e.name for e in lc.authority.enforce] == ["x"]
    with pytest.raises(InputError):
        broken()


def test_live_evaluator_follows_config_edits_and_keeps_the_last_good_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine.config import load_config
    from engine.rules.authority.lifecycle_run import open_live
    from tests.rules._lifecycle_util import MIN, Journal, starter

    cfg_path = tmp_path / "harness.toml"
    monkeypatch.setenv("HARNESS_CONFIG", str(cfg_path))
    cfg_path.write_text("[memory.rules]\nenforce = []\n")
    conn = connect(tmp_path / "s.db")
    j = Journal(conn)
    evaluator, policy = open_live(conn, starter(), load_config())

    def burst(harness: str) -> str:
        j.advance(5 * MIN)
        j.restarts(harness, 3)
        evaluator.run_until_idle()
        row = conn.execute(
            "SELECT effective_level FROM rule_fires WHERE target = ? AND status = 'fired'",
            (harness,),
        ).fetchone()
        return str(row[0])

    assert burst("a") == "notify"
    cfg_path.write_text('[memory.rules]\nenforce = ["restart_same_error"]\n')
    assert burst("b") == "hold"
    cfg_path.write_text('[memory.rules]\nenforce = "restart_same_error"\n')  # broken edit
    assert burst("c") == "hold"  # last good config kept
    assert not policy.needs_rebuild
    cfg_path.write_text('[memory.rules]\ndisable = ["restart_same_error"]\n')
    j.advance(MIN)
    evaluator.run_until_idle()
    assert policy.needs_rebuild
    rebuilt, _ = open_live(conn, starter(), load_config())
    assert [cr.rule.name for cr in rebuilt.rules] == []


@settings(max_examples=40, deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 2), st.integers(0, 40 * 60_000)),
        min_size=1,
        max_size=60,
    ),
    split=st.integers(0, 60),
    period_h=st.integers(0, 3),
)
def test_decisions_are_a_function_of_the_rows_whatever_the_restarts(
    steps: list[tuple[int, int, int]], split: int, period_h: int
) -> None:
    """Any sequence of matches, persisted and reloaded at any point, decides the same."""
    rules = [
        R(name="p", cooldown_ms=10 * 60_000),
        R(name="q", level="hold", cooldown_ms=0),
        R(name="s", source_kind="starter", level="stop", cooldown_ms=5 * 60_000),
        R(name="p", hash="cccc3333" * 8, cooldown_ms=10 * 60_000),
    ]
    authority = auth(enforce=("q", "s"), shadow_period_ms=period_h * H)

    def run(cut: int | None) -> list[object]:
        conn = sqlite3.connect(":memory:", isolation_level=None)
        migrate(conn)
        lc = Lifecycle(authority)
        now = T0
        out: list[object] = []
        for i, (r, target, gap) in enumerate(steps):
            if i == cut:
                lc.flush(conn)
                lc = Lifecycle(authority, LifecycleState.load(conn))
            now += gap
            out.append(lc.decide_fire(rules[r], f"t{target}", i, now))
        return out

    assert run(split) == run(None)
