"""One row per real call: serve's memory of runs and calls, shared by hooks and OTLP.

Both sources report the same tool call when an operator turns both on (hooks
for the gate, OpenTelemetry for what hooks cannot see), and the journal must
still hold one ``tool_call`` row per call, or every count rule and the loop
guard would see each call twice. So every source hands its reports to one
:class:`CallBook`, which decides, under one lock, in arrival order:

- **Runs.** The first event of an unseen session id writes its
  ``run_started`` row (Claude Code sends no ``SessionStart`` to http hooks,
  and OTLP has no session event at all); a session end writes
  ``run_finished``.
- **Calls.** A report matches an earlier report of the other source for the
  same run when both carry the same call id (``tool_use_id`` / ``call_id``),
  else when tool and arguments digest agree, else (one side has no id and the
  arguments are exported differently) the oldest unmatched report of the same
  tool: calls of one run are sequential, so the k-th report of a tool from one
  source is the k-th from the other. A match is a duplicate: no row, counted.
- **Derived rows** for a new call: ``file_edited``/``collision`` and the loop
  guard (:mod:`.derive`).

The book also remembers each run's ``cwd`` (hooks send it, OTLP does not), so
a relative path from either source is journaled absolute.

**The truest outcome.** Codex's hooks never say a command failed (no failure
event, no exit code), while its OTLP record does. So when a harness exports
Codex OTLP, a Codex hook report is held (:meth:`CallBook.await_outcome`) until
the OTLP record with its call id arrives or ``[serve] merge_wait`` passes, and
is journaled once, with the OTLP record's outcome; the record itself is then
the duplicate.

A fresh process (serve after a restart, or the command hook, one process per
call) does not start blind: a :class:`Recall` reads back from the store what
memory lacks (whether a run started, a run's streak, a path's recent editors).
When rows the book decided on are not stored after all (the store refused
them), :meth:`CallBook.forget` drops that run's memory so the store is asked
again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from typing import Final, Protocol, TypeVar

from engine.journal.rows import InsertRow
from engine.record import Record
from engine.serve.derive import Deriver, LoopTrip, make_row

#: How long a report waits to be matched by the other source (OTLP exports in batches).
MATCH_WINDOW_MS = 5 * 60_000
#: A harness that exported agent OTLP this recently is expected to report outcomes there.
EXPORTER_WINDOW_MS = 60 * 60_000
#: Reports kept per run for matching, and runs kept in memory.
MAX_REPORTS = 512
MAX_RUNS = 10_000
HOOK, OTLP = "hook", "otlp"
#: A streak of nothing: the loop guard's state of a run that has made no call yet.
_NO_STREAK: tuple[str, str, int] = ("", "", 0)
T = TypeVar("T")


class ToolReport(Record):
    """One source's report of one finished tool call, already reduced to journal values."""

    __slots__ = (
        "args_digest",
        "call_id",
        "cause_digest",
        "harness",
        "n",
        "outcome",
        "paths",
        "project",
        "run",
        "source",
        "tool",
    )
    __match_args__ = (
        "source",
        "harness",
        "project",
        "run",
        "tool",
        "outcome",
        "args_digest",
        "cause_digest",
        "paths",
        "call_id",
        "n",
    )

    def __init__(
        self,
        source: str,
        harness: str,
        project: str | None,
        run: str | None,
        tool: str,
        outcome: str | None,
        args_digest: str | None,
        cause_digest: str | None,
        paths: tuple[str, ...],
        call_id: str | None,
        n: int | None = None,
    ) -> None:
        self.source: Final = source
        self.harness: Final = harness
        self.project: Final = project
        self.run: Final = run
        self.tool: Final = tool
        self.outcome: Final = outcome
        self.args_digest: Final = args_digest
        self.cause_digest: Final = cause_digest
        self.paths: Final = paths
        self.call_id: Final = call_id
        #: A count the source reports with the call (a shell command's exit code).
        self.n: Final = n


class Decided(Record):
    """What the book made of one report or event: rows to store, a loop trip, a duplicate."""

    __slots__ = ("duplicate", "rows", "trip")
    __match_args__ = ("rows", "trip", "duplicate")

    def __init__(
        self, rows: tuple[InsertRow, ...], trip: LoopTrip | None = None, duplicate: bool = False
    ) -> None:
        self.rows: Final = rows
        self.trip: Final = trip
        self.duplicate: Final = duplicate


class Pending:
    """A hook report held for the same call's OTLP record (mutable: ``merged`` is set once)."""

    __slots__ = ("done", "merged", "report")

    def __init__(self, report: ToolReport) -> None:
        self.report = report
        self.merged: ToolReport | None = None
        self.done = threading.Event()


