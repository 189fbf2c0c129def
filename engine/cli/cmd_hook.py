"""``harness hook claude-code|codex|gemini [--harness ID] [--project NAME] [--store PATH]``.

The command hook: the same :class:`~engine.serve.handler.HookHandler` as
serve's ``POST /hooks/<agent>``, for an agent on the same machine (Codex and
Gemini CLI have command hooks only). The payload on stdin, the answer on
stdout, exit 0. This module only moves bytes: when serve listens at
``[serve] listen`` on the same store it forwards the payload there (so hooks
and OpenTelemetry meet in one process, see :mod:`engine.serve.forward`);
otherwise it plugs the handler into the store directly (one transaction per
call, the store's evaluator cursor for read-your-writes). Either way it
writes the answer.

It runs once per tool call, so it imports only what that needs (no aiohttp,
no CEL, no Textual, and no argparse when its arguments are plain, see
:func:`plain_args`). When the store cannot be used it exits 1 with the
reason on stderr, never 2: an agent treats 1 as a non-blocking error and
proceeds (as with serve's 503), while 2 would make Claude Code and Codex
block the call, and it never guesses "free".
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

MAX_PAYLOAD = 4 * 1024 * 1024
#: The agents with a command hook (the one home of their names is engine.serve.agents).
AGENT_NAMES = ("claude-code", "codex", "gemini")
#: The options of ``hook AGENT``, each taking one value (see :func:`arguments`).
_OPTIONS = {"--harness": "harness", "--project": "project", "--store": "store"}


def arguments(p: argparse.ArgumentParser) -> None:
    """``hook AGENT``'s options (:func:`plain_args` reads the same ones without argparse)."""
    p.add_argument("--harness", metavar="ID", help="harness id (default: git top-level of cwd)")
    p.add_argument("--project", metavar="NAME", help="project (default: git top-level of cwd)")
    p.add_argument("--store", metavar="PATH")


def plain_args(argv: Sequence[str]) -> argparse.Namespace | None:
    """``AGENT`` then ``--harness/--project/--store VALUE`` pairs, read without argparse.

    Returns the namespace argparse would build, or None for anything else
    (``--store=PATH``, an abbreviation, a repeated option, a value starting
    with ``-``, ``--help``, an unknown word), which then goes to the real
    parser so every usage error and help text stays argparse's own.
    """
    if len(argv) % 2 == 0 or argv[0] not in AGENT_NAMES:
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

    return plain_namespace(**values, agent=argv[0], handler=cmd_hook)


def _fail(message: str) -> int:
    sys.stderr.write(f"harness hook: {message}\n")
    return 1


def cmd_hook(args: argparse.Namespace) -> int:
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
        return _answer(args, raw, payload)
    except HarnessError as exc:
        # Exit 2 would make the agent block the call; a store or config problem must not.
        return _fail(f"{exc.title}: {exc.message}")


def _answer(args: argparse.Namespace, raw: bytes, payload: object) -> int:
    from engine.config import load_config, resolve_store

    config = load_config()
    store = resolve_store(args.store, config)
    forwarded = _to_serve(args, raw, store, config)
    if forwarded is not None:
        return forwarded
    return _handle_here(args, payload, store, config)


def _handle_here(args: argparse.Namespace, payload: object, store: Any, config: Any) -> int:
    """No serve to hand the call to: journal it and answer it in this process."""
    import json
    import sqlite3

    from engine.serve.calls import CallBook
    from engine.serve.derive import Deriver
    from engine.serve.direct import DirectJournal, StoreGate
    from engine.serve.handler import HookHandler
    from engine.serve.recall import StoreRecall
    from engine.serve.verdict import release_command
    from engine.store.db import connect

    serve = config.serve
    conn = connect(store)
    try:
        book = CallBook(
            Deriver(loop_guard=serve.loop_guard, collision_window_ms=serve.collision_window_ms),
            StoreRecall(lambda: conn, serve.loop_guard),
        )
        handler = HookHandler(
            book,
            DirectJournal(conn),
            StoreGate(conn, serve.gate_wait_ms),
            release=release_command(None if store == config.resolved_store_path() else str(store)),
        )
        reply = handler.handle(args.agent, payload, harness=args.harness, project=args.project)
    except sqlite3.Error as exc:
        return _fail(f"store error: {exc}")
    finally:
        conn.close()
    if reply.status != 200:
        suffix = "; nothing recorded" if reply.status == 400 else ""
        return _fail(reply.text + suffix)
    sys.stdout.write(json.dumps(reply.answer) + "\n")
    return 0


def _to_serve(args: argparse.Namespace, raw: bytes, store: Any, config: Any) -> int | None:
    """Hand the call to a running serve (exit code), or None to handle it here.

    None when nothing listens at ``[serve] listen``, or serve refuses the call
    as not its own (another store: 409; no token for it: 401): then this
    process journals the call itself. Once serve has the call, its answer is
    the answer, even a 503: handling the call here too could journal it twice.
    """
    from engine.serve.forward import answer_text, forward, read_token

    serve = config.serve
    try:
        reply = forward(
            serve.listen,
            args.agent,
            raw,
            harness=args.harness,
            project=args.project,
            store=store,
            token=read_token(serve.token_file),
            timeout_s=10.0,
        )
    except OSError as exc:
        return _fail(f"serve took the call but gave no answer: {exc}")
    if reply is None or reply.status in (401, 409):
        return None
    if reply.status != 200:
        return _fail(f"serve answered {reply.status}: {answer_text(reply.body)}")
    sys.stdout.write(reply.body.decode("utf-8", "replace").strip() + "\n")
    return 0
