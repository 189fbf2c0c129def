"""The OTLP receiver: decoded log records in, tool calls handed to the book, rows committed.

Like the collector's OTLP receiver, it decodes nothing itself (the wire is
:mod:`.otlp`) and owns no metrics (they are recorded around it, from its
:class:`OtlpReply`). What it knows is what the three agents' records mean:

- a record's *name* is its ``event_name`` when that is an event identifier
  (Codex puts a source location such as ``event otel/src/tool_result.rs:54``
  there), else its ``event.name`` attribute, else a string body that is an
  event identifier (``tool_result`` from service ``claude-code`` meaning
  ``claude_code.tool_result``);
- ``claude_code.tool_result``, ``codex.tool_result`` and
  ``gemini_cli.tool_call`` are tool calls: tool name, success, the run
  (``session.id`` / ``conversation.id``), arguments (digested), the error
  (digested), the call id (Codex's ``call_id``); a Codex shell result is an
  error when its output says the process exited non-zero (only that number
  is read, into ``n``); a Gemini call a hook blocked never ran and is no call;
- identity is the resource's ``harness.id`` and ``harness.project``; a record
  without a usable ``harness.id`` is rejected and counted in
  ``partial_success``;
- every other name is accepted, ignored and counted.

Every tool call goes to the same :class:`~engine.serve.calls.CallBook` the
hooks use, so a call both sources report is one row.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any, Final

from google.protobuf.message import Message

from engine.journal.errors import StoreUnavailable
from engine.journal.rows import InsertRow, RowError
from engine.record import Record
from engine.serve.calls import OTLP, CallBook, ToolReport
from engine.serve.canon import cause_digest, digest, digest_json_text, ident, journal_path
from engine.serve.otlp import as_logs, value_of
from engine.serve.ports import Journal
from engine.serve.tools import EDIT_TOOLS, PATCH_TOOLS, canonical, digest_basis, named_paths

CLAUDE_RESULT, CODEX_RESULT, GEMINI_CALL = (
    "claude_code.tool_result",
    "codex.tool_result",
    "gemini_cli.tool_call",
)
TOOL_RESULTS = frozenset({CLAUDE_RESULT, CODEX_RESULT, GEMINI_CALL})
#: Gemini's ``error_type`` for a call a hook refused: it never ran.
_BLOCKED = frozenset({"policy_violation", "stop_execution"})
#: An event name: dotted lowercase words (``codex.tool_result``, ``tool_result``).
_EVENT_NAME = re.compile(r"[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*")
_EXIT = re.compile(r"^(?:Process exited with code|Exit code:?) (-?\d{1,10})\s*$", re.MULTILINE)
#: The record attributes the mapping reads; the rest (prompts, outputs it does not
#: need, costs) are never even converted.
WANTED = frozenset(
    {
        "event.name",
        "tool_name",
        "function_name",
        "success",
        "session.id",
        "conversation.id",
        "call_id",
        "tool_use_id",
        "tool_input",
        "arguments",
        "tool_parameters",
        "function_args",
        "error",
        "error_type",
        "output",
    }
)
#: Labels for the metrics: the names serve knows, everything else is ``other``.
KNOWN_NAMES = TOOL_RESULTS | frozenset(
    {
        "claude_code.user_prompt",
        "claude_code.api_request",
        "claude_code.api_error",
        "claude_code.tool_decision",
        "codex.conversation_starts",
        "codex.api_request",
        "codex.sse_event",
        "codex.user_prompt",
        "codex.tool_decision",
        "codex.startup_phase",
        "codex.turn_ttft",
        "gemini_cli.config",
        "gemini_cli.user_prompt",
        "gemini_cli.api_request",
        "gemini_cli.api_response",
        "gemini_cli.api_error",
        "gemini_cli.hook_call",
        "gemini_cli.model_routing",
        "gemini_cli.file_operation",
    }
)


class OtlpReply(Record):
    """What one request did: per-(name, verdict) counts, rows, rejections and the first reason.

    ``status`` is 200, or 503 with ``text`` when the rows could not be stored.
    """

    __slots__ = ("duplicates", "first_reason", "records", "rejected", "rows", "status", "text")
    __match_args__ = (
        "status",
        "records",
        "rows",
        "duplicates",
        "rejected",
        "first_reason",
        "text",
    )

    def __init__(
        self,
        status: int,
        records: dict[tuple[str, str], int],
        rows: int,
        duplicates: int,
        rejected: int,
        first_reason: str,
        text: str = "",
    ) -> None:
        self.status: Final = status
        self.records: Final = records
        self.rows: Final = rows
        self.duplicates: Final = duplicates
        self.rejected: Final = rejected
        self.first_reason: Final = first_reason
        self.text: Final = text


class _Tally:
    """Counting for one request (mutable, local to one call of :meth:`OtlpReceiver.receive`)."""

    __slots__ = ("duplicates", "first_reason", "records", "rejected")

    def __init__(self) -> None:
        self.records: dict[tuple[str, str], int] = {}
        self.rejected = 0
        self.duplicates = 0
        self.first_reason = ""

    def count(self, label: str, verdict: str) -> None:
        key = (label, verdict)
        self.records[key] = self.records.get(key, 0) + 1

    def reject(self, label: str, reason: str) -> None:
        self.rejected += 1
        self.count(label, "rejected")
        if not self.first_reason:
            self.first_reason = reason


class OtlpReceiver:
    """Maps a request's records to the book and commits the rows before the reply."""

    def __init__(self, book: CallBook, journal: Journal, clock: Callable[[], int]) -> None:
        self.book = book
        self.journal = journal
        self.clock = clock

    def receive(self, request: Message) -> OtlpReply:
        """Map and commit ``request`` (a :data:`~engine.serve.otlp.Logs` or the official one)."""
        logs = as_logs(request)
        tally = _Tally()
        book = self.book
        touched: list[tuple[str, str | None]] = []
        try:
            with book.lock:
                try:  # a store read of the book's (after a restart) or the queue may refuse
                    rows = self._map(logs, tally, touched)
                    token = self.journal.submit(rows) if rows else None
                except StoreUnavailable:
                    _forget(book, touched)
                    raise
            if token is not None:
                try:
                    self.journal.acknowledge(token)
                except StoreUnavailable:
                    with book.lock:
                        _forget(book, touched)
                    raise
        except StoreUnavailable as exc:
            return OtlpReply(503, tally.records, 0, 0, 0, "", str(exc))
        return OtlpReply(
            200, tally.records, len(rows), tally.duplicates, tally.rejected, tally.first_reason
        )

    def _map(
        self,
        request: Any,
        tally: _Tally,
        touched: list[tuple[str, str | None]],
    ) -> list[InsertRow]:
        """Every record of ``request`` into rows (under the book's lock); nothing queued yet."""
        now = self.clock()
        rows: list[InsertRow] = []
        for rl in request.resource_logs:
            res = {key: value_of(value) for key, value in rl.resource.attributes.items()}
            service = res.get("service.name")
            harness = ident(res.get("harness.id"))
            project_raw = res.get("harness.project")
            project = ident(project_raw)
            for sl in rl.scope_logs:
                for rec in sl.log_records:
                    a = wanted_attrs(rec.attributes)
                    name = event_name(rec, a, service)
                    label = name if name in KNOWN_NAMES else "other"
                    if harness is None:
                        tally.reject(
                            label, "resource attribute harness.id missing or not an identifier"
                        )
                        continue
                    if name is not None and name.startswith("codex."):
                        self.book.exporting(harness, now)  # its outcomes arrive here too
                    if name not in TOOL_RESULTS:
                        tally.count(label, "ignored")
                        continue
                    if project_raw is not None and project is None:
                        tally.reject(label, "harness.project: not an identifier")
                        continue
                    try:
                        report = tool_report(name, a, res, harness, project, self.book)
                        if report is None:
                            tally.count(label, "blocked")
                            continue
                        touched.append((harness, report.run))
                        rows.extend(self.book.run_event(harness, project, report.run))
                        decided = self.book.call(report, now)
                    except RowError as exc:
                        tally.reject(label, f"{exc.field}: not a journal value")
                        continue
                    if decided.duplicate:
                        tally.duplicates += 1
                        tally.count(label, "duplicate")
                    else:
                        rows.extend(decided.rows)
                        tally.count(label, "admitted")
        return rows


