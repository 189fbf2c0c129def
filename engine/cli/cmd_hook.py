"""``harness hook claude-code [--harness ID] [--project NAME] [--store PATH]``: the command hook.

The same handler as serve's ``POST /hooks/claude-code``, for an agent on the
same machine: the payload on stdin, the answer on stdout, exit 0. It runs
once per tool call, so it imports only the journal, holds and the handler
(no aiohttp, no CEL, no Textual, and no argparse when its arguments are
plain, see :func:`plain_args`) and admits its rows directly, in one short
transaction; a call that journals nothing (PreToolUse) never loads the
writer. When the store cannot be read it exits 1 with the reason on
stderr: Claude Code treats that as a non-blocking error and proceeds, which
is the same outcome serve's 503 has; it never guesses "free".
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

MAX_PAYLOAD = 4 * 1024 * 1024
#: The options of ``hook claude-code``, each taking one value (see :func:`register`).
_OPTIONS = {"--harness": "harness", "--project": "project", "--store": "store"}


def register(sub: Any) -> None:
    p = sub.add_parser("hook", help="Claude Code command hook: payload on stdin, answer on stdout.")
    p.set_defaults(handler=lambda _a: (p.print_help(sys.stderr), 2)[1])
    hs = p.add_subparsers(title="agents", metavar="AGENT")
    cp = hs.add_parser("claude-code", help="Journal a Claude Code hook event and answer its gate.")
    cp.add_argument("--harness", metavar="ID", help="harness id (default: git top-level of cwd)")
    cp.add_argument("--project", metavar="NAME", help="project (default: git top-level of cwd)")
    cp.add_argument("--store", metavar="PATH")
    cp.set_defaults(handler=cmd_claude_code)


def plain_args(argv: Sequence[str]) -> argparse.Namespace | None:
    """``claude-code`` then ``--harness/--project/--store VALUE`` pairs, read without argparse.

    Returns the namespace argparse would build, or None for anything else
    (``--store=PATH``, an abbreviation, a repeated option, a value starting
    with ``-``, ``--help``, an unknown word), which then goes to the real
    parser so every usage error and help text stays argparse's own.
    """
    if len(argv) % 2 == 0 or argv[0] != "claude-code":
        return None
    values: dict[str, str | None] = dict.fromkeys(_OPTIONS.values())
    seen = set()
    for flag, value in zip(argv[1::2], argv[2::2], strict=True):
        dest = _OPTIONS.get(flag)
        if dest is None or dest in seen or value.startswith("-"):
            return None
        seen.add(dest)
        values[dest] = value
    from engine.cli.common import plain_namespace

    return plain_namespace(**values, handler=cmd_claude_code)


def _fail(message: str) -> int:
    sys.stderr.write(f"harness hook: {message}\n")
    return 1


def cmd_claude_code(args: argparse.Namespace) -> int:
    import json

    from engine.errors import HarnessError

    raw = sys.stdin.buffer.read(MAX_PAYLOAD + 1)
    if len(raw) > MAX_PAYLOAD:
        return _fail(f"payload larger than {MAX_PAYLOAD} bytes; nothing recorded")
    try:
        payload = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        return _fail(f"payload is not JSON ({type(exc).__name__}); nothing recorded")
    try:
        return _run(args, payload)
    except HarnessError as exc:
        # Exit 2 would make Claude Code block the call; a store or config problem must not.
        return _fail(f"{exc.title}: {exc.message}")


def _run(args: argparse.Namespace, payload: object) -> int:
    import json
    import sqlite3
    import time

    from engine.config import load_config, resolve_store
    from engine.serve.derive import Deriver
    from engine.serve.gate import GateState, GateUnavailable, read_state
    from engine.serve.handler import HookHandler, seed_from_store
    from engine.serve.hooks import PayloadError, resolve_identity
    from engine.store.db import connect

    config = load_config()
    now = time.time_ns() // 1_000_000
    deriver = Deriver(
        loop_guard=config.serve.loop_guard, collision_window_ms=config.serve.collision_window_ms
    )
    rows: list[Any] = []

    def collect(row: Any) -> bool:
        rows.append(row)
        return True

    handler = HookHandler(deriver, collect)
    conn = connect(resolve_store(args.store, config))
    try:
        if isinstance(payload, dict):
            who, _ = resolve_identity(payload, args.harness, args.project)
            session = payload.get("session_id")
            if who is not None:
                seed_from_store(
                    deriver, conn, payload, who, session if isinstance(session, str) else None, now
                )
        try:
            mapped, _offered = handler.ingest(
                payload, harness=args.harness, project=args.project, now_ms=now
            )
        except PayloadError as exc:
            return _fail(f"{exc}; nothing recorded")
        if rows:
            from engine.journal.writer import Committer

            Committer(conn).admit(rows)
        question = handler.gate_question(mapped)
        try:
            state = (
                read_state(conn, mapped.harness, question[1], holds=question[0])
                if question is not None
                else GateState()
            )
        except GateUnavailable as exc:
            return _fail(str(exc))
        _decision, body = handler.respond(mapped, state)
    except sqlite3.Error as exc:
        return _fail(f"store error: {exc}")
    finally:
        conn.close()
    sys.stdout.write(json.dumps(body) + "\n")
    return 0
