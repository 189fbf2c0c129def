"""Tests of engine/capped.py: the one capped reader refuses each kind of bad file by kind."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine.capped import CappedReadError, open_capped, read_capped


def _kind(path: str | Path, cap: int = 100) -> CappedReadError:
    with pytest.raises(CappedReadError) as info:
        read_capped(path, cap)
    return info.value


def test_reads_a_regular_file_up_to_the_cap(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 100)
    assert read_capped(path, 100) == b"x" * 100
    path.write_bytes(b"x" * 101)
    err = _kind(path)
    assert (err.kind, err.size) == ("too_large", 101)


def test_missing_directory_and_nul_path_are_told_apart(tmp_path: Path) -> None:
    err = _kind(tmp_path / "absent")
    assert err.kind == "missing" and isinstance(err.os_error, FileNotFoundError)
    assert _kind(tmp_path).kind == "directory"
    assert _kind(str(tmp_path / "a\0b")).kind == "inaccessible"


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    err = _kind(fifo)
    assert (err.kind, err.reason) == ("not_regular", "a FIFO")


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_an_endless_device_is_refused() -> None:
    err = _kind("/dev/zero")
    assert (err.kind, err.reason) == ("not_regular", "a character device")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_an_unreadable_file_is_unreadable(tmp_path: Path) -> None:
    path = tmp_path / "secret"
    path.write_bytes(b"x")
    path.chmod(0)
    assert _kind(path).kind == "unreadable"


def test_open_capped_streams_a_blocking_file(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"a\nb\n")
    with open_capped(path, 10) as fh:
        assert os.get_blocking(fh.fileno())
        assert fh.readlines() == [b"a\n", b"b\n"]


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("a\x00b", "NUL"),
        ("a/\ud800.md", "surrogate"),
        ("n" * 256, "file name too long (256 bytes"),
        ("é" * 128, "file name too long (256 bytes"),  # bytes, not characters
        ("d/" * 2048, "path too long (4096 bytes"),
    ],
)
def test_path_refusal_names_what_the_os_would_refuse(path: str, why: str) -> None:
    from engine.capped import path_refusal

    refusal = path_refusal(path)
    assert refusal is not None and why in refusal
    with pytest.raises((ValueError, OSError)) as info:  # and the OS does refuse it
        os.stat(path)
    assert not isinstance(info.value, FileNotFoundError)


@pytest.mark.parametrize(
    "path", ["a.md", "n" * 255, "é" * 127 + "x", "d/" * 2047, "\udcff.md", "/abs/ok", ""]
)
def test_path_refusal_passes_every_name_the_os_takes(path: str) -> None:
    from engine.capped import path_refusal

    assert path_refusal(path) is None  # \udcff: a non-UTF-8 byte, as os.fsdecode spells it
