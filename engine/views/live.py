"""The evaluator a console runs when started with ``--act`` (or ``--demo``).

The console runs the same live evaluator as ``harness evaluate --follow``,
behind the store's lease (role ``console``, with its rule set's digest): when
another evaluator already acts on the store the console only follows, and it
hands the lease over to serve or ``harness evaluate``. Without ``--act`` the
console runs none of this: it only watches. The simulated fleet lives in
``engine.views.demo`` (its names are re-exported here for the console).
"""

from __future__ import annotations

import contextlib
import dataclasses
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

from engine.config import HarnessConfig
from engine.rules.authority.lease import CONSOLE, Lease, Stepper, ruleset_digest, serve
from engine.rules.authority.recovery import FaultRide
from engine.rules.language.model import CompiledRule
from engine.store.db import connect, store_fault
from engine.views.changes import Backoff, file_stamp
from engine.views.demo import DEMO_DAY as DEMO_DAY
from engine.views.demo import DEMO_ENFORCE as DEMO_ENFORCE
from engine.views.demo import demo_config as demo_config
from engine.views.demo import feed_live as feed_live
from engine.views.demo import mine_demo as mine_demo
from engine.views.demo import mine_demo_apart as mine_demo_apart
from engine.views.demo import prepare_demo_store as prepare_demo_store
from engine.views.demo import prepare_demo_store_apart as prepare_demo_store_apart
from engine.views.demo import replay_rows as replay_rows
from engine.views.demo import trim_journal as trim_journal
from engine.views.demo import write_demo_policy as write_demo_policy
from engine.views.demo import write_demo_spec as write_demo_spec
from engine.views.rules import keep_last_good, load_console_rules


class QuietStepper:
    """A Stepper that skips SQLite while the store's files have not moved since an empty step.

    An idle console must use no measurable CPU: the live evaluator's empty
    step is a write transaction 20 times a second. This asks the file system
    first (a stat) and still takes a real step every ``max_skip_s`` in case a
    write landed within the file system's timestamp granularity.
    """

    def __init__(self, inner: Stepper, store: Path, *, max_skip_s: float = 1.0) -> None:
        self.inner = inner
        self.store = store
        self.max_skip_s = max_skip_s
        self._idle_stamp: tuple[int, ...] | None = None
        self._idle_since = 0.0

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)  # serve() looks at ``policy``

    def step(self, max_rows: int | None = None) -> object:
        stamp = file_stamp(self.store)
        now = time.monotonic()
        if stamp == self._idle_stamp and now - self._idle_since < self.max_skip_s:
            return IDLE_STEP
        result = self.inner.step(max_rows)
        if getattr(result, "rows", 0):
            self._idle_stamp = None
        elif stamp != self._idle_stamp:
            self._idle_stamp, self._idle_since = stamp, now
        else:
            self._idle_since = now
        return result


@dataclasses.dataclass(frozen=True)
class _IdleStep:
    rows: int = 0


#: What a skipped step returns (no rows; the console shows no progress for it).
IDLE_STEP = _IdleStep()
#: The longest the embedded evaluator waits between looks at a store that stands
#: still (it looks every ``poll_s`` while rows keep coming): the bound on how late
#: a row written after a quiet spell is evaluated.
EVAL_IDLE_S = 0.5


class ActingRules:
    """The rules an acting console evaluates with, their config, and the digest its lease records.

    Reloaded when rule files or harness.toml change; a broken edit keeps the
    last good version of its rules (as the Rules pane shows them).
    """

    def __init__(self, config: HarnessConfig, policy_dir: Path | None) -> None:
        self.policy_dir = policy_dir
        self.config = config
        self.loaded = load_console_rules(config, policy_dir)
        self.digest = ruleset_digest(self.loaded.rules, config.rules)

    @property
    def rules(self) -> list[CompiledRule]:
        return list(self.loaded.rules)

    def reload(self, config: HarnessConfig) -> None:
        self.config = config
        self.loaded = keep_last_good(self.loaded, load_console_rules(config, self.policy_dir))
        self.digest = ruleset_digest(self.loaded.rules, config.rules)


#: The acting evaluator's wait after a store error, seconds (doubles up to the second).
FAULT_BACKOFF_S = (0.2, 5.0)


