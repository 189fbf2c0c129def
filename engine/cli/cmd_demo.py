"""``harness demo``: write the simulated fleet's history into a store (then ``--live``).

The history ends now: it starts ``--days`` UTC midnights ago and stops at the
current time, so ``--live`` can continue it without a jump. A store that
already holds rows at or after the history's start is refused (journal time
cannot go back); use a fresh ``--store``. A progress bar (rich) is shown only
when stderr is a terminal.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.cli.common import EXIT_OK, print_json

#: Rows a day per harness in the default fleet (for the progress total only).
_ROWS_PER_HARNESS_DAY = 4_850


MAX_DAYS = 365
MAX_HARNESSES = 200


def _bounded(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: a whole number in ``low..high`` (anything else is exit 2)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be between {low} and {high}, got {text}")
        return value

    return parse


def arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", metavar="PATH", help="journal store (default from harness.toml)")
    p.add_argument(
        "--days",
        type=_bounded(1, MAX_DAYS),
        default=45,
        metavar="N",
        help=f"days of history (1..{MAX_DAYS}; 45)",
    )
    p.add_argument(
        "--harnesses",
        type=_bounded(1, MAX_HARNESSES),
        default=12,
        metavar="N",
        help=f"fleet size (1..{MAX_HARNESSES}; 12)",
    )
    p.add_argument("--seed", type=int, default=7, metavar="S", help="random seed (7)")
    p.add_argument("--quiet-fleet", action="store_true", help="no planted patterns")
    p.add_argument("--live", action="store_true", help="then keep writing in real time")
    p.add_argument("--json", action="store_true", help="machine-readable summary")


def cmd_demo(args: argparse.Namespace) -> int:
    import time

    from engine.config import resolve_store
    from engine.fleet.sim import DAY_MS
    from engine.journal.reader import store_file_bytes
    from engine.journal.writer import wall_clock_ms
    from engine.store.db import ensure_parent

    path = resolve_store(args.store)
    now = wall_clock_ms()
    start = (now // DAY_MS - args.days) * DAY_MS
    t0 = time.perf_counter()
    fresh = not path.exists() or (path.is_file() and path.stat().st_size == 0)
    if fresh:
        ensure_parent(path)
        result = _write_fresh(path, args, start, now)
    else:
        result = _write_into(path, args, start, now)
    elapsed = time.perf_counter() - t0
    summary = {
        "ok": True,
        "store": str(path),
        "rows": result.admitted,
        "first_seq": result.first_seq,
        "last_seq": result.last_seq,
        "first_at": result.first_at,
        "last_at": result.last_at,
        "seconds": round(elapsed, 2),
        "file_bytes": store_file_bytes(path),
    }
    if args.json:
        print_json(summary)
    else:
        print(
            f"wrote {result.admitted:,} rows ({args.days} days + today, "
            f"{args.harnesses} harnesses, seed {args.seed}) to {path} in {elapsed:.1f} s, "
            f"{summary['file_bytes'] / 1e6:.0f} MB"
        )
    if args.live:
        from engine.fleet.realtime import run_live

        if not args.json:
            print("live: writing in real time; Ctrl-C to stop", flush=True)
        try:
            live = run_live(path, start_ms=start, harnesses=args.harnesses, seed=args.seed,
                            quiet=args.quiet_fleet)  # fmt: skip
            stats = live.stats
        except KeyboardInterrupt:
            print("stopped", file=sys.stderr)
            return EXIT_OK
        print(f"live: admitted {stats.admitted}, dropped {stats.dropped}, ticks {stats.ticks}")
    return EXIT_OK


def _write(conn: Any, args: argparse.Namespace, start: int, now: int) -> Any:
    from engine.fleet.sim import write_fleet

    total = max(1, (args.days + 1) * args.harnesses * _ROWS_PER_HARNESS_DAY)
    progress = _progress(total) if sys.stderr.isatty() and not args.json else None
    try:
        result = write_fleet(
            conn,
            days=args.days + 1,
            harnesses=args.harnesses,
            seed=args.seed,
            start_ms=start,
            quiet=args.quiet_fleet,
            end_ms=now,
            on_batch=progress.update if progress else None,
        )
    finally:
        if progress:
            progress.close()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return result


def _write_fresh(path: Path, args: argparse.Namespace, start: int, now: int) -> Any:
    """Write into a temp file beside ``path``; rename it into place only when complete.

    A killed or failed demo then leaves no partial (or empty) store at ``path``
    for the console to open as if it were whole.
    """
    import contextlib
    import os

    from engine.store.db import connect

    tmp = path.with_name(f".{path.name}.{os.getpid()}.demo-tmp")
    # O_EXCL: never reuse someone else's file; default mode, so umask applies as for any store.
    os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
    try:
        conn = connect(tmp)
        try:
            result = _write(conn, args, start, now)
        finally:
            conn.close()  # the last close also removes the -wal and -shm files
        os.replace(tmp, path)
    except BaseException:
        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(OSError):
                os.unlink(f"{tmp}{suffix}")
        raise
    return result


def _write_into(path: Path, args: argparse.Namespace, start: int, now: int) -> Any:
    """Append the history to an existing store whose rows all end before it starts."""
    from engine.errors import InputError
    from engine.journal.writer import read_marks
    from engine.store.db import connect
    from engine.timefmt import iso_ms

    conn = connect(path, create=False)
    try:
        last_seq, last_at, _tick = read_marks(conn)
        if last_seq and last_at > start:
            raise InputError(
                f"{path}: the store already has journal rows up to {iso_ms(last_at)}, after the "
                f"demo history would start ({iso_ms(start)}); use a new --store",
                title="Store not empty",
            )
        return _write(conn, args, start, now)
    finally:
        conn.close()


class _Progress:
    def __init__(self, total: int) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self.total = total
        self.bar = Progress(
            TextColumn("demo history"),
            BarColumn(),
            TextColumn("{task.completed:,} rows"),
            TimeElapsedColumn(),
            transient=True,
            console=Console(stderr=True),
        )
        self.bar.start()
        self.task = self.bar.add_task("rows", total=total)

    def update(self, done: int) -> None:
        self.bar.update(self.task, completed=min(done, self.total))

    def close(self) -> None:
        self.bar.stop()


def _progress(total: int) -> _Progress:
    return _Progress(total)
