"""Fuzz surface 6: Claude Code hook payloads, through ``harness hook claude-code`` (issue 22).

Property: whatever payload arrives on stdin, the hook answers exit 0 with a
JSON object on stdout or exit 1 with the reason on stderr (Claude Code then
proceeds), never 2 (which would block the tool call) and never 70. Issue 22
found the hook exiting 70 on a ``tool_input`` nested 991 deep: ``json.loads``
took it, and the digest, a few frames deeper, overflowed the stack. That
window is one depth wide and moves with the caller's stack, so depth is
swept: every depth just under where ``json.loads`` gives up, from this frame.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.cli.harness import main as harness
from tests.conftest import ROOT
from tests.fuzz._cli import assert_clean, run_cli
from tests.fuzz.conftest import PROFILE, depth_sweep, fuzz_settings, scratch_dir
from tests.fuzz.strategies import (
    DEEPEST,
    RECURSION_LIMIT,
    depths,
    json_line,
    json_parse_limit,
    json_values,
    nested_json,
    nesting_kinds,
)

_DIR = scratch_dir("fuzz-hook-")
STORE = _DIR / "hook.db"
ARGV = ["hook", "claude-code", "--harness", "h1", "--project", "p1", "--store", str(STORE)]
EVENTS = [
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "UserPromptSubmit",
    "SessionStart",
    "Stop",
    "Notification",
]
#: The payload fields a nested value is put in (``error`` is digested as a cause).
DEEP_FIELDS = ["tool_input", "error", "tool_response", "cwd", "session_id"]


def payload(event: str, field: str, raw_value: str) -> bytes:
    """A hook payload (JSON text) with ``field`` holding ``raw_value`` (JSON text) verbatim."""
    head = {"hook_event_name": event, "session_id": "s1", "cwd": "/tmp", "tool_name": "Bash"}
    head.pop(field, None)
    return (json.dumps(head)[:-1] + f', "{field}": {raw_value}}}').encode()


def check(code: int, out: str, err: str) -> None:
    assert_clean(code, out, err)
    assert code in (0, 1), (code, err)  # 2 would block the agent's tool call
    if code == 0:
        assert isinstance(json.loads(out), dict)
    else:
        assert err.startswith("harness hook: ")


@pytest.mark.parametrize(
    ("event", "field"), [("PostToolUse", "tool_input"), ("PostToolUseFailure", "error")]
)
def test_regression_every_depth_the_hook_parses_is_digested(event: str, field: str) -> None:
    """Issue 22: exit 70 at the one depth that parses but overflowed the digest.

    Under pytest that depth was 4 under where ``json.loads`` gives up from this
    frame (952 of 956): a band ten times as wide is swept.
    """
    for depth in depth_sweep(json_parse_limit() + 2, band=40, stride=50):
        code, out, err = run_cli(harness, ARGV, payload(event, field, nested_json(depth)))
        check(code, out, err)
        assert code == 0 or "not JSON (RecursionError)" in err, (depth, err)


@fuzz_settings()  # the surface's 10,000 under the slow profile: each depth ~10 times
@given(st.sampled_from(EVENTS), st.sampled_from(DEEP_FIELDS), depths, nesting_kinds)
def test_one_field_at_any_depth(event: str, field: str, depth: int, kind: str) -> None:
    code, out, err = run_cli(harness, ARGV, payload(event, field, nested_json(depth, kind)))
    check(code, out, err)


@fuzz_settings(through_store=True)
@given(st.sampled_from(EVENTS), st.sampled_from(DEEP_FIELDS), json_values)
def test_any_value_in_any_field(event: str, field: str, value: object) -> None:
    code, out, err = run_cli(harness, ARGV, payload(event, field, json_line(value)))
    check(code, out, err)


@fuzz_settings()
@given(st.one_of(json_values.map(json_line), st.text(max_size=80)))
def test_any_payload_at_all(text: str) -> None:
    code, out, err = run_cli(harness, ARGV, text.encode("utf-8", "surrogatepass"))
    check(code, out, err)


#: Depths for the real program, just under where a fresh process's parse gives
#: up: issue 22's exit 70 was at 991 through the ``harness`` script and at 988
#: through ``python -m`` (two frames more); a wider band under the slow profile.
SUBPROCESS_DEPTHS = (
    list(range(RECURSION_LIMIT - 60, DEEPEST + 1))
    if PROFILE == "slow"
    else [1, *range(RECURSION_LIMIT - 16, RECURSION_LIMIT - 5), DEEPEST]
)


@pytest.mark.parametrize("depth", SUBPROCESS_DEPTHS)
def test_the_installed_command_at_the_edge_of_the_recursion_limit(depth: int) -> None:
    env = {"PYTHONPATH": str(ROOT), "HARNESS_CONFIG": str(_DIR / "none.toml"), "PATH": "/usr/bin"}
    proc = subprocess.run(
        [sys.executable, "-m", "engine.cli.harness", *ARGV],
        input=payload("PostToolUse", "tool_input", nested_json(depth)),
        capture_output=True,
        env=env,
        timeout=60,
    )
    check(proc.returncode, proc.stdout.decode(), proc.stderr.decode())
