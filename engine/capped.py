"""The one reader for a named file that may be anything: regular files only, never over a cap.

A path from a config variable, a command line or a spec is user data and may
point anywhere: ``/dev/zero`` would be read until memory runs out, a FIFO
would block forever and a multi-gigabyte file would end in ``MemoryError``.
Every reader of such a path goes through :func:`open_capped` (or
:func:`read_capped`, which reads it whole) so that all of them refuse the same
things the same way:

- the mode is checked with ``stat`` *before* opening (opening some devices has
  side effects);
- the open is non-blocking, so a path swapped for a FIFO meanwhile cannot hang,
  and ``fstat`` re-checks what was actually opened;
- at most ``cap + 1`` bytes are read, in case the file grew since.

A refusal is a :class:`CappedReadError` whose ``kind`` says what went wrong;
each caller words its own message from it (the messages are pinned by tests
and differ per command), so this module holds no user-facing text beyond the
OS's own reason and a file-type name.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

TYPE_CHECKING = False  # no ``typing`` at run time (see engine.record)
if TYPE_CHECKING:
    from typing import BinaryIO, Literal

    #: Why a file was refused; see :class:`CappedReadError`.
    RefusalKind = Literal[
        "missing", "inaccessible", "directory", "not_regular", "too_large", "unreadable"
    ]

_FILE_TYPES = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class CappedReadError(Exception):
    """A file :func:`open_capped` will not open or read.

    ``kind`` is one of: ``missing`` (nothing at the path, ENOENT at ``stat``),
    ``inaccessible`` (``stat`` failed otherwise, e.g. permission or a NUL in
    the path), ``directory``, ``not_regular`` (FIFO, device, socket),
    ``too_large`` (``size`` is the size ``stat`` reported, or None when the
    file grew past the cap while being read) and ``unreadable`` (``open`` or
    ``read`` failed). ``reason`` is the OS's own short reason (``strerror``)
    or, for a refused file type, its name such as ``"a FIFO"``; ``os_error``
    keeps the original exception for callers that print it whole.
    """

    def __init__(
        self,
        kind: RefusalKind,
        reason: str,
        *,
        size: int | None = None,
        os_error: OSError | None = None,
    ) -> None:
        super().__init__(reason)
        self.kind: RefusalKind = kind
        self.reason = reason
        self.size = size
        self.os_error = os_error


#: Longest file name (one path component) and whole path, in bytes, the OS
#: accepts: Linux's ``NAME_MAX`` and ``PATH_MAX`` (a path must fit in
#: ``PATH_MAX`` with its terminating NUL). Longer ones fail with ENAMETOOLONG.
NAME_MAX = 255
PATH_MAX = 4096


def path_refusal(path: str) -> str | None:
    """Why the OS would refuse ``path`` as a file name, decided without touching the disk.

    Why: a path named in a spec, a config file or a command line is user data,
    and ``os.stat`` and friends do not answer "no such file" for every
    string: a NUL byte or a character the file system encoding cannot encode
    (a lone surrogate) raises ``ValueError``, and an over-long name raises
    ``OSError(ENAMETOOLONG)`` even from ``Path.exists()``. Checked first, such
    a path becomes an error naming the field instead of a crash. Returns a
    short phrase for a diagnostic (it never echoes the path), or None.
    """
    if "\x00" in path:
        return "path contains a NUL byte (no file name can hold one)"
    try:
        raw = os.fsencode(path)
    except UnicodeError:
        return "path contains a character the file system cannot encode (a lone surrogate)"
    if len(raw) >= PATH_MAX:
        return f"path too long ({len(raw)} bytes; the OS accepts at most {PATH_MAX - 1})"
    longest = max(len(part) for part in raw.split(b"/"))
    if longest > NAME_MAX:
        return f"file name too long ({longest} bytes; the OS accepts at most {NAME_MAX})"
    return None


def file_type_name(mode: int) -> str:
    """``"a FIFO"``, ``"a directory"``, ...: what a non-regular ``st_mode`` is, for messages."""
    return next((name for test, name in _FILE_TYPES if test(mode)), "not a regular file")


def _refuse(mode: int, size: int, cap: int) -> None:
    if stat.S_ISDIR(mode):
        raise CappedReadError("directory", file_type_name(mode))
    if not stat.S_ISREG(mode):
        raise CappedReadError("not_regular", file_type_name(mode))
    if size > cap:
        raise CappedReadError("too_large", f"larger than {cap} bytes", size=size)


def _os_reason(exc: OSError | ValueError) -> str:
    return getattr(exc, "strerror", None) or str(exc)


def open_capped(path: str | Path, cap: int) -> BinaryIO:
    """Open a regular file of at most ``cap`` bytes for binary reading, or raise.

    For callers that stream a large file (a journal import of up to 4 GiB)
    rather than hold it; :func:`read_capped` is the usual entry. The returned
    file is blocking again (``O_NONBLOCK`` only guarded the open) and the
    caller closes it.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError as exc:
        raise CappedReadError("missing", _os_reason(exc), os_error=exc) from None
    except (OSError, ValueError) as exc:
        err = exc if isinstance(exc, OSError) else None
        raise CappedReadError("inaccessible", _os_reason(exc), os_error=err) from None
    _refuse(st.st_mode, st.st_size, cap)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise CappedReadError("unreadable", _os_reason(exc), os_error=exc) from None
    try:
        st = os.fstat(fd)
        _refuse(st.st_mode, st.st_size, cap)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException as exc:
        os.close(fd)
        if isinstance(exc, OSError):
            raise CappedReadError("unreadable", _os_reason(exc), os_error=exc) from None
        raise


def read_capped(path: str | Path, cap: int) -> bytes:
    """The bytes of a regular file of at most ``cap`` bytes, or :class:`CappedReadError`.

    Reads at most ``cap + 1`` bytes, so a file that grew past the cap after
    ``fstat`` is refused as ``too_large`` (with ``size`` None) without being
    held whole.
    """
    with open_capped(path, cap) as fh:
        try:
            raw = fh.read(cap + 1)
        except OSError as exc:
            raise CappedReadError("unreadable", _os_reason(exc), os_error=exc) from None
    if len(raw) > cap:
        raise CappedReadError("too_large", f"larger than {cap} bytes")
    return raw