class Recall(Protocol):
    """Reads back from the store what a fresh process's memory lacks."""

    def run_started(self, harness: str, run: str) -> bool: ...

    def streak(self, harness: str, run: str | None) -> tuple[str, str, int] | None: ...

    def editors(self, path: str, since_ms: int) -> dict[str, int]: ...


class _Seen:
    """One report kept for matching (mutable: ``matched`` flips once)."""

    __slots__ = ("args", "at", "call_id", "matched", "source", "tool")

    def __init__(self, report: ToolReport, at: int) -> None:
        self.source = report.source
        self.tool = report.tool
        self.args = report.args_digest
        self.call_id = report.call_id
        self.at = at
        self.matched = False


class _RunReports:
    """One run's recent reports, oldest first, and how many of each source still wait.

    Most runs are reported by one source only, so matching first asks whether
    the other source has a report waiting at all (a counter) and only then
    looks: by call id (a dict), else through the waiting reports in order,
    where the match is almost always the oldest. Nothing else is indexed: a
    report costs one append.
    """

    __slots__ = ("by_id", "order", "waiting")

    def __init__(self) -> None:
        self.order: deque[_Seen] = deque()
        self.by_id: dict[str, _Seen] = {}
        self.waiting: dict[str, int] = {HOOK: 0, OTLP: 0}

    def expire(self, since: int) -> None:
        order = self.order
        while order and (order[0].at < since or len(order) > MAX_REPORTS):
            old = order.popleft()
            if not old.matched:
                old.matched = True
                self.waiting[old.source] -= 1
            if old.call_id is not None and self.by_id.get(old.call_id) is old:
                del self.by_id[old.call_id]

    def match(self, report: ToolReport) -> _Seen | None:
        """The earlier, unmatched report of another source that is this same call."""
        other = OTLP if report.source == HOOK else HOOK
        if not self.waiting[other]:
            return None
        cid = report.call_id
        if cid is not None:
            seen = self.by_id.get(cid)
            if seen is not None and not seen.matched and seen.source == other:
                return seen
        same_tool = [
            s
            for s in self.order
            if not s.matched
            and s.source == other
            and s.tool == report.tool
            # two reports that both carry a call id are the same call only by that id
            and (s.call_id is None or cid is None)
        ]
        if report.args_digest is not None:
            for s in same_tool:
                if s.args == report.args_digest:
                    return s
        return same_tool[0] if same_tool else None

    def take(self, seen: _Seen) -> None:
        seen.matched = True
        self.waiting[seen.source] -= 1

    def add(self, report: ToolReport, at: int) -> None:
        seen = _Seen(report, at)
        self.order.append(seen)
        self.waiting[report.source] += 1
        if report.call_id is not None:
            self.by_id[report.call_id] = seen


