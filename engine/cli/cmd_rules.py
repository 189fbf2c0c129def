"""``harness rules``: inspect rules (list, show, lint) and hand backtest, explain, propose, mine on.

Usage: ``harness rules list | show NAME | lint | backtest | explain | propose | mine``.

list, show and lint are static: they load rules with the evaluator's loader
and, for list/show, read fires from the store *when it exists* — read-only,
never creating or migrating it, and tolerating a store that has no fire
tables yet, so the commands work on a fresh machine. backtest and explain are
the evaluator's (``engine.cli.cmd_backtest``, ``engine.cli.cmd_explain``),
propose and mine are ``engine.cli.cmd_propose``'s; each is imported inside
its handler, only when run, so this module imports nothing heavy at top level.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

DAY_MS = 86_400_000
MAX_ID = 2**63 - 1
MAX_DAYS = 3650
MAX_SPAN_MS = MAX_DAYS * DAY_MS


def _int_in(lo: int, hi: int) -> Any:
    """argparse type: an integer in [lo, hi] (so SQLite never sees an out-of-range value)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text[:40]!r}") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"must be between {lo} and {hi}, got {text[:40]}")
        return value

    return parse


def span(text: str) -> str:
    """argparse type: a duration of at most MAX_DAYS days (checked, passed on as text)."""
    from engine.durations import DurationError, parse_duration_ms

    try:
        value = parse_duration_ms(text)
    except DurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if value > MAX_SPAN_MS:
        raise argparse.ArgumentTypeError(f"{text[:40]} is longer than {MAX_DAYS} days")
    return text


def until(text: str) -> str:
    """argparse type for --until: a seq in range, a bounded duration, or a time (checked later)."""
    from engine.durations import DurationError, DurationRangeError, parse_duration_ms

    stripped = text.strip()
    if stripped.isdigit():
        _int_in(0, MAX_ID)(stripped)
        return text
    try:
        value = parse_duration_ms(stripped)
    except DurationRangeError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    except DurationError:
        return text  # an ISO time; resolve_range reports a bad one
    if value > MAX_SPAN_MS:
        raise argparse.ArgumentTypeError(f"{text[:40]} is longer than {MAX_DAYS} days")
    return text


def register(sub: Any) -> None:
    p = sub.add_parser("rules", help="List, show, lint, backtest and explain rules.")
    rs = p.add_subparsers(title="rules commands", metavar="COMMAND")

    lp = rs.add_parser("list", help="Every loaded rule with its state and recent fires.")
    _common(lp)
    lp.set_defaults(handler=cmd_list)

    sp = rs.add_parser("show", help="One rule: source, normalized when, hash, cost, fires.")
    sp.add_argument("name", metavar="NAME")
    _common(sp)
    sp.set_defaults(handler=cmd_show)

    tp = rs.add_parser("lint", help="Check rule files with the evaluator's loader (no store).")
    tp.add_argument("paths", metavar="PATH", nargs="*")
    tp.add_argument("--format", choices=("text", "json", "sarif"), default="text")
    tp.add_argument("--json", action="store_true", help="same as --format json")
    tp.set_defaults(handler=cmd_lint)

    bp = rs.add_parser("backtest", help="Replay stored history through candidate rules.")
    bp.add_argument("rules", metavar="RULE_FILE_OR_NAME", nargs="+")
    since = bp.add_mutually_exclusive_group()
    since.add_argument("--since", metavar="DUR", type=span)
    since.add_argument("--from-seq", metavar="N", type=_int_in(0, MAX_ID), dest="from_seq")
    bp.add_argument("--until", metavar="UNTIL", type=until)
    bp.add_argument("--policy", metavar="DIR", action="append", default=[])
    bp.add_argument("--json", action="store_true")
    bp.add_argument("--store", metavar="PATH")
    bp.set_defaults(handler=_backtest)

    ep = rs.add_parser("explain", help="Why a fire happened, recomputed from the journal.")
    ep.add_argument("fire_id", metavar="FIRE_ID", type=_int_in(1, MAX_ID))
    ep.add_argument("--json", action="store_true")
    ep.add_argument("--store", metavar="PATH")
    ep.set_defaults(handler=_explain)

    pp = rs.add_parser("propose", help="Backtest a rule file and prepare a policy-repo change.")
    pp.add_argument("file", metavar="FILE")
    pp.add_argument(
        "--days",
        type=_int_in(1, MAX_DAYS),
        default=7,
        help=f"backtest window in days, 1..{MAX_DAYS} (default 7)",
    )
    pp.add_argument("--repo", metavar="NAME", help="which [policy_repo.NAME] (if several)")
    pp.add_argument("--push", action="store_true", help="push the prepared branch")
    pp.add_argument("--who", metavar="NAME", help="who proposes (stored with the proposal)")
    pp.add_argument("--json", action="store_true")
    pp.add_argument("--store", metavar="PATH")
    pp.set_defaults(handler=_propose)

    mp = rs.add_parser(
        "mine",
        help="Find recurring journal patterns no active rule covers; propose rules (notify).",
    )
    mp.add_argument(
        "--since", metavar="DUR", type=span, help="journal time to look back (default: all)"
    )
    mp.add_argument(
        "--miner", action="append", default=[], metavar="NAME", help="run only these miners"
    )
    mp.add_argument("--dry-run", action="store_true", help="report, do not store proposals")
    _common(mp)
    mp.set_defaults(handler=_mine)
    p.set_defaults(handler=lambda a: (p.print_help(), 2)[1])


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--policy", metavar="DIR", action="append", default=[], help="extra rule dir")
    p.add_argument("--store", metavar="PATH")
    p.add_argument("--json", action="store_true")


