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

from collections.abc import Sequence
from typing import Protocol

from engine.journal.rows import InsertRow
from engine.serve.verdict import GateState


class Journal(Protocol):
    """Where a handler's rows go: ``submit`` queues them, ``acknowledge`` waits for the commit.

    Both raise :class:`~engine.journal.queue.StoreUnavailable` when the rows
    are not (and will not be) stored.
    """

    def submit(self, rows: Sequence[InsertRow]) -> object: ...

    def acknowledge(self, token: object) -> None: ...


class Gate(Protocol):
    """Holds and stops for a harness, once the evaluator has seen its rows.

    Returns the state and whether the wait ran out first (a late answer);
    raises :class:`~engine.serve.verdict.GateUnavailable` when the store
    cannot be read.
    """

    def state(self, harness: str, run: str | None, *, holds: bool) -> tuple[GateState, bool]: ...
