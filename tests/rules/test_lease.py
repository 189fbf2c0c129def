"""One acting evaluator per store: acquire, renew, follow, expiry after a crash."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from engine.rules.lease import Lease, current_lease
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
        "from engine.rules.lease import Lease\n"
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
