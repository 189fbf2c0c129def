"""``harness serve [--store PATH] [--listen HOST:PORT] [--policy DIR]``: watch a real fleet.

One process is the journal's writer, the acting evaluator (behind the store
lease) and an HTTP listener for OTLP logs and Claude Code hooks; see
:mod:`engine.serve`. Heavy imports (aiohttp, protobuf, CEL) happen in the
handler so ``harness --help`` stays fast.
"""

from __future__ import annotations

import argparse


def arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", metavar="PATH")
    p.add_argument(
        "--listen", metavar="HOST:PORT", help="default: [serve] listen, else 127.0.0.1:4318"
    )
    p.add_argument(
        "--policy", metavar="DIR", action="append", default=[], help="extra rule directory"
    )


def _say(line: str) -> None:
    import sys

    sys.stderr.write(f"harness serve: {line}\n")
    sys.stderr.flush()


def cmd_serve(args: argparse.Namespace) -> int:
    import sys

    from engine.config import load_config, resolve_store
    from engine.rules.language.sources import FollowedRules, load_rule_set, rule_sources
    from engine.serve.server import parse_listen, run
    from engine.store.db import connect

    config = load_config()
    sources = rule_sources(config, args.policy)
    loaded = load_rule_set(sources, config)
    for diag in loaded.errors:
        sys.stderr.write(f"rule not loaded: {diag}\n")
    listen = (
        parse_listen(args.listen)
        if args.listen
        else parse_listen(config.serve.listen, "[serve] listen")
    )
    store = resolve_store(args.store, config)
    connect(store).close()  # create and migrate here, so a bad path fails before listening
    followed = FollowedRules(config, loaded, args.policy, say=_say)
    return run(store, config, followed, listen)
