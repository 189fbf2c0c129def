"""kill -9 the evaluator at random points while actions run: nothing lost, nothing twice.

Each round appends restarts for fresh harnesses (each pattern is an enforced
hold whose notify action appends the fire id to a file and sleeps a little),
starts ``harness evaluate``, waits until a random number of actions have
started, kills it with SIGKILL at a random moment and goes on. A final run
finishes the work. Afterwards: every journal row is still there, the cursor
reached the end, no fire or hold is duplicated, the fires are exactly what a
backtest over the same rows says, and no action ran twice (some may be lost:
at-most-once, by design, and explain shows them without an outcome).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from engine.rules.authority.actions import actions_for_fire
from engine.rules.authority.enforcement import Authority
from engine.rules.authority.lifecycle_run import backtest_with_lifecycle
from engine.rules.evaluation.backtest import resolve_range
from engine.store.db import connect
from tests.rules._lifecycle_util import MIN, Journal, config, starter

ROOT = Path(__file__).resolve().parents[2]
ROUNDS = 30
HARNESSES_PER_ROUND = 4


def lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def test_kill_9_never_loses_rows_or_repeats_fires_or_actions(tmp_path: Path) -> None:
    rng = random.Random(20261130)
    store = tmp_path / "s.db"
    out = tmp_path / "actions.txt"
    cfg = tmp_path / "harness.toml"
    cfg.write_text(
        '[memory.rules]\nenforce = ["restart_same_error"]\n'
        "[memory.rules.actions]\n"
        f'notify = ["sh", "-c", "echo $0 >> {out}; sleep 0.03", "{{fire_id}}"]\n'
    )
    env = {**os.environ, "HARNESS_CONFIG": str(cfg), "PYTHONPATH": str(ROOT)}
    conn = connect(store)
    journal = Journal(conn)
    appended = 0
    kills_mid_action = 0
    for round_ in range(ROUNDS):
        before = conn.execute("SELECT COUNT(*) FROM rule_journal").fetchone()[0]
        journal.advance(2 * 60 * MIN)  # old windows and holds expire on these ticks
        for k in range(HARNESSES_PER_ROUND):
            journal.restarts(f"h{round_}_{k}", 3)
        appended += conn.execute("SELECT COUNT(*) FROM rule_journal").fetchone()[0] - before
        seen = len(lines(out))
        want = seen + rng.randint(0, 3)
        follow = ["--follow"] if round_ % 2 else []  # the leased serve loop every other round
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "engine.cli.harness",
                "evaluate",
                *follow,
                "--store",
                str(store),
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 20
        while proc.poll() is None and len(lines(out)) < want and time.monotonic() < deadline:
            time.sleep(0.002)
        time.sleep(rng.uniform(0, 0.04))
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            kills_mid_action += 1
        _, err = proc.communicate(timeout=20)
        assert b"Traceback" not in err, err.decode()
    final = subprocess.run(
        [sys.executable, "-m", "engine.cli.harness", "evaluate", "--store", str(store)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert final.returncode == 0, final.stderr

    # the store survived every kill intact
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"

    # no journal row lost, and the evaluator reached the end
    total, last = conn.execute("SELECT COUNT(*), MAX(seq) FROM rule_journal").fetchone()
    assert total == appended
    assert conn.execute("SELECT seq FROM rule_cursor WHERE name='live'").fetchone()[0] == last

    # no fire duplicated, and the fires are exactly what a backtest of the same rows gives
    fires = conn.execute(
        "SELECT id, seq, rule, status, effective_level FROM rule_fires ORDER BY seq, rule"
    ).fetchall()
    assert len({(s, r) for _, s, r, _, _ in fires}) == len(fires)
    replay = backtest_with_lifecycle(
        conn,
        starter(),
        resolve_range(conn),
        Authority.from_config(config(enforce=("restart_same_error",))),
    )
    assert [(s, r, st, lvl) for _, s, r, st, lvl in fires] == [
        (f.seq, f.rule, f.status, f.effective_level) for f in replay.fires
    ]
    hold_fires = [fid for fid, _, _, st, lvl in fires if st == "fired" and lvl == "hold"]
    assert len(hold_fires) == ROUNDS * HARNESSES_PER_ROUND

    # one hold per hold fire, never two
    holds = conn.execute("SELECT fire_id FROM rule_holds").fetchall()
    assert sorted(h for (h,) in holds) == sorted(hold_fires)

    # no action ran twice; each one that ran was recorded as started first
    ran = Counter(int(x) for x in lines(out))
    assert ran and max(ran.values()) == 1
    recorded = {fid: actions_for_fire(conn, fid) for fid in hold_fires}
    assert all(len(rows) <= 1 for rows in recorded.values())
    assert all(recorded[fid] for fid in ran)
    lost = [fid for fid, rows in recorded.items() if not rows or rows[0].status == "started"]
    completed = [fid for fid, rows in recorded.items() if rows and rows[0].status == "ok"]
    assert all(ran[fid] == 1 for fid in completed)
    assert len(completed) + len(lost) == len(hold_fires)
    assert kills_mid_action >= ROUNDS // 2, kills_mid_action
    print(
        f"\n{ROUNDS} rounds, {kills_mid_action} kill -9 mid-run, {len(hold_fires)} fires, "
        f"{len(ran)} actions ran ({len(completed)} with a recorded outcome), "
        f"{len(hold_fires) - len(ran)} never ran (lost: at-most-once), 0 ran twice"
    )
