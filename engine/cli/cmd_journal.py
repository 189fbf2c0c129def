"""``harness journal``: write rows into the journal and read, count and prune it from the shell.

Usage: ``harness journal append | import | tail | stats | prune``.

``append`` admits JSON lines from stdin *now* (the committer assigns ``seq``
and ``at``). Admission is per row, as for a live writer: a bad line is refused
(reported with its line number and field, and counted in the store's
``refused`` counter) and the good lines are still admitted; the exit code is 1
when any line was refused. ``import FILE`` is the opposite: history carrying
its own ``at`` is all-or-nothing, because a partly imported history would
silently change what a backtest sees; any bad line (or an ``at`` going back)
stops it with exit 2 and nothing of the file is stored.

Heavy modules are imported inside the handlers so ``harness --help`` stays fast.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from engine.cli.common import EXIT_FAILED, EXIT_OK, print_json

APPEND_BATCH = 5_000


def append_arguments(p: argparse.ArgumentParser) -> None:
    _store(p)
    p.add_argument("--json", action="store_true", help="machine-readable summary")


def import_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="JSON-lines file ('-' for stdin)")
    p.add_argument(
        "--ticks",
        action="store_true",
        help="add a tick row at every minute boundary (tick rows of the file are then skipped)",
    )
    _store(p)
    p.add_argument("--json", action="store_true", help="machine-readable summary")


def tail_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-n",
        type=_tail_count,
        default=20,
        metavar="N",
        help="rows to show first (1..1,000,000; 20)",
    )
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new rows")
    _store(p)
    p.add_argument("--json", action="store_true", help="one JSON object per line")


def stats_arguments(p: argparse.ArgumentParser) -> None:
    _store(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")


def prune_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--days", type=int, metavar="N", help="retention in days")
    _store(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")


MAX_TAIL = 1_000_000
MAX_RETENTION_DAYS = 36_500


def _tail_count(text: str) -> int:
    """``-n``: an integer 1..MAX_TAIL (argparse turns the ValueError into exit 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 1 <= value <= MAX_TAIL:
        raise argparse.ArgumentTypeError(f"must be between 1 and {MAX_TAIL:,}, got {text}")
    return value


def _busy(path: object, what: str) -> Any:
    """The InputError for a store whose write lock another process holds too long."""
    from engine.errors import Diagnostic, InputError, Location

    return InputError(
        f"{path}: store busy: another writer holds the lock; {what}",
        title="Store busy",
        diagnostics=[
            Diagnostic("store busy: another writer holds the lock", Location(str(path)), hint=what)
        ],
    )


def _is_lock(exc: BaseException) -> bool:
    text = str(exc)
    return "locked" in text or "busy" in text


def _store(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", metavar="PATH", help="journal store (default from harness.toml)")


def _open(args: argparse.Namespace, *, readonly: bool = False) -> Any:
    from engine.config import resolve_store
    from engine.store.db import connect

    path = resolve_store(args.store)
    return path, connect(path, readonly=readonly)


def cmd_append(args: argparse.Namespace) -> int:
    import sqlite3

    from engine.errors import InputError
    from engine.journal.lines import iter_capped_lines
    from engine.journal.rows import RowError
    from engine.journal.writer import Committer, parse_json_row

    path, conn = _open(args)
    committer = Committer(conn)
    admitted = ticks = 0
    refusals: list[dict[str, Any]] = []
    good: list[Any] = []
    pending_refused = 0

    def flush() -> None:
        nonlocal admitted, ticks, good, pending_refused
        if good or pending_refused:
            try:
                result = committer.commit_checked(good, refused_count=pending_refused)
            except sqlite3.OperationalError as exc:
                if not _is_lock(exc):
                    raise
                raise _busy(
                    path,
                    f"{len(good):,} checked row(s) of this batch and any later lines were not "
                    f"admitted; {admitted:,} row(s) were admitted before",
                ) from None
            admitted += result.admitted
            ticks += result.ticks
            good = []
            pending_refused = 0

    lines = iter_capped_lines(sys.stdin, "<stdin>")
    stopped: InputError | None = None
    try:
        while True:
            try:
                lineno, line = next(lines)
            except StopIteration:
                break
            except InputError as exc:  # an endless or binary line: keep what came before it
                stopped = exc
                break
            if not line.strip():
                continue
            try:
                row = parse_json_row(line, "<stdin>", lineno, with_at=False)
                if row[1] == "tick":
                    raise RowError("kind", "tick rows are written by the committer only").at_line(
                        "<stdin>", lineno
                    )
            except RowError as exc:
                refusals.append({"line": lineno, "field": exc.field, "problem": exc.problem})
                if not args.json:
                    sys.stderr.write(f"<stdin>:{lineno}: refused: {exc.field}: {exc.problem}\n")
                pending_refused += 1
                continue
            except Exception:
                # A bug, not bad input: the line counts as refused and the good
                # lines before it are still admitted; then the error surfaces.
                pending_refused += 1
                flush()
                raise
            good.append(row)
            if len(good) >= APPEND_BATCH:
                flush()
        flush()
    finally:
        conn.close()
    if stopped is not None:
        note = f"stopped reading; {admitted:,} row(s) before it were admitted"
        raise InputError(
            f"{stopped.message}; {note}",
            title=stopped.title,
            diagnostics=[d.with_hint(note) for d in stopped.diagnostics],
        )
    if args.json:
        print_json({"ok": not refusals, "admitted": admitted, "ticks": ticks, "refused": refusals})
    else:
        print(f"admitted {admitted} row(s), refused {len(refusals)}, ticks {ticks}")
    return EXIT_FAILED if refusals else EXIT_OK


def cmd_import(args: argparse.Namespace) -> int:
    import sqlite3

    from engine.errors import Diagnostic, InputError, Location
    from engine.journal.lines import MAX_IMPORT_BYTES, iter_capped_lines, open_import_file
    from engine.journal.rows import RowError
    from engine.journal.writer import (
        FUTURE_SKEW_MS,
        Committer,
        iter_jsonl_history,
        wall_clock_ms,
    )

    name = "<stdin>" if args.file == "-" else args.file
    stream = sys.stdin if args.file == "-" else open_import_file(args.file)
    try:
        path, conn = _open(args)
    except BaseException:
        if stream is not sys.stdin:
            stream.close()
        raise
    where = [0]
    lines = (
        line
        for _n, line in iter_capped_lines(
            stream, name, max_total=MAX_IMPORT_BYTES, hint="nothing was imported"
        )
    )
    try:
        result = Committer(conn).import_history(
            iter_jsonl_history(lines, name, where, max_at=wall_clock_ms() + FUTURE_SKEW_MS),
            atomic=True,
            synth_ticks=args.ticks,
        )
    except RowError as exc:
        loc = exc.diagnostics[0].location
        if not loc.line:
            loc = Location(name, where[0])
        raise InputError(
            f"{loc}: {exc.field}: {exc.problem}; nothing was imported",
            title="Import refused",
            diagnostics=[
                Diagnostic(
                    exc.problem, loc, path=exc.field, code="row", hint="nothing was imported"
                )
            ],
        ) from None
    except sqlite3.OperationalError as exc:
        if not _is_lock(exc):
            raise
        raise _busy(path, "nothing was imported") from None
    finally:
        if stream is not sys.stdin:
            stream.close()
        conn.close()
    if args.json:
        print_json(
            {
                "ok": True,
                "admitted": result.admitted,
                "ticks": result.ticks,
                "skipped_ticks": result.skipped_ticks,
                "first_seq": result.first_seq,
                "last_seq": result.last_seq,
            }
        )
    else:
        print(
            f"imported {result.admitted} row(s) (seq {result.first_seq}..{result.last_seq}), "
            f"{result.ticks} tick(s) added"
        )
    return EXIT_OK


def format_row(row: tuple[Any, ...]) -> str:
    """One row as a line: seq, ISO time, type, then the non-empty columns."""
    from engine.journal.rows import COLUMNS
    from engine.timefmt import iso_ms_precise_z

    when = iso_ms_precise_z(row[1])
    rest = " ".join(f"{c}={v}" for c, v in zip(COLUMNS[4:], row[4:], strict=True) if v is not None)
    return f"{row[0]:>9} {when} {row[3]:<16} {rest}".rstrip()


def cmd_tail(args: argparse.Namespace) -> int:
    import json

    from engine.errors import InputError
    from engine.journal.reader import follow, iter_rows, tail_start
    from engine.journal.rows import RowError, check_values, row_dict

    path, conn = _open(args, readonly=True)

    def emit(row: tuple[Any, ...]) -> None:
        try:  # a garbled store can hand back rows no writer could have admitted
            check_values(row[1:])
        except RowError as exc:
            raise InputError(
                f"{path}: row seq {row[0]!r} is garbled ({exc.field}: {exc.problem}); "
                "run harness doctor",
                title="Bad store",
            ) from None
        if args.json:
            sys.stdout.write(json.dumps(row_dict(row)) + "\n")
        else:
            sys.stdout.write(format_row(row) + "\n")

    cursor = tail_start(conn, args.n)
    for row in iter_rows(conn, cursor):
        emit(row)
        cursor = row[0]
    sys.stdout.flush()
    if args.follow:
        for row in follow(conn, cursor):
            emit(row)
            sys.stdout.flush()
    conn.close()
    return EXIT_OK


def cmd_stats(args: argparse.Namespace) -> int:
    from engine.journal.reader import journal_stats
    from engine.timefmt import iso_ms

    path, conn = _open(args, readonly=True)
    stats = journal_stats(conn, path)
    conn.close()
    if args.json:
        print_json({"store": str(path), **stats.to_json()})
        return EXIT_OK

    def iso(ms: int | None) -> str:
        if ms is None:
            return "-"
        return iso_ms(ms)

    print(f"store    {path} ({stats.file_bytes / 1e6:.1f} MB)")
    print(f"rows     {stats.rows:,} (seq {stats.first_seq}..{stats.last_seq})")
    print(f"first at {iso(stats.first_at)}")
    print(f"last at  {iso(stats.last_at)}")
    print(f"dropped  {stats.dropped:,}   refused {stats.refused:,}   pruned {stats.pruned:,}")
    for kind, types in stats.by_type.items():
        print(f"{kind:12} {sum(types.values()):>12,}")
        for typ, count in types.items():
            print(f"  {typ:18} {count:>12,}")
    return EXIT_OK


def cmd_prune(args: argparse.Namespace) -> int:
    import sqlite3

    from engine.config import load_config, resolve_store
    from engine.errors import InputError
    from engine.journal.reader import prune
    from engine.journal.writer import FUTURE_SKEW_MS, wall_clock_ms
    from engine.store.db import connect
    from engine.timefmt import iso_ms

    config = load_config()
    days = args.days if args.days is not None else config.retention_days
    if not 1 <= days <= MAX_RETENTION_DAYS:
        raise InputError(f"--days must be between 1 and {MAX_RETENTION_DAYS:,}, got {days}")
    path = resolve_store(args.store, config)
    conn = connect(path, create=False)  # prune never creates a store
    try:
        newest = conn.execute("SELECT at FROM rule_journal ORDER BY seq DESC LIMIT 1").fetchone()
        if newest is not None and newest[0] > wall_clock_ms() + FUTURE_SKEW_MS:
            raise InputError(
                f"{path}: the journal's last at is {iso_ms(newest[0])}, in the future; pruning "
                f"{days} day(s) before it would delete real rows, so nothing was pruned",
                title="Prune refused",
            )
        result = prune(conn, days=days)
    except sqlite3.OperationalError as exc:
        if not _is_lock(exc):
            raise
        raise _busy(
            path, "prune stopped; rows deleted in earlier transactions stay deleted"
        ) from None
    finally:
        conn.close()
    if args.json:
        print_json(
            {
                "ok": True,
                "deleted": result.deleted,
                "cutoff_at": result.cutoff_at,
                "days": days,
                "transactions": result.transactions,
                "longest_transaction_ms": round(result.longest_txn_ms, 2),
            }
        )
    else:
        print(
            f"deleted {result.deleted:,} row(s) older than {days} day(s) "
            f"in {result.transactions} transaction(s) (longest {result.longest_txn_ms:.1f} ms)"
        )
    return EXIT_OK
