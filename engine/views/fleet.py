"""Fleet summary: one line per harness, computed from the journal with indexed lookups.

The journal can hold millions of rows, so nothing here scans it: harness names
come from a skip-scan of the ``(harness, type, at)`` index, and each harness's
last event, run state and recent activity are range lookups on that index.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass

from engine.journal.rows import TYPES_BY_KIND
from engine.vocab import SHADOW, STOP, SUPPRESSED

#: Every event type but ``tick``, in the journal's order (the types a harness emits).
ALL_TYPES: tuple[str, ...] = tuple(
    t for kind, types in TYPES_BY_KIND.items() if kind != "tick" for t in types
)
DAY_MS = 86_400_000


@dataclass(frozen=True, slots=True)
class HarnessSummary:
    """What the Fleet pane shows for one harness.

    ``state`` is ``held`` (an active hold), ``stopped`` (a stop acted in the
    last 24 hours, after its last run start), ``running`` (a run started and
    has not finished) or ``idle``.
    ``activity`` counts events per bucket, oldest first, for a sparkline.
    ``stale``: ``running`` but silent longer than ``[console] stale_after``
    (the process may be gone without recording a finish).
    """

    harness: str
    project: str
    state: str
    last_at: int
    last_age_ms: int
    fires_24h: int
    activity: tuple[int, ...]
    stale: bool = False


def harness_names(conn: sqlite3.Connection) -> list[str]:
    """Distinct harness names via an index skip-scan (cost ~ harnesses, not rows)."""
    sql = """
        WITH RECURSIVE h(x) AS (
            SELECT MIN(harness) FROM rule_journal WHERE harness IS NOT NULL
            UNION ALL
            SELECT (SELECT MIN(harness) FROM rule_journal WHERE harness > h.x)
            FROM h WHERE h.x IS NOT NULL
        )
        SELECT x FROM h WHERE x IS NOT NULL
    """
    return [str(r[0]) for r in conn.execute(sql)]


def _last(conn: sqlite3.Connection, harness: str, types: tuple[str, ...]) -> tuple[int, str]:
    """Latest (at, type) among ``types`` for ``harness``; (0, "") when none."""
    best = (0, "")
    for t in types:
        row = conn.execute(
            "SELECT MAX(at) FROM rule_journal WHERE harness = ? AND type = ?", (harness, t)
        ).fetchone()
        if row[0] is not None and int(row[0]) >= best[0]:
            best = (int(row[0]), t)
    return best


def _project(conn: sqlite3.Connection, harness: str) -> str:
    for t in ("run_started", *ALL_TYPES):
        row = conn.execute(
            "SELECT project FROM rule_journal WHERE harness = ? AND type = ?"
            " AND project IS NOT NULL ORDER BY at DESC LIMIT 1",
            (harness, t),
        ).fetchone()
        if row is not None:
            return str(row[0])
    return ""


def _first_seq_since(conn: sqlite3.Connection, since_ms: int) -> int:
    row = conn.execute("SELECT MIN(seq) FROM rule_journal WHERE at > ?", (since_ms,)).fetchone()
    if row[0] is None:
        top = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM rule_journal").fetchone()
        return int(top[0]) + 1
    return int(row[0])


def fleet_summary(
    conn: sqlite3.Connection,
    now_ms: int | None = None,
    *,
    buckets: int = 24,
    bucket_ms: int = 3_600_000,
    stale_after_ms: int | None = None,
) -> list[HarnessSummary]:
    """Every harness in the journal with its state, age, fires in 24h and activity."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    since_seq = _first_seq_since(conn, now - DAY_MS)
    fires: dict[str, int] = {}
    for target, n in conn.execute(
        "SELECT target, COUNT(*) FROM rule_fires WHERE seq >= ? AND target IS NOT NULL"
        f" AND status != '{SUPPRESSED}' GROUP BY target",
        (since_seq,),
    ):
        fires[str(target)] = int(n)
    held = {
        str(r[0])
        for r in conn.execute("SELECT DISTINCT harness FROM rule_holds WHERE released_at IS NULL")
    }
    stops: dict[str, int] = {}
    for target, at in conn.execute(
        f"SELECT target, MAX(at) FROM rule_fires WHERE seq >= ? AND effective_level = '{STOP}'"
        f" AND status NOT IN ('{SHADOW}', '{SUPPRESSED}') AND target IS NOT NULL GROUP BY target",
        (since_seq,),
    ):
        stops[str(target)] = int(at)
    window_start = now - buckets * bucket_ms
    out: list[HarnessSummary] = []
    for name in harness_names(conn):
        last_at, _ = _last(conn, name, ALL_TYPES)
        started, _ = _last(conn, name, ("run_started",))
        ended, _ = _last(conn, name, ("run_finished", "loop_stopped", "budget_exhausted"))
        if name in held:
            state = "held"
        elif stops.get(name, -1) >= started and name in stops:
            state = "stopped"
        elif started and started >= ended:
            state = "running"
        else:
            state = "idle"
        counts = [0] * buckets
        for t in ALL_TYPES:
            # counted per bucket in SQL over the covering (harness, type, at) index:
            # a Python loop over a day of rows was most of a Fleet refresh's CPU
            for idx, n in conn.execute(
                "SELECT (at - ? - 1) / ?, COUNT(*) FROM rule_journal"
                " WHERE harness = ? AND type = ? AND at > ? AND at <= ? GROUP BY 1",
                (window_start, bucket_ms, name, t, window_start, now),
            ):
                counts[min(max(int(idx), 0), buckets - 1)] += int(n)
        out.append(
            HarnessSummary(
                harness=name,
                project=_project(conn, name),
                state=state,
                last_at=last_at,
                last_age_ms=max(now - last_at, 0) if last_at else -1,
                fires_24h=fires.get(name, 0),
                activity=tuple(counts),
                stale=(
                    state == "running"
                    and stale_after_ms is not None
                    and now - last_at > stale_after_ms
                ),
            )
        )
    return out


def format_age(ms: int) -> str:
    """A compact age (``12s``, ``5m``, ``3h``, ``2d``); ``-`` when unknown."""
    if ms < 0:
        return "-"
    for unit, size in (("d", DAY_MS), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms >= size:
            return f"{ms // size}{unit}"
    return "0s"
