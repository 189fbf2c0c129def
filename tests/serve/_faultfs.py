"""Small real filesystems that fail on demand: full, read-only, I/O errors.

Each needs root (``mount``); where the machine cannot mount one the test is
skipped with the reason the mount gave. Every mount is undone (lazily, when a
killed process still holds files on it) when the context ends.

- :func:`tmpfs`: a tmpfs of a given size; filling it makes SQLite's writes
  fail with ``SQLITE_FULL``; deleting the filler frees it.
- :func:`ext4_loop`: an ext4 image on a loop device, for the two faults a
  tmpfs cannot give to files that are already open:

  * read-only: ``chattr +i`` on the store and its WAL makes every write on
    the open descriptors fail (``EPERM``, which SQLite reports as an I/O
    error) and new opens read-only; ``chattr -i`` undoes it. A remount
    read-only is refused while serve has the files open for writing (the
    kernel only forces one after a filesystem error, which cannot be undone
    without a new mount). The ``-shm`` file stays writable: it is memory-
    mapped, and a write fault on an immutable mapping is a SIGBUS.
  * I/O error: ``EXT4_IOC_SHUTDOWN`` (after syncing, so nothing committed
    is lost) makes every operation on the filesystem fail with ``EIO``, as a
    vanished disk does. The disk "comes back" as a fresh mount of the same
    bytes at the same path: the old descriptors stay dead, so a process
    recovers only by opening the store again.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

#: _IOR('X', 125, __u32): shut an ext4 filesystem down; flag 0 syncs it first.
EXT4_IOC_SHUTDOWN = 0x8004587D
EXT4_GOING_FLAGS_DEFAULT = 0


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


def _need_root(what: str) -> None:
    if os.geteuid() != 0:
        pytest.skip(f"{what} needs root (mount); this test runs as uid {os.geteuid()}")


def _unmount(where: Path) -> None:
    if _run("umount", str(where)).returncode != 0:
        _run("umount", "-l", str(where))


@contextlib.contextmanager
def tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``where`` (skip when this machine cannot mount one)."""
    _need_root("a tmpfs")
    where.mkdir(parents=True, exist_ok=True)
    done = _run("mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(where))
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}")
    try:
        yield where
    finally:
        _unmount(where)


def fill(where: Path) -> Path:
    """Write a filler file until the filesystem at ``where`` is full; return its path."""
    filler = where / "filler"
    size = 1 << 20
    with open(filler, "wb", buffering=0) as fh:
        while size:
            try:
                fh.write(b"\0" * size)
            except OSError:
                size //= 2  # the last free blocks: smaller writes until none fits
    return filler


class Ext4:
    """An ext4 image mounted (loop) at :attr:`where`; faults on demand."""

    def __init__(self, image: Path, where: Path) -> None:
        self.image = image
        self.where = where
        self.generation = 0

    def immutable(self, *names: str, on: bool) -> None:
        for name in names:
            path = self.where / name
            if path.exists():
                done = _run("chattr", "+i" if on else "-i", str(path))
                assert done.returncode == 0, done.stderr

    def shutdown(self) -> None:
        """Sync, then fail every operation on the filesystem with EIO."""
        fd = os.open(self.where, os.O_RDONLY)
        try:
            fcntl.ioctl(fd, EXT4_IOC_SHUTDOWN, EXT4_GOING_FLAGS_DEFAULT.to_bytes(4, "little"))
        finally:
            os.close(fd)

    def remount_fresh(self) -> None:
        """The disk is back: the same bytes, mounted anew at the same path."""
        self.unmount()
        self.mount_fresh()

    def unmount(self) -> None:
        """The disk is gone (lazily: open descriptors keep the old filesystem)."""
        _run("umount", "-l", str(self.where))

    def mount_fresh(self) -> None:
        """Mount a copy of the image at the same path (a copy: a fresh loop device)."""
        self.generation += 1
        copy = self.image.with_name(f"{self.image.name}.{self.generation}")
        shutil.copyfile(self.image, copy)
        self.image = copy
        done = _run("mount", "-o", "loop", str(copy), str(self.where))
        assert done.returncode == 0, done.stderr


@contextlib.contextmanager
def ext4_loop(base: Path, size_mb: int = 64) -> Iterator[Ext4]:
    """An ext4 image of ``size_mb`` on a loop device (skip when this machine cannot make one)."""
    _need_root("an ext4 loop device")
    for tool in ("mkfs.ext4", "losetup", "chattr"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")
    image = base / "ext4.img"
    where = base / "ext4"
    where.mkdir(parents=True, exist_ok=True)
    with open(image, "wb") as fh:
        fh.truncate(size_mb * 1024 * 1024)
    made = _run("mkfs.ext4", "-q", "-F", str(image))
    if made.returncode != 0:
        pytest.skip(f"mkfs.ext4 failed: {made.stderr.strip()}")
    done = _run("mount", "-o", "loop", str(image), str(where))
    if done.returncode != 0:
        pytest.skip(f"cannot loop-mount an ext4 image here: {done.stderr.strip()}")
    fs = Ext4(image, where)
    try:
        yield fs
    finally:
        with contextlib.suppress(AssertionError):
            fs.immutable("journal.db", "journal.db-wal", "journal.db-shm", on=False)
        _unmount(where)
