"""Handlers for ``harness rules propose FILE`` and ``harness rules mine``: prepare proposals.

Order matters for "nothing lost, nothing partly written": everything that can
refuse (the file, the rule, the policy repo's configuration) is checked
before the proposal is stored; the branch is prepared last and its name
recorded on the stored proposal.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from engine.cli.common import EXIT_OK, print_json
from engine.cli.options import MAX_DAYS, int_in, rule_set_options, span
from engine.config import load_config, resolve_store
from engine.errors import Diagnostic, InputError, Location


def propose_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE")
    p.add_argument(
        "--days",
        type=int_in(1, MAX_DAYS),
        default=7,
        help=f"backtest window in days, 1..{MAX_DAYS} (default 7)",
    )
    p.add_argument("--repo", metavar="NAME", help="which [policy_repo.NAME] (if several)")
    p.add_argument("--push", action="store_true", help="push the prepared branch")
    p.add_argument("--who", metavar="NAME", help="who proposes (stored with the proposal)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--store", metavar="PATH")


def mine_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--since", metavar="DUR", type=span, help="journal time to look back (default: all)"
    )
    p.add_argument(
        "--miner", action="append", default=[], metavar="NAME", help="run only these miners"
    )
    p.add_argument("--dry-run", action="store_true", help="report, do not store proposals")
    rule_set_options(p)


def _check_who(who: str) -> str:
    """``--who`` is stored and printed: one printable line, bounded."""
    if len(who) > 100 or not who.isprintable():
        raise InputError("--who must be one printable line of at most 100 characters")
    return who


def cmd_propose(args: argparse.Namespace) -> int:
    from engine.capped import CappedReadError, read_capped
    from engine.policy.proposals import prepare_rule, set_branch, store_prepared
    from engine.policy.propose import (
        backtest_prepared,
        branch_name,
        check_free_branch,
        pr_description,
        prepare_branch,
    )
    from engine.policy.workflow import pick_repo
    from engine.store.db import connect
    from engine.store.txn import immediate
    from engine.yamlsrc import MAX_BYTES, decode_source

    path = Path(args.file)
    days = int(getattr(args, "days", 7) or 7)
    if days < 1:
        raise InputError(f"--days must be at least 1, got {days}")
    try:
        raw = read_capped(path, MAX_BYTES)
    except CappedReadError as exc:
        raise InputError(
            f"{path}: cannot read: {exc.reason}",
            diagnostics=[Diagnostic(f"cannot read: {exc.reason}", Location(str(path)))],
        ) from None
    text = decode_source(raw, str(path))
    config = load_config()
    prepared = prepare_rule(text, str(path), config.rules)
    repo = pick_repo(config, getattr(args, "repo", None), unique=True)
    who = _check_who(getattr(args, "who", None) or "harness rules propose")
    check_free_branch(repo, branch_name(prepared))
    conn = connect(resolve_store(args.store, config))
    try:
        summary = backtest_prepared(conn, prepared, days)
        message = pr_description(prepared, summary)
        # One transaction: the proposal is stored only if its branch was prepared.
        with immediate(conn):
            proposal = store_prepared(conn, prepared, who=who, backtest=summary)
            branch = prepare_branch(
                repo, prepared, message, push=bool(getattr(args, "push", False))
            )
            set_branch(conn, proposal.id, branch.branch)
    finally:
        conn.close()
    if args.json:
        out = proposal.to_json()
        out.update(
            {
                "branch": branch.branch,
                "commit": branch.commit,
                "repo": branch.repo,
                "pushed": branch.pushed,
                "description": message,
            }
        )
        print_json(out)
    else:
        print(message)
        print(f"proposal #{proposal.id} stored; branch {branch.branch} prepared in {repo.path}")
        if not branch.pushed:
            print("not pushed (use --push to push it); harness.toml was not touched")
    return EXIT_OK


def cmd_mine(args: argparse.Namespace) -> int:
    """``harness rules mine``: run miners on demand over the journal's identifiers."""
    import sys

    from engine.policy.miner import MINER_NAMES, mine
    from engine.rules.language.sources import load_listed
    from engine.store.db import connect

    config = load_config()
    loaded = load_listed(config, args.policy)
    disabled = set(config.rules.disable)
    active = [r for r in loaded.rules if r.rule.name not in disabled]
    names = tuple(args.miner) or MINER_NAMES
    conn = connect(resolve_store(args.store, config))

    def say(step: str) -> None:
        if not args.json and sys.stderr.isatty():
            print(f"mining: {step}", file=sys.stderr)

    try:
        found = mine(
            conn,
            active,
            config.rules,
            since=args.since,
            miners=names,
            store=not args.dry_run,
            progress=say,
        )
    finally:
        conn.close()
    if args.json:
        print_json({"patterns": [p.to_json() for p in found]})
        return EXIT_OK
    if not found:
        print("no uncovered recurring pattern found (on recorded history)")
        return EXIT_OK
    for pattern in found:
        if pattern.proposal:
            what = f"proposed as #{pattern.proposal.id} ({pattern.rule}, level notify)"
        elif pattern.already_proposed:
            what = f"{pattern.rule} was already proposed"
        else:
            what = f"{pattern.rule} (dry run: not stored)"
        print(
            f"{pattern.miner}: {len(pattern.instances)} uncovered instance(s), "
            f"{pattern.covered} covered, {pattern.fires} would-be fires; {what}"
        )
        for inst in pattern.instances[:5]:
            print("    " + ", ".join(f"{k}={v}" for k, v in inst.items()))
    return EXIT_OK
