"""One hook handler for both transports: serve's ``POST /hooks/claude-code`` and the command hook.

The handler maps a payload to rows (:mod:`.hooks`), offers them to a sink
that never blocks (serve: the journal's admission queue; the command hook:
one direct admission), remembers loop-guard trips so the very next call of a
tripped run is stopped even before its ``loop_stopped`` row commits, and
turns the store's holds and stops (:mod:`.gate`) into the event's answer.
Reading the store is left to the caller, so serve can do it off its event
loop and the command hook inline.
"""

from __future__ import annotations

import sqlite3
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Final

from engine.journal.rows import InsertRow, RowError
from engine.record import Record
from engine.rules.stops import RunStop, loop_reason
from engine.serve.derive import EDIT_TOOLS, Deriver, LoopTrip
from engine.serve.gate import GateState, answer
from engine.serve.hooks import (
    GATED_EVENTS,
    Mapped,
    PayloadError,
    edited_paths,
    map_hook,
    resolve_identity,
)

MAX_TRIPS = 10_000


class Offered(Record):
    """What happened to a mapped payload's rows: queued, dropped (queue full), refused."""

    __slots__ = ("dropped", "queued", "refused")
    __match_args__ = ("queued", "dropped", "refused")

    def __init__(self, queued: int, dropped: int, refused: int) -> None:
        self.queued: Final = queued
        self.dropped: Final = dropped
        self.refused: Final = refused


class HookHandler:
    """Maps, offers and answers; one instance per process (it holds the derived state)."""

    def __init__(self, deriver: Deriver, offer: Callable[[InsertRow], bool]) -> None:
        self.deriver = deriver
        self.offer = offer
        self.trips: OrderedDict[tuple[str, str | None], LoopTrip] = OrderedDict()

    def ingest(
        self, payload: object, *, harness: str | None, project: str | None, now_ms: int
    ) -> tuple[Mapped, Offered]:
        """Map ``payload`` and offer its rows. PayloadError when it is no hook payload."""
        if not isinstance(payload, dict):
            raise PayloadError(f"expected a JSON object, got {type(payload).__name__}")
        who, proj = resolve_identity(payload, harness, project)
        if who is None:
            raise PayloadError(
                "harness: not given (?harness=ID or --harness) and no git top-level in cwd "
                "names one"
                if harness is None
                else "harness: not an identifier ([A-Za-z0-9._:/@+-], 1-256 chars)"
            )
        refused_project = project is not None and proj is None
        try:
            mapped = map_hook(
                payload, harness=who, project=proj, deriver=self.deriver, now_ms=now_ms
            )
        except RowError as exc:
            mapped = Mapped(
                str(payload.get("hook_event_name")), who, proj, None, refused=(exc.field,)
            )
        queued = dropped = 0
        for row in mapped.rows:
            if self.offer(row):
                queued += 1
            else:
                dropped += 1
        if mapped.trip is not None:
            self.trips[(mapped.trip.harness, mapped.trip.run)] = mapped.trip
            while len(self.trips) > MAX_TRIPS:
                self.trips.popitem(last=False)
        refused = len(mapped.refused) + (1 if refused_project else 0)
        return mapped, Offered(queued, dropped, refused)

    def gate_question(self, mapped: Mapped) -> tuple[bool, str | None] | None:
        """(read holds?, run) the answer needs from the store; None when it needs nothing."""
        holds = mapped.event in GATED_EVENTS
        if not holds and mapped.run is None:
            return None
        return holds, mapped.run

    def respond(self, mapped: Mapped, state: GateState) -> tuple[str, dict[str, object]]:
        """The answer: an in-memory loop-guard trip first, then the store's stops and holds."""
        trip = self.trips.get((mapped.harness, mapped.run))
        if trip is not None and state.stop is None and mapped.run is not None:
            state = GateState(
                state.holds,
                RunStop(
                    mapped.harness,
                    mapped.run,
                    "loop_guard",
                    None,
                    0,
                    loop_reason(trip.tool, trip.count),
                ),
            )
        return answer(mapped.event, state)


def seed_from_store(
    deriver: Deriver,
    conn: sqlite3.Connection,
    payload: dict[str, object],
    harness: str,
    run: str | None,
    now_ms: int,
) -> None:
    """Give a one-shot deriver (the command hook) the state serve would hold in memory.

    The streak is read back from the run's newest tool_call rows; recent
    editors of the edited path from file_edited rows within the window.
    """
    tool = payload.get("tool_name")
    if deriver.loop_guard > 0 and isinstance(tool, str):
        rows = conn.execute(
            "SELECT tool, args_digest FROM rule_journal WHERE harness = ? AND type = 'tool_call' "
            "AND run IS ? ORDER BY seq DESC LIMIT ?",
            (harness, run, deriver.loop_guard + 1),
        ).fetchall()
        if rows and rows[0][1] is not None:
            count = 0
            for r in rows:
                if tuple(r) != tuple(rows[0]):
                    break
                count += 1
            deriver.seed_streak(harness, run, rows[0][0], rows[0][1], count)
    if isinstance(tool, str) and tool in EDIT_TOOLS:
        for path in _paths(tool, payload):
            editors = {
                str(h): int(at)
                for h, at in conn.execute(
                    "SELECT harness, MAX(at) FROM rule_journal WHERE type = 'file_edited' "
                    "AND path = ? AND at > ? GROUP BY harness",
                    (path, now_ms - deriver.collision_window_ms),
                )
            }
            if editors:
                deriver.seed_editors(path, editors)


def _paths(tool: str, payload: dict[str, object]) -> Iterable[str]:
    return edited_paths(tool, payload.get("tool_input"), payload.get("cwd"))
