"""Serve attacked from the network (issue 18, DESIGN "The gate's guarantees" 8).

- Option injection: identifiers never start with ``-`` (refused where rows
  enter), action templates substitute whole arguments and a filled-in value
  never becomes an option.
- A web page in the operator's browser cannot reach a token-less listener:
  ``Origin``, a foreign ``Host`` and non-JSON hook bodies are refused.
- 1,100 half-open connections under ``ulimit -n 1024`` leave a legitimate hook
  answered within 1 s.
- Malformed framing: a 4xx where a response is possible, one log line each,
  no traceback, token or request byte in the log.
- Metric labels come from a fixed list: never a record's or a payload's text.
"""

from __future__ import annotations

import json
import os
import re
import resource
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.journal.rows import INSERT_COLUMNS, RowError, check_values, row_from_mapping
from engine.rules.actions import ActionRequest, ActionRunner, UnsafeArgument, render_argv
from engine.store.db import connect
from tests.serve._load import hook_body, otlp_body
from tests.serve.conftest import CONFIG, ROOT, Serve, fixture, serve_env, start_serve

TOKEN = "tok-Sekr1t-7f3a9c"
MARKER = "REQUEST-BYTES-MARKER"


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


# -- half-open connections under a file limit -------------------------------------------------


def _limit_files() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))


def timed_request(serve: Serve, path: str, body: bytes | None, timeout: float) -> tuple[int, float]:
    req = urllib.request.Request(
        serve.base + path, data=body, headers={"Content-Type": "application/json"}
    )
    t0 = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            resp.read()
            return resp.status, time.monotonic() - t0
    except urllib.error.HTTPError as exc:
        return exc.code, time.monotonic() - t0


def test_1100_half_open_connections_under_ulimit_1024(tmp_path: Path) -> None:
    serve = start_serve(tmp_path, preexec=_limit_files)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1400:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    held: list[socket.socket] = []
    try:
        limits = Path(f"/proc/{serve.proc.pid}/limits").read_text()
        assert re.search(r"Max open files\s+1024\s+1024", limits), limits
        for k in range(1100):
            s = socket.create_connection(("127.0.0.1", serve.port), timeout=5)
            if k % 2:  # half send a request head that never ends, half nothing at all
                s.sendall(f"POST /hooks/claude-code?harness=h01 HTTP/1.1\r\nX-N: {k}\r\n".encode())
            held.append(s)
        answers = []
        for n in range(5):
            status, took = timed_request(
                serve,
                "/hooks/claude-code?harness=legit01",
                hook_body(f"legit-{n}", n, post=False),
                1.0,
            )
            answers.append((status, round(took, 3)))
        health, took = timed_request(serve, "/healthz", None, 1.0)
        print(f"\n[1,100 half-open, ulimit 1024] hooks {answers}; /healthz {health} {took:.3f}s")
        assert all(status == 200 and took < 1.0 for status, took in answers), answers
        assert health == 200 and took < 1.0
        text = serve.request("/metrics")[1].decode()
        m = re.search(r'harness_serve_events_total\{event="connections_evicted"\} (\d+)', text)
        assert m and int(m.group(1)) >= 1100 - 256, text[-2000:]
    finally:
        for s in held:
            s.close()
    assert post_hook(serve, "legit01", hook_body("after", 0, post=True)) == 200
    assert serve.stop() == 0
    log = serve.log.read_text()
    assert "Too many open files" not in log and "Traceback" not in log, log[-3000:]
    assert len(log) < 16_384, f"{len(log)} bytes of log"


def test_a_connection_without_a_head_is_closed_after_the_deadline(serve: Serve) -> None:
    s = socket.create_connection(("127.0.0.1", serve.port), timeout=30)
    try:
        s.sendall(b"POST /hooks/claude-code HTTP/1.1\r\nX-Slow: 1\r\n")
        t0 = time.monotonic()
        assert s.recv(1024) == b""  # the server closed it
        took = time.monotonic() - t0
    finally:
        s.close()
    assert 5 < took < 25, took  # the 10 s header deadline, not the hour of keep-alive


# -- malformed framing -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    tmp = tmp_path_factory.mktemp("guarded")
    token = tmp / "serve.token"
    token.write_text(TOKEN + "\n")
    os.chmod(token, 0o600)
    server = start_serve(tmp, config=CONFIG + f'token_file = "{token}"\n', token=TOKEN)
    try:
        yield server
    finally:
        server.stop()