def run_evaluator(
    store: Path,
    config: HarnessConfig | Callable[[], HarnessConfig],
    policy_dir: Path | None,
    stop: threading.Event,
    *,
    reload: threading.Event | None = None,
    on_step: Callable[[object], None] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    on_fault: Callable[[str | None], None] | None = None,
    poll_s: float = 0.05,
    idle_s: float = EVAL_IDLE_S,
) -> None:
    """Act on the store while holding its lease (else follow) until ``stop`` is set.

    Only a console started with ``--act`` (or ``--demo``) runs this: the lease
    records role ``console`` and the rule set's digest, and hands over to
    ``harness serve`` or ``harness evaluate`` when one starts. Setting
    ``reload`` re-reads the rules and ``config()`` (keeping the last good
    version of a broken file), records the new digest in the lease and
    rebuilds the evaluator, without giving the lease up. ``config`` is the
    configuration, or a function giving the current one (read on each reload).

    ``on_progress(cursor, head)`` follows each batch that evaluated rows, so a
    console can say "evaluating backlog: seq N of M" while it catches up.
    After a step with no rows the wait doubles from ``poll_s`` up to ``idle_s``
    (one look, a stat, per ``idle_s`` on a static store) and drops back to
    ``poll_s`` as soon as a step evaluates rows.

    A store error (locked past the busy timeout, full, read-only, I/O) does not
    end it: ``on_fault(why)`` says so, and it starts again on a new connection
    after a back-off, until a step works (``on_fault(None)``). Only a store a
    new connection also finds corrupt ends it, as the InputError naming it.
    """
    current = config if callable(config) else (lambda: config)
    acting = ActingRules(current(), policy_dir)
    ride = FaultRide(
        stop,
        on_fault=on_fault,
        on_recovered=(lambda: on_fault(None)) if on_fault is not None else None,
        backoff_s=FAULT_BACKOFF_S,
    )

    def stepped(result: object) -> None:
        ride.working()
        if on_step is not None:
            on_step(result)

    try:
        ride.run(
            lambda: _act(
                store, current, acting, stop, reload, stepped, on_progress, (poll_s, idle_s)
            )
        )
    except sqlite3.DatabaseError as exc:  # corrupt on two connections in a row
        raise store_fault(exc, store) from None


def _act(
    store: Path,
    current: Callable[[], HarnessConfig],
    acting: ActingRules,
    stop: threading.Event,
    reload: threading.Event | None,
    on_step: Callable[[object], None],
    on_progress: Callable[[int, int], None] | None,
    waits: tuple[float, float],
) -> None:
    """One connection's worth of :func:`run_evaluator`: a store error ends it (and the lease)."""
    from engine.policy.schedule import MinerSchedule, check_miner_names, mine_if_due
    from engine.rules.authority.lifecycle_run import open_live

    poll_s, idle_s = waits
    miners = MinerSchedule(check_miner_names(acting.config.rule_miners, str(acting.config.source)))
    conn = connect(store, create=False, check_same_thread=False)
    try:
        lease = Lease(conn, role=CONSOLE, ruleset=acting.digest)
        pace = Backoff(poll_s, max(poll_s, idle_s))

        def build() -> Stepper:
            if reload is not None and reload.is_set():
                reload.clear()
                acting.reload(current())
                lease.set_ruleset(acting.digest)
            evaluator, _policy = open_live(conn, acting.rules, acting.config, lease=lease)
            return QuietStepper(cast(Stepper, evaluator), store)

        def stepped(result: object) -> None:
            pace.saw(bool(getattr(result, "rows", 0)))
            # configured miners run in the acting evaluator, hourly in journal time
            if getattr(result, "rows", 0):
                mine_if_due(miners, conn, acting.rules, acting.config.rules)
                if on_progress is not None:
                    head = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM rule_journal")
                    on_progress(int(getattr(result, "cursor", 0)), int(head.fetchone()[0]))
            on_step(result)

        serve(
            lease,
            build,
            stop,
            poll_s=poll_s,
            on_step=stepped,
            idle_wait=lambda: pace.delay,
            rebuild=reload.is_set if reload is not None else None,
        )
    finally:
        with contextlib.suppress(sqlite3.Error):
            conn.close()
