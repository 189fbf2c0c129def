"""Opening the store the same way everywhere.

WAL lets readers (the console, ``journal tail``, a following evaluator) read
committed rows while the committer writes; ``busy_timeout`` makes a second
writer process wait for the lock instead of failing. Every opener goes through
:func:`connect` so those settings and the migrations are never forgotten.

Every way a store path can be wrong (a parent that is a file, an unwritable or
virtual directory, ``~nouser``, a file that is not a store, a lock held by
another writer) becomes an :class:`InputError` naming the path (exit 2),
because a traceback tells an operator nothing about which path to fix.
"""

from __future__ import annotations

import _thread
import os
import sqlite3
from pathlib import Path

from engine.capped import path_refusal
from engine.errors import Diagnostic, InputError, Location
from engine.store.migrations import migrate

BUSY_TIMEOUT_MS = 10_000


class StoreConnection(sqlite3.Connection):
    """A writable store connection that carries its file's in-process write lock.

    Why: threads of one process that write one store (serve's committer and
    its evaluator, the console's feeder and evaluator) took turns at SQLite's
    write lock through its busy handler, which sleeps 1, 2, 5 ms … between
    tries; serve's committer slept ~1.5 ms per commit on average (a fifth of
    its time) while the evaluator held a batch. :func:`engine.store.txn.immediate`
    takes ``write_lock`` first, so they wait for each other on a lock that
    wakes them at once, for at most ``busy_ms`` as SQLite would. Writers in
    other processes still meet only SQLite's lock.
    """

    write_lock: _thread.RLock | None = None
    busy_ms: int = BUSY_TIMEOUT_MS


_WRITE_LOCKS: dict[str, _thread.RLock] = {}
_WRITE_LOCKS_GUARD = _thread.allocate_lock()


def _write_lock(target: Path) -> _thread.RLock:
    """The one in-process write lock of the store file at ``target``."""
    key = os.path.realpath(target)
    with _WRITE_LOCKS_GUARD:
        lock = _WRITE_LOCKS.get(key)
        if lock is None:
            lock = _WRITE_LOCKS[key] = _thread.RLock()
        return lock


def set_busy_timeout(conn: sqlite3.Connection, ms: int) -> None:
    """How long ``conn`` waits for the write lock (SQLite's and the in-process one)."""
    conn.execute(f"PRAGMA busy_timeout = {int(ms)}")
    if isinstance(conn, StoreConnection):
        conn.busy_ms = int(ms)


def _error(
    target: object, message: str, title: str, hint: str = "", kind: type[InputError] = InputError
) -> InputError:
    return kind(
        f"{target}: {message}" + (f" ({hint})" if hint else ""),
        title=title,
        diagnostics=[Diagnostic(message, Location(str(target)), hint=hint)],
    )


def expand_store_path(path: str | Path) -> Path:
    """``path`` with ``~`` expanded; ``~nouser`` is an InputError, not a RuntimeError."""
    try:
        return Path(path).expanduser()
    except RuntimeError:
        head = str(path).split("/", 1)[0]
        raise _error(path, f"cannot expand {head}: no such user", "Bad store path") from None


