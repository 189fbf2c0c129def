"""A fake Gemini API (``generateContent`` and its SSE stream) that plays a script to Gemini CLI."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web

from tests.e2e._fakeserver import FakeModel, Planned, Result, read_json, sse
from tests.e2e._script import Turn

MODEL = "gemini-2.5-flash"
# Gemini CLI asks side questions for JSON (which model to route to, who speaks next);
# one object answers them all without consuming a turn.
SIDE_JSON = {
    "reasoning": "e2e fake",
    "model_choice": "flash",
    "next_speaker": "user",
    "complexity_reasoning": "e2e fake",
    "complexity_score": 1,
}


class FakeGemini(FakeModel):
    """Gemini CLI's model API: ``/v1beta/models/<m>:streamGenerateContent?alt=sse`` and
    ``:generateContent``.

    A main-conversation request is one that declares functions (the agent loop always
    does); the routing and next-speaker checks declare none.
    """

    vendor = "gemini"

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        return app

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        body = await read_json(request) if request.method == "POST" else None
        path = request.path
        streaming = path.endswith(":streamGenerateContent")
        if request.method == "POST" and (streaming or path.endswith(":generateContent")):
            if _declares_functions(body):
                turn, current, planned = self.begin_turn(request, body)
                response = await self._play(request, streaming, turn, current, planned)
                self.sent(turn, planned)
                return response
            self.note(request, body, main=False, turn=None)
            answer = _response([{"text": json.dumps(SIDE_JSON)}], "STOP")
            if streaming:
                return await sse(request, [(None, answer)])
            return web.json_response(answer)
        self.note(request, body, main=False, turn=None)
        if path.endswith(":countTokens"):
            return web.json_response({"totalTokens": 100})
        return web.json_response({}, status=404)

    def results_in(self, body: Any) -> list[Result]:
        found = []
        for content in body.get("contents", []):
            for part in content.get("parts", []) if isinstance(content, dict) else []:
                reply = part.get("functionResponse") if isinstance(part, dict) else None
                if not isinstance(reply, dict):
                    continue
                response = reply.get("response") or {}
                error = "error" in response if isinstance(response, dict) else None
                text = response.get("error", response.get("output", response))
                found.append(
                    Result(
                        call_id=str(reply.get("id", reply.get("name"))),
                        text=text if isinstance(text, str) else json.dumps(text, sort_keys=True),
                        is_error=error,
                    )
                )
        return found

    async def _play(
        self,
        request: web.Request,
        streaming: bool,
        turn: int,
        current: Turn,
        planned: list[Planned],
    ) -> web.StreamResponse:
        if current.delay_s:
            await asyncio.sleep(current.delay_s)
        parts: list[dict[str, Any]] = []
        if current.text or not planned:
            parts.append({"text": current.text or "done"})
        for call in planned:
            parts.append(
                {"functionCall": {"id": call.call_id, "name": call.name, "args": call.input}}
            )
        answer = _response(parts, "STOP")
        if streaming:
            return await sse(request, [(None, answer)])
        return web.json_response(answer)


def _declares_functions(body: Any) -> bool:
    if not isinstance(body, dict):
        return False
    return any(
        isinstance(tool, dict) and tool.get("functionDeclarations")
        for tool in body.get("tools") or []
    )


def _response(parts: list[dict[str, Any]], finish: str) -> dict[str, Any]:
    return {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": finish, "index": 0}
        ],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
        "modelVersion": MODEL,
    }
