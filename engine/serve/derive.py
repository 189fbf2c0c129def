"""Rows derived from tool calls: file_edited and collision (graph), the loop guard.

These stand in for the seed's graph source and its loop guard (seed 004,
"One journal is the only input"): an edit of a path becomes a graph_event
``file_edited``; an edit of a path another harness edited within
``[serve] collision_window`` also becomes a ``collision`` naming that harness;
and ``[serve] loop_guard`` identical tool calls (same tool, same args digest)
in an unbroken streak of one run become a ``loop_stopped`` row from source
``loopguard``, after which that run is stopped. The loop guard is fixed code,
not a rule, exactly as the seed keeps it; rules see its trips as input.

State is in memory and bounded: serve keeps one :class:`Deriver` for its life;
a fresh process (the command hook, serve after a restart) has it seeded from
the store by :class:`engine.serve.calls.CallBook` with
:meth:`Deriver.seed_streak` and :meth:`Deriver.seed_editors`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from typing import Final

from engine.journal.rows import INSERT_INDEX, InsertRow, check_values
from engine.record import Record

DEFAULT_LOOP_GUARD = 8
DEFAULT_COLLISION_WINDOW_MS = 10 * 60_000
MAX_RUNS = 10_000
MAX_PATHS = 20_000


def make_row(typ: str, source: str, **fields: object) -> InsertRow:
    """An insert tuple (``at`` 0: the committer assigns it) checked against the journal shapes.

    Raises :class:`engine.journal.rows.RowError` naming the field: a row that
    does not fit is refused here, before it can reach the queue.
    """
    kind = "graph_event" if typ in ("file_edited", "collision", "churn") else "run_event"
    values: list[object] = [0, kind, typ, source, *([None] * 11)]
    for name, value in fields.items():
        if value is not None:
            values[INSERT_INDEX[name]] = value
    row = tuple(values)
    check_values(row)
    return row


class LoopTrip(Record):
    """The loop guard tripped: the run to stop and why (identifiers and counts only)."""

    __slots__ = ("count", "harness", "run", "tool")
    __match_args__ = ("harness", "run", "tool", "count")

    def __init__(self, harness: str, run: str | None, tool: str, count: int) -> None:
        self.harness: Final = harness
        self.run: Final = run
        self.tool: Final = tool
        self.count: Final = count


class Deriver:
    """Derive graph and loop-guard rows from tool calls (one instance per process).

    A plain class (and :class:`LoopTrip` a Record) rather than dataclasses:
    ``harness hook`` imports this module once per tool call.
    """

    __slots__ = ("collision_window_ms", "editors", "loop_guard", "streaks")

    def __init__(
        self,
        loop_guard: int = DEFAULT_LOOP_GUARD,
        collision_window_ms: int = DEFAULT_COLLISION_WINDOW_MS,
    ) -> None:
        self.loop_guard = loop_guard
        self.collision_window_ms = collision_window_ms
        #: (harness, run) -> (tool, args_digest, streak length)
        self.streaks: OrderedDict[tuple[str, str | None], tuple[str, str, int]] = OrderedDict()
        #: path -> {harness: last edit time in ms}
        self.editors: OrderedDict[str, dict[str, int]] = OrderedDict()

    def seed_streak(
        self, harness: str, run: str | None, tool: str, args_digest: str, count: int
    ) -> None:
        self.streaks[(harness, run)] = (tool, args_digest, count)

    def seed_editors(self, path: str, editors: dict[str, int]) -> None:
        self.editors[path] = dict(editors)

    def edits(
        self,
        *,
        harness: str,
        project: str | None,
        run: str | None,
        paths: Iterable[str],
        now_ms: int,
    ) -> list[InsertRow]:
        """file_edited rows for ``paths`` and a collision row per other recent editor."""
        out: list[InsertRow] = []
        since = now_ms - self.collision_window_ms
        for path in paths:
            out.append(
                make_row(
                    "file_edited",
                    "graph",
                    harness=harness,
                    project=project,
                    run=run,
                    path=path,
                    n=1,
                )
            )
            seen = self.editors.pop(path, {})
            for other, at in sorted(seen.items()):
                if other != harness and at > since:
                    out.append(
                        make_row(
                            "collision",
                            "graph",
                            harness=harness,
                            project=project,
                            run=run,
                            path=path,
                            other_harness=other,
                            n=1,
                        )
                    )
            recent = {h: at for h, at in seen.items() if at > since}
            recent[harness] = now_ms
            self.editors[path] = recent
            while len(self.editors) > MAX_PATHS:
                self.editors.popitem(last=False)
        return out

    def loop(
        self,
        *,
        harness: str,
        project: str | None,
        run: str | None,
        tool: str,
        args_digest: str | None,
    ) -> tuple[list[InsertRow], LoopTrip | None]:
        """Count this call into its run's streak; at ``loop_guard`` emit loop_stopped.

        A call without an args digest breaks the streak (nothing says it is
        identical). The trip fires once, when the streak reaches the limit.
        """
        key = (harness, run)
        if self.loop_guard <= 0:
            return [], None
        if args_digest is None:
            self.streaks.pop(key, None)
            return [], None
        prev = self.streaks.pop(key, None)
        count = prev[2] + 1 if prev is not None and prev[:2] == (tool, args_digest) else 1
        self.streaks[key] = (tool, args_digest, count)
        while len(self.streaks) > MAX_RUNS:
            self.streaks.popitem(last=False)
        if count != self.loop_guard:
            return [], None
        row = make_row(
            "loop_stopped",
            "loopguard",
            harness=harness,
            project=project,
            run=run,
            tool=tool,
            args_digest=args_digest,
            n=count,
        )
        return [row], LoopTrip(harness, run, tool, count)