def _forget(book: CallBook, touched: list[tuple[str, str | None]]) -> None:
    """Rows not stored: the book forgets those runs, so the store is asked again."""
    for harness, run in touched:
        book.forget(harness, run)


def wanted_attrs(attrs: Mapping[str, Any]) -> dict[str, object]:
    """A record's :data:`WANTED` attributes, from its attribute map (key to AnyValue).

    Only these keys are converted (prompts, outputs and costs never are).
    Almost every value an exporter sends is a string, so a non-empty
    ``string_value`` is taken as it is and only the other kinds pay for
    :func:`value_of`.
    """
    out: dict[str, object] = {}
    for key in attrs:
        if key in WANTED:
            value = attrs[key]
            text = value.string_value
            out[key] = text if text else value_of(value)
    return out


#: Strings already judged event names or not (exporters repeat a handful of them).
_NAMES: dict[str, bool] = {}


def _is_event_name(text: str) -> bool:
    known = _NAMES.get(text)
    if known is None:
        known = _EVENT_NAME.fullmatch(text) is not None
        if len(_NAMES) < 4096:
            _NAMES[text] = known
    return known


def event_name(record: Any, attrs: Mapping[str, object], service: object) -> str | None:
    """The record's event name (see the module docstring for where it is looked for)."""
    name: object = record.event_name
    if not (isinstance(name, str) and name and _is_event_name(name)):
        name = attrs.get("event.name")
        if not (isinstance(name, str) and name):
            body = record.body.string_value
            name = body if body and _is_event_name(body) else None
    if name == "tool_result" and service == "claude-code":
        return CLAUDE_RESULT
    return name if isinstance(name, str) else None


