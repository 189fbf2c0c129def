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
    run = _Evaluation(args)
    if args.follow:
        run.follow()
        return EXIT_OK
    _report(run.once(), as_json=args.json)
    return EXIT_OK


class _Evaluation:
    """One ``harness evaluate``: its rules, its connection and lease, and what it evaluated.

    Following, a store error (locked, full, I/O) ends one connection's worth
    of evaluating, not the command: it says why on stderr and starts again on
    a new connection (:class:`~engine.rules.authority.recovery.FaultRide`, as
    serve and the console do).
    """

    def __init__(self, args: argparse.Namespace) -> None:
        from engine.config import resolve_store
        from engine.policy.schedule import MinerSchedule, check_miner_names
        from engine.rules.language.model import LoadResult
        from engine.rules.language.sources import FollowedRules

        self.args = args
        self.open_live = _open_live()
        config, rules = _load(args)
        self.followed = FollowedRules(
            config, LoadResult(tuple(rules), (), ()), args.policy, say=_say
        )
        self.miners = MinerSchedule(check_miner_names(config.rule_miners, str(config.source)))
        self.store = resolve_store(args.store, config)
        self.totals = {"rows": 0, "fires": 0, "rule_errors": 0, "store_errors": 0, "proposals": 0}
        self.conn: Any = None
        self.lease: Any = None
        self.ride: Any = None

    def _open(self) -> None:
        from engine.rules.authority.lease import EVALUATE, Lease, ruleset_digest
        from engine.store.db import connect

        self.conn = connect(self.store, create=False)
        followed = self.followed
        self.lease = Lease(
            self.conn, role=EVALUATE, ruleset=ruleset_digest(followed.rules, followed.config.rules)
        )

    def _close(self) -> None:
        import contextlib
        import sqlite3

        if self.conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self.conn.close()
        self.conn = self.lease = None

    def build(self) -> Any:
        from engine.rules.authority.lease import ruleset_digest

        followed = self.followed
        if followed.changed.is_set() and followed.reload():
            self.lease.set_ruleset(ruleset_digest(followed.rules, followed.config.rules))
        evaluator, _hooks = self.open_live(
            self.conn, followed.rules, followed.config, lease=self.lease
        )
        if self.ride is not None:
            self.ride.working()
        return evaluator

    def _mine(self) -> None:
        """Configured miners run in the acting evaluator, hourly in journal time."""
        from engine.policy.schedule import mine_if_due

        found = mine_if_due(self.miners, self.conn, self.followed.rules, self.followed.config.rules)
        stored = [p for p in found if p.proposal is not None]
        self.totals["proposals"] += len(stored)
        for pattern in stored:
            sys.stderr.write(
                f"miner {pattern.miner}: proposed {pattern.rule} "
                f"(#{pattern.proposal.id if pattern.proposal else '?'}, notify)\n"
            )

    def on_step(self, result: Any) -> None:
        totals = self.totals
        totals["rows"] += result.rows
        totals["fires"] += len(result.fires)
        totals["rule_errors"] += len(result.rule_errors)
        totals["store_errors"] += len(result.store_errors)
        if result.rows:
            self._mine()
        if self.args.follow:
            for fire in result.fires:
                sys.stdout.write(_fire_line(fire, self.args.json) + "\n")
            for err in result.rule_errors:
                sys.stderr.write(f"rule {err.rule} disabled at seq {err.seq}: {err.error}\n")
            sys.stdout.flush()

    def follow(self) -> None:
        """Evaluate rows as they commit until SIGTERM or Ctrl-C, through store faults."""
        from engine.rules.authority.lease import serve
        from engine.rules.authority.recovery import FaultRide

        stop = threading.Event()
        previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
        self.followed.watch(stop)
        self.ride = FaultRide(
            stop,
            on_fault=lambda why: _say(f"store error: {why}; evaluating again on a new connection"),
            on_recovered=lambda: _say("the store works again; evaluating"),
        )

        def attempt() -> None:
            self._open()
            try:
                serve(
                    self.lease,
                    self.build,
                    stop,
                    on_step=self.on_step,
                    rebuild=self.followed.changed.is_set,
                )
            finally:
                self._close()

        try:
            self.ride.run(attempt)
        except KeyboardInterrupt:
            stop.set()
        finally:
            signal.signal(signal.SIGTERM, previous)

    def once(self) -> dict[str, Any]:
        """Evaluate every committed row after the cursor (when this one may act); the summary."""
        from engine.rules.authority.lease import current_lease

        self._open()
        conn, lease = self.conn, self.lease
        try:
            acting = lease.try_acquire()
            if acting:
                try:
                    evaluator = self.build()
                    while True:
                        result = evaluator.step()
                        self.on_step(result)
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
                "SELECT name, error, error_seq FROM rule_state"
                " WHERE state = 'disabled' ORDER BY name"
            ).fetchall()
        finally:
            self._close()
        return {
            "acting": acting,
            "rules": len(self.followed.rules),
            **self.totals,
            "cursor": int(cursor[0]) if cursor else 0,
            "disabled": [{"rule": n, "error": e, "seq": s} for n, e, s in disabled],
        }


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
