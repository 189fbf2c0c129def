"""A fake Anthropic Messages API (streaming) that plays a script to the real Claude Code."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from tests.e2e._fakeserver import FakeModel, Planned, Result, read_json, sse, text_of
from tests.e2e._script import Turn

MODEL = "claude-sonnet-4-5"


class FakeAnthropic(FakeModel):
    """Claude Code's model API: a ``HEAD`` probe, ``POST /v1/messages?beta=true`` (SSE).

    A main-conversation request is one that offers tools (the agent loop always does);
    Claude Code's side requests (quota probe, titles, token counts) offer none.
    """

    vendor = "claude"

    def call_id(self, turn: int, index: int) -> str:
        return f"toolu_e2e{turn:02d}{index:02d}"

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        return app

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        body = await read_json(request) if request.method == "POST" else None
        if request.method == "POST" and request.path == "/v1/messages":
            if isinstance(body, dict) and body.get("tools"):
                turn, current, planned = self.begin_turn(request, body)
                response = await self._play(request, body, turn, current, planned)
                self.sent(turn, planned)
                return response
            self.note(request, body, main=False, turn=None)
            return await self._idle_answer(request, body)
        self.note(request, body, main=False, turn=None)
        if request.path.endswith("/count_tokens"):
            return web.json_response({"input_tokens": 100})
        if request.method == "HEAD":  # reachability probes: HEAD / or /api/hello
            return web.Response(status=200)
        return web.json_response({}, status=404)

    def results_in(self, body: Any) -> list[Result]:
        found = []
        for message in body.get("messages", []):
            content = message.get("content")
            if message.get("role") != "user" or not isinstance(content, list):
                continue
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    found.append(
                        Result(
                            call_id=str(block.get("tool_use_id")),
                            text=text_of(block.get("content")),
                            is_error=bool(block.get("is_error", False)),
                        )
                    )
        return found

    async def _play(
        self, request: web.Request, body: Any, turn: int, current: Turn, planned: list[Planned]
    ) -> web.StreamResponse:
        if current.delay_s:
            import asyncio

            await asyncio.sleep(current.delay_s)
        blocks: list[tuple[dict[str, Any], dict[str, Any]]] = []
        if current.text or not planned:
            blocks.append(_text_block(current.text or "done"))
        for call in planned:
            start = {"type": "tool_use", "id": call.call_id, "name": call.name, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(call.input)}
            blocks.append((start, delta))
        stop = "tool_use" if planned else "end_turn"
        return await sse(request, _events(f"msg_e2e_{turn}", body, blocks, stop))

    async def _idle_answer(self, request: web.Request, body: Any) -> web.StreamResponse:
        blocks = [_text_block("ok")]
        if isinstance(body, dict) and body.get("stream"):
            return await sse(request, _events("msg_e2e_side", body, blocks, "end_turn"))
        return web.json_response(
            {
                "id": "msg_e2e_side",
                "type": "message",
                "role": "assistant",
                "model": _model(body),
                "content": [{"type": "text", "text": "ok"}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 10, "output_tokens": 1},
            }
        )


def _model(body: Any) -> str:
    return str(body.get("model", MODEL)) if isinstance(body, dict) else MODEL


def _text_block(text: str) -> tuple[dict[str, Any], dict[str, Any]]:
    return {"type": "text", "text": ""}, {"type": "text_delta", "text": text}


def _events(
    message_id: str, body: Any, blocks: list[tuple[dict[str, Any], dict[str, Any]]], stop: str
) -> list[tuple[str | None, Any]]:
    message: dict[str, Any] = {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": _model(body),
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1},
    }
    events: list[tuple[str | None, Any]] = [
        ("message_start", {"type": "message_start", "message": message})
    ]
    for index, (start, delta) in enumerate(blocks):
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start},
            )
        )
        events.append(
            ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
        )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 10},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events