def tool_report(
    name: str,
    a: Mapping[str, object],
    res: Mapping[str, object],
    harness: str,
    project: str | None,
    book: CallBook,
) -> ToolReport | None:
    """One tool-call record as a report; None for a Gemini call a hook blocked (it never ran).

    RowError (naming the field) when a value cannot be journaled.
    """
    gemini = name == GEMINI_CALL
    blocked = a.get("error_type")
    if gemini and isinstance(blocked, str) and blocked in _BLOCKED:
        return None
    tool = ident(a.get("function_name") if gemini else a.get("tool_name"))
    if tool is None:
        raise RowError("tool", "missing")
    run_raw = _get(a, res, "session.id", "conversation.id")
    run = ident(run_raw)
    if run_raw is not None and run is None:
        raise RowError("run", "not an identifier")
    name_ = canonical(tool)
    args, parsed = _args(a, name_)
    success = a.get("success")
    ok = success is True or (isinstance(success, str) and success.lower() == "true")
    outcome = None if success is None else ("ok" if ok else "error")
    output = a.get("output")
    exit_code = _exit_code(output) if name == CODEX_RESULT else None
    if exit_code:
        outcome = "error"
    cause = None
    if outcome == "error":
        cause = cause_digest(a.get("error") if "error" in a else output)
    paths: tuple[str, ...] = ()
    if tool in EDIT_TOOLS or tool in PATCH_TOOLS:
        cwd = book.cwd(harness, run)
        joined = (journal_path(p, cwd) for p in named_paths(tool, parsed))
        paths = tuple(dict.fromkeys(p for p in joined if p))
    call_id = ident(a.get("call_id") or a.get("tool_use_id"))
    return ToolReport(
        OTLP,
        harness,
        project,
        run,
        name_,
        outcome,
        args,
        cause,
        paths,
        call_id,
        exit_code,
    )


def _get(a: Mapping[str, object], res: Mapping[str, object], *keys: str) -> object:
    for key in keys:
        if key in a:
            return a[key]
        if key in res:
            return res[key]
    return None


def _exit_code(output: object) -> int | None:
    """The exit code a Codex shell result's output reports (the number only), if any."""
    if not isinstance(output, str):
        return None
    m = _EXIT.search(output)
    code = int(m.group(1)) if m else None
    return code if code is not None and -(2**31) <= code < 2**31 else None


#: The C scanner behind ``json.loads``: called directly it skips two regex
#: whitespace scans and three Python frames per call (serve parses one tool
#: input per record). Stateless between calls (it clears its memo).
_scan_once: Callable[[str, int], tuple[object, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _json_loads(text: str) -> object:
    """Exactly ``json.loads(text)`` for a str, faster when it is one JSON value and nothing else.

    A document that starts with its value and ends with it (what exporters
    send) is read by the scanner alone; anything else (leading or trailing
    whitespace, extra data, no value, a BOM) goes through ``json.loads``, which
    then returns the same value or raises the same error it always did.
    """
    try:
        value, end = _scan_once(text, 0)
    except StopIteration:
        return json.loads(text)
    return value if end == len(text) else json.loads(text)


def _args(a: Mapping[str, object], tool: str) -> tuple[str | None, object]:
    """(args digest, parsed arguments) from the first arguments attribute present.

    The digest is over :func:`~engine.serve.tools.digest_basis` (a shell
    call's command), as the hooks take it, so both sources agree.
    """
    for key in ("tool_input", "arguments", "tool_parameters", "function_args"):
        if key not in a:
            continue
        value = a[key]
        if isinstance(value, str):
            try:
                parsed: object = _json_loads(value)
            except (ValueError, RecursionError):
                return digest_json_text(value), value
            return digest(digest_basis(tool, parsed)), parsed
        return digest(digest_basis(tool, value)), value
    return None, None
