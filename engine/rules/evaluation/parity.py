"""Parity stamp: does a backtest reproduce the fires the live evaluator stored over the same rows?

Seed 004 claims a backtest reproduces live fires exactly. This module makes
that claim checkable on every run instead of only in the test suite: a
backtest result is stamped with its journal range, each rule's hash and a
digest of its fire list (over :meth:`Fire.key`, the facts live and backtest
must agree on; status and effective level depend on lifecycle state and are
left out), and the stamp is compared with the live fires stored for the same
rules over the same rows.

The comparison only covers rows the live evaluator has seen: from the first
row it evaluated that rule version (``rule_versions.first_seen_seq``) to its
cursor. A row where a live primitive could not read the store
(``rule_store_errors``) is the one documented exception to equivalence; a
difference there is allowed and named ``store_error``, never hidden.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from engine.rules.evaluation.backtest import BacktestResult
from engine.rules.evaluation.fires import Fire, list_fires
from engine.rules.evaluation.live_evaluator import read_cursor

#: How many differences a parity report lists (the count is always exact).
MAX_DIFFERENCES = 50


def fires_digest(fires: Iterable[Fire]) -> str:
    """SHA-256 over the fires' keys in (seq, rule) order: equal lists give equal digests."""
    h = hashlib.sha256()
    for key in sorted((f.key() for f in fires), key=lambda k: (k[0], k[1], k[3])):
        h.update(repr(key).encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


@dataclass(frozen=True, slots=True)
class ParityStamp:
    """What a backtest covered and produced: range, rule versions, fire count and digest."""

    first_seq: int
    last_seq: int
    first_at: int
    last_at: int
    rules: tuple[tuple[str, str], ...]
    fires: int
    digest: str

    def to_json(self) -> dict[str, Any]:
        return {
            "range": {
                "first_seq": self.first_seq,
                "last_seq": self.last_seq,
                "first_at": self.first_at,
                "last_at": self.last_at,
            },
            "rules": [{"name": n, "hash": h} for n, h in self.rules],
            "fires": self.fires,
            "digest": self.digest,
        }


def stamp(result: BacktestResult) -> ParityStamp:
    """The stamp of a backtest result (its range, rule hashes and fire digest)."""
    r = result.range
    return ParityStamp(
        r.first_seq,
        r.last_seq,
        r.first_at,
        r.last_at,
        result.rules,
        len(result.fires),
        fires_digest(result.fires),
    )


@dataclass(frozen=True, slots=True)
class Difference:
    """A fire on one side only. ``kind`` is ``only_backtest`` | ``only_live``."""

    kind: str
    seq: int
    rule: str
    hash: str
    target: str
    #: True at a row where live recorded a store_error (the one allowed difference).
    store_error: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "seq": self.seq,
            "rule": self.rule,
            "hash": self.hash,
            "target": self.target,
            "allowed": "store_error" if self.store_error else None,
        }

    def describe(self) -> str:
        side = "backtest only" if self.kind == "only_backtest" else "live only"
        why = " (store_error: allowed)" if self.store_error else ""
        return f"{side}: seq {self.seq} {self.rule}@{self.hash[:8]} {self.target}{why}"


@dataclass(frozen=True, slots=True)
class Parity:
    """The backtest's stamp against the live fires over the rows live evaluated."""

    stamp: ParityStamp
    #: Seq range actually compared (live's first evaluation .. live cursor), or None.
    compared: tuple[int, int] | None
    backtest_fires: int
    backtest_digest: str
    live_fires: int
    live_digest: str
    differences: tuple[Difference, ...]
    difference_count: int
    notes: tuple[str, ...] = ()

    @property
    def equal(self) -> bool:
        """Live = backtest, allowing only store_error differences."""
        return self.compared is not None and all(d.store_error for d in self.differences)

    @property
    def store_errors(self) -> int:
        return sum(1 for d in self.differences if d.store_error)

    def summary(self) -> str:
        """One line: "live = backtest (N fires, digest …)" or what differs."""
        if self.compared is None:
            return "parity: not compared (" + "; ".join(self.notes or ("no live rows",)) + ")"
        lo, hi = self.compared
        where = f"seq {lo}..{hi}"
        if self.equal and not self.differences:
            return (
                f"live = backtest ({self.live_fires} fires, digest {self.live_digest[:12]}…)"
                f" over {where}"
            )
        if self.equal:
            return (
                f"live = backtest except {self.store_errors} store_error row(s), the one"
                f" allowed difference ({self.backtest_fires} backtest / {self.live_fires}"
                f" live fires) over {where}"
            )
        real = self.difference_count - self.store_errors
        return (
            f"live ≠ backtest: {real} difference(s) over {where}"
            f" (backtest {self.backtest_fires} fires, digest {self.backtest_digest[:12]}…;"
            f" live {self.live_fires}, digest {self.live_digest[:12]}…)"
        )

    def lines(self) -> list[str]:
        """The summary, then each listed difference and any notes."""
        out = [self.summary()]
        out.extend(f"  {d.describe()}" for d in self.differences)
        if self.difference_count > len(self.differences):
            out.append(f"  … and {self.difference_count - len(self.differences)} more")
        out.extend(f"  note: {n}" for n in self.notes)
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "stamp": self.stamp.to_json(),
            "compared": None
            if self.compared is None
            else {"first_seq": self.compared[0], "last_seq": self.compared[1]},
            "equal": self.equal,
            "summary": self.summary(),
            "backtest": {"fires": self.backtest_fires, "digest": self.backtest_digest},
            "live": {"fires": self.live_fires, "digest": self.live_digest},
            "difference_count": self.difference_count,
            "store_error_rows": self.store_errors,
            "differences": [d.to_json() for d in self.differences],
            "notes": list(self.notes),
        }