def _backtest(args: argparse.Namespace) -> int:
    from engine.cli.cmd_backtest import cmd_backtest

    return cmd_backtest(args)


def _explain(args: argparse.Namespace) -> int:
    from engine.cli.cmd_explain import cmd_explain

    return cmd_explain(args)


def _propose(args: argparse.Namespace) -> int:
    from engine.cli.cmd_propose import cmd_propose

    return cmd_propose(args)


def _mine(args: argparse.Namespace) -> int:
    from engine.cli.cmd_propose import cmd_mine

    return cmd_mine(args)


# --- loading ------------------------------------------------------------------------------


def _load(args: argparse.Namespace) -> tuple[Any, Any]:
    """Config and loaded rules; missing configured policy dirs become load warnings."""
    from dataclasses import replace

    from engine.config import load_config
    from engine.rules.lint import policy_dir_problems
    from engine.rules.sources import load_rule_set, rule_sources

    config = load_config()
    result = load_rule_set(rule_sources(config, args.policy), config)
    missing = policy_dir_problems(config)
    if missing:
        result = replace(result, warnings=(*result.warnings, *missing))
    return config, result


class _StoreView:
    """Read-only, defensive view of fires and rule state (E owns the tables)."""

    def __init__(self, path: Path | None, named: bool = False, problem: str | None = None) -> None:
        self.conn: sqlite3.Connection | None = None
        # Why fires and states cannot be shown; None when the store was read (or,
        # for the implicit default location, simply does not exist yet).
        self.problem: str | None = problem
        self.missing = False
        if path is None or problem:
            return
        if not path.exists() or (path.is_file() and path.stat().st_size == 0):
            if named:  # warn, but nothing recorded there: 0 fires stays true
                self.problem = f"no store here: {path}"
                self.missing = True
            return
        try:
            self.conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=2.0)
            self.conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.Error as exc:
            self.problem = f"cannot read the store {path}: {exc}"
            self.conn = None

    def _q(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        if self.conn is None:
            return []
        try:
            return list(self.conn.execute(sql, params).fetchall())
        except sqlite3.Error as exc:
            if not str(exc).startswith("no such table"):  # a fresh store has no fire tables
                self.problem = self.problem or f"cannot read the store: {exc}"
            return []

    def now_ms(self) -> int:
        """Journal time: the newest row's ``at``, else the wall clock."""
        rows = self._q("SELECT MAX(at) FROM rule_journal")
        if rows and rows[0][0] is not None:
            return int(rows[0][0])
        return int(time.time() * 1000)

    def fires_since(self, name: str, since_ms: int) -> int | None:
        """Fires in the window, or None when the store could not be read (unknown, not 0)."""
        rows = self._q(
            "SELECT COUNT(*) FROM rule_fires WHERE rule = ? AND at > ?", (name, since_ms)
        )
        if self.problem and not self.missing:
            return None
        return int(rows[0][0]) if rows else 0

    def state(self, name: str, rule_hash: str) -> tuple[str | None, str | None]:
        """The evaluator's recorded state, if it is about this version of the rule."""
        rows = self._q("SELECT state, error, hash FROM rule_state WHERE name = ?", (name,))
        if not rows or rows[0][2] != rule_hash:
            return None, None
        return rows[0][0], rows[0][1]

    def last_fires(self, name: str, limit: int = 10) -> list[dict[str, Any]]:
        rows = self._q(
            "SELECT id, hash, seq, at, target, level, effective_level, status FROM rule_fires"
            " WHERE rule = ? ORDER BY seq DESC, id DESC LIMIT ?",
            (name, limit),
        )
        keys = ("id", "hash", "seq", "at", "target", "level", "effective_level", "status")
        return [dict(zip(keys, r, strict=True)) for r in rows]

    def last_acted_hash(self, name: str) -> str | None:
        rows = self._q(
            "SELECT hash FROM rule_fires WHERE rule = ? AND status NOT IN ('shadow', 'suppressed')"
            " ORDER BY seq DESC, id DESC LIMIT 1",
            (name,),
        )
        return str(rows[0][0]) if rows else None


def _store_view(args: argparse.Namespace, config: Any) -> _StoreView:
    from engine.config import resolve_store

    named = bool(args.store) or config.store_path is not None
    from engine.errors import HarnessError

    try:
        return _StoreView(resolve_store(args.store, config), named)
    except (HarnessError, OSError) as exc:  # a bad store path: say so, show fires as unknown
        return _StoreView(None, named, f"cannot use the store: {exc}")


def _state(name: str, rule_hash: str, config: Any, store: _StoreView) -> tuple[str, str | None]:
    stored, error = store.state(name, rule_hash)
    if name in config.rules.disable:
        return "disabled", "disabled in harness.toml"
    if stored:
        return stored, error
    return "active", None


# --- handlers -----------------------------------------------------------------------------


def cmd_list(args: argparse.Namespace) -> int:
    from engine.cli.common import print_json

    config, result = _load(args)
    store = _store_view(args, config)
    since = store.now_ms() - DAY_MS
    rows = []
    for cr in sorted(result.rules, key=lambda c: c.rule.name):
        r = cr.rule
        state, error = _state(r.name, r.hash, config, store)
        rows.append(
            {
                "name": r.name,
                "source_file": r.source_file,
                "source_kind": r.source_kind,
                "on": r.on,
                "level": r.level,
                "enforced": any(e.split("@")[0] == r.name for e in config.rules.enforce),
                "state": state,
                "hash": r.hash,
                "fires_24h": store.fires_since(r.name, since),
                "error": error,
            }
        )
    errors = [d.to_json() for d in result.errors]
    warnings = [d.to_json() for d in result.warnings if d.code == "policy_repo"]
    if store.problem:
        warnings.append(_store_warning(store.problem))
    if args.json:
        print_json({"rules": rows, "errors": errors, "warnings": warnings})
    else:
        print(f"{'NAME':<28} {'LEVEL':<9} {'STATE':<9} {'HASH':<12} {'24H':>5}  SOURCE")
        for row in rows:
            fires = "?" if row["fires_24h"] is None else row["fires_24h"]
            print(
                f"{row['name']:<28} {row['level']:<9} {row['state']:<9} {row['hash'][:12]:<12}"
                f" {fires:>5}  {row['source_file']}"
            )
            if row["error"]:
                print(f"    error: {row['error']}")
        for d in result.errors:
            print(f"load error: {d}", file=sys.stderr)
        for w in warnings:
            print(f"warning: {w['message']}", file=sys.stderr)
    return 0


def _store_warning(problem: str) -> dict[str, Any]:
    """The --json warning entry for a store whose fires and states could not be read."""
    return {
        "severity": "warning",
        "code": "store",
        "message": f"{problem}; fires and recorded states could not be read",
        "path": "",
        "file": None,
        "line": 0,
        "col": 0,
        "hint": "",
    }


def cmd_show(args: argparse.Namespace) -> int:
    from engine.cli.common import print_json
    from engine.durations import format_duration_ms
    from engine.errors import InputError

    config, result = _load(args)
    found = [cr for cr in result.rules if cr.rule.name == args.name]
    if not found:
        near = [d for d in result.errors if args.name in d.message or args.name in str(d.location)]
        detail = "; ".join(str(d) for d in near[:3])
        raise InputError(f"no loaded rule named {args.name!r}" + (f" ({detail})" if detail else ""))
    r = found[0].rule
    store = _store_view(args, config)
    state, error = _state(r.name, r.hash, config, store)
    acted = store.last_acted_hash(r.name)
    changed = acted is not None and acted != r.hash
    data = {
        "name": r.name,
        "description": r.description,
        "source_file": r.source_file,
        "source_kind": r.source_kind,
        "on": r.on,
        "level": r.level,
        "target": r.target,
        "cooldown": format_duration_ms(r.cooldown_ms),
        "message": r.message,
        "state": state,
        "error": error,
        "hash": r.hash,
        "hash_changed_since_last_acted": changed,
        "last_acted_hash": acted,
        "normalized_when": r.normalized_when,
        "static_cost": r.static_cost,
        "primitives": [
            {
                "index": p.index,
                "fn": p.fn,
                "field": p.field,
                "selector_keys": list(p.selector_keys),
                "window": format_duration_ms(p.window_ms),
            }
            for p in r.primitives
        ],
        "last_fires": store.last_fires(r.name),
        "source_text": r.text,
    }
    if store.problem:
        data["last_fires"] = [] if store.missing else None
        data["warnings"] = [_store_warning(store.problem)]
        print(f"warning: {data['warnings'][0]['message']}", file=sys.stderr)
    if args.json:
        print_json(data)
        return 0
    mark = f"  [CHANGED since it last acted: was {acted[:12]}]" if changed and acted else ""
    print(f"{r.name}  ({r.source_kind}: {r.source_file})")
    print(f"  state: {state}" + (f" - {error}" if error else ""))
    print(f"  hash: {r.hash}{mark}")
    print(f"  on {r.on}, level {r.level}, target {r.target}, cooldown {data['cooldown']}")
    print(f"  static cost: {r.static_cost}")
    print(f"  normalized when: {r.normalized_when}")
    for p in r.primitives:
        field = f'"{p.field}", ' if p.field else ""
        keys = ", ".join(p.selector_keys)
        print(
            f"  primitive {p.index}: {p.fn}({field}{{{keys}}}, {format_duration_ms(p.window_ms)})"
        )
    fires = data["last_fires"]
    if fires is None:
        fires = []
        print("  last fires: ? (store unreadable)")
    else:
        assert isinstance(fires, list)
        print(f"  last fires: {len(fires) or 'none'}")
    for f in fires:
        print(
            f"    #{f['id']} seq {f['seq']} target {f['target']}"
            f" {f['effective_level']} {f['status']}"
        )
    print("--- source ---")
    print(r.text.rstrip("\n"))
    return 0


def cmd_lint(args: argparse.Namespace) -> int:
    from engine.cli.common import print_json
    from engine.config import load_config
    from engine.rules.lint import format_json, format_sarif, format_text, run_lint

    fmt = "json" if args.json else args.format
    args.json = fmt == "json"  # so an unreadable PATH is a JSON error on stdout too
    report = run_lint(args.paths, load_config())
    if fmt == "json":
        print_json(format_json(report))
    elif fmt == "sarif":
        print_json(format_sarif(report))
    else:
        print(format_text(report))
    return report.exit_code
