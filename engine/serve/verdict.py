"""What a hook should be told, given what the store says: the gate's decision and its words.

Authority stays where it was: only rules in ``[memory.rules] enforce`` create
holds or stops; this module only reads them. A hold refuses new work of a
harness (a tool about to run is denied, a prompt blocked) until released; a
stop names a run, and every later hook call of that run is told to stop,
while a new session is a new run and starts free.

The verdict is agent-neutral (:class:`Verdict`); :mod:`engine.serve.agents`
renders it in each agent's own JSON. What the store says (holds, the run's
stop) is read by the gate port (:mod:`engine.serve.ports`), which never
guesses: when the store cannot be read the hook gets 503 (serve) or a
non-zero, non-blocking exit (the command hook).
"""

from __future__ import annotations

import re
from typing import Final

from engine.record import Record
from engine.rules.authority.holds import Hold
from engine.rules.authority.stops import RunStop
from engine.serve.ports import GateState

#: Decisions, as metrics labels: free; deny (a tool), block (a prompt); stop (a run).
#: A vocabulary of its own, not the rule levels of engine.vocab: a hold-level fire becomes a
#: deny or a block, and the loop guard stops a run with no rule level at all.
FREE, DENY, BLOCK, STOP = "free", "deny", "block", "stop"
_HOLD_PREFIX = re.compile(r"^rule_hold: rule `[^`]*` fired at seq \d+(: )?")


class Verdict(Record):
    """The gate's decision for one hook call and the reason to show the agent."""

    __slots__ = ("decision", "reason")
    __match_args__ = ("decision", "reason")

    def __init__(self, decision: str, reason: str = "") -> None:
        self.decision: Final = decision
        self.reason: Final = reason


FREE_VERDICT: Final = Verdict(FREE)


#: How an operator releases a hold, when the store is the one ``harness holds`` finds itself.
RELEASE = "harness holds release"


def release_command(store: str | None) -> str:
    """The release command to print: with ``--store`` when the store is not the default one."""
    if store is None:
        return RELEASE
    safe = store if all(c.isalnum() or c in "/._-+@:~" for c in store) else _quote(store)
    return f"harness holds release --store {safe}"


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def decide(state: GateState, *, gated: bool, release: str = RELEASE) -> Verdict:
    """Stop a stopped run; deny gated work of a held harness; else free."""
    if state.stop is not None:
        return Verdict(STOP, stop_text(state.stop))
    if gated and state.holds:
        return Verdict(DENY, "; ".join(hold_text(h, release) for h in state.holds))
    return FREE_VERDICT


def hold_text(hold: Hold, release: str = RELEASE) -> str:
    """Why a call is denied and the command that releases the hold, as it must be typed."""
    message = _HOLD_PREFIX.sub("", hold.reason)
    return (
        f"held by rule {hold.rule} (hold {hold.id})"
        + (f": {message}" if message else "")
        + f"; release: {release} {hold.id}"
    )


def stop_text(stop: RunStop) -> str:
    if stop.rule == "loop_guard":
        return f"stopped by the loop guard: {stop.reason} (run {stop.run})"
    fire = f", fire {stop.fire_id}" if stop.fire_id is not None else ""
    return f"stopped by rule {stop.rule} (run {stop.run}{fire}): {stop.reason}"
