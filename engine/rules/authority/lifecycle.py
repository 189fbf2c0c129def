"""Whether and how a fire acts: disable, cooldown, shadow and the enforce list.

The seed's authority line lives here. A rule may hold or stop a harness only
when the operator names it in ``[memory.rules] enforce`` of the global
``harness.toml``; anything else is capped at notify and the reason is written
into the fire row. Nothing a rule file, a policy repo, a project directory or
an environment variable says can change that, because this module takes the
enforce list from :class:`engine.config.RulesConfig` only.

Every decision is made in journal time (``now`` is the evaluated row's
``at``), from state that is itself a function of the journal (first-seen time
per rule version, last fire per (rule, target)), so a backtest that starts
from the same state reaches the same decisions as the live evaluator.

:class:`Lifecycle` judges each match (``decide_fire``),
:func:`~engine.rules.authority.enforcement.decide_level` caps its level, and
``flush`` persists the state it changed inside the evaluator's transaction;
:class:`LifecycleHooks` plugs all of it (with holds and actions) into the
evaluator.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.durations import format_duration_ms
from engine.rules.authority.actions import ActionRequest, ActionRunner, action_for, render_message
from engine.rules.authority.enforcement import Authority, RuleLike, decide_level, shadow_decision
from engine.rules.authority.holds import (
    Hold,
    SimulatedHolds,
    active_holds,
    create_hold,
    reevaluate_on_tick,
    release_hold,
)
from engine.rules.authority.lease import Lease, LeaseLost
from engine.rules.authority.stops import record_stop
from engine.rules.evaluation.hooks import FireDecision, RowView
from engine.timefmt import iso_ms
from engine.vocab import (
    ACTION_FOR_LEVEL,
    ANNOTATE,
    DISABLED,
    FIRED,
    HOLD,
    SHADOW,
    STOP,
    SUPPRESSED,
)

if TYPE_CHECKING:
    from engine.rules.evaluation.fires import Fire
    from engine.rules.language.model import CompiledRule, Rule

ACTIVE = FIRED  # the fire acts; kept as a name for callers that say "active"


@dataclass(slots=True)
class Cooldown:
    last_fire_at: int
    last_fire_seq: int
    suppressed: int = 0
    suppressed_total: int = 0


@dataclass(slots=True)
class LifecycleState:
    """Mutable journal-derived state; ``dirty_*`` say what ``flush`` must write."""

    first_seen: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)
    cooldowns: dict[tuple[str, str], Cooldown] = field(default_factory=dict)
    dirty_seen: set[tuple[str, str]] = field(default_factory=set)
    dirty_cool: set[tuple[str, str]] = field(default_factory=set)

    @classmethod
    def load(cls, conn: sqlite3.Connection) -> LifecycleState:
        state = cls()
        for name, hash_, seq, at in conn.execute(
            "SELECT name, hash, first_seen_seq, first_seen_at FROM rule_shadow"
        ):
            state.first_seen[(name, hash_)] = (int(seq), int(at))
        for rule, target, at, seq, sup, total in conn.execute(
            "SELECT rule, target, last_fire_at, last_fire_seq, suppressed, suppressed_total "
            "FROM rule_cooldowns"
        ):
            state.cooldowns[(rule, target)] = Cooldown(int(at), int(seq), int(sup), int(total))
        return state

    def flush(self, conn: sqlite3.Connection) -> None:
        """Write changed entries; call inside the transaction that stores the fires."""
        for key in self.dirty_seen:
            seq, at = self.first_seen[key]
            conn.execute(
                "INSERT OR IGNORE INTO rule_shadow (name, hash, first_seen_seq, first_seen_at) "
                "VALUES (?, ?, ?, ?)",
                (key[0], key[1], seq, at),
            )
        for key in self.dirty_cool:
            c = self.cooldowns[key]
            conn.execute(
                "INSERT INTO rule_cooldowns (rule, target, last_fire_at, last_fire_seq, "
                "suppressed, suppressed_total) VALUES (?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (rule, target) DO UPDATE SET last_fire_at = excluded.last_fire_at, "
                "last_fire_seq = excluded.last_fire_seq, suppressed = excluded.suppressed, "
                "suppressed_total = excluded.suppressed_total",
                (key[0], key[1], c.last_fire_at, c.last_fire_seq, c.suppressed, c.suppressed_total),
            )
        self.dirty_seen.clear()
        self.dirty_cool.clear()


class Lifecycle:
    """The rule lifecycle: one instance per evaluator (live) or per backtest (fresh state)."""

    def __init__(self, authority: Authority, state: LifecycleState | None = None) -> None:
        self.authority = authority
        self.state = state or LifecycleState()
        self.config_error: str | None = None
        #: Reason texts that depend only on the rule version, the authority and (for
        #: shadow) its first-seen time and which side of the period ``now`` is on:
        #: formatted once, not on every fire (see ``_level`` and ``_shadow``).
        self._texts: dict[tuple[Any, ...], Any] = {}
        self._texts_for: Authority | None = None

    # -- configuration ---------------------------------------------------------------
    def reload(self, load: object = None) -> str | None:
        """Re-read the global config; on error keep the last good one and return the error."""
        from engine.config import load_config
        from engine.errors import HarnessError

        try:
            config = load_config() if load is None else load()  # type: ignore[operator]
        except HarnessError as exc:
            self.config_error = str(exc)
            return self.config_error
        self.authority = Authority.from_config(config)
        self.config_error = None
        return None

    def is_disabled(self, name: str) -> bool:
        return name in self.authority.disable

    # -- shadow bookkeeping ----------------------------------------------------------
    def note_loaded(self, rule: RuleLike, seq: int, now_ms: int) -> None:
        """Record the first journal time this (name, hash) was evaluated (non-starters)."""
        if rule.source_kind == "starter":
            return
        key = (rule.name, rule.hash)
        if key not in self.state.first_seen:
            self.state.first_seen[key] = (seq, now_ms)
            self.state.dirty_seen.add(key)

    def shadow_until(self, rule: RuleLike) -> int | None:
        """Journal time the rule's current version leaves shadow (None: starter or unseen)."""
        if rule.source_kind == "starter":
            return None
        seen = self.state.first_seen.get((rule.name, rule.hash))
        return None if seen is None else seen[1] + self.authority.shadow_period_ms

    # -- the decision ---------------------------------------------------------------
    def decide_fire(self, rule: RuleLike, target: str, seq: int, now_ms: int) -> FireDecision:
        """Decide one match of ``rule`` on row ``seq`` at journal time ``now_ms``.

        Order: disable (silences), cooldown (suppresses, shadow or not, so the
        shadow log shows what would have acted), shadow, then the level cap.
        """
        if self.is_disabled(rule.name):
            return FireDecision(
                DISABLED,
                ANNOTATE,
                (f"`{rule.name}` is in [memory.rules] disable of {self.authority.source}",),
            )
        self.note_loaded(rule, seq, now_ms)
        key = (rule.name, target)
        cool = self.state.cooldowns.get(key)
        if (
            cool is not None
            and rule.cooldown_ms > 0
            and now_ms - cool.last_fire_at < (rule.cooldown_ms)
        ):
            cool.suppressed += 1
            cool.suppressed_total += 1
            self.state.dirty_cool.add(key)
            return FireDecision(
                SUPPRESSED,
                self._level(rule)[0],
                (
                    f"suppressed: within cooldown {format_duration_ms(rule.cooldown_ms)} of the "
                    f"fire at seq {cool.last_fire_seq} ({iso_ms(cool.last_fire_at)}) for "
                    f"target {target!r}; suppressed {cool.suppressed} since the last fire",
                ),
            )
        reasons: list[str] = []
        if cool is not None and cool.suppressed:
            reasons.append(f"suppressed {cool.suppressed} since the last fire")
        self.state.cooldowns[key] = Cooldown(now_ms, seq, 0, cool.suppressed_total if cool else 0)
        self.state.dirty_cool.add(key)
        first = self.state.first_seen.get((rule.name, rule.hash))
        in_shadow, why = self._shadow(rule, None if first is None else first[1], now_ms)
        reasons.append(why)
        level, level_reasons = self._level(rule)
        reasons.extend(level_reasons)
        return FireDecision(SHADOW if in_shadow else ACTIVE, level, tuple(reasons))

    def _remembered(self) -> dict[tuple[Any, ...], Any]:
        """The reason texts formatted under the current authority (forgotten when it changes)."""
        if self._texts_for is not self.authority:
            self._texts.clear()
            self._texts_for = self.authority
        return self._texts

    def _level(self, rule: RuleLike) -> tuple[str, tuple[str, ...]]:
        """:func:`decide_level` of this rule version under the current authority, remembered."""
        texts = self._remembered()
        key = ("level", rule.name, rule.hash, rule.level, rule.source_kind)
        found = texts.get(key)
        if found is None:
            level, reasons = decide_level(rule, self.authority)
            found = texts[key] = (level, tuple(reasons))
        return found

    def _shadow(self, rule: RuleLike, first_seen_at: int | None, now_ms: int) -> tuple[bool, str]:
        """:func:`shadow_decision`, remembered per version, first-seen time and side of the period.

        Its text depends on ``now_ms`` only through which side of the period
        end it falls on (and, before the version is seen, on ``now_ms`` itself,
        which is then not remembered).
        """
        period = self.authority.shadow_period_ms
        if first_seen_at is None or rule.source_kind == "starter":
            return shadow_decision(rule, first_seen_at, now_ms, period)
        inside = now_ms < first_seen_at + period
        texts = self._remembered()
        key = ("shadow", rule.name, rule.hash, first_seen_at, inside)
        found = texts.get(key)
        if found is None:
            found = texts[key] = shadow_decision(rule, first_seen_at, now_ms, period)
        return found

    def flush(self, conn: sqlite3.Connection) -> None:
        self.state.flush(conn)


