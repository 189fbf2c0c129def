"""Starting and stopping ``harness serve``: listener checks, the token, signals, clean shutdown.

A listener on anything but loopback refuses to start unless ``[serve]
token_file`` names a regular file readable only by its owner (mode ``0600``
or stricter, owned by this user): a token another local user can read is no
secret. SIGTERM and SIGINT stop the listener, commit everything queued (at most
``[serve] drain_timeout`` for rows not yet acknowledged: acknowledged rows are
already committed) and release the lease. A fault serve cannot recover from
(a corrupt store, an evaluator that cannot be built) ends it with exit 1, so a
supervisor restarts it.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import ipaddress
import os
import signal
import stat
import sys
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.rules.language.sources import FollowedRules

from engine.config import HarnessConfig
from engine.errors import Diagnostic, InputError, Location

MAX_TOKEN_BYTES = 4096
#: How long an idle keep-alive connection stays open (aiohttp's default is an hour).
KEEPALIVE_S = 15.0


@dataclass(frozen=True, slots=True)
class Listen:
    host: str
    port: int

    @property
    def loopback(self) -> bool:
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host.strip("[]")).is_loopback
        except ValueError:
            return False


def parse_listen(text: str, where: str = "--listen") -> Listen:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise InputError(
            f"{where} {text!r}: expected HOST:PORT (port 0-65535)",
            title="Bad listen address",
            diagnostics=[Diagnostic("expected HOST:PORT", Location(where), path=where)],
        )
    return Listen(host.strip("[]"), int(port))


def read_token(path: Path) -> str:
    """The bearer token from ``path``, refusing a file others can read or that is not ours."""

    def refuse(why: str) -> InputError:
        return InputError(
            f"[serve] token_file {path}: {why}",
            title="Unusable token file",
            diagnostics=[Diagnostic(why, Location(str(path)), path="serve.token_file")],
        )

    try:
        info = path.stat()
    except OSError as exc:
        raise refuse(f"cannot read it ({exc.strerror or exc})") from None
    if not stat.S_ISREG(info.st_mode):
        raise refuse("not a regular file")
    if info.st_uid != os.getuid():
        raise refuse("not owned by this user")
    if info.st_mode & 0o077:
        raise refuse(f"readable by others (mode {stat.S_IMODE(info.st_mode):o}); chmod 600 it")
    with open(path, "rb") as fh:
        raw = fh.read(MAX_TOKEN_BYTES + 1)
    token = raw.decode("utf-8", "replace").strip()
    if not token or len(raw) > MAX_TOKEN_BYTES or not token.isprintable() or " " in token:
        raise refuse("must hold one token of printable characters without spaces (≤ 4 KiB)")
    return token


def _hosts(listen: Listen) -> frozenset[str]:
    """The Host names a token-less listener answers to: its own address and localhost."""
    return frozenset({listen.host.lower(), "localhost", "127.0.0.1", "::1"})


def check_listener(listen: Listen, config: HarnessConfig) -> str | None:
    """The token to require (None: none), or InputError when the listener would be open."""
    token_file = config.serve.token_file
    if token_file is not None:
        return read_token(token_file)
    if not listen.loopback:
        raise InputError(
            f"refusing to listen on {listen.host}:{listen.port} without a token: set "
            "[serve] token_file in harness.toml to a file readable only by you",
            title="Open listener refused",
        )
    return None


async def _serve(
    store: Path, config: HarnessConfig, followed: FollowedRules, listen: Listen, token: str | None
) -> int:
    from aiohttp import web

    from engine.serve.adapters import ACK_TIMEOUT_S
    from engine.serve.app import MAX_HEADER_LINE, build_app
    from engine.serve.listener import Listener, quiet_logs
    from engine.serve.metrics import ServeMetrics
    from engine.serve.runtime import ServeRuntime

    # The event loop shares the GIL with the committer and evaluator threads; a
    # shorter switch interval bounds how long a request waits for it.
    sys.setswitchinterval(0.0005)
    runtime = ServeRuntime(store, config, followed.rules, ServeMetrics(), followed=followed)
    runtime.start()
    app = build_app(
        runtime, token=token, max_body=config.serve.max_body, allowed_hosts=_hosts(listen)
    )
    quiet_logs(runtime.metrics.add)
    runner = web.AppRunner(
        app,
        access_log=None,
        handle_signals=False,
        max_line_size=MAX_HEADER_LINE,
        max_field_size=MAX_HEADER_LINE,
        keepalive_timeout=KEEPALIVE_S,
        auto_decompress=False,  # /v1/logs decompresses itself, capped at max_body
        # Requests in flight at SIGTERM get their answer (200, or 503 once their
        # acknowledge timeout passes) instead of a closed connection.
        shutdown_timeout=ACK_TIMEOUT_S + 1.0,
    )
    await runner.setup()
    assert runner.server is not None
    listener = Listener(
        runner.server, max_connections=config.serve.max_connections, count=runtime.metrics.add
    )
    loop = asyncio.get_running_loop()
    try:
        server = await loop.create_server(listener, listen.host, listen.port, backlog=512)
    except OSError as exc:
        await runner.cleanup()
        runtime.close()
        raise InputError(
            f"cannot listen on {listen.host}:{listen.port}: {exc.strerror or exc}",
            title="Cannot listen",
        ) from None
    port = server.sockets[0].getsockname()[1] if server.sockets else listen.port
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    _settle_gc()
    sys.stderr.write(
        f"harness serve: listening on http://{listen.host}:{port} (store {store}"
        + (", bearer token required" if token else "")
        + ")\n"
    )
    sys.stderr.flush()
    fatal = await _until_stopped(stop, runtime)
    sys.stderr.write("harness serve: stopping (committing what is queued, releasing the lease)\n")
    server.close()
    # Requests already sent on a kept-alive connection but not yet read would
    # look idle to the shutdown and be cut off: let the loop read them first,
    # so they are in progress, and answered, when the connections close.
    await asyncio.sleep(SHUTDOWN_READ_S)
    await runner.cleanup()
    drain_s = config.serve.drain_timeout_ms / 1000
    await loop.run_in_executor(None, partial(runtime.close, drain_s))
    stats = runtime.writer.stats()
    sys.stderr.write(
        f"harness serve: stopped; {stats.admitted} row(s) stored, "
        f"{stats.withdrawn} not stored (their requests were answered 503)\n"
    )
    if fatal is not None:
        sys.stderr.write(f"harness serve: exiting for a restart: {fatal}\n")
        return 1
    return 0


#: At SIGTERM, how long the loop reads requests already sent before connections close.
SHUTDOWN_READ_S = 0.1
#: Container allocations between young collections (CPython's default: 700).
GC_YOUNG_THRESHOLD = 20_000


def _settle_gc() -> None:
    """Once started, stop the cycle collector from re-walking what lives as long as serve.

    Serve allocates a few containers per record and frees nearly all of them by
    reference counting; at CPython's defaults the collector still ran 212
    times in 60,000 OTLP records (0.14 s of CPU, while holding the GIL every
    other thread waits for). Freezing the start-up objects (modules, rules,
    config) out of the collector's sight and collecting the young generation
    every 20,000 allocations: 6 collections, 0.05 s.
    """
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, middle, old)


async def _until_stopped(stop: asyncio.Event, runtime: Any) -> str | None:
    """Wait for SIGTERM/SIGINT, or for a fault serve cannot recover from (returned)."""
    while not stop.is_set():
        fatal = runtime.fatal
        if fatal is not None:
            return str(fatal)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.5)
    return None


def run(store: Path, config: HarnessConfig, followed: FollowedRules, listen: Listen) -> int:
    """Run serve until SIGTERM/SIGINT; InputError for a refused listener or token."""
    token = check_listener(listen, config)
    return asyncio.run(_serve(store, config, followed, listen, token))
