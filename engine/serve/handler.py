"""One hook handler for every transport: :meth:`HookHandler.handle` owns a call, payload to answer.

Serve's ``POST /hooks/<agent>``, the command hook ``harness hook <agent>`` and
the tests all call ``handle``; they only move bytes. The sequence, in one
place:

1. read the payload in its agent's dialect (:mod:`.agents`) and name who is
   calling (harness, project);
2. decide its rows (:class:`.calls.CallBook`: ``run_started`` for a new run,
   one ``tool_call`` per real call, derived rows) and queue them, under the
   book's lock so that journal order is decision order (a Codex call first
   waits, at most ``[serve] merge_wait``, for its OTLP record's outcome);
3. wait until they are committed: an answer means the rows are stored;
4. for a gated moment (a tool about to run, a prompt): wait until the
   acting evaluator has seen every row of this harness (read-your-writes, at
   most ``[serve] gate_wait``), then read its holds and the run's stop; for
   any other moment of a run, read the run's stop as it is (a stop found on
   the next gated moment still blocks, so nothing waits here);
5. render the verdict in the agent's own JSON.

The journal and the gate are ports (:class:`Journal`, :class:`Gate`): serve
plugs in its group-committing writer and its evaluator's watermark, the
command hook a direct transaction and the store's cursor.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Final

from engine.journal.errors import StoreUnavailable
from engine.journal.rows import IDENT_RULE, RowError
from engine.record import Record
from engine.serve.agents import (
    AFTER_TOOL,
    CODEX,
    END,
    GATED,
    PROMPT,
    START,
    TOOL_FAILED,
    HookEvent,
    PayloadError,
    read_event,
    render,
)
from engine.serve.calls import HOOK, CallBook, ToolReport
from engine.serve.canon import cause_digest, digest, ident, journal_path, project_of
from engine.serve.ports import Gate, GateUnavailable, Journal
from engine.serve.tools import canonical, digest_basis, named_paths
from engine.serve.verdict import BLOCK, DENY, RELEASE, decide


class HookReply(Record):
    """The answer to one hook call and what happened on the way (for the transport and metrics).

    ``status`` 200 carries ``answer`` (the agent's JSON); 400 and 503 carry
    ``text`` (the reason, safe to show) and 503 says what ``failed``: the
    ``store`` (rows not stored) or the ``gate`` (holds and stops unreadable).
    ``decision`` is None when no verdict was asked for.
    """

    __slots__ = (
        "answer",
        "decision",
        "duplicates",
        "failed",
        "label",
        "late",
        "refused",
        "rows",
        "status",
        "text",
    )
    __match_args__ = (
        "status",
        "answer",
        "text",
        "label",
        "rows",
        "duplicates",
        "refused",
        "decision",
        "late",
        "failed",
    )

    def __init__(
        self,
        status: int,
        answer: dict[str, object] | None = None,
        text: str = "",
        label: str = "other",
        rows: int = 0,
        duplicates: int = 0,
        refused: int = 0,
        decision: str | None = None,
        late: bool = False,
        failed: str = "",
    ) -> None:
        self.status: Final = status
        self.answer: Final = answer
        self.text: Final = text
        self.label: Final = label
        self.rows: Final = rows
        self.duplicates: Final = duplicates
        self.refused: Final = refused
        self.decision: Final = decision
        self.late: Final = late
        self.failed: Final = failed


DEFAULT_MERGE_WAIT_S = 1.5


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


class HookHandler:
    """Owns a hook call from payload to answer; one per process (its book holds the memory)."""

    def __init__(
        self,
        book: CallBook,
        journal: Journal,
        gate: Gate,
        clock: Callable[[], int] = _wall_ms,
        *,
        release: str = RELEASE,
        merge_wait_s: float = DEFAULT_MERGE_WAIT_S,
    ) -> None:
        self.book = book
        self.journal = journal
        self.gate = gate
        self.clock = clock
        #: The release command a deny names (with ``--store`` when the store is not the default).
        self.release = release
        #: How long a Codex hook report waits for its OTLP twin's outcome.
        self.merge_wait_s = merge_wait_s

    def handle(
        self, agent: str, payload: object, *, harness: str | None, project: str | None
    ) -> HookReply:
        """Journal ``payload`` (an ``agent`` hook call) and answer it from holds and stops."""
        try:
            event = read_event(agent, payload)
            who, proj = identity(event.payload, harness, project)
        except PayloadError as exc:
            return HookReply(400, text=str(exc))
        refused = list(event.refused)
        if project is not None and proj is None:
            refused.append("project")
        label = event.label
        try:
            rows, dup = self._record(event, who, proj, refused)
        except StoreUnavailable as exc:
            return HookReply(503, text=str(exc), label=label, refused=len(refused), failed="store")
        gated = event.moment in GATED
        if not gated and event.run is None:
            return HookReply(200, {}, label=label, rows=rows, duplicates=dup, refused=len(refused))
        try:
            state, late = self.gate.state(who, event.run, gated=gated)
        except GateUnavailable as exc:
            return HookReply(
                503,
                text=str(exc),
                label=label,
                rows=rows,
                duplicates=dup,
                refused=len(refused),
                failed="gate",
            )
        verdict = decide(state, gated=gated, release=self.release)
        decision = (
            BLOCK if verdict.decision == DENY and event.moment == PROMPT else verdict.decision
        )
        return HookReply(
            200,
            render(event, verdict),
            label=label,
            rows=rows,
            duplicates=dup,
            refused=len(refused),
            decision=decision,
            late=late,
        )

    def _record(
        self, event: HookEvent, harness: str, project: str | None, refused: list[str]
    ) -> tuple[int, int]:
        """Decide, queue and commit the event's rows; (rows stored, duplicates)."""
        book = self.book
        now = self.clock()
        report = None
        if event.moment in (AFTER_TOOL, TOOL_FAILED):
            report = tool_report(event, harness, project, refused)
        pending = None
        if report is not None and event.agent == CODEX:
            with book.lock:
                pending = book.await_outcome(report, now)
            if pending is not None:  # Codex's hook cannot say it failed; its OTLP record can
                pending.done.wait(self.merge_wait_s)
        with book.lock:
            if pending is not None:
                report = book.settle(pending)
            try:
                rows = book.run_event(
                    harness,
                    project,
                    event.run,
                    cwd=event.payload.get("cwd"),
                    start=event.moment == START,
                    end=event.moment == END,
                )
                decided = book.call(report, now) if report is not None else None
            except RowError as exc:  # not expected: every value is checked on the way in
                book.forget(harness, event.run)
                refused.append(exc.field)
                return 0, 0
            except StoreUnavailable:  # the book could not read back what it lacked
                book.forget(harness, event.run)
                raise
            if decided is not None:
                rows.extend(decided.rows)
            try:
                token = self.journal.submit(rows) if rows else None
            except StoreUnavailable:
                book.forget(harness, event.run)
                raise
        if token is not None:
            try:
                self.journal.acknowledge(token)
            except StoreUnavailable:
                with book.lock:
                    book.forget(harness, event.run)
                raise
        return len(rows), int(decided is not None and decided.duplicate)


def tool_report(
    event: HookEvent, harness: str, project: str | None, refused: list[str]
) -> ToolReport | None:
    """A finished tool call as a hook reports it; None (``tool_name`` refused) without a tool."""
    p = event.payload
    tool = ident(p.get("tool_name"))
    if tool is None:
        refused.append("tool_name")
        return None
    tool_input = p.get("tool_input")
    cwd = p.get("cwd")
    named = named_paths(tool, tool_input)
    paths = tuple(dict.fromkeys(j for j in (journal_path(n, cwd) for n in named) if j))
    if named and not paths:
        refused.append("path")
    code = event.exit_code()
    failed = event.moment == TOOL_FAILED or bool(code)
    name = canonical(tool)
    return ToolReport(
        HOOK,
        harness,
        project,
        event.run,
        name,
        "error" if failed else "ok",
        digest(digest_basis(name, tool_input)) if "tool_input" in p else None,
        cause_digest(event.error()) if failed else None,
        paths,
        ident(p.get("tool_use_id")),
        code,
    )


def identity(
    payload: Mapping[str, object], harness: str | None, project: str | None
) -> tuple[str, str | None]:
    """(harness, project): the given ones, else the git top-level basename of ``cwd``.

    PayloadError when no harness can be named: it is who a hold applies to.
    """
    guessed = project_of(payload.get("cwd")) if project is None or harness is None else None
    who = ident(harness) if harness is not None else guessed
    if who is None:
        raise PayloadError(
            "harness: not given (?harness=ID or --harness) and no git top-level in cwd names one"
            if harness is None
            else f"harness: not an identifier ({IDENT_RULE})"
        )
    return who, ident(project) if project is not None else guessed
