"""``harness rules backtest``: replay stored history through candidate rules.

The parser imports this module for :func:`arguments`, so the heavy imports
(CEL, the evaluator) wait for the handler. It opens the store read-only: a
backtest only ever reads history.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.cli.common import EXIT_OK
from engine.cli.options import MAX_ID, int_in, span, until
from engine.config import HarnessConfig, load_config, resolve_store
from engine.errors import CheckFailed, Diagnostic, InputError, Location

if TYPE_CHECKING:
    from engine.rules.language.model import CompiledRule


def arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("rules", metavar="RULE_FILE_OR_NAME", nargs="+")
    since = p.add_mutually_exclusive_group()
    since.add_argument("--since", metavar="DUR", type=span)
    since.add_argument("--from-seq", metavar="N", type=int_in(0, MAX_ID), dest="from_seq")
    p.add_argument("--until", metavar="UNTIL", type=until)
    p.add_argument("--policy", metavar="DIR", action="append", default=[])
    p.add_argument("--json", action="store_true")
    p.add_argument("--store", metavar="PATH")


def _policy_dirs(config: HarnessConfig, extra: Sequence[str]) -> tuple[list[Path], list[Path]]:
    repos = config.policy_rule_dirs(existing=True)
    return repos, [Path(p).expanduser() for p in extra]


def resolve_rules(
    specs: Sequence[str], config: HarnessConfig, extra_dirs: Sequence[str] = ()
) -> list[CompiledRule]:
    """Rules named by file path (a file or a directory of rule files) or by loaded name.

    A file that fails to load is an error naming its file:line:col; a name
    is looked up in starter_rules/, the policy repos and ``--policy`` dirs.
    """
    from engine.rules.language.loader import default_sources, load_rules

    for d in extra_dirs:
        if not Path(d).expanduser().is_dir():
            raise InputError(
                f"--policy {d}: not a directory",
                title="Cannot load rules",
                diagnostics=[Diagnostic("--policy: not a directory", Location(d), code="io")],
            )
    chosen: dict[str, CompiledRule] = {}
    by_name: dict[str, CompiledRule] | None = None
    name_errors: tuple[Diagnostic, ...] = ()
    problems: list[Diagnostic] = []
    for spec in specs:
        path = Path(spec).expanduser()
        if path.exists() or "/" in spec or spec.endswith((".yml", ".yaml")):
            if not path.exists():
                problems.append(Diagnostic("no such rule file", Location(spec), code="io"))
                continue
            res = load_rules([(path, "file")], config.rules)
            if res.errors:
                problems.extend(res.errors)
                continue
            if not res.rules:
                readable = path.is_file() or path.is_dir()  # not a FIFO or a device
                problems.append(
                    Diagnostic(
                        "no rule in this file" if readable else "not a regular file",
                        Location(spec),
                        code="schema" if readable else "io",
                    )
                )
            for cr in res.rules:
                chosen[cr.rule.name] = cr
            continue
        if by_name is None:
            repos, extra = _policy_dirs(config, extra_dirs)
            loaded = load_rules(default_sources(repos, extra), config.rules)
            by_name = {cr.rule.name: cr for cr in loaded.rules}
            name_errors = loaded.errors
        found = by_name.get(spec)
        if found is None:
            hint = "give a rule file path, or one of: " + ", ".join(sorted(by_name))
            problems.append(Diagnostic(f"no rule named {spec!r}", Location(spec), hint=hint))
            problems.extend(d for d in name_errors if spec in d.message or spec in str(d.location))
            continue
        chosen[found.rule.name] = found
    if problems:
        # A rule file that was read but does not load is an invalid rule file, exit 1;
        # a file that cannot be read, or a name that is not a rule, is exit 2 (issue 13).
        unreadable = any(d.code in ("io", "size") or d.hint.startswith("give a") for d in problems)
        error = InputError if unreadable else CheckFailed
        raise error(
            f"{len(problems)} problem(s) with the rules to backtest",
            title="Cannot load rules",
            diagnostics=problems,
        )
    return list(chosen.values())


def _progress_bar(total: int) -> tuple[Callable[[Any], None] | None, Callable[[], None]]:
    """A rich progress bar on stderr when it is a terminal; otherwise none at all.

    No bar means no progress callback, so the replay does not count its
    candidate rows up front for a total nobody sees.
    """
    if not sys.stderr.isatty() or total <= 0:
        return None, _nothing
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    bar = Progress(
        TextColumn("backtest"),
        BarColumn(),
        TextColumn("{task.completed:,}/{task.total:,} rows"),
        TextColumn("{task.fields[fires]} fires"),
        TimeRemainingColumn(),
        console=Console(file=sys.stderr),
        transient=True,
    )
    task = bar.add_task("backtest", total=total, fires=0)
    bar.start()

    def update(p: Any) -> None:
        # The total is the prefilter's candidate rows, known once the replay starts.
        bar.update(task, completed=p.rows_done, total=p.rows_total, fires=p.fires)

    def stop() -> None:
        bar.stop()

    return update, stop


def _nothing() -> None:
    return None


def _write_json(result: Any) -> None:
    """What ``print_json(result.to_json())`` writes, built and written faster.

    A 27k-fire report is 21 MB: it goes out as UTF-8 bytes, a piece at a
    time, when stdout is a UTF-8 stream (the text layer would encode it
    again), else as text.
    """
    out = sys.stdout
    buffer = getattr(out, "buffer", None)
    if (
        buffer is not None
        and (getattr(out, "encoding", "") or "").lower().replace("-", "") == "utf8"
    ):
        out.flush()
        result.write_json(buffer.write)
        buffer.write(b"\n")
        buffer.flush()
        return
    out.write(result.json_text() + "\n")


def cmd_backtest(args: argparse.Namespace) -> int:
    from engine.rules.authority.enforcement import Authority
    from engine.rules.authority.lifecycle_run import backtest_with_lifecycle
    from engine.rules.evaluation.backtest import resolve_range
    from engine.rules.language.sources import policy_dir_problems
    from engine.store.db import connect

    config = load_config()
    rules = resolve_rules(args.rules, config, getattr(args, "policy", []) or [])
    for warning in policy_dir_problems(config):
        sys.stderr.write(f"warning: {warning.message}\n")
    conn = connect(resolve_store(getattr(args, "store", None), config), readonly=True)
    try:
        seq_range = resolve_range(
            conn,
            since=getattr(args, "since", None),
            from_seq=getattr(args, "from_seq", None),
            until=getattr(args, "until", None),
        )
        update, stop_bar = _progress_bar(0 if args.json else seq_range.rows)
        cancel = threading.Event()
        try:
            # The lifecycle's wiring: shadow, suppressed, today's levels, hold spans.
            authority = Authority.from_config(config)
            result = backtest_with_lifecycle(
                conn, rules, seq_range, authority, progress=update, cancel=cancel
            )
        finally:
            stop_bar()
        from engine.rules.evaluation.parity import compare_live

        parity = compare_live(conn, result)
        result.extra["parity"] = parity.to_json()
    except sqlite3.Error as exc:
        store = resolve_store(getattr(args, "store", None), config)
        raise InputError(f"{store}: cannot read the journal: {exc}", title="Bad store") from None
    finally:
        conn.close()
    if args.json:
        _write_json(result)
    else:
        sys.stdout.write(result.render_text() + "\n")
        sys.stdout.write("\n".join(parity.lines()) + "\n")
    return EXIT_OK
