"""The acting process reloads rule files on change and keeps the last good set on a broken edit."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.serve.conftest import CONFIG, Serve, fixture, start_serve

NEW_RULE = """\
name: serve_test_new
description: A harness ran the newly forbidden tool.
on: run_event
when: event.type == "tool_call" && event.tool == "NewlyForbidden"
level: hold
target: harness
cooldown: 0s
message: "{harness} ran {tool}"
"""


def wait_log(serve: Serve, text: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while text not in serve.log.read_text(errors="replace"):
        assert time.monotonic() < deadline, serve.log.read_text(errors="replace")
        time.sleep(0.05)


def call(serve: Serve, harness: str, tool: str) -> None:
    post = dict(fixture("PostToolUse"), tool_name=tool, tool_input={"x": tool})
    assert serve.hook(post, harness)[0] == 200


def denied(serve: Serve, harness: str) -> bool:
    status, answer = serve.hook(fixture("PreToolUse"), harness)
    assert status == 200
    return "deny" in json.dumps(answer)


def test_an_edit_reloads_and_a_broken_edit_keeps_the_last_good_rules(tmp_path: Path) -> None:
    config = CONFIG.replace(
        'enforce = ["serve_test_hold"', 'enforce = ["serve_test_new", "serve_test_hold"'
    )
    serve = start_serve(tmp_path, config=config)
    try:
        policy = tmp_path / "policy"
        call(serve, "r01", "NewlyForbidden")
        assert not denied(serve, "r01")  # no such rule yet
        (policy / "serve_test_new.yml").write_text(NEW_RULE)
        wait_log(serve, "rules reloaded")
        call(serve, "r02", "NewlyForbidden")
        assert denied(serve, "r02")  # read-your-writes: the very next call is denied
        (policy / "serve_test_new.yml").write_text(NEW_RULE.replace("on: run_event", "on: [bad"))
        wait_log(serve, "rule not loaded (last good version kept)")
        call(serve, "r03", "NewlyForbidden")
        assert denied(serve, "r03")  # the last good version still acts
    finally:
        assert serve.stop() == 0
