"""The simulated fleet ``--demo`` runs: its history, its live replay, its policy and spec.

The demo writes the simulator's history into a temporary store, then replays
one more simulated day compressed in wall-clock time (``speed`` simulated
seconds per second), so the starter pack's planted patterns fire within
seconds of opening. It enforces one rule in memory only (never in any
harness.toml), so that a hold can be seen. A demo left open prunes its oldest
rows so its store levels off.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from engine.config import HarnessConfig
from engine.fleet.sim import DAY_MS, HOUR_MS, MINUTE_MS, day_rows, write_fleet
from engine.journal.rows import InsertRow
from engine.journal.writer import Committer
from engine.store.db import connect
from engine.views.rules import load_console_rules
from engine.views.store_schema import register_full_schema

# The demo opens stores for the whole program's schema.
register_full_schema()

#: The rule the demo enforces in memory (never written to any harness.toml)
#: so that a hold appears; the operator's real config is untouched.
DEMO_ENFORCE = "restart_same_error"
#: The replayed day: its index is 1 mod 3 (restart burst from 13:03) and even
#: (verify failures, collisions). The replay starts at 13:03, just before the
#: burst's first restart, so its third (the hold) comes some 23 simulated
#: minutes, about 3.5 s at the demo's speed, after the live feed starts.
DEMO_DAY = 4
DEMO_START_OFFSET_MS = 13 * HOUR_MS + 3 * MINUTE_MS
DEMO_OVERRIDE = """\
# Demo policy override of a starter rule: new content, so it runs in shadow.
name: loop_guard_repeated
description: Demo override, stricter than the starter rule (two trips in 6 hours).
on: run_event
when: >-
  event.type == "loop_stopped" &&
  count({"harness": event.harness, "type": "loop_stopped"}, duration("6h")) >= 2
level: notify
target: harness
cooldown: 1h
message: "{harness} tripped the loop guard twice (run {run})"
"""


#: The skill spec ``--demo`` opens in Decide (written for this project: an
#: operator's requests about the fleet, routed to the pane or command that answers them).
DEMO_SPEC = """\
# Demo skill spec shipped with `harness console --demo` (a temporary copy).
schema: skillspec/v0
id: harness.operator
title: Fleet operator requests
description: Routes an operator's request about the fleet to the view that answers it.

routes:
  - id: explain_fire
    label: Explain a fire
    rank: 1
    description: Step through why a rule fired (Fires, enter).
  - id: review_hold
    label: Review a hold
    rank: 2
    description: Look at the fire behind a hold before releasing it (Holds, enter).
  - id: backtest_rule
    label: Backtest a rule
    rank: 3
    description: Run a rule over recorded history before enforcing it.

rules:
  - id: why_questions_explain
    when:
      user_says_any: ["why did", "what fired", "explain"]
    prefer: explain_fire
    reason: A fire's explanation recomputes its aggregates from the journal.
  - id: release_needs_review
    when:
      user_says_any: ["release", "unblock", "held"]
    prefer: review_hold
    forbid: [release_without_reason]
    reason: A hold is released with a reason, after reading the fire that made it.
  - id: enforce_needs_backtest
    when:
      user_says_any: ["enforce", "promote", "turn on"]
    prefer: backtest_rule
    forbid: [enforce_untested_rule]
    reason: Enforcing acts on real runs; see what it would have held first.

tests:
  - name: why goes to explain
    input: why did h05 stop
    expect:
      route: explain_fire
  - name: releasing is reviewed first
    input: please release the hold on h05
    expect:
      route: review_hold
      forbid: [release_without_reason]
"""


def _wall_ms() -> int:
    return int(time.time() * 1000)


def demo_config(base: HarnessConfig) -> HarnessConfig:
    """``base`` plus the demo's in-memory enforce entry (nothing is written)."""
    rules = base.rules.replace(enforce=tuple(dict.fromkeys((*base.rules.enforce, DEMO_ENFORCE))))
    return base.replace(rules=rules)


def write_demo_policy(directory: Path) -> Path:
    """Write the demo's policy override (a rule that shadows) into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "loop_guard_repeated.yml").write_text(DEMO_OVERRIDE, encoding="utf-8")
    return directory


def write_demo_spec(directory: Path) -> Path:
    """Write the demo's skill spec into ``directory`` so Decide works out of the box."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "operator.spec.yml"
    path.write_text(DEMO_SPEC, encoding="utf-8")
    return path


