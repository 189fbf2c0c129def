"""A fake OpenAI Responses API (streaming) that plays a script to the real Codex CLI."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web

from tests.e2e._fakeserver import FakeModel, Planned, Result, read_json, sse, text_of
from tests.e2e._script import Turn

# A slug in Codex 0.171.0's built-in catalog: with it Codex offers its freeform
# ``apply_patch`` tool (an unknown slug gets fallback metadata and no patch tool).
MODEL = "gpt-5.5"
FREEFORM = frozenset({"apply_patch"})


class FakeResponses(FakeModel):
    """Codex's model API: ``POST /v1/responses`` streamed as SSE ``response.*`` events.

    A main-conversation request is one that offers tools; anything else (model listing and
    the like) gets an empty answer and consumes no turn.
    """

    vendor = "codex"

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        return app

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        body = await read_json(request) if request.method == "POST" else None
        if request.method == "POST" and request.path.endswith("/responses"):
            if isinstance(body, dict) and body.get("tools"):
                turn, current, planned = self.begin_turn(request, body)
                response = await self._play(request, turn, current, planned)
                self.sent(turn, planned)
                return response
            self.note(request, body, main=False, turn=None)
            return await self._play_text(request, "ok")
        self.note(request, body, main=False, turn=None)
        if request.method == "GET" and request.path.endswith("/models"):
            return web.json_response({"object": "list", "data": [], "models": []})
        return web.json_response({}, status=404)

    def results_in(self, body: Any) -> list[Result]:
        found = []
        for item in body.get("input", []):
            if not isinstance(item, dict):
                continue
            if item.get("type") in ("function_call_output", "custom_tool_call_output"):
                output = item.get("output")
                if isinstance(output, dict):  # {"content": ..., "success": ...}
                    text = text_of(output.get("content", output))
                    success = output.get("success")
                    error = None if success is None else not success
                else:
                    text, error = text_of(output), None
                found.append(Result(str(item.get("call_id")), text, error))
        return found

    async def _play(
        self, request: web.Request, turn: int, current: Turn, planned: list[Planned]
    ) -> web.StreamResponse:
        if current.delay_s:
            await asyncio.sleep(current.delay_s)
        items: list[dict[str, Any]] = []
        if current.text or not planned:
            items.append(_message(f"msg_e2e_{turn}", current.text or "done"))
        for call in planned:
            items.append(_call_item(call))
        return await sse(request, _events(f"resp_e2e_{turn}", items))

    async def _play_text(self, request: web.Request, text: str) -> web.StreamResponse:
        return await sse(request, _events("resp_e2e_side", [_message("msg_e2e_side", text)]))


def _call_item(call: Planned) -> dict[str, Any]:
    if call.name in FREEFORM and set(call.input) == {"input"}:
        return {
            "type": "custom_tool_call",
            "id": f"ctc_{call.call_id}",
            "call_id": call.call_id,
            "name": call.name,
            "input": call.input["input"],
            "status": "completed",
        }
    return {
        "type": "function_call",
        "id": f"fc_{call.call_id}",
        "call_id": call.call_id,
        "name": call.name,
        "arguments": json.dumps(call.input),
        "status": "completed",
    }


def _message(item_id: str, text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": item_id,
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def _events(response_id: str, items: list[dict[str, Any]]) -> list[tuple[str | None, Any]]:
    head: dict[str, Any] = {
        "id": response_id,
        "object": "response",
        "status": "in_progress",
        "output": [],
    }
    events: list[tuple[str | None, Any]] = [
        ("response.created", {"type": "response.created", "response": head})
    ]
    for index, item in enumerate(items):
        events.append(
            (
                "response.output_item.added",
                {"type": "response.output_item.added", "output_index": index, "item": item},
            )
        )
        events.append(
            (
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": index, "item": item},
            )
        )
    done: dict[str, Any] = dict(head, status="completed", output=items)
    done["usage"] = {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 15,
    }
    events.append(("response.completed", {"type": "response.completed", "response": done}))
    return events
