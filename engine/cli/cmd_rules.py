"""``harness rules list | show NAME | lint``: inspect rules without evaluating them.

list, show and lint are static: they load rules with the evaluator's loader
and, for list/show, read fires from the store *when it exists* — read-only,
never creating or migrating it, and tolerating a store that has no fire
tables yet, so the commands work on a fresh machine. The other ``rules``
commands live in their own modules (``backtest`` in
:mod:`engine.cli.cmd_backtest`, ``explain`` in :mod:`engine.cli.cmd_explain`,
``propose`` and ``mine`` in :mod:`engine.cli.cmd_propose`), as the command
table in :mod:`engine.cli.registry` says; this module imports nothing heavy at
top level.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

from engine.cli.options import rule_set_options

DAY_MS = 86_400_000


def list_arguments(p: argparse.ArgumentParser) -> None:
    rule_set_options(p)


def show_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", metavar="NAME")
    rule_set_options(p)


def lint_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", metavar="PATH", nargs="*")
    p.add_argument("--format", choices=("text", "json", "sarif"), default="text")
    p.add_argument("--json", action="store_true", help="same as --format json")


# --- loading ------------------------------------------------------------------------------


def _load(args: argparse.Namespace) -> tuple[Any, Any]:
    """Config and the rules that ``list`` and ``show`` show (see ``sources.load_listed``)."""
    from engine.config import load_config
    from engine.rules.language.sources import load_listed

    config = load_config()
    return config, load_listed(config, args.policy)


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
    from engine.rules.language.lint import format_json, format_sarif, format_text, run_lint

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
