"""Claude Code hook payloads -> journal rows (DESIGN.md "Real agents", mapping table).

Only identifiers, enums, digests and paths leave this module: ``tool_input``
becomes ``args_digest`` (canonical JSON), an error becomes ``cause_digest``
(its redacted last line), ``file_path``/``notebook_path`` become a path
relative to the session's ``cwd``. Prompts, tool responses, messages and
transcripts are never read beyond their presence.

Events and what they become:

- ``SessionStart``: run_started (run = session_id);
- ``PostToolUse``: tool_call, outcome ok, plus derived graph/loop-guard rows;
- ``PostToolUseFailure``: the same with outcome error and a cause digest;
- ``SessionEnd``: run_finished (outcome ok: the session ended, whatever the reason);
- ``PreToolUse``, ``UserPromptSubmit``: no row; the gate answers them;
- everything else: accepted, no row, counted by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from engine.journal.rows import InsertRow, RowError
from engine.record import Record
from engine.serve.canon import cause_digest, digest, ident, journal_path, project_of
from engine.serve.derive import EDIT_TOOLS, Deriver, LoopTrip, make_row

#: The hook events Claude Code documents; any other name is counted as "other".
HOOK_EVENTS: tuple[str, ...] = (
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PermissionRequest",
    "PostToolUse",
    "PostToolUseFailure",
    "Notification",
    "Stop",
    "SubagentStop",
    "PreCompact",
    "SessionEnd",
)
_KNOWN = frozenset(HOOK_EVENTS)
#: Events whose answer reflects holds (stops apply to every event of a stopped run).
GATED_EVENTS = frozenset({"PreToolUse", "UserPromptSubmit"})


class PayloadError(ValueError):
    """The payload is not a hook payload at all (not an object, no event name)."""


class Mapped(Record):
    """One hook payload, mapped: its event label, identity, rows and refusals."""

    __slots__ = ("event", "harness", "ignored", "project", "refused", "rows", "run", "trip")
    __match_args__ = ("event", "harness", "project", "run", "rows", "refused", "trip", "ignored")

    def __init__(
        self,
        event: str,
        harness: str,
        project: str | None,
        run: str | None,
        rows: tuple[InsertRow, ...] = (),
        refused: tuple[str, ...] = (),
        trip: LoopTrip | None = None,
        ignored: bool = False,
    ) -> None:
        self.event: Final = event
        self.harness: Final = harness
        self.project: Final = project
        self.run: Final = run
        self.rows: Final = rows
        self.refused: Final = refused
        self.trip: Final = trip
        self.ignored: Final = ignored


def event_label(name: object) -> str:
    """A metrics-safe label: a documented event name, else ``other``."""
    return name if isinstance(name, str) and name in _KNOWN else "other"


def edited_paths(tool: str, tool_input: object, cwd: object) -> list[str]:
    """Journal paths an edit tool's input names (relative to ``cwd`` when inside it)."""
    if tool not in EDIT_TOOLS or not isinstance(tool_input, Mapping):
        return []
    out: list[str] = []
    for key in ("file_path", "notebook_path"):
        path = journal_path(tool_input.get(key), cwd)
        if path is not None and path not in out:
            out.append(path)
    return out


def resolve_identity(
    payload: Mapping[str, object], harness: str | None, project: str | None
) -> tuple[str | None, str | None]:
    """(harness, project): the given ones, else the git top-level basename of ``cwd``."""
    guessed = project_of(payload.get("cwd")) if project is None or harness is None else None
    return ident(harness) if harness is not None else guessed, (
        ident(project) if project is not None else guessed
    )


def map_hook(
    payload: object,
    *,
    harness: str,
    project: str | None,
    deriver: Deriver,
    now_ms: int,
) -> Mapped:
    """Map one payload to rows (already checked against the journal shapes)."""
    if not isinstance(payload, Mapping):
        raise PayloadError(f"expected a JSON object, got {type(payload).__name__}")
    name = payload.get("hook_event_name")
    if not isinstance(name, str):
        raise PayloadError("hook_event_name: missing or not a string")
    label = event_label(name)
    refused: list[str] = []
    session = payload.get("session_id")
    run = ident(session)
    if session is not None and run is None:
        refused.append("session_id")
    base = Mapped(label, harness, project, run)
    if label == "SessionStart":
        return _run_row(base, refused, "run_started")
    if label == "SessionEnd":
        return _run_row(base, refused, "run_finished", outcome="ok")
    if label not in ("PostToolUse", "PostToolUseFailure"):
        return Mapped(label, harness, project, run, refused=tuple(refused), ignored=True)
    tool = ident(payload.get("tool_name"))
    if tool is None:
        refused.append("tool_name")
        return Mapped(label, harness, project, run, refused=tuple(refused))
    tool_input = payload.get("tool_input")
    args = digest(tool_input) if "tool_input" in payload else None
    failed = label == "PostToolUseFailure"
    cwd = payload.get("cwd")
    paths = edited_paths(tool, tool_input, cwd)
    named = isinstance(tool_input, Mapping) and any(
        tool_input.get(k) is not None for k in ("file_path", "notebook_path")
    )
    if tool in EDIT_TOOLS and named and not paths:
        refused.append("path")
    rows: list[InsertRow] = [
        make_row(
            "tool_call",
            "observer",
            harness=harness,
            project=project,
            run=run,
            tool=tool,
            outcome="error" if failed else "ok",
            path=paths[0] if paths else None,
            cause_digest=cause_digest(payload.get("error")) if failed else None,
            args_digest=args,
        )
    ]
    if not failed:
        rows.extend(
            deriver.edits(harness=harness, project=project, run=run, paths=paths, now_ms=now_ms)
        )
    loop_rows, trip = deriver.loop(
        harness=harness, project=project, run=run, tool=tool, args_digest=args
    )
    rows.extend(loop_rows)
    return Mapped(label, harness, project, run, tuple(rows), tuple(refused), trip)


def _run_row(base: Mapped, refused: list[str], typ: str, **extra: object) -> Mapped:
    """A run_started / run_finished row; without a usable session id there is no run to name."""
    if base.run is None:
        why = refused if "session_id" in refused else [*refused, "session_id"]
        return Mapped(base.event, base.harness, base.project, None, refused=tuple(why))
    try:
        row = make_row(
            typ, "observer", harness=base.harness, project=base.project, run=base.run, **extra
        )
    except RowError as exc:
        return Mapped(
            base.event, base.harness, base.project, base.run, refused=(*refused, exc.field)
        )
    return Mapped(base.event, base.harness, base.project, base.run, (row,), tuple(refused))