def _framing(port: int) -> dict[str, bytes]:
    head = (
        f"Host: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\nX-Marker: {MARKER}\r\n"
        "Content-Type: application/json\r\n"
    )
    post = "POST /hooks/claude-code?harness=m01 HTTP/1.1\r\n" + head
    kinds = {
        "negative Content-Length": post + "Content-Length: -1\r\n\r\n{}",
        "Transfer-Encoding and Content-Length": post
        + "Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
        "NUL in a header": post + "X-Bad: a\x00b\r\nContent-Length: 2\r\n\r\n{}",
        "2,000 headers": post + "".join(f"X-H{i}: v\r\n" for i in range(2000)) + "\r\n",
        "Content-Length not a number": post + "Content-Length: 1e3\r\n\r\n{}",
        "two Content-Lengths": post + "Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
        "bad chunk size": post + "Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
        "chunk size overflow": post
        + "Transfer-Encoding: chunked\r\n\r\nffffffffffffffffffffffff\r\n{}\r\n0\r\n\r\n",
        "unknown Transfer-Encoding": post + "Transfer-Encoding: gzip, identity\r\n\r\n{}",
        "header line of 20 KB": post + "X-Long: " + "a" * 20_000 + "\r\n\r\n",
        "request line of 20 KB": "POST /hooks/claude-code?harness="
        + "a" * 20_000
        + " HTTP/1.1\r\n"
        + head
        + "\r\n",
        "obsolete line folding": post + "X-Fold: a\r\n b\r\nContent-Length: 2\r\n\r\n{}",
        "space before the colon": post + "Content-Length : 2\r\n\r\n{}",
        "CR inside a header": post + "X-Bad: a\rb\r\nContent-Length: 2\r\n\r\n{}",
        "HTTP/9.9": "POST /hooks/claude-code HTTP/9.9\r\n" + head + "\r\n",
        "bare LF line ends": (post + "Content-Length: 2\r\n\r\n{}").replace("\r\n", "\n"),
        "no Host in HTTP/1.1": post.replace(f"Host: 127.0.0.1:{port}\r\n", "")
        + "Content-Length: 2\r\n\r\n{}",
        "a TLS handshake": "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + MARKER,
        "a method of symbols": f"P@ST / HTTP/1.1\r\n{head}\r\n",
    }
    return {k: v.encode("latin-1") for k, v in kinds.items()}


def _exchange(port: int, raw: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(raw)
        data = b""
        while True:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, TimeoutError):
                break
            if not chunk:
                break
            data += chunk
        return data


def _wait_log(serve: Serve, start: int, lines: int, timeout: float = 5.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while True:
        new = serve.log.read_text(errors="replace")[start:].splitlines()
        if len(new) >= lines or time.monotonic() > deadline:
            return new
        time.sleep(0.02)


def test_malformed_framing_is_4xx_and_one_clean_log_line_each(guarded: Serve) -> None:
    seen: dict[str, tuple[int, list[str]]] = {}
    for name, raw in _framing(guarded.port).items():
        time.sleep(0.11)  # under the log's burst limit (10 lines a second), not a sync
        start = len(guarded.log.read_text(errors="replace"))
        answer = _exchange(guarded.port, raw)
        m = re.match(rb"HTTP/1\.[01] (\d{3}) ", answer)
        assert m, f"{name}: no HTTP answer: {answer[:80]!r}"
        status = int(m.group(1))
        new = _wait_log(guarded, start, 1)
        seen[name] = (status, new)
    # Disconnect mid-body: no answer is possible; still one line.
    start = len(guarded.log.read_text(errors="replace"))
    with socket.create_connection(("127.0.0.1", guarded.port)) as s:
        s.sendall(
            f"POST /hooks/claude-code?harness=m01 HTTP/1.1\r\nHost: localhost\r\n"
            f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
            f'Content-Length: 100\r\n\r\n{{"m": "{MARKER}'.encode()
        )
        time.sleep(0.2)  # the body's first bytes reach the server before the reset
    seen["disconnect mid-body"] = (0, _wait_log(guarded, start, 1))
    print()
    for name, (status, lines) in seen.items():
        print(f"  {name:38} {status or '-':>3}  {lines}")
    for name, (status, lines) in seen.items():
        assert status == 0 or 400 <= status < 500, (name, status)
        assert len(lines) == 1, (name, lines)
    log = guarded.log.read_text(errors="replace")
    for leaked in (TOKEN, MARKER, "Traceback", "X-Bad", "\\x00", "aaaa", "Bearer"):
        assert leaked not in log, leaked
    assert guarded.rows("harness = 'm01'") == []
    text = guarded.request("/metrics")[1].decode()
    m = re.search(r'harness_serve_events_total\{event="malformed_requests"\} (\d+)', text)
    assert m and int(m.group(1)) >= len(seen) - 2, text[-1500:]


def test_a_flood_of_malformed_requests_is_rate_limited_in_the_log(guarded: Serve) -> None:
    raw = _framing(guarded.port)["negative Content-Length"]
    counted = malformed_count(guarded)
    start = len(guarded.log.read_text(errors="replace"))
    t0 = time.monotonic()
    for _ in range(200):
        assert _exchange(guarded.port, raw).startswith(b"HTTP/1.0 400 ")
    took = time.monotonic() - t0
    lines = guarded.log.read_text(errors="replace")[start:].splitlines()
    print(f"\n[200 malformed in {took:.2f}s] {len(lines)} log lines: {lines[-2:]}")
    assert len(lines) <= 11 * (int(took) + 2), lines  # 10 a second, and one saying so
    assert any("counted and said in the next second" in line for line in lines), lines
    assert malformed_count(guarded) - counted == 200  # metrics count what the log leaves out


def malformed_count(serve: Serve) -> int:
    text = serve.request("/metrics")[1].decode()
    m = re.search(r'harness_serve_events_total\{event="malformed_requests"\} (\d+)', text)
    return int(m.group(1)) if m else 0


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