class CallBook:
    """Turns reports and run events into rows: one per real call, runs started once."""

    def __init__(self, deriver: Deriver, recall: Recall | None = None) -> None:
        self.deriver = deriver
        self.recall = recall
        self.lock = threading.Lock()
        self._runs: OrderedDict[tuple[str, str], str | None] = OrderedDict()  # -> cwd
        self._reports: OrderedDict[tuple[str, str | None], _RunReports] = OrderedDict()
        self._exporters: OrderedDict[str, int] = OrderedDict()  # harness -> last OTLP record
        self._pending: dict[tuple[str, str | None, str], Pending] = {}

    # -- under the caller's hold of ``lock`` ---------------------------------

    def run_event(
        self,
        harness: str,
        project: str | None,
        run: str | None,
        *,
        cwd: object = None,
        start: bool = False,
        end: bool = False,
    ) -> list[InsertRow]:
        """``run_started`` when ``run`` is new here (or ``start``), ``run_finished`` on ``end``."""
        if run is None or (not end and cwd is None and (harness, run) in self._runs):
            return []
        rows: list[InsertRow] = []
        key = (harness, run)
        known = key in self._runs
        if not known and (
            start or self.recall is None or not self.recall.run_started(harness, run)
        ):
            rows.append(
                make_row("run_started", "observer", harness=harness, project=project, run=run)
            )
            # A run starting here has no streak in the store to read back.
            self.deriver.streaks.setdefault(key, _NO_STREAK)
        if not known or (isinstance(cwd, str) and cwd):
            self._runs[key] = cwd if isinstance(cwd, str) and cwd else self._runs.get(key)
            _bound(self._runs, MAX_RUNS)
        if end:
            rows.append(
                make_row(
                    "run_finished",
                    "observer",
                    harness=harness,
                    project=project,
                    run=run,
                    outcome="ok",
                )
            )
        return rows

    def cwd(self, harness: str, run: str | None) -> str | None:
        """The run's working directory, as its hooks last reported it."""
        return None if run is None else self._runs.get((harness, run))

    def exporting(self, harness: str, now_ms: int) -> None:
        """``harness`` sent an agent OTLP record (so its outcomes will arrive that way too)."""
        self._exporters[harness] = now_ms
        self._exporters.move_to_end(harness)
        _bound(self._exporters, MAX_RUNS)  # type: ignore[arg-type]

    def await_outcome(self, report: ToolReport, now_ms: int) -> Pending | None:
        """Hold ``report`` for its OTLP twin when its harness exports OTLP; else None.

        Not when the twin came first (its row, with its outcome, is stored: this
        report is then its duplicate).
        """
        seen = self._exporters.get(report.harness)
        if report.call_id is None or seen is None or now_ms - seen > EXPORTER_WINDOW_MS:
            return None
        reports = self._reports.get((report.harness, report.run))
        twin = reports.by_id.get(report.call_id) if reports is not None else None
        if twin is not None and twin.source == OTLP:
            return None
        pending = Pending(report)
        self._pending[(report.harness, report.run, report.call_id)] = pending
        return pending

    def settle(self, pending: Pending) -> ToolReport:
        """The held report, with the OTLP twin's outcome when it came; no longer held."""
        report = pending.report
        assert report.call_id is not None
        self._pending.pop((report.harness, report.run, report.call_id), None)
        twin = pending.merged
        if twin is None or twin.outcome is None:
            return report
        return report.replace(outcome=twin.outcome, cause_digest=twin.cause_digest, n=twin.n)

    def call(self, report: ToolReport, now_ms: int) -> Decided:
        """The rows for one reported call: none when it is the other source's duplicate."""
        if report.source == OTLP and report.call_id is not None:
            pending = self._pending.get((report.harness, report.run, report.call_id))
            if pending is not None and pending.merged is None:
                pending.merged = report  # the held hook report takes its outcome
                pending.done.set()
                return Decided((), duplicate=True)
        if self._duplicate(report, now_ms):
            return Decided((), duplicate=True)
        d = self.deriver
        # The tool_call row in INSERT_COLUMNS order, as make_row would build it but
        # without its check: every value of a report already has its journal shape
        # (identifiers passed ident(), digests come from digest(), paths from
        # journal_path(), the outcome is an enum literal). tests/serve/test_otlp_rows.py
        # checks every row the receiver emits against check_values.
        row = (
            0,
            "run_event",
            "tool_call",
            "observer",
            report.harness,
            report.project,
            report.run,
            report.tool,
            report.outcome,
            report.paths[0] if report.paths else None,
            report.cause_digest,
            report.args_digest,
            None,
            None,
            report.n,
        )
        rows: list[InsertRow] = [row]
        if report.paths and report.outcome != "error":
            if self.recall is not None:
                for path in report.paths:
                    if path not in d.editors:
                        editors = self.recall.editors(path, now_ms - d.collision_window_ms)
                        if editors:
                            d.seed_editors(path, editors)
            rows.extend(
                d.edits(
                    harness=report.harness,
                    project=report.project,
                    run=report.run,
                    paths=report.paths,
                    now_ms=now_ms,
                )
            )
        key = (report.harness, report.run)
        if self.recall is not None and d.loop_guard > 0 and key not in d.streaks:
            streak = self.recall.streak(report.harness, report.run)
            if streak is not None:
                d.seed_streak(report.harness, report.run, *streak)
        loop_rows, trip = d.loop(
            harness=report.harness,
            project=report.project,
            run=report.run,
            tool=report.tool,
            args_digest=report.args_digest,
        )
        rows.extend(loop_rows)
        return Decided(tuple(rows), trip)

    def forget(self, harness: str, run: str | None) -> None:
        """Drop what is remembered of a run whose rows were not stored after all."""
        if run is not None:
            self._runs.pop((harness, run), None)
        self._reports.pop((harness, run), None)
        self.deriver.streaks.pop((harness, run), None)

    # -- matching -----------------------------------------------------------------

    def _duplicate(self, report: ToolReport, now_ms: int) -> bool:
        key = (report.harness, report.run)
        reports = self._reports.get(key)
        if reports is None:
            reports = self._reports[key] = _RunReports()
            _bound(self._reports, MAX_RUNS)
        reports.expire(now_ms - MATCH_WINDOW_MS)
        other = reports.match(report)
        if other is not None:
            reports.take(other)
            return True
        reports.add(report, now_ms)
        return False


def _bound(
    table: OrderedDict[tuple[str, str | None], T] | OrderedDict[tuple[str, str], T], size: int
) -> None:
    while len(table) > size:
        table.popitem(last=False)
