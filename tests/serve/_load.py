"""Bounded hook and OTLP traffic against a serve subprocess, remembering every answer.

Every request journals rows under a run id of its own (a hook's
``session_id``, an OTLP batch's ``session.id``), so the store says exactly
which requests' rows it holds: an acknowledged (2xx) request must have all
its rows, a refused one none, one whose answer never came (serve killed,
connection reset) all or none. A hook answered 503 because the gate could not
read the store must have all its rows too: they were committed before the
gate was asked. :func:`audit` checks that and that ``seq`` is
dense; the load itself never asserts, it records.
"""

from __future__ import annotations

import http.client
import json
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

#: Records per OTLP batch (each batch is one run: a run_started row plus one row per record).
OTLP_RECORDS = 20
#: Seconds a client waits for an answer: longer than any answer serve should take.
CLIENT_TIMEOUT_S = 15.0
ACKED, REFUSED, UNKNOWN = "acked", "refused", "unknown"
#: A hook answered 503 because the gate could not read the store *after* its rows were
#: committed: its rows are stored, the answer only says the gate cannot decide.
GATE_FAILED = "gate failed"
_GATE_TEXTS = ("cannot read holds and stops", "cannot read the evaluator's progress")


@dataclass
class Sent:
    """One request and what became of it."""

    kind: str  # "hook" or "otlp"
    run: str
    rows: int  # rows it journals when stored
    sent: float
    answered: float = 0.0
    status: int = 0  # 0: no answer
    retry_after: str | None = None
    text: str = ""

    @property
    def outcome(self) -> str:
        if self.status == 0:
            return UNKNOWN
        if self.status == 503 and any(t in self.text for t in _GATE_TEXTS):
            return GATE_FAILED
        return ACKED if 200 <= self.status < 300 else REFUSED


def hook_body(run: str, n: int, *, post: bool, tool: str = "Bash") -> bytes:
    payload: dict[str, object] = {
        "session_id": run,
        "cwd": "/home/dev/src/atlas",
        "hook_event_name": "PostToolUse" if post else "PreToolUse",
        "tool_name": tool,
        "tool_input": {"command": f"make t{n}"},
        "tool_use_id": f"toolu_{run}",
    }
    if post:
        payload["tool_response"] = {"stdout": "", "exit_code": 0}
    return json.dumps(payload).encode()


def otlp_body(harness: str, run: str, records: int = OTLP_RECORDS) -> bytes:
    request = ExportLogsServiceRequest()
    rl = request.resource_logs.add()
    for key, value in (
        ("service.name", "claude-code"),
        ("harness.id", harness),
        ("harness.project", "atlas"),
    ):
        kv = rl.resource.attributes.add()
        kv.key, kv.value.string_value = key, value
    scope = rl.scope_logs.add()
    for i in range(records):
        rec = scope.log_records.add()
        rec.event_name = "claude_code.tool_result"
        for key, value in (
            ("tool_name", "Bash"),
            ("success", "true"),
            ("session.id", run),
            ("tool_input", json.dumps({"command": f"make {run}-{i}"})),
        ):
            a = rec.attributes.add()
            a.key, a.value.string_value = key, value
    return request.SerializeToString()


