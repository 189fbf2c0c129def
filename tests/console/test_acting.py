"""Nobody acts by surprise: the console acts only with --act, and its header says who acts.

DESIGN, "The gate's guarantees" 5, and issue 19 P2.5: a console opened on a
real store watches (its evaluator takes no lease, stores no fires, creates no
holds); ``--act`` (implied by ``--demo``) lets it act when nobody else does,
and it hands over to serve. The header names the actor and its rule set, or
says nobody is acting.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from console.app import HarnessConsole
from console.context import ConsoleContext
from console.widgets.header import ConsoleHeader, cut_left
from engine.cli.harness import main
from engine.config import HarnessConfig
from engine.rules.authority.lease import Lease, current_lease, ruleset_digest
from engine.store.db import connect
from engine.views.acting import Acting, acting_on, serve_acting, short_digest, who_acts
from engine.views.live import demo_config
from engine.views.rules import load_console_rules
from engine.views.session import ConsoleOptions
from tests.console.conftest import END_MS, START_MS, until


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _unevaluated_store(tmp_path: Path) -> tuple[Path, int]:
    """A day of fleet rows that no evaluator has seen yet; (store, rows)."""
    from engine.fleet.sim import write_fleet

    store = tmp_path / "backlog.db"
    conn = connect(store)
    write_fleet(conn, days=1, start_ms=START_MS, end_ms=END_MS, validate=False)
    rows = int(conn.execute("SELECT MAX(seq) FROM rule_journal").fetchone()[0])
    conn.close()
    return store, rows


def _app(store: Path, policy_dir: Path, *, act: bool) -> HarnessConsole:
    options = ConsoleOptions(
        store_path=store, act=act, policy_dir=policy_dir, config=demo_config(HarnessConfig())
    )
    context = ConsoleContext(options, clock=lambda: END_MS, evaluate=True, cursor_blink=False)
    return HarnessConsole(context, initial="fleet", watch_files=False)


def _header(app: HarnessConsole) -> str:
    return app.query_one(ConsoleHeader).acting


def _fires(store: Path) -> int:
    conn = connect(store)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM rule_fires").fetchone()[0])
    finally:
        conn.close()


def _write_lease(store: Path, holder: str, pid: int, role: str, ruleset: str | None) -> None:
    conn = connect(store)
    conn.execute(
        "INSERT OR REPLACE INTO evaluator_lease (id, holder, pid, host, acquired_at, renewed_at,"
        " expires_at, role, ruleset) VALUES (1, ?, ?, ?, 0, 0, ?, ?, ?)",
        (holder, pid, socket.gethostname(), 2**62, role, ruleset),
    )
    conn.close()


async def test_without_act_the_console_only_watches(tmp_path: Path, policy_dir: Path) -> None:
    store, rows = _unevaluated_store(tmp_path)
    app = _app(store, policy_dir, act=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: _header(app).startswith("nobody is acting"))
        assert f"{rows:,} rows wait for an actor" in _header(app)
        await pilot.pause(1.5)  # an acting console would have taken the lease by now
        conn = connect(store)
        assert current_lease(conn) is None
        conn.close()
        assert _fires(store) == 0


async def test_with_act_the_console_acts_and_says_so(tmp_path: Path, policy_dir: Path) -> None:
    store, _rows = _unevaluated_store(tmp_path)
    app = _app(store, policy_dir, act=True)
    config = demo_config(HarnessConfig())
    digest = ruleset_digest(load_console_rules(config, policy_dir).rules, config.rules)
    async with app.run_test(size=(160, 45)) as pilot:
        await until(pilot, lambda: "(this console) acting" in _header(app))
        conn = connect(store)
        info = current_lease(conn)
        assert info is not None and info.role == "console" and info.ruleset == digest
        assert f"rules {digest[:19]}…" in _header(app)
        await until(pilot, lambda: _fires(store) > 0)
        # serve comes back: it takes the lease from the console, which follows
        serve = Lease(conn, holder=f"serve@{socket.gethostname()}:{os.getpid()}:back")
        assert serve.try_acquire()
        await until(pilot, lambda: _header(app).startswith("serve@"), timeout=10)
        await pilot.pause(0.5)
        info = current_lease(conn)
        assert info is not None and info.holder == serve.holder
        conn.close()


async def test_a_console_started_while_serve_restarts_does_not_act(
    tmp_path: Path, policy_dir: Path
) -> None:
    """Serve's process is gone but its row is there; the console leaves it; serve takes it back."""
    store, _rows = _unevaluated_store(tmp_path)
    dead = _dead_pid()
    _write_lease(store, f"serve@{socket.gethostname()}:{dead}:old", dead, "serve", None)
    app = _app(store, policy_dir, act=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: _header(app).startswith("serve@"))
        await pilot.pause(1.5)
        conn = connect(store)
        info = current_lease(conn)
        assert info is not None and info.pid == dead  # untouched by the console
        assert _fires(store) == 0
        back = Lease(conn, holder=f"serve@{socket.gethostname()}:{os.getpid()}:new")
        assert back.try_acquire()  # the dead holder's row does not keep serve out
        conn.close()


def test_who_acts_reads_the_lease_and_the_backlog(tmp_path: Path) -> None:
    store, rows = _unevaluated_store(tmp_path)
    assert acting_on(store) == Acting(waiting=rows)
    assert acting_on(store).line() == f"nobody is acting · {rows:,} rows wait for an actor"  # type: ignore[union-attr]
    digest = "sha256:" + "ab" * 32
    _write_lease(store, "serve@box:1:x", os.getppid(), "serve", digest)
    acting = acting_on(store)
    assert acting is not None and acting.role == "serve" and not acting.mine
    assert (
        acting.line()
        == f"serve@{socket.gethostname()}:{os.getppid()} acting, rules sha256:abababababab…"
    )
    assert serve_acting(store)
    conn = connect(store)
    assert who_acts(conn, now_ms=2**62).who is None  # expired: nobody
    conn.close()
    assert acting_on(tmp_path / "missing.db") is None and not serve_acting(tmp_path / "x.db")
    assert short_digest(None) == "not recorded" and short_digest("sha256:abc") == "sha256:abc"


def test_header_keeps_who_acts_whole_and_cuts_the_path_visibly() -> None:
    assert cut_left("/tmp/harness-demo-x/journal.db", 12) == "…/journal.db"
    assert cut_left("short", 12) == "short"


@pytest.mark.parametrize("kind", ["directory", "not sqlite"])
def test_a_store_that_cannot_be_opened_is_exit_2(
    tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """P2.2: no screen that stacks a notification every 2 s; one located error, exit 2."""
    path = tmp_path / "store"
    if kind == "directory":
        path.mkdir()
    else:
        path.write_text("not a store\n", encoding="utf-8")
    assert main(["console", "--store", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and ("directory" in err or "not a store" in err)


def test_act_is_a_flag_and_demo_implies_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import shutil

    import console.app

    seen: list[ConsoleOptions] = []
    monkeypatch.setattr(console.app, "run_console", lambda o: seen.append(o) or 0)
    store = tmp_path / "j.db"
    connect(store).close()
    assert main(["console", "--store", str(store)]) == 0
    assert main(["console", "--store", str(store), "--act"]) == 0
    assert main(["console", "--demo"]) == 0
    assert [o.act for o in seen] == [False, True, True]
    assert seen[2].temp_dir is not None
    shutil.rmtree(seen[2].temp_dir)
