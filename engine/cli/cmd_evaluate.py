"""``harness evaluate``: run the rules over committed rows headless, once or following new ones.

Usage: ``harness evaluate [--follow] [--store PATH] [--json]``.

Without ``--follow`` it evaluates every committed row after the cursor and
exits (what a cron job or a test wants); with ``--follow`` it keeps going as
rows commit until interrupted, and reloads the rule files and harness.toml
when they change (watchfiles), keeping the last good version of a broken file
and recording the new rule-set digest in the lease. Either way it goes through the lifecycle
(``engine.rules.authority.lifecycle.open_live``) and the store lease (role
``evaluate``, with the digest of its rule set), so running it beside serve or
a console started with ``--act`` never acts twice: the one holding the lease
acts, the others follow (a console hands the lease over to it).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from typing import Any

from engine.cli.common import EXIT_OK, print_json


def arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--follow", action="store_true", help="keep evaluating rows as they commit")
    p.add_argument("--store", metavar="PATH")
    p.add_argument("--json", action="store_true", help="JSON summary (JSON lines with --follow)")
    p.add_argument(
        "--policy", metavar="DIR", action="append", default=[], help="extra rule directory"
    )


def _fire_line(fire: Any, as_json: bool) -> str:
    if as_json:
        return json.dumps(fire.to_json(), ensure_ascii=False)
    aggs = ", ".join(f"{c.fn}={c.result}" for c in fire.calls)
    return (
        f"fire {fire.id}: {fire.rule} seq {fire.seq} target {fire.target} "
        f"{fire.status} at {fire.effective_level}" + (f" ({aggs})" if aggs else "")
    )


def cmd_evaluate(args: argparse.Namespace) -> int:
    from engine.config import resolve_store
    from engine.rules.authority.lease import EVALUATE, Lease, current_lease, ruleset_digest, serve
    from engine.rules.language.model import LoadResult
    from engine.rules.language.sources import FollowedRules
    from engine.store.db import connect

    open_live = _open_live()

    from engine.policy.schedule import MinerSchedule, check_miner_names, mine_if_due

    config, rules = _load(args)
    followed = FollowedRules(config, LoadResult(tuple(rules), (), ()), args.policy, say=_say)
    miners = MinerSchedule(check_miner_names(config.rule_miners, str(config.source)))
    conn = connect(resolve_store(args.store, config), create=False)
    lease = Lease(conn, role=EVALUATE, ruleset=ruleset_digest(rules, config.rules))
    totals = {"rows": 0, "fires": 0, "rule_errors": 0, "store_errors": 0, "proposals": 0}

    def maybe_mine() -> None:
        """Configured miners run in the acting evaluator, hourly in journal time."""
        found = mine_if_due(miners, conn, followed.rules, followed.config.rules)
        if found:
            stored = [p for p in found if p.proposal is not None]
            totals["proposals"] += len(stored)
            for pattern in stored:
                sys.stderr.write(
                    f"miner {pattern.miner}: proposed {pattern.rule} "
                    f"(#{pattern.proposal.id if pattern.proposal else '?'}, notify)\n"
                )

    def build() -> Any:
        if followed.changed.is_set() and followed.reload():
            lease.set_ruleset(ruleset_digest(followed.rules, followed.config.rules))
        evaluator, _hooks = open_live(conn, followed.rules, followed.config, lease=lease)
        return evaluator

    def on_step(result: Any) -> None:
        totals["rows"] += result.rows
        totals["fires"] += len(result.fires)
        totals["rule_errors"] += len(result.rule_errors)
        totals["store_errors"] += len(result.store_errors)
        if result.rows:
            maybe_mine()
        if args.follow:
            for fire in result.fires:
                sys.stdout.write(_fire_line(fire, args.json) + "\n")
            for err in result.rule_errors:
                sys.stderr.write(f"rule {err.rule} disabled at seq {err.seq}: {err.error}\n")
            sys.stdout.flush()

    try:
        if args.follow:
            stop = threading.Event()
            previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
            followed.watch(stop)
            try:
                serve(lease, build, stop, on_step=on_step, rebuild=followed.changed.is_set)
            except KeyboardInterrupt:
                stop.set()
            finally:
                signal.signal(signal.SIGTERM, previous)
            acting = True
        else:
            acting = lease.try_acquire()
            if acting:
                try:
                    evaluator = build()
                    while True:
                        result = evaluator.step()
                        on_step(result)
                        if result.rows == 0:
                            break
                finally:
                    lease.release()
            else:
                holder = current_lease(conn)
                who = holder.who if holder is not None else "another evaluator"
                sys.stderr.write(f"{who} holds the evaluator lease; nothing evaluated here\n")
        cursor = conn.execute("SELECT seq FROM rule_cursor WHERE name = 'live'").fetchone()
        disabled: list[tuple[str, str, int]] = conn.execute(
            "SELECT name, error, error_seq FROM rule_state WHERE state = 'disabled' ORDER BY name"
        ).fetchall()
    finally:
        conn.close()
    summary: dict[str, Any] = {
        "acting": acting,
        "rules": len(followed.rules),
        **totals,
        "cursor": int(cursor[0]) if cursor else 0,
        "disabled": [{"rule": n, "error": e, "seq": s} for n, e, s in disabled],
    }
    if not args.follow:
        _report(summary, as_json=args.json)
    return EXIT_OK


def _report(summary: dict[str, Any], *, as_json: bool) -> None:
    """What a one-shot ``harness evaluate`` says when it is done."""
    if as_json:
        print_json(summary)
        return
    sys.stdout.write(
        f"evaluated {summary['rows']} row(s) with {summary['rules']} rule(s): "
        f"{summary['fires']} fire(s); cursor at seq {summary['cursor']}\n"
    )
    for d in summary["disabled"]:
        sys.stdout.write(f"  disabled {d['rule']} (seq {d['seq']}): {d['error']}\n")
    if summary["store_errors"]:
        sys.stdout.write(f"  store errors: {summary['store_errors']}\n")


def _open_live() -> Any:
    """The lifecycle's wiring of a live evaluator (shadow, cooldown, levels, holds, actions)."""
    from engine.rules.authority.lifecycle_run import open_live

    return open_live


def _load(args: argparse.Namespace) -> tuple[Any, list[Any]]:
    from engine.config import load_config
    from engine.rules.language.sources import load_rule_set, rule_sources

    config = load_config()
    loaded = load_rule_set(rule_sources(config, args.policy), config)
    for diag in loaded.errors:
        sys.stderr.write(f"rule not loaded: {diag}\n")
    return config, list(loaded.rules)


def _say(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()
