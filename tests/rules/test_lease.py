"""One acting evaluator per store: acquire, renew, follow, expiry after a crash."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.rules.authority.lease import Lease, current_lease
from engine.store.db import connect


class Clock:
    def __init__(self, t: int = 1_000_000) -> None:
        self.t = t

    def __call__(self) -> int:
        return self.t


def test_second_evaluator_follows_until_the_first_lease_expires(tmp_path: Path) -> None:
    clock = Clock()
    a = Lease(connect(tmp_path / "s.db"), ttl_ms=10_000, holder="a", clock=clock)
    b = Lease(connect(tmp_path / "s.db"), ttl_ms=10_000, holder="b", clock=clock)
    assert a.try_acquire() and not b.try_acquire()
    clock.t += 9_000
    assert a.try_acquire()  # renewed: expiry moves
    clock.t += 9_000
    assert not b.try_acquire()
    info = current_lease(b.conn)
    assert info is not None and info.holder == "a" and info.expires_at == clock.t + 1_000
    clock.t += 1_000  # a stops renewing (crashed): b takes over at expiry
    assert b.try_acquire()
    assert not a.still_held() and not a.try_acquire()


def test_release_lets_a_follower_take_over_at_once(tmp_path: Path) -> None:
    clock = Clock()
    a = Lease(connect(tmp_path / "s.db"), holder="a", clock=clock)
    b = Lease(connect(tmp_path / "s.db"), holder="b", clock=clock)
    assert a.try_acquire()
    a.release()
    assert b.try_acquire()


def test_renew_if_due_writes_only_after_a_third_of_the_ttl(tmp_path: Path) -> None:
    clock = Clock()
    a = Lease(connect(tmp_path / "s.db"), ttl_ms=9_000, holder="a", clock=clock)
    assert a.renew_if_due()
    first = current_lease(a.conn)
    clock.t += 2_000
    assert a.renew_if_due()
    assert current_lease(a.conn) == first
    clock.t += 2_000
    assert a.renew_if_due()
    renewed = current_lease(a.conn)
    assert renewed is not None and first is not None and renewed.expires_at > first.expires_at
    assert renewed.acquired_at == first.acquired_at


def test_a_killed_holder_loses_the_lease_when_it_expires(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    connect(store).close()
    code = (
        "import sys, time\n"
        "from engine.store.db import connect\n"
        "from engine.rules.authority.lease import Lease\n"
        f"l = Lease(connect({str(store)!r}), ttl_ms=600, holder='victim')\n"
        "assert l.try_acquire()\n"
        "print('held', flush=True)\n"
        "while True:\n    l.renew_if_due(); time.sleep(0.05)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, cwd=Path(__file__).parents[2]
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"held"
        follower = Lease(connect(store), ttl_ms=600, holder="follower")
        time.sleep(0.3)
        assert not follower.try_acquire()  # alive and renewing
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 5
        while not follower.try_acquire():
            assert time.monotonic() < deadline, "lease never expired"
            time.sleep(0.05)
        info = current_lease(follower.conn)
        assert info is not None and info.holder == "follower"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_holder_whose_lease_was_taken_over_commits_nothing(tmp_path: Path) -> None:
    import pytest

    from engine.rules.authority.lease import LeaseLost
    from engine.rules.authority.lifecycle_run import open_live
    from tests.rules._lifecycle_util import MIN, Journal, config, starter

    clock = Clock()
    conn_a = connect(tmp_path / "s.db")
    a = Lease(conn_a, ttl_ms=10_000, holder="a", clock=clock)
    b = Lease(connect(tmp_path / "s.db"), ttl_ms=10_000, holder="b", clock=clock)
    assert a.try_acquire()
    j = Journal(conn_a)
    j.restarts("h1", 3)
    evaluator, _ = open_live(conn_a, starter(), config(), lease=a)
    clock.t += 11_000  # a paused past its expiry; b takes over
    assert b.try_acquire()
    with pytest.raises(LeaseLost):
        evaluator.step()
    assert conn_a.execute("SELECT COUNT(*) FROM rule_fires").fetchone()[0] == 0
    assert conn_a.execute("SELECT COUNT(*) FROM rule_cursor").fetchone()[0] == 0
    j.advance(MIN)


def test_two_following_evaluators_act_once_and_the_survivor_takes_over(tmp_path: Path) -> None:
    from collections import Counter

    from tests.rules._lifecycle_util import Journal

    store = tmp_path / "s.db"
    out = tmp_path / "notified.txt"
    cfg = tmp_path / "harness.toml"
    cfg.write_text(
        '[memory.rules]\nenforce = ["restart_same_error"]\n[memory.rules.actions]\n'
        f'notify = ["sh", "-c", "echo $0 >> {out}", "{{fire_id}}"]\n'
    )
    conn = connect(store)
    journal = Journal(conn)
    env = {**os.environ, "HARNESS_CONFIG": str(cfg)}
    root = Path(__file__).parents[2]
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "engine.cli.harness",
                "evaluate",
                "--follow",
                "--store",
                str(store),
            ],
            cwd=root,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for _ in range(2)
    ]

    def wait_for(cond: object, what: str) -> None:
        deadline = time.monotonic() + 20
        while not cond():  # type: ignore[operator]
            assert time.monotonic() < deadline, what
            time.sleep(0.05)

    def caught_up() -> bool:
        last = conn.execute("SELECT MAX(seq) FROM rule_journal").fetchone()[0]
        cur = conn.execute("SELECT seq FROM rule_cursor WHERE name='live'").fetchone()
        return cur is not None and cur[0] == last

    def notified() -> Counter[str]:
        return Counter(out.read_text().split()) if out.exists() else Counter()

    try:
        for k in range(4):
            journal.restarts(f"a{k}", 3)
        wait_for(caught_up, "no evaluator caught up")
        wait_for(lambda: len(notified()) == 4, "notify actions did not all run")
        info = current_lease(conn)
        assert info is not None
        holder = next(p for p in procs if p.pid == info.pid)
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
        for k in range(3):
            journal.restarts(f"b{k}", 3)
        wait_for(caught_up, "the follower never took over")
        wait_for(lambda: len(notified()) == 7, "actions after takeover did not run")
        survivor = next(p for p in procs if p is not holder)
        after = current_lease(conn)
        assert after is not None and after.pid == survivor.pid
        counts = notified()
        assert max(counts.values()) == 1
        fires = conn.execute("SELECT COUNT(*) FROM rule_fires WHERE status='fired'").fetchone()[0]
        assert fires == 7
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            _, err = p.communicate(timeout=20)
            assert b"Traceback" not in err, err.decode()


# -- who acts: role, rule set, hand-over (DESIGN, "The gate's guarantees" 5) ------------


def _dead_pid() -> int:
    """The pid of a process that has exited (so it is not alive on this host)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_the_row_records_role_and_rule_set(tmp_path: Path) -> None:
    from engine.rules.authority.lease import ruleset_digest
    from tests.rules._lifecycle_util import config, starter

    rules = starter(("restart_same_error", "file_churn"))
    digest = ruleset_digest(rules, config().rules)
    serve = Lease(connect(tmp_path / "s.db"), holder="serve@box:7:ab12cd34", ruleset=digest)
    assert serve.role == "serve"  # serve's own call, read from its holder's prefix
    assert serve.try_acquire()
    info = current_lease(serve.conn)
    assert info is not None and (info.role, info.ruleset) == ("serve", digest)
    assert info.who == f"serve@{info.host}:{os.getpid()}"
    other = ruleset_digest(rules[:1], config().rules)
    serve.set_ruleset(other)  # the acting process reloaded its rules
    info = current_lease(serve.conn)
    assert info is not None and info.ruleset == other
    evaluate = Lease(connect(tmp_path / "s.db"), role="evaluate")
    assert evaluate.holder.startswith("evaluate@") and not evaluate.try_acquire()
    evaluate.set_ruleset(digest)  # not held: nothing written
    info = current_lease(serve.conn)
    assert info is not None and info.ruleset == other
    with pytest.raises(ValueError, match="not one of"):
        Lease(serve.conn, role="janitor")