def _first_seen(conn: sqlite3.Connection, name: str, hash_: str) -> int | None:
    row = conn.execute(
        "SELECT first_seen_seq FROM rule_versions WHERE name = ? AND hash = ?", (name, hash_)
    ).fetchone()
    return None if row is None else int(row[0])


def _live_fires(conn: sqlite3.Connection, rule: str, lo: int, hi: int) -> list[Fire]:
    """Stored fires of ``rule`` with seq in ``lo..hi``."""
    return list_fires(conn, rule=rule, seq_range=(lo, hi))


def _store_error_rows(conn: sqlite3.Connection, lo: int, hi: int) -> set[tuple[int, str]]:
    return {
        (int(s), str(r))
        for s, r in conn.execute(
            "SELECT seq, rule FROM rule_store_errors WHERE seq BETWEEN ? AND ?", (lo, hi)
        )
    }


def compare_live(conn: sqlite3.Connection, result: BacktestResult) -> Parity:
    """Compare ``result`` with the live fires stored for its rules over the rows live saw."""
    st = stamp(result)
    notes: list[str] = []
    if result.cancelled:
        notes.append("the backtest was cancelled: a cut-short run has no parity")
        return Parity(st, None, len(result.fires), st.digest, 0, "", (), 0, tuple(notes))
    cursor, _ = read_cursor(conn)
    hi = min(result.range.last_seq, cursor)
    if not result.range.rows or hi < result.range.first_seq:
        notes.append(f"the live evaluator has not reached seq {result.range.first_seq}")
        return Parity(st, None, len(result.fires), st.digest, 0, "", (), 0, tuple(notes))
    bt: list[Fire] = []
    live: list[Fire] = []
    lo_all: int | None = None
    for name, hash_ in result.rules:
        seen = _first_seen(conn, name, hash_)
        if seen is None or seen >= hi:
            notes.append(f"{name}@{hash_[:8]} was never evaluated live here: nothing to compare")
            continue
        # ``first_seen_seq`` is the live cursor when the version was loaded: it first
        # evaluated the row after it.
        lo = max(result.range.first_seq, seen + 1)
        if lo > result.range.first_seq:
            notes.append(f"{name}@{hash_[:8]} compared from seq {lo}, its first live row")
        lo_all = lo if lo_all is None else min(lo_all, lo)
        bt.extend(f for f in result.fires if f.rule == name and lo <= f.seq <= hi)
        live.extend(_live_fires(conn, name, lo, hi))
    if lo_all is None:
        return Parity(st, None, len(result.fires), st.digest, 0, "", (), 0, tuple(notes))
    if result.range.last_seq > cursor:
        notes.append(f"rows after the live cursor (seq {cursor}) are not compared")
    return _diff(st, (lo_all, hi), bt, live, _store_error_rows(conn, lo_all, hi), notes)


def _diff(
    st: ParityStamp,
    compared: tuple[int, int],
    bt: Sequence[Fire],
    live: Sequence[Fire],
    store_errors: set[tuple[int, str]],
    notes: list[str],
) -> Parity:
    bt_keys = {f.key(): f for f in bt}
    live_keys = {f.key(): f for f in live}
    diffs: list[Difference] = []
    for kind, side, other in (
        ("only_backtest", bt_keys, live_keys),
        ("only_live", live_keys, bt_keys),
    ):
        for key, f in side.items():
            if key not in other:
                allowed = (f.seq, f.rule) in store_errors
                diffs.append(Difference(kind, f.seq, f.rule, f.hash, f.target, allowed))
    diffs.sort(key=lambda d: (d.store_error, d.seq, d.rule, d.kind))
    return Parity(
        st,
        compared,
        len(bt),
        fires_digest(bt),
        len(live),
        fires_digest(live),
        tuple(diffs[:MAX_DIFFERENCES]),
        len(diffs),
        tuple(notes),
    )
