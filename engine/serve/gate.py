"""The gate: answer a hook from the store's holds and stops, in the JSON each event expects.

Authority stays where it was: only rules in ``[memory.rules] enforce`` create
holds or stops; the gate only reports them. A hold refuses new work of a
harness (PreToolUse is denied, UserPromptSubmit blocked) until released; a
stop names a run and every later hook call of that run is told to stop
(``continue: false``), while a new session is a new run and starts free.

The gate never guesses: when the store cannot be read it raises
:class:`GateUnavailable`, which serve turns into HTTP 503 with the reason and
the command hook into a non-zero exit (Claude Code proceeds in both cases,
by its own design) and which is counted for metrics and doctor.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Final

from engine.record import Record
from engine.rules.holds import Hold, active_holds
from engine.rules.stops import RunStop, stop_for_run

#: Decisions, as metrics labels.
FREE, DENY, BLOCK, STOP = "free", "deny", "block", "stop"
_HOLD_PREFIX = re.compile(r"^rule_hold: rule `[^`]*` fired at seq \d+(: )?")


class GateUnavailable(RuntimeError):
    """The store could not be read; the reason is safe to show (no agent text).

    ``busy`` says the store was only locked (worth one more try with a wait).
    """

    def __init__(self, message: str, *, busy: bool = False) -> None:
        super().__init__(message)
        self.busy = busy


class GateState(Record):
    """What the store says about one (harness, run) right now."""

    __slots__ = ("holds", "stop")
    __match_args__ = ("holds", "stop")

    def __init__(self, holds: tuple[Hold, ...] = (), stop: RunStop | None = None) -> None:
        self.holds: Final = holds
        self.stop: Final = stop


def read_state(
    conn: sqlite3.Connection, harness: str, run: str | None, *, holds: bool
) -> GateState:
    """Read holds (when ``holds``) and the run's stop; GateUnavailable on a store error."""
    try:
        found = tuple(active_holds(conn, harness)) if holds else ()
        stop = stop_for_run(conn, harness, run) if run is not None else None
    except sqlite3.Error as exc:
        text = str(exc)
        raise GateUnavailable(
            f"cannot read holds and stops from the store: {text}",
            busy="locked" in text or "busy" in text,
        ) from None
    return GateState(found, stop)


def hold_text(hold: Hold) -> str:
    message = _HOLD_PREFIX.sub("", hold.reason)
    return (
        f"held by rule {hold.rule} (hold {hold.id})"
        + (f": {message}" if message else "")
        + f"; release: harness holds release {hold.id}"
    )


def stop_text(stop: RunStop) -> str:
    if stop.rule == "loop_guard":
        return f"stopped by the loop guard: {stop.reason} (run {stop.run})"
    fire = f", fire {stop.fire_id}" if stop.fire_id is not None else ""
    return f"stopped by rule {stop.rule} (run {stop.run}{fire}): {stop.reason}"


def answer(event: str, state: GateState) -> tuple[str, dict[str, object]]:
    """(decision, JSON answer) for hook ``event`` given the store ``state``."""
    if state.stop is not None:
        return STOP, {"continue": False, "stopReason": stop_text(state.stop)}
    if state.holds and event in ("PreToolUse", "UserPromptSubmit"):
        text = "; ".join(hold_text(h) for h in state.holds)
        if event == "PreToolUse":
            return DENY, {
                "hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "permissionDecision": "deny",
                    "permissionDecisionReason": text,
                }
            }
        return BLOCK, {"decision": "block", "reason": text}
    return FREE, {}