def test_the_digest_follows_meaning_and_authority_not_order(tmp_path: Path) -> None:
    from engine.rules.authority.lease import ruleset_digest
    from tests.rules._lifecycle_util import config, rule_from_text, starter

    rules = starter(("restart_same_error", "file_churn"))
    base = ruleset_digest(rules, config().rules)
    assert base.startswith("sha256:") and len(base) == len("sha256:") + 64
    assert ruleset_digest(list(reversed(rules)), config().rules) == base
    assert ruleset_digest(rules[:1], config().rules) != base
    enforce = ruleset_digest(rules, config(enforce=("restart_same_error",)).rules)
    disable = ruleset_digest(rules, config(disable=("file_churn",)).rules)
    assert len({base, enforce, disable}) == 3
    text = (
        "name: x\non: run_event\nwhen: event.type == 'restart'\nlevel: notify\n"
        "target: harness\nmessage: m\n"
    )
    one = rule_from_text(tmp_path, text)
    commented = rule_from_text(tmp_path, "# a comment changes nothing\n" + text)
    edited = rule_from_text(tmp_path, text.replace("'restart'", "'crash'"))
    assert ruleset_digest([one], config().rules) == ruleset_digest([commented], config().rules)
    assert ruleset_digest([one], config().rules) != ruleset_digest([edited], config().rules)


