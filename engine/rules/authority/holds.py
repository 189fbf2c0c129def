"""Rule holds: a persisted refusal of new runs for a harness (skip reason ``rule_hold``).

A hold is created in the same transaction as the fire that caused it, so a
crash can never leave a fire without its hold or a hold without its fire.
It is released in exactly two ways: by its rule, when a tick row re-evaluates
the rule on the held fire's event at the tick's ``now`` and the result is
false, or by the
operator (``harness holds release``). Starting a run releases nothing: a
supervisor asks :func:`check_admission` before admitting a run, and a start
that silently cleared the hold would defeat a rule the operator enforced.

:class:`SimulatedHolds` applies the same re-evaluation to an in-memory list,
so a backtest reports hold spans from tick rows with the same code.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping
from typing import Any, Final, Protocol

from engine.errors import Diagnostic, InputError
from engine.journal.rows import COLUMNS
from engine.record import Record
from engine.timefmt import iso_ms

SKIP_REASON = "rule_hold"
JOURNAL_COLUMNS: tuple[str, ...] = COLUMNS  # the pinned column order
_HOLD_COLUMNS = (
    "id, harness, fire_id, rule, hash, event_seq, created_seq, created_at, reason, "
    "released_at, released_seq, released_by, release_reason"
)


class EvalOutcome(Protocol):
    @property
    def matched(self) -> bool: ...
    @property
    def error(self) -> str | None: ...


class Evaluable(Protocol):
    """What re-evaluation needs of a compiled rule (``CompiledRule`` satisfies it)."""

    def evaluate(self, event: Mapping[str, object], now_ms: int, host: Any) -> EvalOutcome: ...


class Hold(Record):
    """One rule hold on a harness, as ``rule_holds`` stores it (``released_at`` set once freed).

    Holds, stops and the gate's answer are Records rather than frozen dataclasses: the command
    hook imports this module on every agent tool call, and ``dataclasses`` costs it ~15 ms.
    """

    __slots__ = (
        "created_at",
        "created_seq",
        "event_seq",
        "fire_id",
        "harness",
        "hash",
        "id",
        "reason",
        "release_reason",
        "released_at",
        "released_by",
        "released_seq",
        "rule",
    )
    __match_args__ = (
        "id",
        "harness",
        "fire_id",
        "rule",
        "hash",
        "event_seq",
        "created_seq",
        "created_at",
        "reason",
        "released_at",
        "released_seq",
        "released_by",
        "release_reason",
    )

    def __init__(
        self,
        id: int,
        harness: str,
        fire_id: int | None,
        rule: str,
        hash: str,
        event_seq: int,
        created_seq: int,
        created_at: int,
        reason: str,
        released_at: int | None = None,
        released_seq: int | None = None,
        released_by: str | None = None,
        release_reason: str | None = None,
    ) -> None:
        self.id: Final = id
        self.harness: Final = harness
        self.fire_id: Final = fire_id
        self.rule: Final = rule
        self.hash: Final = hash
        self.event_seq: Final = event_seq
        self.created_seq: Final = created_seq
        self.created_at: Final = created_at
        self.reason: Final = reason
        self.released_at: Final = released_at
        self.released_seq: Final = released_seq
        self.released_by: Final = released_by
        self.release_reason: Final = release_reason

    @property
    def active(self) -> bool:
        return self.released_at is None

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "harness": self.harness,
            "rule": self.rule,
            "hash": self.hash,
            "fire_id": self.fire_id,
            "event_seq": self.event_seq,
            "created_seq": self.created_seq,
            "created_at": iso_ms(self.created_at),
            "reason": self.reason,
            "skip_reason": SKIP_REASON,
            "active": self.active,
            "released_at": None if self.released_at is None else iso_ms(self.released_at),
            "released_seq": self.released_seq,
            "released_by": self.released_by,
            "release_reason": self.release_reason,
        }


def _hold(row: tuple[object, ...]) -> Hold:
    return Hold(*row)  # type: ignore[arg-type]


def create_hold(
    conn: sqlite3.Connection,
    *,
    harness: str,
    fire_id: int | None,
    rule: str,
    hash_: str,
    event_seq: int,
    seq: int,
    at: int,
    reason: str,
) -> Hold:
    """Insert a hold (call inside the fire's transaction); reuse an active one for the pair."""
    existing = conn.execute(
        f"SELECT {_HOLD_COLUMNS} FROM rule_holds WHERE harness = ? AND rule = ? "
        "AND released_at IS NULL ORDER BY id LIMIT 1",
        (harness, rule),
    ).fetchone()
    if existing is not None:
        return _hold(existing)
    cur = conn.execute(
        "INSERT INTO rule_holds (harness, fire_id, rule, hash, event_seq, created_seq, "
        "created_at, reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (harness, fire_id, rule, hash_, event_seq, seq, at, reason),
    )
    assert cur.lastrowid is not None
    return Hold(cur.lastrowid, harness, fire_id, rule, hash_, event_seq, seq, at, reason)


def get_hold(conn: sqlite3.Connection, hold_id: int) -> Hold | None:
    row = conn.execute(
        f"SELECT {_HOLD_COLUMNS} FROM rule_holds WHERE id = ?", (hold_id,)
    ).fetchone()
    return None if row is None else _hold(row)


def list_holds(conn: sqlite3.Connection, *, include_released: bool = False) -> list[Hold]:
    where = "" if include_released else "WHERE released_at IS NULL"
    return [
        _hold(r)
        for r in conn.execute(f"SELECT {_HOLD_COLUMNS} FROM rule_holds {where} ORDER BY id")
    ]


def active_holds(conn: sqlite3.Connection, harness: str | None = None) -> list[Hold]:
    if harness is None:
        return list_holds(conn)
    return [
        _hold(r)
        for r in conn.execute(
            f"SELECT {_HOLD_COLUMNS} FROM rule_holds WHERE harness = ? AND released_at IS NULL "
            "ORDER BY id",
            (harness,),
        )
    ]


def release_hold(
    conn: sqlite3.Connection, hold_id: int, *, by: str, reason: str, seq: int | None, at: int
) -> None:
    conn.execute(
        "UPDATE rule_holds SET released_at = ?, released_seq = ?, released_by = ?, "
        "release_reason = ? WHERE id = ? AND released_at IS NULL",
        (at, seq, by, reason, hold_id),
    )


def release_by_operator(
    conn: sqlite3.Connection, hold_id: int, *, reason: str, now_ms: int, who: str = "operator"
) -> Hold:
    """Release a hold by hand; unknown or already released ids are input errors."""
    hold = get_hold(conn, hold_id)
    if hold is None:
        raise InputError(
            f"no hold with id {hold_id}",
            title="Unknown hold",
            diagnostics=[Diagnostic(f"no hold with id {hold_id}", path="HOLD_ID")],
        )
    if not hold.active:
        raise InputError(
            f"hold {hold_id} was already released by {hold.released_by} ({hold.release_reason})",
            title="Hold already released",
        )
    max_seq = conn.execute("SELECT MAX(seq) FROM rule_journal").fetchone()[0]
    release_hold(
        conn, hold_id, by=who, reason=reason or "released by operator", seq=max_seq, at=now_ms
    )
    released = get_hold(conn, hold_id)
    assert released is not None
    return released


class AdmissionCheck(Record):
    """What a supervisor needs before admitting a run: held or free, and why."""

    __slots__ = ("harness", "holds")
    __match_args__ = ("harness", "holds")

    def __init__(self, harness: str, holds: tuple[Hold, ...]) -> None:
        self.harness: Final = harness
        self.holds: Final = holds

    @property
    def held(self) -> bool:
        return bool(self.holds)

    @property
    def skip_reason(self) -> str | None:
        return SKIP_REASON if self.holds else None

    def message(self) -> str:
        if not self.holds:
            return f"{self.harness}: free (no active rule hold)"
        parts = [
            f"hold {h.id} by rule `{h.rule}` since {iso_ms(h.created_at)}: {h.reason}"
            for h in self.holds
        ]
        return f"{self.harness}: held ({SKIP_REASON}): " + "; ".join(parts)


def check_admission(conn: sqlite3.Connection, harness: str) -> AdmissionCheck:
    return AdmissionCheck(harness, tuple(active_holds(conn, harness)))


def journal_row(conn: sqlite3.Connection, seq: int) -> dict[str, object] | None:
    row = conn.execute(
        f"SELECT {', '.join(JOURNAL_COLUMNS)} FROM rule_journal WHERE seq = ?", (seq,)
    ).fetchone()
    return None if row is None else dict(zip(JOURNAL_COLUMNS, row, strict=True))


def still_matches(
    rule: Evaluable | None, event: Mapping[str, object] | None, now_ms: int, host: object
) -> tuple[bool, str]:
    """Re-evaluate a held fire's rule at ``now_ms``; (True, why) keeps the hold.

    A missing rule, a missing event (pruned) or an evaluation error keeps the
    hold: only a definite "false" from the rule releases it, and the operator
    can always release by hand.
    """
    if rule is None:
        return True, "rule not loaded: only the operator can release this hold"
    if event is None:
        return True, "held event no longer in the journal: only the operator can release"
    result = rule.evaluate(event, now_ms, host)
    if result.error:
        return True, f"re-evaluation error ({result.error}): hold kept"
    if result.matched:
        return True, "rule still matches"
    return False, "rule no longer matches the held event"


def reevaluate_on_tick(
    conn: sqlite3.Connection,
    tick: Mapping[str, object],
    rules: Mapping[str, Evaluable],
    host: object,
) -> list[Hold]:
    """On a tick row, re-evaluate every active hold; release those whose rule is false.

    ``host`` is the evaluator's primitive host positioned at the tick row, so
    the primitives see the journal up to the tick and windows ending at the
    tick's ``now``: the hold lasts while the pattern is still in the window
    (time passing moves the window past the counted rows). Call inside the
    evaluator's transaction for the tick row. Returns the holds released.
    """
    tick_seq = int(tick["seq"])  # type: ignore[call-overload]
    now = int(tick["at"])  # type: ignore[call-overload]
    released: list[Hold] = []
    for hold in list_holds(conn):
        if hold.created_seq >= tick_seq:
            continue
        event = journal_row(conn, hold.event_seq)
        keep, why = still_matches(rules.get(hold.rule), event, now, host)
        if keep:
            continue
        reason = f"{why} (seq {hold.event_seq}) at tick seq {tick_seq}, {iso_ms(now)}"
        release_hold(conn, hold.id, by="rule", reason=reason, seq=tick_seq, at=now)
        after = get_hold(conn, hold.id)
        assert after is not None
        released.append(after)
    return released


class HoldSpan(Record):
    """A simulated hold in a backtest: from the fire to the tick that released it."""

    __slots__ = (
        "end_at",
        "end_reason",
        "end_seq",
        "event_seq",
        "harness",
        "rule",
        "start_at",
        "start_seq",
    )
    __match_args__ = (
        "rule",
        "harness",
        "event_seq",
        "start_seq",
        "start_at",
        "end_seq",
        "end_at",
        "end_reason",
    )

    def __init__(
        self,
        rule: str,
        harness: str,
        event_seq: int,
        start_seq: int,
        start_at: int,
        end_seq: int | None = None,
        end_at: int | None = None,
        end_reason: str | None = None,
    ) -> None:
        self.rule: Final = rule
        self.harness: Final = harness
        self.event_seq: Final = event_seq
        self.start_seq: Final = start_seq
        self.start_at: Final = start_at
        self.end_seq: Final = end_seq
        self.end_at: Final = end_at
        self.end_reason: Final = end_reason

    @property
    def duration_ms(self) -> int | None:
        return None if self.end_at is None else self.end_at - self.start_at


class SimulatedHolds:
    """The same hold lifecycle as the store, in memory, for backtests."""

    __slots__ = ("active", "done", "events")

    def __init__(self) -> None:
        self.active: list[HoldSpan] = []
        self.done: list[HoldSpan] = []
        self.events: dict[int, Mapping[str, object]] = {}

    def on_fire(self, rule: str, harness: str, event: Mapping[str, object]) -> None:
        """A fire that acts at hold: open a span unless one is open for (rule, harness)."""
        if any(h.rule == rule and h.harness == harness for h in self.active):
            return
        seq = int(event["seq"])  # type: ignore[call-overload]
        self.events[seq] = dict(event)
        self.active.append(HoldSpan(rule, harness, seq, seq, int(event["at"])))  # type: ignore[call-overload]

    def on_tick(
        self,
        tick: Mapping[str, object],
        rules: Mapping[str, Evaluable],
        host: object,
    ) -> list[HoldSpan]:
        tick_seq = int(tick["seq"])  # type: ignore[call-overload]
        now = int(tick["at"])  # type: ignore[call-overload]
        ended: list[HoldSpan] = []
        keep: list[HoldSpan] = []
        for span in self.active:
            if span.start_seq >= tick_seq:
                keep.append(span)
                continue
            still, why = still_matches(
                rules.get(span.rule), self.events.get(span.event_seq), now, host
            )
            if still:
                keep.append(span)
            else:
                closed = HoldSpan(
                    span.rule,
                    span.harness,
                    span.event_seq,
                    span.start_seq,
                    span.start_at,
                    tick_seq,
                    now,
                    f"{why} (seq {span.event_seq}) at tick seq {tick_seq}, {iso_ms(now)}",
                )
                ended.append(closed)
        self.active = keep
        self.done.extend(ended)
        return ended

    def spans(self) -> list[HoldSpan]:
        return sorted(self.done + self.active, key=lambda s: (s.start_seq, s.rule, s.harness))


def summarize(holds: Iterable[Hold]) -> dict[str, int]:
    """Counts for doctor/metrics: active, released by rule, released by operator."""
    out = {"active": 0, "released_by_rule": 0, "released_by_operator": 0}
    for h in holds:
        if h.active:
            out["active"] += 1
        elif h.released_by == "rule":
            out["released_by_rule"] += 1
        else:
            out["released_by_operator"] += 1
    return out
