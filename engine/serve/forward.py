"""The command hook hands its call to a running serve, so every source meets in one process.

Codex and Gemini CLI have command hooks only, and their OpenTelemetry goes to
``harness serve``. If the command hook wrote to the store itself, the same
call would be journaled by two processes that cannot see each other's
memory: twice, or with the wrong outcome. So when serve listens where
``[serve] listen`` says (and on the same store), ``harness hook`` forwards the
payload to serve's ``POST /hooks/<agent>`` and prints serve's answer; only
when nothing listens there does it handle the call itself.

A hand-written HTTP/1.1 exchange over one loopback socket, because this runs
once per tool call and ``http.client`` costs more to import than the whole
exchange takes. For the same reason a numeric address is connected through
``_socket`` itself: ``socket``'s wrapper (its enums, ``selectors``) and the
IDNA encoding ``getaddrinfo`` pays for a host name cost ~8 ms per call.
"""

from __future__ import annotations

import _socket
from pathlib import Path
from typing import Any

#: Header that names the store the command hook would write, so serve can refuse
#: a call meant for another store (409) and the hook then handles it itself.
STORE_HEADER = "X-Harness-Store"
CONNECT_TIMEOUT_S = 0.25
MAX_ANSWER = 1024 * 1024
_WILDCARD = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}


class Forwarded:
    """Serve's answer: the HTTP status and the body (the agent's JSON when 200)."""

    __slots__ = ("body", "status")

    def __init__(self, status: int, body: bytes) -> None:
        self.status = status
        self.body = body


def forward(
    listen: str,
    agent: str,
    payload: bytes,
    *,
    harness: str | None,
    project: str | None,
    store: Path,
    token: str | None,
    timeout_s: float,
) -> Forwarded | None:
    """POST ``payload`` to serve's hook route; None when no serve listens there.

    Any other failure after connecting (a reset, a timeout, a reply that is
    not HTTP) is an ``OSError`` for the caller: serve has the call and may have
    journaled it, so handling it here too could journal it twice.
    """
    host, _, port = listen.rpartition(":")
    host = host.strip("[]")
    host = _WILDCARD.get(host, host)
    try:
        sock = _connect(host, int(port))
    except (OSError, ValueError):  # refused, timed out, unreachable: nobody listens
        return None
    query = "&".join(
        f"{key}={quote(value, safe='')}"
        for key, value in (("harness", harness), ("project", project))
        if value is not None
    )
    head = [
        f"POST /hooks/{agent}{'?' + query if query else ''} HTTP/1.1",
        f"Host: {'localhost' if host in ('127.0.0.1', '::1') else host}:{port}",
        "Content-Type: application/json",
        f"Content-Length: {len(payload)}",
        f"{STORE_HEADER}: {quote(str(store), safe='/')}",
        "Connection: close",
    ]
    if token:
        head.append(f"Authorization: Bearer {token}")
    try:
        sock.settimeout(timeout_s)
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode("utf-8") + payload)
        return _read_answer(sock)
    finally:
        sock.close()


def _connect(host: str, port: int) -> Any:
    """A connected socket to ``host:port`` (numeric through ``_socket``, a name through socket)."""
    if ":" in host:
        family = _socket.AF_INET6
    elif host and all(c.isdigit() or c == "." for c in host):
        family = _socket.AF_INET
    else:  # a host name: the full socket module resolves it
        import socket

        return socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S)
    sock = _socket.socket(family, _socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_TIMEOUT_S)
        sock.connect((host, port))
    except OSError:
        sock.close()
        raise
    return sock


def _read_answer(sock: Any) -> Forwarded:
    chunks: list[bytes] = []
    size = 0
    while size <= MAX_ANSWER:
        chunk = sock.recv(65536)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    raw = b"".join(chunks)
    head, sep, body = raw.partition(b"\r\n\r\n")
    parts = head.split(b" ", 2)
    if not sep or len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        raise OSError("serve's answer is not HTTP")
    length = _content_length(head)
    if length is not None:
        body = body[:length]
    return Forwarded(int(parts[1]), body)


_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def quote(text: str, safe: str = "") -> str:
    """Percent-encode ``text`` as ``urllib.parse.quote`` does (that module costs 2 ms to import)."""
    keep = _SAFE | frozenset(safe.encode())
    return "".join(chr(b) if b in keep else f"%{b:02X}" for b in text.encode("utf-8"))


def _content_length(head: bytes) -> int | None:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length" and value.strip().isdigit():
            return int(value.strip())
    return None


def answer_text(body: bytes) -> str:
    """A non-200 body as one line for stderr (serve's error bodies are one line of text)."""
    text = body.decode("utf-8", "replace").strip()
    return text.splitlines()[0] if text else "no reason given"


def read_token(path: Path | None) -> str | None:
    """The bearer token from ``[serve] token_file`` (None when unset or unreadable)."""
    if path is None:
        return None
    try:
        with open(path, "rb") as fh:
            return fh.read(4097).decode("utf-8", "replace").strip() or None
    except OSError:
        return None
