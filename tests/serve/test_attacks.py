"""Serve attacked from the network (issue 18, DESIGN "The gate's guarantees" 8).

- Option injection: identifiers never start with ``-`` (refused where rows
  enter), action templates substitute whole arguments and a filled-in value
  never becomes an option.
- A web page in the operator's browser cannot reach a token-less listener:
  ``Origin``, a foreign ``Host`` and non-JSON hook bodies are refused.
- Metric labels come from a fixed list: never a record's or a payload's text.

Connections and malformed framing: test_attacks_listener.py.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.journal.rows import INSERT_COLUMNS, RowError, check_values, row_from_mapping
from engine.rules.authority.actions import ActionRequest, ActionRunner, UnsafeArgument, render_argv
from engine.store.db import connect
from tests.serve._load import hook_body, otlp_body
from tests.serve.conftest import CONFIG, ROOT, Serve, fixture, serve_env, start_serve


def post_hook(
    serve: Serve, harness: str, body: bytes, headers: dict[str, str] | None = None
) -> int:
    hdrs = {"Content-Type": "application/json", **(headers or {})}
    return serve.request(f"/hooks/claude-code?harness={harness}&project=atlas", body, hdrs)[0]


# -- option injection ---------------------------------------------------------------------


RECORDER = "import json, sys\nopen(sys.argv[1], 'a').write(json.dumps(sys.argv[2:]) + '\\n')\n"


@pytest.fixture(scope="module")
def acting(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Serve, Path]]:
    """Serve with notify and stop actions that record their argv."""
    tmp = tmp_path_factory.mktemp("acting")
    recorder = tmp / "recorder.py"
    recorder.write_text(RECORDER)
    calls = tmp / "calls.jsonl"
    prefix = json.dumps([sys.executable, str(recorder), str(calls)])[1:-1]
    config = CONFIG + (
        "\n[memory.rules.actions]\n"
        f'notify = [{prefix}, "notify", "{{harness}}", "{{rule}}"]\n'
        f'stop = [{prefix}, "stop", "{{harness}}", "{{rule}}"]\n'
    )
    server = start_serve(tmp, config=config)
    try:
        yield server, calls
    finally:
        server.stop()


def nine_identical_calls(serve: Serve, harness: str, run: str) -> list[int]:
    """Nine PostToolUse of one run with the same tool and input (the loop guard trips at 8)."""
    statuses = []
    for k in range(9):
        payload = fixture("PostToolUse")
        payload.update(
            session_id=run,
            tool_name="Bash",
            tool_input={"command": "make again"},
            tool_response={"exit_code": 0},
            tool_use_id=f"toolu_{run}_{k}",
        )
        statuses.append(post_hook(serve, harness, json.dumps(payload).encode()))
    return statuses


def test_option_injection_is_refused_at_the_identifier(acting: tuple[Serve, Path]) -> None:
    serve, calls = acting
    # The attack (issue 18): nine identical calls for harness=--all, twice, so the loop
    # guard trips twice and the starter rule loop_guard_repeated notifies.
    for run in ("atk-1", "atk-2"):
        assert nine_identical_calls(serve, "--all", run) == [400] * 9
    assert serve.rows("harness LIKE '-%' OR run LIKE '-%'") == []
    # The same calls from a real harness: the actions do run (so the attack's would have).
    for run in ("ok-1", "ok-2"):
        assert nine_identical_calls(serve, "ok01", run) == [200] * 9
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        recorded = calls.read_text().splitlines() if calls.exists() else []
        if any('"loop_guard_repeated"' in line for line in recorded):
            break
        time.sleep(0.1)
    argvs = [json.loads(line) for line in calls.read_text().splitlines()]
    assert ["notify", "ok01", "loop_guard_repeated"] in argvs, argvs
    # Every action that ran was for ok01; none took an argument starting with '-'.
    assert all(a[1] == "ok01" for a in argvs), argvs
    assert not [a for a in argvs if any(x.startswith("-") for x in a)]
    assert len(serve.rows("type = 'loop_stopped' AND harness = 'ok01'")) == 2


def test_every_identifier_starting_with_a_dash_is_refused_where_rows_enter(
    acting: tuple[Serve, Path],
) -> None:
    serve, _ = acting
    before = len(serve.rows())
    payload = fixture("PostToolUse")
    payload.update(session_id="--all", tool_name="-rf", tool_use_id="toolu_dash")
    assert post_hook(serve, "dash01", json.dumps(payload).encode()) == 200
    status, _, _ = serve.request(
        "/hooks/claude-code?harness=dash02&project=--all",
        json.dumps(fixture("SessionStart")).encode(),
        {"Content-Type": "application/json"},
    )
    assert status == 200
    # OTLP: a harness.id starting with '-' rejects the records (partial success).
    status, body, _ = serve.request(
        "/v1/logs",
        otlp_body("--all", "otlp-dash", records=3),
        {"Content-Type": "application/x-protobuf"},
    )
    assert status == 200 and b"harness.id" in body
    new = serve.rows()[before:]
    for row in new:
        for column in ("harness", "project", "run", "tool", "other_harness", "fact"):
            assert not str(row.get(column) or "").startswith("-"), row
    assert serve.rows("run = 'otlp-dash'") == []
    # The journal itself refuses them, naming the field.
    for column in ("harness", "project", "run", "tool"):
        with pytest.raises(RowError) as caught:
            row_from_mapping({"type": "tool_call", "tool": "Bash", column: "--all"}, with_at=False)
        assert caught.value.field == column
    good = row_from_mapping({"type": "tool_call", "harness": "h01", "tool": "Bash"}, with_at=False)
    bad = list(good)
    bad[INSERT_COLUMNS.index("harness")] = "-h"
    with pytest.raises(RowError):
        check_values(tuple(bad))


def test_action_templates_substitute_whole_arguments(tmp_path: Path) -> None:
    values = {
        "rule": "r1",
        "harness": "h01",
        "message": "two words; rm -rf / && echo $HOME `id`",
        "target": "h01",
        "level": "notify",
        "fire_id": "3",
    }
    argv = render_argv(["notify", "{message}", "--rule={rule}", "{harness} {level}"], values)
    assert argv == ("notify", values["message"], "--rule=r1", "h01 notify")
    # A value never makes an argument an option: '-' at the start of a filled-in element.
    for message in ("--all", "-rf x", "-1 retries"):
        with pytest.raises(UnsafeArgument, match="argument 1"):
            render_argv(["notify", "{message}"], {**values, "message": message})
    assert render_argv(["notify", "--text={message}"], {**values, "message": "-x"}) == (
        "notify",
        "--text=-x",
    )
    # The runner records such an action as an error and never executes it.
    marker = tmp_path / "ran"
    conn = connect(tmp_path / "s.db")
    runner = ActionRunner(
        conn, {"notify": (sys.executable, "-c", f"open({str(marker)!r}, 'w')", "{message}")}
    )
    request = ActionRequest(1, "notify", "r1", "h01", "h01", "notify", "--all")
    outcome = runner.run(request)
    assert outcome is not None and outcome.status == "error"
    assert outcome.error is not None and "read as an option" in outcome.error
    assert not marker.exists()


# -- cross-site requests ---------------------------------------------------------------------


def test_a_browser_cannot_reach_a_token_less_listener(serve: Serve) -> None:
    body = hook_body("xs-run", 1, post=True)
    # A "simple" cross-site request: no preflight, so the browser sends it as it is.
    assert post_hook(serve, "xs01", body, {"Content-Type": "text/plain"}) == 415
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    assert post_hook(serve, "xs01", body, form) == 415
    # With a JSON type the browser adds Origin (after a preflight the listener never allows).
    evil = {"Origin": "https://evil.example"}
    assert post_hook(serve, "xs01", body, evil) == 403
    assert post_hook(serve, "xs01", body, {"Origin": "null"}) == 403
    assert (
        serve.request(
            "/v1/logs",
            otlp_body("xs01", "xs-otlp"),
            {"Content-Type": "application/x-protobuf", **evil},
        )[0]
        == 403
    )
    assert serve.request("/metrics", headers=evil)[0] == 403
    assert serve.request(
        "/hooks/claude-code",
        method="OPTIONS",
        headers={**evil, "Access-Control-Request-Method": "POST"},
    )[0] in (403, 405)
    # DNS rebinding: evil.example resolves to 127.0.0.1; the Host says so.
    for host in ("evil.example", f"evil.example:{serve.port}", "127.0.0.1.nip.io"):
        assert post_hook(serve, "xs01", body, {"Host": host}) == 403, host
    assert serve.rows("harness = 'xs01'") == []
    # The listener's own names are served.
    for host in (f"localhost:{serve.port}", f"127.0.0.1:{serve.port}", "localhost"):
        assert (
            post_hook(serve, "xs02", hook_body(f"ok-{host}", 2, post=True), {"Host": host}) == 200
        )
    metrics = serve.request("/metrics")[1].decode()
    assert re.search(r'harness_serve_events_total\{event="cross_site"\} [1-9]', metrics)


# -- metric labels ----------------------------------------------------------------------------


def test_no_metric_label_comes_from_a_record_or_a_payload(serve: Serve) -> None:
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    texts = ("alice@example.com", "secret.label_text", "evil.event.name", "EvilHookEvent")
    request = ExportLogsServiceRequest()
    rl = request.resource_logs.add()
    kv = rl.resource.attributes.add()
    kv.key, kv.value.string_value = "harness.id", "lbl01"
    scope = rl.scope_logs.add()
    for body in texts[:2]:  # no event_name: an identifier-shaped body
        scope.log_records.add().body.string_value = body
    rec = scope.log_records.add()
    attr = rec.attributes.add()
    attr.key, attr.value.string_value = "event.name", texts[2]
    status, _, _ = serve.request(
        "/v1/logs", request.SerializeToString(), {"Content-Type": "application/x-protobuf"}
    )
    assert status == 200
    payload = fixture("Notification")
    payload["hook_event_name"] = texts[3]
    assert post_hook(serve, "lbl01", json.dumps(payload).encode()) == 200
    metrics = serve.request("/metrics")[1].decode()
    for text in texts:
        assert text not in metrics, text
    labels = set(re.findall(r"\{([^}]*)\}", metrics))
    values = {v for group in labels for v in re.findall(r'="([^"]*)"', group)}
    assert "other" in values
    assert not [v for v in values if "@" in v or v in texts]


def test_the_journal_cli_refuses_dash_identifiers_with_a_clear_error(tmp_path: Path) -> None:
    env = serve_env(tmp_path)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "engine.cli.harness",
            "journal",
            "append",
            "--store",
            str(tmp_path / "j.db"),
        ],
        input='{"type": "run_started", "harness": "ok01", "run": "-x"}\n',
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=60,
    )
    assert done.returncode == 1, done.stderr  # refused rows: exit 1, each named
    assert "<stdin>:1: refused: run: not an identifier" in done.stderr
    assert "not starting with '-'" in done.stderr and "Traceback" not in done.stderr