def write_demo_history(store: Path, now_ms: int, *, days: int = 2, seed: int = 7) -> int:
    """The simulator's last ``days`` full days before today, into ``store``; rows written."""
    start = (now_ms // DAY_MS) * DAY_MS - days * DAY_MS
    conn = connect(store)
    try:
        result = write_fleet(conn, days=days, seed=seed, start_ms=start, validate=False)
    finally:
        conn.close()
    return int(getattr(result, "admitted", 0)) + int(getattr(result, "ticks", 0))


def prepare_demo_store(store: Path, now_ms: int, policy_dir: Path | None) -> int:
    """--demo's history (the last full day), written and evaluated to its end; rows written.

    The console's embedded evaluator then starts at the history's end, so the
    first live rows fire at once, and it restores its windows and lifecycle
    from the store as after any restart (live equals backtest across restarts).
    """
    from engine.config import load_config
    from engine.rules.authority.lifecycle_run import open_live

    rows = write_demo_history(store, now_ms, days=1)
    config = demo_config(load_config())
    conn = connect(store)
    try:
        evaluator, _hooks = open_live(conn, load_console_rules(config, policy_dir).rules, config)
        evaluator.run_until_idle()
    finally:
        conn.close()
    return rows


_DEMO_CHILD = (
    "import sys\n"
    "from pathlib import Path\n"
    "from engine.config import load_config\n"
    "from engine.views.store_schema import register_full_schema\n"
    "from engine.views import demo\n"
    "register_full_schema()\n"
    "store, policy = Path(sys.argv[2]), (Path(sys.argv[4]) if sys.argv[4] else None)\n"
    "if sys.argv[1] == 'prepare':\n"
    "    print(demo.prepare_demo_store(store, int(sys.argv[3]), policy))\n"
    "else:\n"
    "    print(demo.mine_demo(store, demo.demo_config(load_config()), policy))\n"
)


def _demo_child(*args: str) -> int:
    """Run one demo step in a child process; its printed count.

    Simulating, evaluating and mining days of history is seconds of
    pure-Python work: in a thread of the console it held the GIL against the
    screen and the embedded evaluator, so tabs took a second to switch and the
    first live fire came late. A child has its own interpreter (and this
    machine a second core).
    """
    import subprocess
    import sys

    from engine.errors import InputError

    done = subprocess.run(
        [sys.executable, "-c", _DEMO_CHILD, *args], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise InputError(f"{args[1]}: the demo's {args[0]} step failed: {last}", title="Demo")
    return int(done.stdout.split()[-1])


def prepare_demo_store_apart(store: Path, now_ms: int, policy_dir: Path | None) -> int:
    """:func:`prepare_demo_store` in a child process; rows written."""
    return _demo_child("prepare", str(store), str(now_ms), str(policy_dir or ""))


def mine_demo_apart(store: Path, policy_dir: Path | None) -> int:
    """:func:`mine_demo` in a child process; proposals made."""
    return _demo_child("mine", str(store), "0", str(policy_dir or ""))


def replay_rows(
    start_wall_ms: int, *, speed: float, seed: int = 7, harnesses: int = 12
) -> Iterator[InsertRow]:
    """Simulated days from the demo day on, re-stamped to wall time ``speed`` times faster.

    Endless: after the demo day comes the next simulated day, so a demo left
    open keeps receiving rows (and the planted patterns keep recurring).
    """
    origin = DEMO_DAY * DAY_MS + DEMO_START_OFFSET_MS
    day = DEMO_DAY
    while True:
        for row in day_rows(day, harnesses=harnesses, seed=seed, start_ms=0, quiet=False):
            if row[0] < origin:
                continue
            yield (start_wall_ms + int((row[0] - origin) / speed), *row[1:])
        day += 1


def feed_live(
    store: Path,
    stop: threading.Event,
    *,
    speed: float = 400.0,
    clock: Callable[[], int] = _wall_ms,
    poll_s: float = 0.05,
    keep_rows: int = 0,
) -> int:
    """Write replayed rows as their wall time comes, until ``stop``; return rows written.

    At 400 simulated seconds a second a demo left open replays a simulated
    day every few minutes. Each time it has written ``keep_rows`` more rows
    (default: as many as the store held when it started, the demo's day of
    history), the oldest rows beyond twice that are pruned, so the store's size
    levels off (SQLite reuses the freed pages) instead of growing by hundreds
    of MB an hour.
    """
    conn = connect(store, check_same_thread=False)
    committer = Committer(conn)
    written = since_trim = 0
    last_at, held = conn.execute(
        "SELECT COALESCE(MAX(at), 0), COUNT(*) FROM rule_journal"
    ).fetchone()
    keep = keep_rows or max(int(held), 10_000)
    pending = replay_rows(max(clock(), int(last_at) + 1), speed=speed)
    nxt = next(pending, None)
    try:
        while nxt is not None and not stop.is_set():
            now = clock()
            batch: list[InsertRow] = []
            while nxt is not None and nxt[0] <= now:
                batch.append(nxt)
                nxt = next(pending, None)
            if batch:
                committer.import_history(batch, atomic=True, synth_ticks=False, validate=False)
                written += len(batch)
                since_trim += len(batch)
                if since_trim >= keep:
                    since_trim = 0
                    trim_journal(conn, keep_rows=2 * keep)
            stop.wait(poll_s)
    finally:
        conn.close()
    return written


def trim_journal(conn: sqlite3.Connection, *, keep_rows: int) -> int:
    """Prune all but the newest ``keep_rows`` journal rows (the journal's own prune); rows gone."""
    from engine.journal.reader import prune

    row = conn.execute(
        "SELECT at FROM rule_journal WHERE seq <= (SELECT MAX(seq) FROM rule_journal) - ?"
        " ORDER BY seq DESC LIMIT 1",
        (keep_rows,),
    ).fetchone()
    if row is None:
        return 0
    # prune keeps rows at or after now - 1 day: put "now" one day after the boundary row
    return int(prune(conn, days=1, now_ms=int(row[0]) + DAY_MS).deleted)


def mine_demo(store: Path, config: HarnessConfig, policy_dir: Path | None) -> int:
    """--demo: mine the simulated history once so the Proposals pane has something to show."""
    from engine.policy.miner import mine

    conn = connect(store, check_same_thread=False)
    try:
        rules = load_console_rules(config, policy_dir).rules
        disabled = set(config.rules.disable)
        active = [r for r in rules if r.rule.name not in disabled]
        return len(mine(conn, active, config.rules))
    finally:
        conn.close()