# -- the evaluator's FireHooks -------------------------------------------------------


class LifecycleHooks:
    """:class:`~.evaluation.hooks.FireHooks` made of :class:`Lifecycle`, holds and actions.

    Live: ``before_commit`` creates holds in the fire's transaction and
    persists lifecycle state; ``after_commit`` runs actions (at most once).
    Backtest (``conn`` is None): nothing is written; hold spans are simulated
    from tick rows in :attr:`simulated`. Pass :meth:`host_factory` to the
    evaluator so tick re-evaluation uses the evaluator's own primitive host
    (positioned at the tick), and so a rebuilt evaluator reloads this state.
    """

    row_kinds: frozenset[str] | None = frozenset({"tick"})

    def __init__(
        self,
        lifecycle: Lifecycle,
        rules: Sequence[CompiledRule] = (),
        *,
        runner: ActionRunner | None = None,
        lease: Lease | None = None,
        conn: sqlite3.Connection | None = None,
    ) -> None:
        self.lifecycle = lifecycle
        self.rules: dict[str, CompiledRule] = {cr.rule.name: cr for cr in rules}
        self.runner = runner
        self.lease = lease
        self.conn = conn
        self.host: object | None = None
        self.simulated = SimulatedHolds()
        self.released: list[Hold] = []
        self._context: dict[tuple[str, int, str], tuple[str, str]] = {}
        #: (rule, seq) -> (harness, run) of stop fires: the run a stop names (run_stops).
        self._stop_runs: dict[tuple[str, int], tuple[str, str]] = {}
        #: Returns the current (last good) authority; polled once per committed batch.
        self.watch: Callable[[], Authority] | None = None
        #: Set when a reload changed ``disable``: the evaluator must be rebuilt
        #: (with the silenced rules left out), which :func:`.lease.serve` does.
        self.needs_rebuild = False
        #: (rules, state, authority) when every active rule was last noted (see ``_note_all``).
        self._noted_for: tuple[object, object, object] | None = None

    def host_factory(
        self, make: Callable[[Sequence[CompiledRule]], Any]
    ) -> Callable[[Sequence[CompiledRule]], Any]:
        """Wrap the evaluator's host factory: remember the host, reload persisted state."""

        def build(rules: Sequence[CompiledRule]) -> Any:
            self.host = make(rules)
            if self.conn is not None:
                self.lifecycle.state = LifecycleState.load(self.conn)
            self._context.clear()
            self._stop_runs.clear()
            return self.host

        return build

    def _noted(self) -> bool:
        """Whether every active rule's version is already noted (see :meth:`_note_all`)."""
        stamp = self._noted_for
        lifecycle = self.lifecycle
        return (
            stamp is not None
            and stamp[0] is self.rules
            and stamp[1] is lifecycle.state
            and stamp[2] is lifecycle.authority
        )

    def _note_all(self, seq: int, now_ms: int) -> None:
        """Note each active rule's first journal time; once done, nothing until something changes.

        After one pass every active rule's (name, hash) is in the state, and
        entries are never removed, so a later pass could only repeat no-ops
        until the rules, the state (reloaded from the store) or the authority
        (a changed ``disable``) is replaced: the pass remembers those objects.
        """
        if self._noted():
            return
        for cr in self.rules.values():
            if not self.lifecycle.is_disabled(cr.rule.name):
                self.lifecycle.note_loaded(cr.rule, seq, now_ms)
        self._noted_for = (self.rules, self.lifecycle.state, self.lifecycle.authority)

    def due(self) -> bool:
        """Whether :meth:`on_row` has anything to do on the next tick.

        Live (``conn`` set) it always has: stored holds, which other processes
        may release, are re-evaluated on every tick. In a backtest a tick
        matters only while a rule version is not yet noted (the shadow period
        starts at its first tick) or a simulated hold is open (a tick may
        release it); otherwise it changes nothing and the replay need not
        read it.
        """
        return self.conn is not None or bool(self.simulated.active) or not self._noted()

    def on_match(self, rule: Rule, target: str, row: RowView, now_ms: int) -> FireDecision:
        seq = int(row["seq"])  # type: ignore[call-overload]
        self._poll_config()  # a match is rare; decide under the newest valid config
        d = self.lifecycle.decide_fire(rule, target, seq, now_ms)
        if d.status == FIRED:
            harness = str(row.get("harness") or target or "")
            if d.effective_level in ACTION_FOR_LEVEL:
                self._context[(rule.name, seq, target)] = (
                    harness,
                    render_message(rule.message, row),
                )
            if d.effective_level == STOP and row.get("run") and harness:
                self._stop_runs[(rule.name, seq)] = (harness, str(row.get("run")))
            # Live: an active stored hold for the pair already covers this fire.
            if (
                d.effective_level == HOLD
                and harness
                and (
                    self.conn is None
                    or not any(h.rule == rule.name for h in active_holds(self.conn, harness))
                )
            ):
                self.simulated.on_fire(rule.name, harness, row)
        return d

    def on_row(self, row: RowView, conn: sqlite3.Connection | None) -> None:
        if row.get("kind") != "tick":
            return
        seq = int(row["seq"])  # type: ignore[call-overload]
        now = int(row["at"])  # type: ignore[call-overload]
        self._note_all(seq, now)
        if self.host is None:
            return
        if conn is not None:
            self.released.extend(reevaluate_on_tick(conn, row, self.rules, self.host))
        self.simulated.on_tick(row, self.rules, self.host)

    def before_commit(self, fires: Sequence[Fire], conn: sqlite3.Connection | None) -> None:
        if conn is None:
            return
        if self.lease is not None and not self.lease.still_held():
            raise LeaseLost("the evaluator lease was taken over; this batch is not committed")
        # Holds opened in this batch (and possibly already released by one of its
        # ticks) were tracked in memory until their fires had ids; store them now.
        fire_ids = {(f.rule, f.seq): f.id for f in fires if f.status == FIRED}
        for span in self.simulated.spans():
            message = next(
                (
                    m
                    for (r, seq, _), (_, m) in self._context.items()
                    if r == span.rule and seq == span.event_seq
                ),
                "",
            )
            hold = create_hold(
                conn,
                harness=span.harness,
                fire_id=fire_ids.get((span.rule, span.event_seq)),
                rule=span.rule,
                hash_=self.rules[span.rule].rule.hash if span.rule in self.rules else "",
                event_seq=span.event_seq,
                seq=span.start_seq,
                at=span.start_at,
                reason=f"rule_hold: rule `{span.rule}` fired at seq {span.event_seq}"
                + (f": {message}" if message else ""),
            )
            if span.end_seq is not None and span.end_at is not None:
                release_hold(
                    conn,
                    hold.id,
                    by="rule",
                    reason=span.end_reason or "rule no longer matches",
                    seq=span.end_seq,
                    at=span.end_at,
                )
        self.simulated = SimulatedHolds()
        for f in fires:
            stopped = self._stop_runs.get((f.rule, f.seq))
            if f.status == FIRED and f.effective_level == STOP and stopped is not None:
                message = next(
                    (
                        m
                        for (r, seq, _), (_, m) in self._context.items()
                        if (r, seq) == (f.rule, f.seq)
                    ),
                    "",
                )
                record_stop(
                    conn,
                    harness=stopped[0],
                    run=stopped[1],
                    rule=f.rule,
                    fire_id=f.id,
                    event_seq=f.seq,
                    at=f.at,
                    reason=message or f"rule `{f.rule}` fired at seq {f.seq}",
                )
        self._stop_runs.clear()
        self.lifecycle.flush(conn)
        self._poll_config()

    def _poll_config(self) -> None:
        """Apply a changed global config to the next batch (the last good one if broken)."""
        if self.watch is None:
            return
        new = self.watch()
        old = self.lifecycle.authority
        if new == old:
            return
        self.lifecycle.authority = new
        if self.runner is not None:
            self.runner.templates = dict(new.actions)
        if new.disable != old.disable:
            self.needs_rebuild = True

    def after_commit(self, fires: Sequence[Fire]) -> None:
        context, self._context = self._context, {}
        if self.runner is None:
            return
        for f in fires:
            action = action_for(f.effective_level) if f.status == FIRED else None
            if action is None or f.id is None:
                continue
            harness, message = context.get((f.rule, f.seq, f.target), (f.target, ""))
            self.runner.run(
                ActionRequest(
                    fire_id=f.id,
                    action=action,
                    rule=f.rule,
                    harness=harness,
                    target=f.target,
                    level=f.effective_level,
                    message=message,
                )
            )

    def active_rules(self, rules: Sequence[CompiledRule]) -> list[CompiledRule]:
        """The rules not silenced by ``[memory.rules] disable`` (evaluate only these)."""
        return [cr for cr in rules if not self.lifecycle.is_disabled(cr.rule.name)]
