"""One acting evaluator per store: a lease row with a holder and an expiry.

The console and ``harness evaluate`` may both be open on one store. If both
stored fires, created holds and ran actions, every notify would go out twice
and every stop would be issued twice. So one of them holds a lease (one row,
``id = 1``) and renews it; the other follows without acting and takes over
only when the lease has expired, which is what happens when the holder is
killed (at once when the dead holder was on this host: its pid is gone).
Lease time is wall-clock time, on purpose: it measures whether a
process is alive, not journal time.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

DEFAULT_TTL_MS = 15_000


def wall_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True, slots=True)
class LeaseInfo:
    holder: str
    pid: int
    host: str
    acquired_at: int
    renewed_at: int
    expires_at: int

    def expired(self, now_ms: int) -> bool:
        return now_ms >= self.expires_at


def current_lease(conn: sqlite3.Connection) -> LeaseInfo | None:
    row = conn.execute(
        "SELECT holder, pid, host, acquired_at, renewed_at, expires_at "
        "FROM evaluator_lease WHERE id = 1"
    ).fetchone()
    if row is None:
        return None
    return LeaseInfo(str(row[0]), int(row[1]), str(row[2]), int(row[3]), int(row[4]), int(row[5]))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _dead_local_holder(info: LeaseInfo) -> bool:
    """A holder on this host whose process is gone (killed) need not be waited for."""
    return (
        info.host == socket.gethostname() and info.pid != os.getpid() and not _pid_alive(info.pid)
    )


class Lease:
    """This process's claim on the store. ``held`` says whether it may act now.

    ``try_acquire`` both acquires and renews, so an evaluator simply calls it
    before each batch: True means act, False means follow. A holder that
    finds another holder's unexpired row (its own lease expired and was taken
    over while it was paused) stops acting immediately.
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        *,
        ttl_ms: int = DEFAULT_TTL_MS,
        holder: str | None = None,
        clock: Callable[[], int] = wall_ms,
    ) -> None:
        self.conn = conn
        self.ttl_ms = ttl_ms
        self.holder = holder or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.clock = clock
        self.held = False
        self._renewed_at = 0

    def try_acquire(self) -> bool:
        """Acquire or renew the lease; return whether this process holds it."""
        now = self.clock()
        own_tx = not self.conn.in_transaction
        if own_tx:
            self.conn.execute("BEGIN IMMEDIATE")
        try:
            info = current_lease(self.conn)
            if (
                info is None
                or info.holder == self.holder
                or info.expired(now)
                or _dead_local_holder(info)
            ):
                acquired = now if info is None or info.holder != self.holder else info.acquired_at
                self.conn.execute(
                    "INSERT INTO evaluator_lease (id, holder, pid, host, acquired_at, renewed_at, "
                    "expires_at) VALUES (1, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET "
                    "holder = excluded.holder, pid = excluded.pid, host = excluded.host, "
                    "acquired_at = excluded.acquired_at, renewed_at = excluded.renewed_at, "
                    "expires_at = excluded.expires_at",
                    (
                        self.holder,
                        os.getpid(),
                        socket.gethostname(),
                        acquired,
                        now,
                        now + self.ttl_ms,
                    ),
                )
                self.held = True
                self._renewed_at = now
            else:
                self.held = False
            if own_tx:
                self.conn.execute("COMMIT")
        except BaseException:
            if own_tx and self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            self.held = False
            raise
        return self.held

    def renew_if_due(self) -> bool:
        """Renew when a third of the TTL has passed (cheap to call per row)."""
        if self.held and self.clock() - self._renewed_at < self.ttl_ms // 3:
            return True
        return self.try_acquire()

    def still_held(self) -> bool:
        """Inside the caller's transaction: is the lease still ours and unexpired?

        Checked in the same transaction that commits fires, so a holder whose
        lease lapsed while paused cannot commit an acting batch after a
        follower took over.
        """
        info = current_lease(self.conn)
        ok = info is not None and info.holder == self.holder and not info.expired(self.clock())
        self.held = ok
        return ok

    def release(self) -> None:
        """Give the lease up (clean shutdown), so a follower can take over at once."""
        if not self.held:
            return
        self.conn.execute("DELETE FROM evaluator_lease WHERE id = 1 AND holder = ?", (self.holder,))
        self.held = False


class LeaseLost(RuntimeError):
    """Raised inside the evaluator's transaction when this process no longer holds the lease.

    The transaction rolls back, so a process whose lease lapsed (paused, then
    overtaken by a follower) can never commit a batch the new holder commits too.
    """


class Stepper(Protocol):
    """What :func:`serve` drives (``engine.rules.evaluator.LiveEvaluator`` fits)."""

    def step(self, max_rows: int | None = None) -> object: ...


def serve(
    lease: Lease,
    build: Callable[[], Stepper],
    stop: threading.Event,
    *,
    poll_s: float = 0.05,
    on_step: Callable[[object], None] | None = None,
    idle_wait: Callable[[], float] | None = None,
) -> None:
    """Evaluate while holding the lease; follow (evaluate nothing) while another holds it.

    A follower keeps no evaluator: when it takes over, ``build`` makes a new
    one, which restores cursor, window and lifecycle state from the store,
    because the previous holder advanced them. ``idle_wait`` says how long to
    wait after a step that found no rows (default ``poll_s``): the console
    backs off while its store stands still, so an idle console costs no CPU.
    """
    evaluator: Stepper | None = None
    try:
        while not stop.is_set():
            if not lease.renew_if_due():
                evaluator = None
                stop.wait(max(poll_s, lease.ttl_ms / 4000))
                continue
            if evaluator is None:
                evaluator = build()
            try:
                result = evaluator.step()
            except LeaseLost:
                evaluator = None
                continue
            if on_step is not None:
                on_step(result)
            if getattr(getattr(evaluator, "hooks", None), "needs_rebuild", False):
                evaluator = None  # e.g. [memory.rules] disable changed: rebuild without them
            if not getattr(result, "rows", 0):
                stop.wait(poll_s if idle_wait is None else idle_wait())
    finally:
        lease.release()
