"""A deterministic simulated fleet history, in journal time.

Why: the rules engine, its backtests, the console demo and every benchmark
need a realistic journal in which the starter rules' patterns really occur,
separated by quiet stretches, and the same journal every time for a given
seed. Everything is a function of (seed, harness, day): the same seed gives
the same rows, and changing the number of harnesses does not change the rows
of the harnesses that remain.

The fleet (default 12 harnesses ``h01``..``h12`` over 4 projects: h01-h03
``atlas``, h04-h06 ``beacon``, h07-h09 ``cinder``, h10-h12 ``delta``). Days
are numbered from 0 at ``start_ms`` (a UTC midnight); times below are UTC
offsets within the day. A shift belongs to the day it starts on (its planted
patterns follow that day's number) even when it runs past midnight.

Background (both modes): h01-h10 are interactive; harness ``hNN`` works a
14-hour shift starting at ``(NN * 5 + 2) % 24`` o'clock UTC (plus up to 20
min; h01 07:00, h02 12:00, h03 17:00, h04 22:00, h05 03:00, h06 08:00, h07
13:00, h08 18:00, h09 23:00, h10 04:00), so the fleet is busy around the clock
while each harness is idle 10 hours a day (the
quiet stretches). Within a shift, runs of 20-90 minutes separated by 5-30
minute gaps; each run has ``run_started``, tool calls (about 50,000 a day
across the default fleet; tools read, bash, grep, edit, test, write,
web_fetch; mostly ``ok``), a ``file_edited`` graph row for every edit/write,
a closing ``verify`` that fails in ~10% of runs with a *unique* cause digest
(``verify_failed``), and ``run_finished``. Each interactive harness restarts
about once every three days with a unique cause digest. About 20
``fact_added`` and 6 ``fact_retracted`` rows a day (source facts, facts
``fact:<project>/<k>``). A ``tick`` row at every minute boundary.

Planted patterns (omitted when ``quiet=True``; a pattern whose harness does
not exist with fewer harnesses is simply absent):

- **verify_same_cause** — h03: on even days, 70% of its runs end in
  ``verify_failed`` with cause :data:`VERIFY_CAUSE_A`; h09: on days divisible
  by 3, 50% of runs fail with :data:`VERIFY_CAUSE_B`.
- **restart_same_error** — h05: on days with ``day % 3 == 1``, four
  ``restart`` rows with cause :data:`RESTART_CAUSE`, 8-15 minutes apart,
  starting at 13:00-13:30 (so >= 3 within an hour, 15 times in 45 days).
- **loop_guard** — h06: on odd days, 2-3 trips spread over its shift (each in
  its own run): 8 identical ``bash`` calls (same args digest, 3 s apart), then
  ``loop_stopped`` (source loopguard, tool bash, that args digest, n=8), and
  the run finishes ``cancelled``.
- **budget_exhausted** — h11 and h12 are one-shots: one nightly run at 02:00
  (h11) / 02:30 (h12), about 150 tool calls over ~40 minutes, ending with
  ``budget_exhausted`` (source ledger, n=500, the budget in cents) and
  ``run_finished`` ``cancelled``. In quiet mode the nightly run finishes ``ok``.
  They are idle the rest of the day.
- **collision** — h01 and h02 (both atlas): on even days between 14:00 and
  15:00, three rounds where both edit :data:`COLLISION_PATH` a minute apart;
  each round gives two ``file_edited`` rows and a ``collision`` row (harness
  h02, other_harness h01, n=1).
- **file_churn** — h04: every day from 03:00, :data:`CHURN_PATH` edited 25
  times in ~2 hours (``file_edited`` with n = the running edit count), then a
  ``churn`` row (n=25).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Iterator
from operator import itemgetter
from typing import Any

from engine.journal.rows import INSERT_COLUMNS, InsertRow

DAY_MS = 86_400_000
HOUR_MS = 3_600_000
MINUTE_MS = 60_000
#: 2026-01-01T00:00:00Z: the default start of the pure generator (tests).
DEFAULT_START_MS = 1_767_225_600_000
DEFAULT_DAYS = 45
DEFAULT_HARNESSES = 12
DEFAULT_SEED = 7
PROJECTS = ("atlas", "beacon", "cinder", "delta")
#: Tool calls a day across the default fleet (the seed's "Journal volume").
TOOL_CALLS_PER_DAY = 50_000


def _digest(label: str) -> str:
    return "sha256:" + hashlib.sha256(label.encode()).hexdigest()


VERIFY_CAUSE_A = _digest("verify:atlas:test_api_contract")
VERIFY_CAUSE_B = _digest("verify:cinder:lint_imports")
RESTART_CAUSE = _digest("restart:beacon:config_missing_key")
COLLISION_PATH = "src/atlas/api/routes.py"
CHURN_PATH = "src/beacon/config.py"

_TOOLS = (
    ["read"] * 32
    + ["bash"] * 22
    + ["grep"] * 16
    + ["edit"] * 10
    + ["test"] * 10
    + ["write"] * 4
    + ["web_fetch"] * 6
)
_PATH_TOOLS = frozenset({"read", "edit", "write", "grep"})
_EDIT_TOOLS = frozenset({"edit", "write"})
_ARGS = tuple(_digest(f"args:{i}") for i in range(256))
_ONESHOTS = {"h11": 2 * HOUR_MS, "h12": 2 * HOUR_MS + 30 * MINUTE_MS}
# Mean seconds between tool calls inside a run, tuned so the default fleet
# makes about TOOL_CALLS_PER_DAY calls a day (10 interactive harnesses, ~11 h of
# runs per 14 h shift, plus the one-shots).
_MEAN_GAP_S = 7.9


def harness_names(count: int) -> list[str]:
    return [f"h{i:02d}" for i in range(1, count + 1)]


def project_of(harness: str) -> str:
    return PROJECTS[((int(harness[1:]) - 1) // 3) % len(PROJECTS)]


def _files(project: str) -> tuple[str, ...]:
    dirs = ("src", "src/core", "src/api", "tests", "docs")
    return tuple(f"{d}/{project}/m{k:02d}.py" for d in dirs for k in range(12))


_FILES = {p: _files(p) for p in PROJECTS}


class _Day:
    """Rows of one (harness, day), appended as insert tuples (no per-row objects)."""

    def __init__(self, out: list[InsertRow], harness: str, rng: random.Random) -> None:
        self.out = out
        self.h = harness
        self.p = project_of(harness)
        self.rng = rng
        self.files = _FILES[self.p]

    def run(self, at: int, typ: str, run: str, **kw: Any) -> None:
        self.out.append(
            (
                at,
                "run_event",
                typ,
                kw.get("source", "observer"),
                self.h,
                self.p,
                run,
                kw.get("tool"),
                kw.get("outcome"),
                kw.get("path"),
                kw.get("cause"),
                kw.get("args"),
                None,
                None,
                kw.get("n"),
            )
        )

    def graph(
        self, at: int, typ: str, run: str, path: str, n: int, other: str | None = None
    ) -> None:
        self.out.append(
            (at, "graph_event", typ, "graph", self.h, self.p, run, None, None, path, None, None,
             other, None, n)
        )  # fmt: skip

    def tool_calls(self, run: str, start: int, end: int) -> int:
        """Tool calls from ``start`` until ``end``; returns the time of the last one."""
        rng, out, h, p, files = self.rng, self.out, self.h, self.p, self.files
        rand, expo = rng.random, rng.expovariate
        rate = 1.0 / (_MEAN_GAP_S * 1000)
        nfiles = len(files)
        t = start + int(expo(rate))
        last = start
        while t < end:
            tool = _TOOLS[int(rand() * 100)]
            r = rand()
            if tool == "test":
                outcome = "failed" if r < 0.15 else "ok"
            else:
                outcome = "ok" if r < 0.97 else ("error" if r < 0.99 else "timeout")
            path = files[int(rand() ** 2 * nfiles)] if tool in _PATH_TOOLS else None
            out.append(
                (t, "run_event", "tool_call", "observer", h, p, run, tool, outcome, path, None,
                 _ARGS[int(rand() * 256)], None, None, None)
            )  # fmt: skip
            if tool in _EDIT_TOOLS and path is not None:
                out.append(
                    (t, "graph_event", "file_edited", "graph", h, p, run, None, None, path,
                     None, None, None, None, 1)
                )  # fmt: skip
            last = t
            t += int(expo(rate)) + 1
        return last


def _unique_cause(rng: random.Random) -> str:
    return f"sha256:{rng.getrandbits(256):064x}"


def _interactive_day(day_rows: _Day, day: int, day0: int, quiet: bool) -> None:
    """One shift of runs for an interactive harness, with its planted patterns."""
    d, rng, h = day_rows, day_rows.rng, day_rows.h
    idx = int(h[1:])
    shift_start = day0 + ((idx * 5 + 2) % 24) * HOUR_MS + int(rng.random() * 20 * MINUTE_MS)
    shift_end = shift_start + 14 * HOUR_MS
    planted = not quiet
    loop_trips: list[int] = []
    if planted and h == "h06" and day % 2 == 1:
        trips = 2 + int(rng.random() * 2)
        span = (shift_end - shift_start - HOUR_MS) // trips
        loop_trips = [shift_start + k * span + int(rng.random() * span / 2) for k in range(trips)]
    t = shift_start
    k = 0
    while t < shift_end:
        k += 1
        run = f"{h}-{day:03d}-{k:02d}"
        end = min(t + int((20 + rng.random() * 70) * MINUTE_MS), shift_end)
        d.run(t, "run_started", run)
        trip = None
        if loop_trips and loop_trips[0] < end:
            trip = max(loop_trips.pop(0), t + MINUTE_MS)
        if trip is not None:
            last = d.tool_calls(run, t, trip)
            args = _ARGS[int(rng.random() * 256)]
            for s in range(8):
                d.run(
                    last + 1000 + s * 3000, "tool_call", run, tool="bash", outcome="ok", args=args
                )
            stop_at = last + 1000 + 8 * 3000
            d.run(stop_at, "loop_stopped", run, source="loopguard", tool="bash", args=args, n=8)
            d.run(stop_at + 500, "run_finished", run, outcome="cancelled", n=8)
            t = stop_at + int((5 + rng.random() * 25) * MINUTE_MS)
            continue
        last = d.tool_calls(run, t, end)
        verify_at = max(last, t) + 2000
        cause = None
        if planted and h == "h03" and day % 2 == 0 and rng.random() < 0.7:
            cause = VERIFY_CAUSE_A
        elif planted and h == "h09" and day % 3 == 0 and rng.random() < 0.5:
            cause = VERIFY_CAUSE_B
        elif rng.random() < 0.10:
            cause = _unique_cause(rng)
        if cause is not None:
            d.run(verify_at, "tool_call", run, tool="verify", outcome="failed", n=1)
            d.run(verify_at + 1, "verify_failed", run, tool="verify", outcome="failed",
                  cause=cause, n=1)  # fmt: skip
            d.run(verify_at + 500, "run_finished", run, outcome="failed")
        else:
            d.run(verify_at, "tool_call", run, tool="verify", outcome="ok", n=0)
            d.run(verify_at + 500, "run_finished", run, outcome="ok")
        t = verify_at + 500 + int((5 + rng.random() * 25) * MINUTE_MS)
    # Background restarts: about one every three days, each with its own cause.
    if rng.random() < 0.33:
        at = shift_start + int(rng.random() * 14 * HOUR_MS)
        d.run(at, "restart", f"{h}-{day:03d}-restart", cause=_unique_cause(rng), n=1)
    if planted and h == "h05" and day % 3 == 1:
        at = day0 + 13 * HOUR_MS + int(rng.random() * 30 * MINUTE_MS)
        for i in range(4):
            d.run(at, "restart", f"{h}-{day:03d}-crash{i}", cause=RESTART_CAUSE, n=i + 1)
            at += int((8 + rng.random() * 7) * MINUTE_MS)
    if planted and h in ("h01", "h02") and day % 2 == 0:
        base = day0 + 14 * HOUR_MS
        for r in range(3):
            at = base + r * 20 * MINUTE_MS + (0 if h == "h01" else MINUTE_MS)
            run = f"{h}-{day:03d}-pair{r}"
            d.graph(at, "file_edited", run, COLLISION_PATH, 1)
            if h == "h02":
                d.graph(at + 1, "collision", run, COLLISION_PATH, 1, other="h01")
    if planted and h == "h04":
        at = day0 + 3 * HOUR_MS
        run = f"{h}-{day:03d}-churn"
        for e in range(1, 26):
            at += int((3 + rng.random() * 2) * MINUTE_MS)
            d.graph(at, "file_edited", run, CHURN_PATH, e)
        d.graph(at + 1, "churn", run, CHURN_PATH, 25)


def _oneshot_day(day_rows: _Day, day: int, day0: int, quiet: bool) -> None:
    d = day_rows
    start = day0 + _ONESHOTS[d.h]
    run = f"{d.h}-{day:03d}-nightly"
    d.run(start, "run_started", run)
    last = d.tool_calls(run, start, start + 20 * MINUTE_MS)
    last = max(last, d.tool_calls(run, last + 1, last + 20 * MINUTE_MS))
    if quiet:
        d.run(last + 1000, "run_finished", run, outcome="ok")
    else:
        d.run(last + 1000, "budget_exhausted", run, source="ledger", n=500)
        d.run(last + 1500, "run_finished", run, outcome="cancelled")


def _facts_day(out: list[InsertRow], rng: random.Random, harnesses: list[str], day0: int) -> None:
    for _ in range(20):
        h = harnesses[int(rng.random() * len(harnesses))]
        p = project_of(h)
        at = day0 + int(rng.random() * DAY_MS)
        fact = f"fact:{p}/{int(rng.random() * 200)}"
        n = 1 + int(rng.random() * 5)
        out.append((at, "fact_event", "fact_added", "facts", h, p, None, None, None, None, None,
                    None, None, fact, n))  # fmt: skip
    for _ in range(6):
        h = harnesses[int(rng.random() * len(harnesses))]
        p = project_of(h)
        at = day0 + int(rng.random() * DAY_MS)
        fact = f"fact:{p}/{int(rng.random() * 200)}"
        out.append((at, "fact_event", "fact_retracted", "facts", h, p, None, None, None, None,
                    None, None, None, fact, 0))  # fmt: skip


def day_rows(
    day: int, *, harnesses: int, seed: int, start_ms: int, quiet: bool, ticks: bool = True
) -> list[InsertRow]:
    """Every row of one day, sorted by ``at`` (ties keep generation order)."""
    day0 = start_ms + day * DAY_MS
    names = harness_names(harnesses)
    out: list[InsertRow] = []
    for h in names:
        if h not in _ONESHOTS:
            # Yesterday's shift may run past midnight: its rows after day0 are today's.
            _interactive_day(
                _Day(out, h, random.Random(f"{seed}:{h}:{day - 1}")), day - 1, day0 - DAY_MS, quiet
            )
        rng = random.Random(f"{seed}:{h}:{day}")
        rows = _Day(out, h, rng)
        if h in _ONESHOTS:
            _oneshot_day(rows, day, day0, quiet)
        else:
            _interactive_day(rows, day, day0, quiet)
    _facts_day(out, random.Random(f"{seed}:facts:{day}"), names, day0)
    out = [r for r in out if day0 <= r[0] < day0 + DAY_MS]
    if ticks:
        tail = ("tick", "tick", "tick", *([None] * 11))
        first = day0 if day > 0 else day0 + MINUTE_MS
        out.extend((t, *tail) for t in range(first, day0 + DAY_MS, MINUTE_MS))
    out.sort(key=itemgetter(0))
    return out


def iter_fleet_tuples(
    *,
    days: int = DEFAULT_DAYS,
    harnesses: int = DEFAULT_HARNESSES,
    seed: int = DEFAULT_SEED,
    start_ms: int = DEFAULT_START_MS,
    quiet: bool = False,
    end_ms: int | None = None,
    ticks: bool = True,
) -> Iterator[InsertRow]:
    """Insert tuples (``at`` first, :data:`INSERT_COLUMNS` order), non-decreasing in ``at``.

    ``end_ms`` cuts the history short (rows at or after it are not produced).
    """
    if start_ms % DAY_MS:
        raise ValueError("start_ms must be a UTC midnight")
    for day in range(days):
        rows = day_rows(day, harnesses=harnesses, seed=seed, start_ms=start_ms, quiet=quiet,
                        ticks=ticks)  # fmt: skip
        if end_ms is not None and rows and rows[-1][0] >= end_ms:
            yield from (r for r in rows if r[0] < end_ms)
            return
        yield from rows


def iter_fleet_rows(
    *,
    days: int = DEFAULT_DAYS,
    harnesses: int = DEFAULT_HARNESSES,
    seed: int = DEFAULT_SEED,
    start_ms: int = DEFAULT_START_MS,
    quiet: bool = False,
) -> Iterator[dict[str, Any]]:
    """The same history as dicts with ``at`` and without NULL columns (for tests)."""
    for row in iter_fleet_tuples(
        days=days, harnesses=harnesses, seed=seed, start_ms=start_ms, quiet=quiet
    ):
        yield {c: v for c, v in zip(INSERT_COLUMNS, row, strict=True) if v is not None}


def write_fleet(
    conn: Any,
    *,
    days: int = DEFAULT_DAYS,
    harnesses: int = DEFAULT_HARNESSES,
    seed: int = DEFAULT_SEED,
    start_ms: int = DEFAULT_START_MS,
    quiet: bool = False,
    end_ms: int | None = None,
    on_batch: Callable[[int], None] | None = None,
    validate: bool = True,
) -> Any:
    """Write the history into a store connection; returns the ImportResult.

    Batches commit one by one (readers see progress); each row is checked
    like any admitted row unless ``validate`` is false.
    """
    from engine.journal.writer import Committer

    rows = iter_fleet_tuples(
        days=days, harnesses=harnesses, seed=seed, start_ms=start_ms, quiet=quiet, end_ms=end_ms
    )
    return Committer(conn).import_history(
        rows, atomic=False, synth_ticks=False, validate=validate, on_batch=on_batch
    )