def test_a_console_hands_the_lease_to_serve_never_the_reverse(tmp_path: Path) -> None:
    clock = Clock()
    console = Lease(connect(tmp_path / "s.db"), role="console", clock=clock)
    serve = Lease(connect(tmp_path / "s.db"), holder="serve@h:1:x", clock=clock)
    evaluate = Lease(connect(tmp_path / "s.db"), role="evaluate", clock=clock)
    assert console.try_acquire()
    assert serve.try_acquire()  # a live console lease does not keep serve out
    assert not console.still_held() and not console.try_acquire()
    assert not evaluate.try_acquire()  # one headless actor does not take from another
    info = current_lease(serve.conn)
    assert info is not None and info.role == "serve"


def test_a_dead_holder_on_this_host_frees_the_lease_at_once(tmp_path: Path) -> None:
    """Serve restarting: the old serve's unexpired row does not keep the new one out."""
    import socket

    conn = connect(tmp_path / "s.db")
    dead = _dead_pid()
    conn.execute(
        "INSERT INTO evaluator_lease (id, holder, pid, host, acquired_at, renewed_at, expires_at,"
        " role) VALUES (1, 'serve@old', ?, ?, 0, 0, ?, 'serve')",
        (dead, socket.gethostname(), 2**62),
    )
    assert Lease(connect(tmp_path / "s.db"), holder="serve@new:2:y").try_acquire()
    info = current_lease(conn)
    assert info is not None and info.holder == "serve@new:2:y" and info.pid == os.getpid()


def test_a_store_from_before_migration_8_still_has_a_lease(tmp_path: Path) -> None:
    from engine.store.migrations import migrate
    from engine.views.store_schema import FULL_SCHEMA

    raw = sqlite3.connect(tmp_path / "old.db", isolation_level=None)
    assert migrate(raw, FULL_SCHEMA[:7]) == 7
    lease = Lease(raw, holder="serve@h:1:x", ruleset="sha256:" + "0" * 64)
    assert lease.try_acquire()
    info = current_lease(raw)
    assert info is not None and info.role == "serve" and info.ruleset is None
    lease.set_ruleset("sha256:" + "1" * 64)  # no column: nothing to record, no error
    raw.close()
    conn = connect(tmp_path / "old.db")  # the full schema adds the columns
    info = current_lease(conn)
    assert info is not None and info.role == "serve"


