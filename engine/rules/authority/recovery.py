"""How an acting evaluator rides out its store's faults: new connection, back-off, say why.

``harness serve``, ``harness evaluate --follow`` and a console started with
``--act`` run the live evaluator for hours on a store that can be locked,
full, read-only, or answer I/O errors and then come back. For each, such an
error must end one
attempt (one connection's worth of :func:`~engine.rules.authority.lease.serve`),
not the evaluator: it says why, waits (doubling), and starts again on a new
connection, until the attempt works again. A store missing from its path
counts as such a fault once an attempt has worked (its disk is away), and as
the operator's error before. A connection that met an I/O error may call the
store malformed, so the store counts as corrupt (the one fault that ends the
evaluator) only when a new connection finds it so too, before anything
worked in between.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable

from engine.errors import InputError
from engine.journal.store_faults import store_error_is_fatal
from engine.store.db import StoreMissing


class Reconnect(Exception):
    """Raised inside an attempt: start again at once on a new connection (no fault to report)."""


class FaultRide:
    """Runs attempts until one returns or ``stop`` is set, through store faults.

    ``on_fault(why)`` follows each failed attempt, ``on_recovered()`` the
    first :meth:`working` after one. The attempt calls :meth:`working` once it
    works (built its evaluator, or took a step), which also resets the
    back-off. Only a store corrupt on two attempts in a row, or an error that
    is not the store's (an InputError of a rule, a bug), leaves :meth:`run`,
    as the exception it was.
    """

    def __init__(
        self,
        stop: threading.Event,
        *,
        on_fault: Callable[[str], None] | None = None,
        on_recovered: Callable[[], None] | None = None,
        backoff_s: tuple[float, float] = (0.1, 2.0),
    ) -> None:
        self.stop = stop
        self.on_fault = on_fault
        self.on_recovered = on_recovered
        self.backoff_s = backoff_s
        self.faulted = False
        self._pause = backoff_s[0]
        self._corrupt = 0  # attempts in a row that found the store corrupt
        self._worked = False  # an attempt has worked: a missing store is then a fault too

    def working(self) -> None:
        """The current attempt works: the fault, if there was one, is over."""
        self._worked = True
        if self.faulted:
            self.faulted = False
            self._pause, self._corrupt = self.backoff_s[0], 0
            if self.on_recovered is not None:
                self.on_recovered()

    def run(self, attempt: Callable[[], None]) -> None:
        while not self.stop.is_set():
            try:
                attempt()
                return
            except Reconnect:
                continue
            except (sqlite3.Error, InputError) as exc:
                cause = exc.__context__ if isinstance(exc, InputError) else exc
                if isinstance(exc, StoreMissing) and self._worked:
                    why = str(exc)  # it was there: its disk is away, or it is being restored
                elif isinstance(cause, sqlite3.DatabaseError):
                    why = str(cause)
                    self._corrupt = self._corrupt + 1 if store_error_is_fatal(cause) else 0
                    if self._corrupt >= 2:
                        raise
                else:
                    raise  # not the store's fault (a rule, a bad path): nothing to wait for
                self.faulted = True
                if self.on_fault is not None:
                    self.on_fault(why)
                self.stop.wait(self._pause)
                self._pause = min(self._pause * 2, self.backoff_s[1])
