"""Serve under store faults, as a subprocess under hook and OTLP load (issue 18, DESIGN "The gate's
guarantees" 3).

For every fault: while it lasts, hooks answer 503, OTLP answers 503 with
``Retry-After`` and ``/healthz`` answers 503 saying why; when it goes, serve
resumes by itself; afterwards every acknowledged request's rows are in the
store, no refused request has a row, ``seq`` is dense, and the gate acts
again (a hold rule fires on one call and denies the next). A store serve
cannot recover from (corrupt) ends it with a non-zero exit.

Each test prints what it observed (``pytest -s``): acknowledged vs stored,
503 counts, time to notice and to recover.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

from tests.serve._faultfs import ext4_loop, fill, tmpfs
from tests.serve._load import ACKED, REFUSED, UNKNOWN, Audit, Load, Sent, audit, hook_body
from tests.serve.conftest import Serve, fixture, start_serve

#: Rows acknowledged before a fault is injected, and again after it went.
WARM = 20
GATE_HARNESS = "gate01"
#: What SQLite says on a filesystem that answers EIO (a connection that met the
#: error may call the image malformed; a new one cannot open the file).
EIO_REASONS = ("I/O error", "malformed", "unable to open")


def health(serve: Serve) -> tuple[int, dict[str, object]]:
    try:
        status, body, _ = serve.request("/healthz")
    except OSError:
        return 0, {}
    return status, json.loads(body)


def wait_health(serve: Serve, want: int, timeout: float) -> tuple[float, dict[str, object]]:
    """Seconds until /healthz answers ``want`` (AssertionError past ``timeout``), and its body."""
    t0 = time.monotonic()
    while True:
        status, body = health(serve)
        if status == want:
            return time.monotonic() - t0, body
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"/healthz not {want} within {timeout:g}s: {status} {body}")
        time.sleep(0.05)


def wait_reason(
    serve: Serve, reasons: tuple[str, ...], timeout: float, body: dict[str, object]
) -> dict[str, object]:
    """The first 503 body naming one of ``reasons`` (AssertionError past ``timeout``)."""
    deadline = time.monotonic() + timeout
    while not any(r in json.dumps(body) for r in reasons):
        if time.monotonic() > deadline:
            raise AssertionError(f"/healthz never named {reasons} within {timeout:g}s: {body}")
        time.sleep(0.05)
        status, body = health(serve)
        assert status == 503, (status, body)
    return body


def wait_hold(serve: Serve, harness: str, timeout: float) -> None:
    """Return once ``harness`` has an active hold (AssertionError past ``timeout``)."""
    deadline = time.monotonic() + timeout
    while True:
        conn = sqlite3.connect(f"file:{serve.store}?mode=ro", uri=True)
        try:
            held = conn.execute(
                "SELECT count(*) FROM rule_holds WHERE harness = ? AND released_at IS NULL",
                (harness,),
            ).fetchone()[0]
        finally:
            conn.close()
        if held:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"no hold on {harness} within {timeout:g}s of the call")
        time.sleep(0.05)


def assert_gate_acts(serve: Serve) -> None:
    """A hold rule fires on a call and the next call of that harness is denied.

    The hold must appear within 10 s: after a fault the evaluator catches up on
    the rows admitted meanwhile, which on a loaded machine can outlast
    ``gate_wait`` (the gate then answers late, by design: read-your-writes
    within ``gate_wait`` is tests/serve/test_watermark_gate.py's subject).
    """
    post = fixture("PostToolUse")
    post.update(tool_name="Forbidden", tool_input={"x": 1}, tool_use_id="toolu_forbidden")
    status, answer = serve.hook(post, GATE_HARNESS)
    assert status == 200, answer
    wait_hold(serve, GATE_HARNESS, 10.0)
    status, answer = serve.hook(fixture("PreToolUse"), GATE_HARNESS)
    assert status == 200, answer
    output = answer["hookSpecificOutput"]  # type: ignore[index]
    assert output["permissionDecision"] == "deny"
    assert "held by rule serve_test_hold" in output["permissionDecisionReason"]


def assert_all_kept(result: Audit) -> None:
    assert not result.lost, f"acknowledged rows missing: {result.lost[:5]}; {result.summary()}"
    assert not result.leaked, f"rows of refused requests: {result.leaked[:5]}"
    assert result.dense, result.summary()
    assert result.stored_rows >= result.acked_rows


def refused_during(sent: list[Sent], t0: float, t1: float) -> dict[str, int]:
    """503 answers to requests sent while the fault lasted, per kind."""
    out = {"hook": 0, "otlp": 0}
    for s in sent:
        if s.status == 503 and t0 <= s.sent <= t1:
            out[s.kind] += 1
    return out


def through_fault(
    serve: Serve,
    inject: Callable[[], None],
    release: Callable[[], None],
    hold_s: float,
    reasons: tuple[str, ...],
) -> tuple[Load, dict[str, float]]:
    """Run load through one fault; return the load and what was observed (seconds)."""
    load = Load(serve.port)
    with load:
        load.wait_for(lambda: load.count(outcome=ACKED) >= WARM, 30, "acknowledged before")
        t0 = time.monotonic()
        inject()
        noticed, body = wait_health(serve, 503, hold_s)
        # The first 503 may come from whichever part met the fault first (the evaluator's
        # write of a fire says "disk I/O error" when a file turns immutable): while the
        # fault lasts, the store's writer must say what it is.
        body = wait_reason(serve, reasons, max(hold_s - (time.monotonic() - t0), 0.1), body)
        remaining = hold_s - (time.monotonic() - t0)
        load.wait_for(
            lambda: (
                refused_during(load.sent, t0, time.monotonic())["otlp"] > 0
                and refused_during(load.sent, t0, time.monotonic())["hook"] > 0
            ),
            max(remaining, 0.1) + 5,
            "a 503 for both hooks and OTLP while the fault lasts",
        )
        time.sleep(max(0.0, hold_s - (time.monotonic() - t0)))  # the fault's length, not a sync
        t1 = time.monotonic()
        release()
        recovered, _ = wait_health(serve, 200, 30)
        acked = load.count(outcome=ACKED)
        load.wait_for(lambda: load.count(outcome=ACKED) >= acked + WARM, 30, "acknowledged after")
    during = refused_during(load.sent, t0, t1)
    otlp_503 = [s for s in load.sent if s.kind == "otlp" and s.status == 503]
    assert otlp_503 and all(s.retry_after for s in otlp_503), "OTLP 503 without Retry-After"
    assert all(s.status in (200, 503) for s in load.sent if s.status), load.statuses()
    slowest = max(s.answered - s.sent for s in load.sent if s.status)
    observed = {
        "noticed_s": noticed,
        "recovered_s": recovered,
        "hook_503": during["hook"],
        "otlp_503": during["otlp"],
        "slowest_answer_s": slowest,
    }
    return load, observed


def report(name: str, result: Audit, observed: dict[str, float]) -> None:
    figures = ", ".join(
        f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in observed.items()
    )
    print(f"\n[{name}] {result.summary()}; {figures}")


def serve_counter(serve: Serve, name: str) -> int:
    text = serve.request("/metrics")[1].decode()
    m = re.search(rf'^harness_serve_events_total\{{event="{name}"\}} (\d+)$', text, re.M)
    return int(m.group(1)) if m else 0


# -- a locked store -------------------------------------------------------------


def test_a_write_lock_held_12s_then_released(tmp_path: Path) -> None:
    serve = start_serve(tmp_path)
    holder = sqlite3.connect(serve.store, isolation_level=None, timeout=30)
    try:
        load, observed = through_fault(
            serve,
            lambda: holder.execute("BEGIN IMMEDIATE"),
            lambda: holder.execute("ROLLBACK"),
            12.0,
            ("database is locked",),
        )
        assert_gate_acts(serve)
        result = audit(serve.store, load.sent)
        report("lock 12s", result, observed)
        assert_all_kept(result)
        # A request is answered within its acknowledge timeout plus one commit attempt.
        assert observed["slowest_answer_s"] < 5.0, observed
        # Metrics and doctor count every "not stored" answer.
        refused = sum(1 for s in load.sent if s.status == 503)
        assert serve_counter(serve, "store_unavailable") == refused
        said = f"{refused} request(s) not stored: the store could not be written"
        deadline = time.monotonic() + 10  # serve copies its counters to the store every second
        while True:
            doctor = serve.harness_cli("doctor", "--store", str(serve.store))
            if said in doctor.stdout or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert said in doctor.stdout and "[warn ] serve" in doctor.stdout, doctor.stdout
    finally:
        holder.close()
        assert serve.stop() == 0


# -- a full disk ---------------------------------------------------------------------


def test_a_full_filesystem_then_freed(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "small", "16m") as where:
        serve = start_serve(tmp_path, store=where / "journal.db")
        filler: list[Path] = []
        try:
            load, observed = through_fault(
                serve,
                lambda: filler.append(fill(where)),
                lambda: filler[0].unlink(),
                4.0,
                ("full",),
            )
            assert_gate_acts(serve)
            result = audit(serve.store, load.sent)
            report("disk full 4s", result, observed)
            assert_all_kept(result)
        finally:
            assert serve.stop() == 0


# -- read-only, I/O errors -----------------------------------------------------------


def test_a_read_only_store_then_writable(tmp_path: Path) -> None:
    with ext4_loop(tmp_path) as fs:
        serve = start_serve(tmp_path, store=fs.where / "journal.db")
        files = ("journal.db", "journal.db-wal")
        try:
            load, observed = through_fault(
                serve,
                lambda: fs.immutable(*files, on=True),
                lambda: fs.immutable(*files, on=False),
                4.0,
                ("cannot write the store", "readonly"),
            )
            assert_gate_acts(serve)
            result = audit(serve.store, load.sent)
            report("read-only 4s", result, observed)
            assert_all_kept(result)
        finally:
            assert serve.stop() == 0


def test_io_errors_then_the_disk_is_back(tmp_path: Path) -> None:
    with ext4_loop(tmp_path) as fs:
        serve = start_serve(tmp_path, store=fs.where / "journal.db")
        try:
            load, observed = through_fault(serve, fs.shutdown, fs.remount_fresh, 4.0, EIO_REASONS)
            assert_gate_acts(serve)
            result = audit(serve.store, load.sent)
            report("I/O error 4s", result, observed)
            assert_all_kept(result)
        finally:
            assert serve.stop() == 0


# -- kill -9, SIGTERM ------------------------------------------------------------------


def test_kill_9_three_times_under_load_loses_nothing_acknowledged(tmp_path: Path) -> None:
    sent: list[Sent] = []
    for k in range(3):
        serve = start_serve(tmp_path)
        load = Load(serve.port, tag=f"K{k}-").start()
        try:
            want = load.count(outcome=ACKED) + 50 + 25 * k  # a different moment each time
            load.wait_for(lambda: load.count(outcome=ACKED) >= want, 30, "load")  # noqa: B023
            serve.proc.send_signal(signal.SIGKILL)
            serve.proc.wait(10)
        finally:
            load.stop()
            sent.extend(load.sent)
    serve = start_serve(tmp_path)  # a restart on the killed store: recovery, then the gate
    try:
        assert_gate_acts(serve)
    finally:
        assert serve.stop() == 0
    result = audit(serve.store, sent)
    report("kill -9 x3", result, {"unanswered": float(result.unknown_requests)})
    assert_all_kept(result)
    assert result.acked_requests >= 3 * 50


def test_sigterm_during_a_6s_lock_commits_everything_acknowledged(tmp_path: Path) -> None:
    serve = start_serve(tmp_path)
    holder = sqlite3.connect(serve.store, isolation_level=None, timeout=30)
    load = Load(serve.port)
    try:
        with load:
            load.wait_for(lambda: load.count(outcome=ACKED) >= WARM, 30, "acknowledged before")
            holder.execute("BEGIN IMMEDIATE")
            locked = time.monotonic()
            wait_health(serve, 503, 6)
            # SIGTERM while requests wait for their commit (one sent just now waits 2 s).
            load.wait_for(lambda: load.count(outcome=REFUSED) > 0, 6, "a 503")
            now = time.monotonic()
            load.wait_for(
                lambda: any(s.status == 0 for s in load.since(now)), 3, "a request waiting"
            )
            serve.proc.send_signal(signal.SIGTERM)
            stopping = time.monotonic()
            time.sleep(max(0.0, 6.0 - (time.monotonic() - locked)))  # the lock's length
            holder.execute("ROLLBACK")
            code = serve.proc.wait(30)
    finally:
        holder.close()
        if serve.proc.poll() is None:
            serve.proc.kill()
    assert code == 0
    result = audit(serve.store, load.sent)
    assert_all_kept(result)
    # Every request in flight at SIGTERM was answered (none cut off by the shutdown).
    in_flight = [s for s in load.sent if s.sent < stopping and (s.answered or 1e18) > stopping]
    assert in_flight and not [s.run for s in in_flight if s.outcome == UNKNOWN]
    log = serve.log.read_text()
    m = re.search(r"stopped; (\d+) row\(s\) stored, (\d+) not stored", log)
    assert m, log
    said_stored, said_not = int(m.group(1)), int(m.group(2))
    conn = sqlite3.connect(serve.store)
    try:
        stored = conn.execute("SELECT COUNT(*) FROM rule_journal WHERE kind != 'tick'").fetchone()[
            0
        ]
    finally:
        conn.close()
    refused = sum(s.rows for s in load.sent if s.outcome == REFUSED and "not stored" in s.text)
    unanswered_unstored = sum(
        s.rows for s in load.sent if s.outcome == UNKNOWN and not _stored(serve.store, s.run)
    )
    report(
        "SIGTERM in a 6s lock",
        result,
        {
            "exit_stored": said_stored,
            "exit_not_stored": said_not,
            "refused_rows": refused,
            "in_flight_at_sigterm": len(in_flight),
        },
    )
    assert said_stored == stored
    assert refused <= said_not <= refused + unanswered_unstored


def _stored(store: Path, run: str) -> bool:
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        return (
            conn.execute("SELECT 1 FROM rule_journal WHERE run = ?", (run,)).fetchone() is not None
        )
    finally:
        conn.close()


# -- a corrupt store ----------------------------------------------------------------------


def test_a_corrupt_store_is_unhealthy_and_serve_exits_for_a_restart(tmp_path: Path) -> None:
    serve = start_serve(tmp_path)
    try:
        for n in range(30):
            status, _ = serve.hook(json.loads(hook_body(f"c{n}", n, post=True)), "c01")
            assert status == 200
        conn = sqlite3.connect(serve.store, isolation_level=None)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = conn.execute("PRAGMA page_size").fetchone()[0]
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.close()
        with open(serve.store, "r+b") as fh:  # every page but the first: garbage
            fh.seek(page)
            fh.write(os.urandom(page * (pages - 1)))
        _, body = wait_health(serve, 503, 10)
        assert "cannot read the store" in json.dumps(body) or "stopped" in json.dumps(body)
        serve.hook(json.loads(hook_body("c-late", 99, post=True)), "c01")
        code = serve.proc.wait(15)
    finally:
        if serve.proc.poll() is None:
            serve.proc.kill()
    assert code != 0
    log = serve.log.read_text()
    assert "exiting for a restart" in log and "Traceback" not in log, log
