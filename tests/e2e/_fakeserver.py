"""A loopback aiohttp server in a background thread; the script-playing core of the fake APIs."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from tests.e2e._script import (
    Exchange,
    Recording,
    Script,
    ToolCallRecord,
    Turn,
    Vendor,
    say,
)

Handler = Callable[[web.Request], Coroutine[Any, Any, web.StreamResponse]]


class BackgroundServer:
    """Runs one aiohttp app on ``127.0.0.1:<free port>`` in its own thread and event loop.

    The agent CLIs are subprocesses that the test waits for synchronously, so the fakes
    must answer from another thread; ``with BackgroundServer(app) as server`` starts it and
    stops it (closing every connection) on exit.
    """

    def __init__(self, app: web.Application) -> None:
        self._app = app
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> BackgroundServer:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=30)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        self._loop.close()

    async def _start(self) -> None:
        self._runner = web.AppRunner(
            self._app, access_log=None, handle_signals=False, shutdown_timeout=1.0
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        _host, port = self._runner.addresses[0][:2]
        self.port = int(port)

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


@dataclass(frozen=True)
class Planned:
    """A tool call of the turn being played, as the vendor will see it."""

    call_id: str
    name: str
    input: dict[str, Any]


@dataclass(frozen=True)
class Result:
    """A tool result found in a request: which call, its text, whether the client flagged it."""

    call_id: str
    text: str
    is_error: bool | None


class FakeModel:
    """Plays a ``Script`` over one vendor's API and records what the client sent back.

    A request that belongs to the main conversation (``is_main``) plays the next turn; any
    other request (titles, quota checks, token counts, routing) gets a harmless answer and
    consumes nothing. After the last turn every main request gets the text ``done``.
    Subclasses know the vendor's wire format; this class keeps the bookkeeping.
    """

    vendor: Vendor

    def __init__(self, script: Script, cwd: str) -> None:
        self.script = script
        self.cwd = cwd
        self._lock = threading.Lock()
        self._next_turn = 0
        self._extra = 0
        self._exchanges: list[Exchange] = []
        self._sent: list[tuple[int, int, Planned, float]] = []
        self._results: dict[str, tuple[float, Result]] = {}

    # --- vendor hooks -------------------------------------------------------------------
    def app(self) -> web.Application:
        raise NotImplementedError

    def results_in(self, body: Any) -> list[Result]:
        raise NotImplementedError

    def call_id(self, turn: int, index: int) -> str:
        return f"call_e2e_{turn}_{index}"

    # --- bookkeeping --------------------------------------------------------------------
    def note(self, request: web.Request, body: Any, *, main: bool, turn: int | None) -> None:
        exchange = Exchange(time.monotonic(), request.method, request.path_qs, main, turn, body)
        with self._lock:
            self._exchanges.append(exchange)

    def begin_turn(self, request: web.Request, body: Any) -> tuple[int, Turn, list[Planned]]:
        """Records the results ``body`` carries and takes the next turn to play."""
        now = time.monotonic()
        found = self.results_in(body)
        with self._lock:
            for result in found:
                self._results.setdefault(result.call_id, (now, result))
            index = self._next_turn
            self._next_turn += 1
            if index < len(self.script.turns):
                current = self.script.turns[index]
            else:
                self._extra += 1
                current = say("done")
        self.note(request, body, main=True, turn=index)
        planned = []
        for i, call in enumerate(current.calls):
            name, tool_input = call.for_vendor(self.vendor, self.cwd)
            planned.append(Planned(self.call_id(index, i), name, tool_input))
        return index, current, planned

    def sent(self, turn: int, planned: list[Planned]) -> None:
        """Call right after the last byte of the turn's message was written."""
        now = time.monotonic()
        with self._lock:
            self._sent.extend((turn, i, p, now) for i, p in enumerate(planned))

    def recording(self) -> Recording:
        with self._lock:
            calls = []
            for turn, index, planned, sent_at in self._sent:
                got = self._results.get(planned.call_id)
                calls.append(
                    ToolCallRecord(
                        turn=turn,
                        index=index,
                        call_id=planned.call_id,
                        name=planned.name,
                        input=planned.input,
                        sent_at=sent_at,
                        result_at=got[0] if got else None,
                        result=got[1].text if got else None,
                        is_error=got[1].is_error if got else None,
                    )
                )
            return Recording(
                exchanges=tuple(self._exchanges),
                calls=tuple(calls),
                turns_played=min(self._next_turn, len(self.script.turns)),
                extra_requests=self._extra,
            )


async def read_json(request: web.Request) -> Any:
    raw = await request.read()
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return {"_unparsed": raw[:2000].decode("utf-8", "replace")}


async def sse(request: web.Request, events: list[tuple[str | None, Any]]) -> web.StreamResponse:
    """Streams ``events`` (SSE ``event:`` name or None, JSON data) and ends the response."""
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    await response.prepare(request)
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        await response.write(f"{head}data: {json.dumps(data)}\n\n".encode())
    await response.write_eof()
    return response


def text_of(content: Any) -> str:
    """The text of a tool result's content: a string, or a list of ``{"text": ...}`` blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(text_of(part) for part in content)
    if isinstance(content, dict):
        if "text" in content:
            return str(content["text"])
        return json.dumps(content, sort_keys=True)
    return "" if content is None else str(content)
