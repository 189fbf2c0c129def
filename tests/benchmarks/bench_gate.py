"""The gate's added latency as the agent sees it (issue 17): real agents, with and without hooks.

The fake model API timestamps when it sends each tool call and when the
call's result comes back; the gap is what the agent waits for that call, its
hooks included. One run of ``CALLS`` sequential shell calls with no hooks and
one with http hooks on every event to a real ``harness serve`` (which
journals each call, waits for the evaluator, reads holds and stops) are
interleaved ``ROUNDS`` times in one process, so both see the same machine.
The figure is the difference of the medians (target: the hooks add
≤ 15 ms); Codex and Gemini CLI (command hooks, a process per call) are
printed beside it for information.

Needs node/npm (the pinned clients are installed into the e2e cache on
first use); without them this benchmark prints nothing.
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from tests.benchmarks._common import Row

CALLS = 40
ROUNDS = 3
#: Each agent's hooks as the README sets them (not every event the client has).
README_EVENTS = {
    "claude": ("UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure", "SessionEnd"),
    "gemini": ("SessionStart", "BeforeAgent", "BeforeTool", "AfterTool", "SessionEnd"),
}


def _latencies(result: object) -> list[float]:
    calls = result.calls  # type: ignore[attr-defined]
    return [c.latency_s * 1000 for c in calls if c.latency_s is not None]


def run(quick: bool = False) -> list[Row]:
    if shutil.which("npm") is None or shutil.which("node") is None:
        print("bench_gate: no node/npm on PATH: skipped", file=sys.stderr)
        return []
    from tests.e2e._config import command_hooks, http_hooks
    from tests.e2e._script import Script, shell
    from tests.e2e._serve import start
    from tests.e2e.conftest import installed

    calls, rounds = (10, 1) if quick else (CALLS, ROUNDS)
    base = Path(tempfile.mkdtemp(prefix="bench-gate-"))
    serve = start(base / "serve", loop_guard=0)
    rows: list[Row] = []
    try:
        script = Script.of(*(shell(f"printf {i} > out{i}.txt") for i in range(calls)))
        for client in ("claude", "codex", "gemini"):
            kit = installed(client)
            without: list[float] = []
            with_hooks: list[float] = []
            for r in range(rounds):
                plain = kit.run(script, base / f"{client}-plain-{r}", env=serve.env).check()
                without += _latencies(plain)
                if client == "claude":
                    hooks = http_hooks(serve.hook_url(f"bench-{client}-{r}"), README_EVENTS[client])
                else:  # the events the README configures
                    agent = "codex" if client == "codex" else "gemini"
                    events = README_EVENTS.get(client, kit.events)
                    hooks = command_hooks(serve.command(agent, f"bench-{client}-{r}"), events)
                gated = kit.run(
                    script, base / f"{client}-gated-{r}", hooks=hooks, env=serve.env
                ).check()
                with_hooks += _latencies(gated)
            plain_ms = statistics.median(without)
            gated_ms = statistics.median(with_hooks)
            rows.append(
                Row(
                    f"gate: {client} per-call latency, no hooks",
                    plain_ms,
                    "ms",
                    higher_is_better=False,
                    note=f"median of {len(without)} calls",
                )
            )
            rows.append(
                Row(
                    f"gate: {client} per-call latency, hooks to serve",
                    gated_ms,
                    "ms",
                    higher_is_better=False,
                    note=f"median of {len(with_hooks)} calls",
                )
            )
            rows.append(
                Row(
                    f"gate: {client} added by its hooks (median)",
                    gated_ms - plain_ms,
                    "ms",
                    target=15.0 if client == "claude" else None,
                    higher_is_better=False,
                )
            )
        late = serve.metric("harness_serve_events_total", event="gate_late")
        rows.append(Row("gate: late answers (gate_wait reached)", late, "answers", target=0.0,
                        higher_is_better=False))  # fmt: skip
    finally:
        serve.stop()
        shutil.rmtree(base, ignore_errors=True)
    return rows
