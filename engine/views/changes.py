"""Has anything a pane shows changed? A few indexed lookups instead of re-reading the store.

The console refreshes its panes on a timer; on a static store every refresh
would redo the same work (the Fleet summary alone is dozens of queries). Panes
read :func:`store_version` first and redo their read only when it moved. The
evaluator's lease renewals write to the store too, so a file's mtime is not
enough: this looks at what the panes show.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

#: One cheap query per table a pane reads (max of the primary key, or a small table's shape).
_PROBES = (
    "SELECT COALESCE(MAX(seq), 0) FROM rule_journal",
    "SELECT COALESCE(MAX(id), 0) FROM rule_fires",
    "SELECT COALESCE(SUM(seq), 0) FROM rule_cursor",
    "SELECT COUNT(*), COALESCE(MAX(id), 0), COUNT(released_at) FROM rule_holds",
    "SELECT COUNT(*), COALESCE(MAX(updated_at), 0) FROM rule_state",
    "SELECT COUNT(*) FROM rule_versions",
    "SELECT COUNT(*), COALESCE(MAX(id), 0), COUNT(branch), COALESCE(SUM(length(backtest)), 0)"
    " FROM rule_proposals",
)


def store_version(conn: sqlite3.Connection) -> tuple[int, ...]:
    """A tuple that moves whenever a row a pane shows is added or changed (missing table: -1)."""
    out: list[int] = []
    for sql in _PROBES:
        try:
            row = conn.execute(sql).fetchone()
        except sqlite3.OperationalError:
            out.append(-1)
            continue
        out.extend(int(v or 0) for v in row)
    return tuple(out)


def file_stamp(store: Path) -> tuple[int, ...]:
    """The store's files as (mtime_ns, size) pairs: a stat, no SQLite, for tight poll loops."""
    out: list[int] = []
    for path in (store, store.with_name(store.name + "-wal")):
        try:
            st = path.stat()
        except OSError:
            out.extend((0, 0))
            continue
        out.extend((st.st_mtime_ns, st.st_size))
    return tuple(out)


class Backoff:
    """A poll delay that grows while nothing changes and snaps back to ``fast`` on a change.

    An idle console must cost no measurable CPU, yet show a change within a
    bound: a poller waits :attr:`delay` between looks and reports what each
    look found. After a change it looks every ``fast`` seconds; each further
    look that finds nothing multiplies the wait by ``factor``, up to ``slow``
    (so ``slow`` is the worst-case latency after a quiet spell).
    """

    def __init__(self, fast: float, slow: float, *, factor: float = 2.0) -> None:
        if fast <= 0 or slow < fast or factor <= 1:
            raise ValueError(f"need 0 < fast <= slow and factor > 1, got {fast}, {slow}, {factor}")
        self.fast = fast
        self.slow = slow
        self.factor = factor
        #: How long to wait before the next look.
        self.delay = fast
        #: Looks in a row that found nothing.
        self.quiet = 0

    def changed(self) -> float:
        """The last look found a change: look again soon (more is likely to follow)."""
        self.quiet = 0
        self.delay = self.fast
        return self.delay

    def unchanged(self) -> float:
        """The last look found nothing: wait longer from the second such look on, up to ``slow``."""
        self.quiet += 1
        if self.quiet > 1:
            self.delay = min(self.slow, self.delay * self.factor)
        return self.delay

    def saw(self, changed: bool) -> float:
        """:meth:`changed` or :meth:`unchanged`; the next delay."""
        return self.changed() if changed else self.unchanged()
