"""The two ports a use case of serve plugs into: where rows go, and what the gate reads.

:class:`~engine.serve.handler.HookHandler` and
:class:`~engine.serve.receiver.OtlpReceiver` own their sequences; what they
need from the outside is only this: a journal that stores rows and says when
they are committed, and a gate that reads holds and stops once the evaluator
has caught up. Serve plugs in its group-committing writer and its own
evaluator's watermark (:mod:`.adapters`); the command hook plugs in one direct
transaction and the store's cursor (:mod:`.direct`); tests plug in whatever
they need to see.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Final, Protocol

from engine.journal.rows import InsertRow
from engine.record import Record
from engine.rules.authority.holds import Hold, active_holds
from engine.rules.authority.stops import RunStop, stop_for_run


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


class Journal(Protocol):
    """Where a handler's rows go: ``submit`` queues them, ``acknowledge`` waits for the commit.

    Both raise :class:`~engine.journal.queue.StoreUnavailable` when the rows
    are not (and will not be) stored.
    """

    def submit(self, rows: Sequence[InsertRow]) -> object: ...

    def acknowledge(self, token: object) -> None: ...


class Gate(Protocol):
    """Holds and stops for a harness.

    For a ``gated`` moment (a tool about to run, a prompt) the answer comes
    once the evaluator has seen every row of the harness (read-your-writes,
    bounded) and includes its holds; for any other moment of a run it is the
    run's stop as the store says it now (nothing waits on it). Returns the
    state and whether the wait ran out first (a late answer); raises
    :class:`GateUnavailable` when the store cannot be read.
    """

    def state(self, harness: str, run: str | None, *, gated: bool) -> tuple[GateState, bool]: ...
