"""One acting evaluator per store: a lease row naming who acts, with which rules, until when.

The console, ``harness evaluate`` and ``harness serve`` may all be open on one
store. If more than one stored fires, created holds and ran actions, every
notify would go out twice and every stop would be issued twice. So one of
them holds a lease (one row, ``id = 1``) and renews it; the others follow
without acting and take over only when the lease has expired, which is what
happens when the holder is killed (at once when the dead holder was on this
host: its pid is gone). Lease time is wall-clock time, on purpose: it
measures whether a process is alive, not journal time.

Nobody acts by surprise (DESIGN, "The gate's guarantees" 5): the row records
the holder's *role* (``serve``, ``evaluate`` or ``console``; only ``harness
serve``, ``harness evaluate`` and a console started with ``--act`` take the
lease) and the *rule set* it acts with, as :func:`ruleset_digest`, so the
console's header can say "serve@host:pid acting, rules sha256:…" or "nobody is
acting". A console acts only when asked, and hands over: a ``serve`` or
``evaluate`` lease may take the lease from a live ``console`` holder (the
console then follows), never the other way round. Rows admitted while nobody
acted are evaluated when an actor returns, from the live cursor (the
watermark), like any backlog.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from engine.store.txn import immediate_unless_open

if TYPE_CHECKING:
    from engine.config import RulesConfig
    from engine.rules.language.model import CompiledRule

DEFAULT_TTL_MS = 15_000

#: Who may hold the lease. ``serve`` and ``evaluate`` are the headless actors;
#: ``console`` is a console started with ``--act`` (or ``--demo``).
SERVE, EVALUATE, CONSOLE = "serve", "evaluate", "console"
ROLES: tuple[str, ...] = (SERVE, EVALUATE, CONSOLE)
#: Roles whose live lease a headless actor may take over (the console hands over).
YIELDING_ROLES: frozenset[str] = frozenset({CONSOLE})


def wall_ms() -> int:
    return int(time.time() * 1000)


def ruleset_digest(rules: Iterable[CompiledRule], config: RulesConfig) -> str:
    """``sha256:`` over the rules an actor acts with and the config that decides their authority.

    The one home of "which rule set": each loaded rule's name and semantic
    hash (so an edit that changes meaning changes the digest; a comment does
    not), plus ``[memory.rules] enforce`` and ``disable``, since the same rules
    with another enforce list act differently. Order does not matter. Two
    processes with the same digest would make the same decisions on the same
    rows.
    """
    body = {
        "rules": sorted([c.rule.name, c.rule.hash] for c in rules),
        "enforce": sorted(config.enforce),
        "disable": sorted(config.disable),
    }
    canonical = json.dumps(body, separators=(",", ":"), sort_keys=True)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def role_of(holder: str) -> str:
    """The role a holder name implies: its ``role@`` prefix, else ``evaluate``.

    Serve names its holder ``serve@host:pid:…``; a holder written before roles
    were recorded (or by a test) with no known prefix is a headless evaluator.
    """
    prefix, at, _rest = holder.partition("@")
    return prefix if at and prefix in ROLES else EVALUATE


@dataclass(frozen=True, slots=True)
class LeaseInfo:
    """The lease row as stored: who holds it, in which role, with which rules, until when."""

    holder: str
    pid: int
    host: str
    acquired_at: int
    renewed_at: int
    expires_at: int
    #: serve | evaluate | console (inferred from the holder for rows written before migration 8).
    role: str = EVALUATE
    #: The holder's :func:`ruleset_digest` (None: not recorded).
    ruleset: str | None = None

    def expired(self, now_ms: int) -> bool:
        return now_ms >= self.expires_at

    @property
    def who(self) -> str:
        """``role@host:pid`` for people (the holder's random suffix left out)."""
        return f"{self.role}@{self.host}:{self.pid}" if self.host else f"{self.role}:{self.pid}"


_COLUMNS = "holder, pid, host, acquired_at, renewed_at, expires_at"


def current_lease(conn: sqlite3.Connection) -> LeaseInfo | None:
    """The lease row, or None; a store from before migration 8 gives the role from the holder."""
    try:
        row = conn.execute(
            f"SELECT {_COLUMNS}, role, ruleset FROM evaluator_lease WHERE id = 1"
        ).fetchone()
    except sqlite3.OperationalError as exc:
        if "no such column" not in str(exc):
            raise
        row = conn.execute(
            f"SELECT {_COLUMNS}, '', NULL FROM evaluator_lease WHERE id = 1"
        ).fetchone()
    if row is None:
        return None
    holder = str(row[0])
    return LeaseInfo(
        holder,
        int(row[1]),
        str(row[2]),
        int(row[3]),
        int(row[4]),
        int(row[5]),
        role=str(row[6]) or role_of(holder),
        ruleset=None if row[7] is None else str(row[7]),
    )


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

    ``role`` says who acts (see :data:`ROLES`; by default it is read from a
    ``role@`` prefix of ``holder``, so ``Lease(conn, holder="serve@…")`` is
    serve) and ``ruleset`` the :func:`ruleset_digest` it acts with; both are
    written into the row. :meth:`set_ruleset` records a reload.
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        *,
        ttl_ms: int = DEFAULT_TTL_MS,
        holder: str | None = None,
        clock: Callable[[], int] = wall_ms,
        role: str = "",
        ruleset: str | None = None,
    ) -> None:
        role = role or (role_of(holder) if holder else EVALUATE)
        if role not in ROLES:
            raise ValueError(f"lease role {role!r} is not one of {', '.join(ROLES)}")
        self.conn = conn
        self.ttl_ms = ttl_ms
        self.role = role
        self.ruleset = ruleset
        self.holder = holder or (
            f"{role}@{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        )
        self.clock = clock
        self.held = False
        self._renewed_at = 0

    def _may_take(self, info: LeaseInfo | None, now: int) -> bool:
        if info is None or info.holder == self.holder or info.expired(now):
            return True
        if _dead_local_holder(info):
            return True
        # a console acting on request hands over to a headless actor (serve, evaluate)
        return info.role in YIELDING_ROLES and self.role not in YIELDING_ROLES

    def try_acquire(self) -> bool:
        """Acquire or renew the lease; return whether this process holds it."""
        now = self.clock()
        try:
            with immediate_unless_open(self.conn):
                info = current_lease(self.conn)
                if self._may_take(info, now):
                    acquired = (
                        now if info is None or info.holder != self.holder else info.acquired_at
                    )
                    self._write(acquired, now)
                    self.held = True
                    self._renewed_at = now
                else:
                    self.held = False
        except BaseException:
            self.held = False
            raise
        return self.held

    def _write(self, acquired: int, now: int) -> None:
        values = (
            self.holder,
            os.getpid(),
            socket.gethostname(),
            acquired,
            now,
            now + self.ttl_ms,
        )
        update = (
            "holder = excluded.holder, pid = excluded.pid, host = excluded.host, "
            "acquired_at = excluded.acquired_at, renewed_at = excluded.renewed_at, "
            "expires_at = excluded.expires_at"
        )
        try:
            self.conn.execute(
                f"INSERT INTO evaluator_lease (id, {_COLUMNS}, role, ruleset) "
                "VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET "
                f"{update}, role = excluded.role, ruleset = excluded.ruleset",
                (*values, self.role, self.ruleset),
            )
        except sqlite3.OperationalError as exc:
            if "role" not in str(exc) and "ruleset" not in str(exc):
                raise
            # a store not migrated to 8 (opened without the full schema): no role column
            self.conn.execute(
                f"INSERT INTO evaluator_lease (id, {_COLUMNS}) VALUES (1, ?, ?, ?, ?, ?, ?) "
                f"ON CONFLICT (id) DO UPDATE SET {update}",
                values,
            )

    def set_ruleset(self, digest: str) -> None:
        """Record that this process now acts with the rule set ``digest`` (after a reload).

        Written at once while the lease is held (so the console's header shows
        the new rules without waiting for a renewal), else at the next acquire.
        """
        self.ruleset = digest
        if not self.held:
            return
        try:
            self.conn.execute(
                "UPDATE evaluator_lease SET ruleset = ? WHERE id = 1 AND holder = ?",
                (digest, self.holder),
            )
        except sqlite3.OperationalError as exc:
            if "ruleset" not in str(exc):
                raise

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
    """What :func:`serve` drives (``engine.rules.evaluation.evaluator.LiveEvaluator`` fits)."""

    def step(self, max_rows: int | None = None) -> object: ...


def serve(
    lease: Lease,
    build: Callable[[], Stepper],
    stop: threading.Event,
    *,
    poll_s: float = 0.05,
    on_step: Callable[[object], None] | None = None,
    idle_wait: Callable[[], float] | None = None,
    rebuild: Callable[[], bool] | None = None,
    pace: Callable[[object], None] | None = None,
) -> None:
    """Evaluate while holding the lease; follow (evaluate nothing) while another holds it.

    A follower keeps no evaluator: when it takes over, ``build`` makes a new
    one, which restores cursor, window and lifecycle state from the store,
    because the previous holder advanced them (rows admitted while nobody
    acted are simply the backlog after the cursor). ``idle_wait`` says how
    long to wait after a step that found no rows (default ``poll_s``): the
    console backs off while its store stands still, so an idle console costs
    no CPU. ``rebuild()`` returning True (e.g. rule files were reloaded) makes
    the next step use a new evaluator from ``build``, without giving up the lease.
    ``pace(result)`` runs after a step that evaluated rows, before the next
    (serve lingers there under load so rows gather into larger batches).
    """
    evaluator: Stepper | None = None
    try:
        while not stop.is_set():
            if not lease.renew_if_due():
                evaluator = None
                stop.wait(max(poll_s, lease.ttl_ms / 4000))
                continue
            if evaluator is None or (rebuild is not None and rebuild()):
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
            elif pace is not None:
                pace(result)
    finally:
        # A release that fails (the store faulted) must not hide why the loop
        # ended; the lease then lapses by its TTL instead.
        with contextlib.suppress(sqlite3.Error):
            lease.release()
