"""Serve's listening socket: bounded connections, a header deadline, one-line logs.

aiohttp gives each connection an hour of keep-alive and no deadline for the
first request's headers, so 1,100 half-open connections once exhausted the
process's file descriptors: every hook and ``/healthz`` went unanswered (an
agent then proceeds ungated) while asyncio logged a traceback per accept. So
serve accepts through :class:`Listener`, which wraps aiohttp's protocol
factory:

- at most ``[serve] max_connections`` are open; when a new one would exceed
  that, the oldest connection that has not yet sent a whole request head is
  closed to make room (a real client sends its head in milliseconds, so a
  flood of idle connections cannot crowd it out), and if every connection is
  busy the new one is refused;
- a connection whose first request head has not arrived within
  :data:`HEADER_TIMEOUT_S` is closed (keep-alive idleness after that is
  aiohttp's ``keepalive_timeout``);
- the loggers of aiohttp and asyncio write one line per event, without
  request bytes or tracebacks, at most :data:`LOG_BURST` lines per second.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

HEADER_TIMEOUT_S = 10.0
LOG_BURST = 10
_END_OF_HEAD = b"\r\n\r\n"


class _Guarded(asyncio.Protocol):
    """Proxies one connection to aiohttp's handler, watching for its first request head.

    The handler is made when the first bytes arrive: a connection that never
    sends any (a flood of half-open ones) costs an accept and a timer, not an
    aiohttp request handler, so the accept queue drains fast enough for a
    real client behind the flood.
    """

    def __init__(self, listener: Listener) -> None:
        self.listener = listener
        self.inner: Any = None
        self.transport: asyncio.Transport | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.tail = b""
        self.headed = False
        self.refused = False  # never handed to aiohttp
        self.evicted = False  # closed to make room: its slot is already free

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        if not self.listener.admit(self):
            self.refused = True
            transport.abort()
            return
        self.timer = asyncio.get_running_loop().call_later(
            self.listener.header_timeout, self._expire
        )

    def data_received(self, data: bytes) -> None:
        if self.inner is None:
            self.inner = self.listener.factory()
            self.inner.connection_made(self.transport)
        if not self.headed:
            window = self.tail + data
            if _END_OF_HEAD in window:
                self._headed()
            else:
                self.tail = window[-3:]
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        if self.inner is None:
            return False  # nothing was asked: close
        result: bool | None = self.inner.eof_received()
        return result

    def pause_writing(self) -> None:
        if self.inner is not None:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self.inner is not None:
            self.inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.timer is not None:
            self.timer.cancel()
        if self.refused:
            return
        if not self.evicted:
            self.listener.release(self)
        if self.inner is not None:
            self.inner.connection_lost(exc)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    def _headed(self) -> None:
        self.headed = True
        self.tail = b""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.listener.headed(self)

    def _expire(self) -> None:
        self.timer = None
        if not self.headed:
            self.listener.count("header_timeouts")
            self.close()


class Listener:
    """The protocol factory serve listens with (wraps aiohttp's ``web.Server``)."""

    def __init__(
        self,
        factory: Callable[[], Any],
        *,
        max_connections: int,
        header_timeout: float = HEADER_TIMEOUT_S,
        count: Callable[[str], None] = lambda _name: None,
    ) -> None:
        self.factory = factory
        self.max_connections = max_connections
        self.header_timeout = header_timeout
        self.count = count
        self.open = 0
        #: Connections still waiting for their first request head, oldest first.
        self.waiting: OrderedDict[_Guarded, None] = OrderedDict()

    def __call__(self) -> asyncio.Protocol:
        return _Guarded(self)

    def admit(self, conn: _Guarded) -> bool:
        if self.open >= self.max_connections:
            if not self.waiting:
                self.count("connections_refused")
                return False
            oldest, _ = self.waiting.popitem(last=False)
            self.count("connections_evicted")
            oldest.evicted = True
            self.open -= 1
            oldest.close()
        self.open += 1
        self.waiting[conn] = None
        return True

    def headed(self, conn: _Guarded) -> None:
        self.waiting.pop(conn, None)

    def release(self, conn: _Guarded) -> None:
        self.waiting.pop(conn, None)
        self.open -= 1


class _OneLine(logging.Handler):
    """Writes a record as one line: logger, level and exception class; no text, no traceback.

    aiohttp's messages for a malformed request quote the request's bytes (an
    ``Authorization`` header among them), so only the exception's class is
    written. Each malformed request is one line and one count
    (``malformed_requests``), also the non-HTTP first line (a TLS handshake, a
    port scan) that aiohttp reports only at debug level. Other debug records
    are not written. Bursts beyond :data:`LOG_BURST` a second are counted,
    then said.
    """

    def __init__(self, count: Callable[[str], None]) -> None:
        super().__init__(logging.DEBUG)
        self.count = count
        self.second = 0
        self.lines = 0
        self.suppressed = 0

    def emit(self, record: logging.LogRecord) -> None:
        info = record.exc_info
        malformed = info is not None and _malformed(info[0])
        if malformed:
            self.count("malformed_requests")
        elif record.levelno < logging.INFO:
            return
        now = int(time.monotonic())
        if now != self.second:
            if self.suppressed:
                sys.stderr.write(f"harness serve: {self.suppressed} more log line(s) suppressed\n")
            self.second, self.lines, self.suppressed = now, 0, 0
        self.lines += 1
        if self.lines > LOG_BURST:
            if not self.suppressed:
                sys.stderr.write(
                    f"harness serve: over {LOG_BURST} log lines this second; the rest are "
                    "counted and said in the next second\n"
                )
            self.suppressed += 1
            return
        kind = record.exc_info[0].__name__ if record.exc_info and record.exc_info[0] else ""
        what = kind or _first_word(record.msg)
        sys.stderr.write(f"harness serve: {record.name} {record.levelname.lower()}: {what}\n")


def _first_word(msg: object) -> str:
    text = str(msg).strip()
    return text.split()[0].strip(":%s") if text else "event"


def _malformed(kind: type[BaseException] | None) -> bool:
    """Whether an exception class is aiohttp's verdict on a malformed request."""
    from aiohttp.http_exceptions import HttpProcessingError

    return kind is not None and issubclass(kind, HttpProcessingError)


def quiet_logs(count: Callable[[str], None] = lambda _name: None) -> None:
    """Route aiohttp's and asyncio's loggers through :class:`_OneLine` (idempotent).

    ``count`` is told ``malformed_requests`` for each malformed request (metrics).
    """
    handler = _OneLine(count)
    for name in ("aiohttp", "asyncio"):
        logger = logging.getLogger(name)
        for old in list(logger.handlers):
            logger.removeHandler(old)
        logger.addHandler(handler)
        # aiohttp.server reports a non-HTTP first line at debug level: let it reach the handler.
        logger.setLevel(logging.DEBUG if name == "aiohttp" else logging.INFO)
        logger.propagate = False