@dataclass
class Load:
    """Threads posting hooks (PreToolUse and PostToolUse) and OTLP batches until stopped.

    ``port`` may be changed between :meth:`start` calls (serve restarted);
    ``tag`` keeps run ids unique across loads on one store.
    """

    port: int
    tag: str = "L"
    hook_threads: int = 2
    otlp_threads: int = 1
    #: Pause after each answer, seconds (bounds the rate on a shared machine).
    pause: float = 0.01
    sent: list[Sent] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _n: int = 0

    def start(self) -> Load:
        self._stop.clear()
        self._threads = [
            threading.Thread(target=self._hooks, args=(k,), daemon=True)
            for k in range(self.hook_threads)
        ] + [
            threading.Thread(target=self._otlp, args=(k,), daemon=True)
            for k in range(self.otlp_threads)
        ]
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(CLIENT_TIMEOUT_S + 5)
        assert not any(t.is_alive() for t in self._threads), "a load thread hangs"

    def __enter__(self) -> Load:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what happened ---------------------------------------------------------

    def count(self, kind: str | None = None, outcome: str | None = None) -> int:
        with self._lock:
            return sum(
                1
                for s in self.sent
                if (kind is None or s.kind == kind) and (outcome is None or s.outcome == outcome)
            )

    def statuses(self) -> Counter[tuple[str, int]]:
        with self._lock:
            return Counter((s.kind, s.status) for s in self.sent)

    def since(self, t: float) -> list[Sent]:
        with self._lock:
            return [s for s in self.sent if s.sent >= t]

    def wait_for(self, pred: Callable[[], bool], timeout: float, what: str) -> float:
        """Wait until ``pred()`` holds; the seconds it took (AssertionError past ``timeout``)."""
        t0 = time.monotonic()
        while not pred():
            if time.monotonic() - t0 > timeout:
                raise AssertionError(f"not within {timeout:g}s: {what}; {self.statuses()}")
            time.sleep(0.02)
        return time.monotonic() - t0

    # -- the threads -------------------------------------------------------------

    def _next(self, prefix: str) -> str:
        with self._lock:
            self._n += 1
            return f"{self.tag}{prefix}{self._n}"

    def _send(
        self,
        conns: list[http.client.HTTPConnection | None],
        sent: Sent,
        path: str,
        body: bytes,
        ctype: str,
    ) -> None:
        with self._lock:
            self.sent.append(sent)
        conn = conns[0]
        try:
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=CLIENT_TIMEOUT_S)
                conns[0] = conn
            conn.request("POST", path, body, {"Content-Type": ctype})
            resp = conn.getresponse()
            text = resp.read()
            sent.retry_after = resp.getheader("Retry-After")
            sent.text = text.decode("utf-8", "replace")[:300] if resp.status != 200 else ""
            sent.answered = time.monotonic()
            sent.status = resp.status
        except (OSError, http.client.HTTPException):
            if conn is not None:
                conn.close()
            conns[0] = None
            self._stop.wait(0.05)  # serve is down or restarting: do not spin

    def _hooks(self, k: int) -> None:
        conns: list[http.client.HTTPConnection | None] = [None]
        post = bool(k % 2)
        while not self._stop.is_set():
            run = self._next("h")
            sent = Sent("hook", run, 2 if post else 1, time.monotonic())
            body = hook_body(run, self._n, post=post)
            self._send(
                conns,
                sent,
                f"/hooks/claude-code?harness=lh{k}&project=atlas",
                body,
                "application/json",
            )
            post = not post
            self._stop.wait(self.pause)
        if conns[0] is not None:
            conns[0].close()

    def _otlp(self, k: int) -> None:
        conns: list[http.client.HTTPConnection | None] = [None]
        while not self._stop.is_set():
            run = self._next("o")
            sent = Sent("otlp", run, OTLP_RECORDS + 1, time.monotonic())
            body = otlp_body(f"lo{k}", run)
            self._send(conns, sent, "/v1/logs", body, "application/x-protobuf")
            self._stop.wait(self.pause * 5)
        if conns[0] is not None:
            conns[0].close()


@dataclass(frozen=True)
class Audit:
    """What the store holds of a load's requests."""

    acked_requests: int
    acked_rows: int
    stored_rows: int  # rows of the load's runs in the store
    refused_requests: int
    gate_failed_requests: int
    unknown_requests: int
    lost: tuple[str, ...]  # acknowledged runs missing rows
    leaked: tuple[str, ...]  # refused runs with rows, or runs half stored
    seq_rows: int
    seq_max: int
    seq_min: int

    @property
    def dense(self) -> bool:
        return self.seq_rows == self.seq_max - self.seq_min + 1

    def summary(self) -> str:
        return (
            f"{self.acked_requests} acknowledged requests ({self.acked_rows} rows), "
            f"{self.stored_rows} rows stored, {self.refused_requests} refused, "
            f"{self.gate_failed_requests} gate-failed (rows stored), "
            f"{self.unknown_requests} unanswered; lost {len(self.lost)}, leaked "
            f"{len(self.leaked)}; seq {self.seq_min}..{self.seq_max} in {self.seq_rows} rows"
        )


def audit(store: Path, sent: list[Sent]) -> Audit:
    """Compare the store with what each request was told."""
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        per_run = dict(
            conn.execute(
                "SELECT run, COUNT(*) FROM rule_journal WHERE run IS NOT NULL GROUP BY run"
            ).fetchall()
        )
        n, lo, hi = conn.execute("SELECT COUNT(*), MIN(seq), MAX(seq) FROM rule_journal").fetchone()
    finally:
        conn.close()
    lost: list[str] = []
    leaked: list[str] = []
    stored = 0
    for s in sent:
        got = per_run.get(s.run, 0)
        stored += got
        if s.outcome in (ACKED, GATE_FAILED) and got != s.rows:
            lost.append(f"{s.run} ({s.outcome}): {got} of {s.rows}")
        elif s.outcome == REFUSED and got:
            leaked.append(f"{s.run} (refused {s.status}: {s.text.strip()}): {got} rows")
        elif s.outcome == UNKNOWN and got not in (0, s.rows):
            leaked.append(f"{s.run} (unanswered): {got} of {s.rows}")
    acked = [s for s in sent if s.outcome == ACKED]
    return Audit(
        acked_requests=len(acked),
        acked_rows=sum(s.rows for s in acked),
        stored_rows=stored,
        refused_requests=sum(1 for s in sent if s.outcome == REFUSED),
        gate_failed_requests=sum(1 for s in sent if s.outcome == GATE_FAILED),
        unknown_requests=sum(1 for s in sent if s.outcome == UNKNOWN),
        lost=tuple(lost),
        leaked=tuple(leaked),
        seq_rows=int(n),
        seq_max=int(hi or 0),
        seq_min=int(lo or 0),
    )
