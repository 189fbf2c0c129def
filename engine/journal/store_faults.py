"""What a store fault means to the journal writer: passing or fatal, its reason, a moved file.

Apart from :mod:`engine.journal.queue` so the queue keeps to queueing, and so
serve's evaluator judges its own store errors by the same words.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from engine.errors import InputError

#: SQLite messages of a store that retrying cannot fix.
_FATAL = ("malformed", "not a database", "file is not a database")


class StoreMoved(OSError):
    """The store's path no longer names the file the committer wrote (removed or replaced)."""


def file_id(path: Path) -> tuple[int, int] | None:
    """(device, inode) of the file at ``path``, None when there is none."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


def fault_reason(exc: BaseException) -> str:
    """A store error's message (SQLite's and the OS's texts name no agent data)."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def store_error_is_fatal(exc: BaseException) -> bool:
    """A store that is no store any more (corrupt): retrying cannot help, a restart may.

    Locked, busy, full, read-only and I/O errors are not: they pass. An
    :class:`~engine.errors.InputError` from :func:`~engine.store.db.connect`
    is judged by the SQLite error it translated.
    """
    if isinstance(exc, InputError) and isinstance(exc.__context__, sqlite3.Error):
        exc = exc.__context__
    text = str(exc).lower()
    return isinstance(exc, sqlite3.DatabaseError) and any(word in text for word in _FATAL)