def test_rows_admitted_while_nobody_acted_are_evaluated_when_an_actor_returns(
    tmp_path: Path,
) -> None:
    """The watermark: an actor that comes back starts from the live cursor, not from now."""
    import threading

    from engine.rules.authority.lease import serve
    from engine.rules.authority.lifecycle_run import open_live
    from tests.rules._lifecycle_util import Journal, config, starter

    conn = connect(tmp_path / "s.db", check_same_thread=False)
    j = Journal(conn)
    j.restarts("h1", 3)
    actor = Lease(conn, role="evaluate")
    stop = threading.Event()
    evaluator, _ = open_live(conn, starter(), config(), lease=actor)
    assert actor.try_acquire()
    evaluator.run_until_idle()
    assert conn.execute("SELECT COUNT(*) FROM rule_fires").fetchone()[0] == 1
    actor.release()  # the actor goes away (serve restarting): nobody acts
    watermark = conn.execute("SELECT seq FROM rule_cursor WHERE name = 'live'").fetchone()[0]
    j.advance(2 * 60 * 60_000)  # the first hold's window passes
    admitted = j.restarts("h2", 3) + j.restarts("h3", 3)
    assert min(admitted) > watermark
    assert conn.execute("SELECT COUNT(*) FROM rule_fires").fetchone()[0] == 1
    head = conn.execute("SELECT MAX(seq) FROM rule_journal").fetchone()[0]
    back = Lease(conn, holder="serve@h:9:z")

    def caught_up(result: object) -> None:
        cur = conn.execute("SELECT seq FROM rule_cursor WHERE name = 'live'").fetchone()[0]
        if cur >= head:
            stop.set()

    serve(
        back, lambda: open_live(conn, starter(), config(), lease=back)[0], stop, on_step=caught_up
    )
    fired = conn.execute(
        "SELECT target, seq FROM rule_fires WHERE status = 'fired' ORDER BY seq"
    ).fetchall()
    assert [t for t, _ in fired] == ["h1", "h2", "h3"]
    assert all(seq > watermark for _t, seq in fired[1:])


def test_evaluate_follow_reloads_its_rules_and_records_the_new_digest(tmp_path: Path) -> None:
    """DESIGN 5: the acting process reloads rule files on change, keeping the last good set."""
    from engine.config import HarnessConfig
    from engine.rules.authority.lease import ruleset_digest
    from engine.rules.language.loader import default_sources, load_rules

    store, policy = tmp_path / "s.db", tmp_path / "policy"
    policy.mkdir()
    connect(store).close()
    env = {**os.environ, "HARNESS_CONFIG": str(tmp_path / "absent.toml")}
    argv = ["evaluate", "--follow", "--store", str(store), "--policy", str(policy)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "engine.cli.harness", *argv],
        cwd=Path(__file__).parents[2],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )

    def digest_now() -> str | None:
        info = current_lease(connect(store))
        return None if info is None else info.ruleset

    def expected() -> str:
        config = HarnessConfig()
        loaded = load_rules(default_sources((), [policy]), config.rules)
        return ruleset_digest(loaded.rules, config.rules)

    def wait_for(what: str, check: object) -> None:
        deadline = time.monotonic() + 30
        while not check():  # type: ignore[operator]
            assert proc.poll() is None and time.monotonic() < deadline, what
            time.sleep(0.05)

    try:
        first = expected()
        wait_for("evaluate --follow never took the lease", lambda: digest_now() == first)
        rule = policy / "extra_rule.yml"
        rule.write_text(
            "name: extra_rule\non: run_event\nwhen: event.type == 'restart'\nlevel: notify\n"
            "target: harness\nmessage: m\n",
            encoding="utf-8",
        )
        second = expected()
        assert second != first
        wait_for("the new rule file was not reloaded", lambda: digest_now() == second)
        rule.write_text("name: extra_rule\non: run_event\nwhen: event.nope ==\n", encoding="utf-8")
        time.sleep(1.5)  # a broken edit: the last good version stays (the digest does not move)
        assert digest_now() == second
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "rules reloaded" in err and "last good version kept" in err
    assert current_lease(connect(store)) is None  # released on SIGTERM