def ensure_parent(target: Path) -> None:
    """Create ``target``'s directory, or say plainly why it cannot be."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise _error(
            target, f"cannot create the store: {target.parent} is not a directory", "Bad store path"
        ) from None
    except OSError as exc:
        raise _error(
            target,
            f"cannot create the store directory {target.parent}: {exc.strerror or exc}",
            "Bad store path",
        ) from None


class StoreMissing(InputError):
    """No store at the path (:func:`connect` with ``create=False`` or ``readonly``).

    Its own class because a process that already worked on the store takes it
    as a fault to wait out (the disk is away), not as the operator's mistake.
    """


def _no_store(target: Path, why: str = "") -> InputError:
    hint = f"run `harness demo --store {target}` or start writing"
    message = "no store here" + (f": {why}" if why else "")
    return _error(target, message, "No store", hint, StoreMissing)


def _uri(target: Path, mode: str) -> str:
    """An SQLite URI for ``target`` (a ``?`` or ``%`` in the path is quoted, not parsed)."""
    text = str(target).replace("%", "%25").replace("?", "%3f").replace("#", "%23")
    return f"file:{text}?mode={mode}"


def connect(
    path: str | Path,
    *,
    readonly: bool = False,
    create: bool = True,
    check_same_thread: bool = True,
) -> sqlite3.Connection:
    """Open and migrate the store at ``path``.

    ``create=False`` (and ``readonly``) never create or write anything: a
    missing or empty (0-byte) file is "no store here". A read-only open also
    checks that the file really is a migrated store, so a stray file says "not
    a store" instead of a later "no such table".
    """
    global _last_opened
    target = expand_store_path(path)
    refusal = path_refusal(str(target))
    if refusal is not None:  # Path.is_dir() and sqlite3 would raise, not answer
        raise _error(target, f"cannot open the store: {refusal}", "Bad store path")
    _last_opened = target
    if target.is_dir():
        raise _error(target, "cannot open the store: it is a directory", "Bad store path")
    if readonly or not create:
        if not target.exists():
            raise _no_store(target)
        if target.is_file() and target.stat().st_size == 0:
            raise _no_store(target, "the file is empty, not a store")
    conn: sqlite3.Connection | None = None
    try:
        if readonly:
            conn = sqlite3.connect(
                _uri(target, "ro"),
                uri=True,
                isolation_level=None,
                check_same_thread=check_same_thread,
            )
        else:
            ensure_parent(target)
            # mode=rw: the file vanishing between the check above and this open
            # (its disk unmounted) is an error, never a new empty store.
            conn = sqlite3.connect(
                str(target) if create else _uri(target, "rw"),
                uri=not create,
                isolation_level=None,
                check_same_thread=check_same_thread,
                factory=StoreConnection,
            )
            conn.write_lock = _write_lock(target)
        set_busy_timeout(conn, BUSY_TIMEOUT_MS)
        if readonly:
            # The first read touches the file (and, in WAL mode, the -shm file).
            if int(conn.execute("PRAGMA user_version").fetchone()[0]) < 1:
                raise _error(target, "not a store (no journal schema in this file)", "Bad store")
        else:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            migrate(conn)
        return conn
    except InputError:
        if conn is not None:
            conn.close()
        raise
    except sqlite3.DatabaseError as exc:
        if conn is not None:
            conn.close()
        raise _translate(target, exc, readonly=readonly) from None


#: The store this process opened last. A fault that surfaces after the open (a
#: page found corrupt mid-query, a read-only file at the first write) reaches
#: the CLI's last line of defence with no path attached; this supplies it.
_last_opened: Path | None = None


def last_opened_store() -> Path | None:
    """The path of the store :func:`connect` opened last in this process, if any."""
    return _last_opened


def store_fault(exc: sqlite3.DatabaseError, path: Path | None = None) -> InputError:
    """A store error met after the open, as a message naming the store (exit 2)."""
    target = path or _last_opened
    if target is None:
        text = str(exc)
        title = "Store busy" if "locked" in text or "busy" in text else "Bad store"
        return InputError(f"cannot use the store: {text}", title=title)
    return _translate(target, exc, readonly=False)


def _translate(target: Path, exc: sqlite3.DatabaseError, *, readonly: bool) -> InputError:
    text = str(exc)
    if "locked" in text or "busy" in text:
        return _error(target, "store busy: another writer holds the lock", "Store busy", text)
    if "not a database" in text:
        return _error(target, "not a store (not an SQLite database)", "Bad store")
    if "unable to open" in text or "readonly" in text or "read-only" in text:
        why = (
            "cannot open the store read-only (a WAL store's directory must be writable for "
            "its -shm file)"
            if readonly
            else "cannot open or create the store here (is the directory writable?)"
        )
        return _error(target, why, "Bad store path", text)
    return _error(target, f"not a usable store: {text}", "Bad store")
