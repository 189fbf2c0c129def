"""``harness demo --live``: keep the simulated fleet writing in real time.

After the history, the fleet carries on as the generator says it would, but
through the live path: each simulated row is offered to a
:class:`~engine.journal.queue.JournalWriter` when wall time reaches the row's
simulated time, so it is admitted *now* (the committer assigns ``seq`` and
``at``, and emits the tick rows itself; the simulator's own ticks are
skipped). Clock, sleep and stop are injectable so tests run it in fake time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from engine.fleet.sim import DAY_MS, day_rows
from engine.journal.queue import JournalWriter, WriterStats
from engine.journal.writer import Clock, wall_clock_ms


@dataclass(frozen=True, slots=True)
class LiveResult:
    offered: int
    stats: WriterStats


def run_live(
    store: str | Path,
    *,
    start_ms: int,
    harnesses: int,
    seed: int,
    quiet: bool = False,
    clock: Clock = wall_clock_ms,
    sleep: Callable[[float], None] = time.sleep,
    stop: Callable[[], bool] = lambda: False,
    max_sleep_s: float = 1.0,
) -> LiveResult:
    """Offer simulated rows from ``clock()`` on, as their time comes, until ``stop()``.

    ``start_ms`` is the (midnight) origin of the simulated history, so live
    rows continue its day numbering and its planted patterns.
    """
    offered = 0
    writer = JournalWriter(store, clock=clock)
    writer.start()
    try:
        now = clock()
        day = max(0, (now - start_ms) // DAY_MS)
        while not stop():
            rows = day_rows(
                day, harnesses=harnesses, seed=seed, start_ms=start_ms, quiet=quiet, ticks=False
            )
            for row in rows:
                if row[0] < now:
                    continue  # already history
                while row[0] > clock():
                    if stop():
                        return LiveResult(offered, writer.close())
                    sleep(min(max_sleep_s, (row[0] - clock()) / 1000))
                writer.offer(row)
                offered += 1
            day += 1
            now = start_ms + day * DAY_MS
        return LiveResult(offered, writer.close())
    except BaseException:
        writer.close()
        raise
