"""Console benchmarks: cold start to first frame, memory with 1M fires, commit-to-screen.

- cold start: a fresh ``python`` process builds the console on a store and
  reports when its first frame is up (Textual's auto-pilot starts once the
  first screen is mounted and painted); baseline: a bare Textual app the same way.
- memory: a child process opens the Fires pane on a store with 1,000,000 fires
  and pages back through thousands of them; its peak RSS is reported;
  baseline: the same on an empty store.
- idle CPU: the console (evaluator, live refresh, file watching) sits on a
  static store; its CPU over 30 s is reported (target < 1% of a core), with
  its threads' wakeups per second (voluntary context switches).
- latency: the console runs ``--demo`` (embedded evaluator + live fleet feed)
  while fires are committed; the time from commit to the fire being in the
  Fires pane's table is measured (p50/p99).
- timeline: the console opens on the Timeline pane over the 45-day demo
  journal (evaluated with the demo's rules and enforce entry, so it has fires
  and holds); the time from pressing its key (the pane loads when first
  asked for) to the grid being rendered into a frame, and the slowest zoom's
  repaint; baseline:
  the same on an empty store. Building that journal takes minutes: set
  ``BENCH_JOURNAL45=/path/journal.db`` to reuse one (it is only read; built
  there when missing).

Run: ``.venv/bin/python tests/benchmarks/run_all.py -k console [--quick]``
(``BENCH_CONSOLE=timeline,idle`` runs only those parts: cold, memory,
latency, timeline, idle). Each idle and timeline row notes the load average
seen while it ran: the figures are only comparable on a quiet machine.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from tests.benchmarks._common import Row

ROOT = Path(__file__).resolve().parents[2]

_CHILD_APP = r"""
import os, resource, sys, time
from pathlib import Path
t0 = float(os.environ["BENCH_T0"])
mode = sys.argv[1]
if mode == "bare":
    from textual.app import App
    from textual.widgets import Footer, Header
    class Bare(App):
        def compose(self):
            yield Header(); yield Footer()
    app = Bare()
else:
    from console.app import HarnessConsole
    from console.context import ConsoleContext
    from engine.views.session import ConsoleOptions
    opts = ConsoleOptions(store_path=Path(sys.argv[2]))
    app = HarnessConsole(ConsoleContext(opts, evaluate=False), initial=sys.argv[3],
                         watch_files=False)
pages = int(sys.argv[4]) if len(sys.argv) > 4 else 0

async def pilot(p):
    first = time.time() - t0
    if pages:
        pane = app.query_one("FiresPane")
        while not pane.loaded:
            await p.pause(0.05)
        for _ in range(pages):
            await p.press("ctrl+home")
            await p.pause(0.02)
        await p.press("end")
        await p.pause(0.3)
    print(f"{first:.4f} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f}")
    app.exit()

app.run(headless=True, auto_pilot=pilot, size=(120, 40))
"""


def _run_child(program: str, *args: str) -> tuple[float, float]:
    """The two figures a child app prints on its last line (it is timed from BENCH_T0)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), BENCH_T0=repr(time.time()))
    out = subprocess.run(
        [sys.executable, "-c", program, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    first, second = out.stdout.strip().splitlines()[-1].split()
    return float(first), float(second)


def _child(*args: str) -> tuple[float, float]:
    """(seconds to first frame, peak RSS in MiB) of a child app."""
    return _run_child(_CHILD_APP, *args)


def _small_store(path: Path) -> None:
    from engine.fleet.sim import DAY_MS, write_fleet
    from engine.store.db import connect

    conn = connect(path)
    start = (int(time.time() * 1000) // DAY_MS - 1) * DAY_MS
    write_fleet(conn, days=1, start_ms=start, validate=False)
    conn.close()


def _fires_store(path: Path, n: int) -> None:
    """A small journal plus ``n`` fires spread over it (written directly, in batches)."""
    from engine.store.db import connect

    _small_store(path)
    conn = connect(path)
    seqs = [r[0] for r in conn.execute("SELECT seq, at FROM rule_journal WHERE kind != 'tick'")]
    ats = dict(conn.execute("SELECT seq, at FROM rule_journal").fetchall())
    calls = (
        '[{"fn":"count","field":null,"selector":{"harness":"h01"},"window_ms":3600000,"result":3}]'
    )
    reasons = '["level notify", "no notify action configured: recorded only"]'
    batch = []
    conn.execute("BEGIN")
    for i in range(n):
        seq = seqs[i % len(seqs)]
        rule = f"bench_rule_{i // len(seqs)}"
        batch.append((rule, "h" * 64, seq, ats[seq], f"h{i % 12 + 1:02d}", reasons, calls))
        if len(batch) == 50_000:
            conn.executemany(
                "INSERT INTO rule_fires (rule, hash, seq, at, target, level, effective_level,"
                " status, reasons, calls) VALUES (?, ?, ?, ?, ?, 'notify', 'notify', 'fired',"
                " ?, ?)",
                batch,
            )
            batch.clear()
    if batch:
        conn.executemany(
            "INSERT INTO rule_fires (rule, hash, seq, at, target, level, effective_level,"
            " status, reasons, calls) VALUES (?, ?, ?, ?, ?, 'notify', 'notify', 'fired', ?, ?)",
            batch,
        )
    conn.execute("COMMIT")
    conn.close()


def _cold_start(tmp: Path, runs: int) -> list[Row]:
    store = tmp / "cold.db"
    _small_store(store)
    console = statistics.median(_child("console", str(store), "fleet")[0] for _ in range(runs))
    bare = statistics.median(_child("bare")[0] for _ in range(runs))
    return [
        Row(
            "console cold start to first frame",
            console,
            "s",
            target=1.5,
            higher_is_better=False,
            baseline=bare,
            note=f"median of {runs} fresh processes; baseline: bare Textual app {bare:.2f}s",
        )
    ]


def _memory(tmp: Path, fires: int, pages: int) -> list[Row]:
    empty = tmp / "empty.db"
    from engine.store.db import connect

    connect(empty).close()
    big = tmp / "big.db"
    t = time.perf_counter()
    _fires_store(big, fires)
    built = time.perf_counter() - t
    _, rss = _child("console", str(big), "fires", str(pages))
    _, base = _child("console", str(empty), "fires", str(pages))
    return [
        Row(
            f"peak RSS, Fires pane over {fires:,} fires",
            rss,
            "MiB",
            target=300,
            higher_is_better=False,
            baseline=base,
            note=f"paged back {pages} pages (≈{pages * 100:,} fires) and jumped to the tail;"
            f" baseline: empty store {base:.0f} MiB; store built in {built:.1f}s",
        )
    ]


def _latency(tmp: Path, samples: int) -> list[Row]:
    from console.app import HarnessConsole
    from console.context import ConsoleContext
    from console.panes.fires import FiresPane
    from engine.store.db import connect
    from engine.views.session import ConsoleOptions

    store = tmp / "demo" / "journal.db"
    store.parent.mkdir()
    opts = ConsoleOptions.from_args(store=str(store), demo=True)
    app = HarnessConsole(ConsoleContext(opts), initial="fires", watch_files=False)
    commits: dict[int, float] = {}
    seen: dict[int, float] = {}
    rows_before = [0]

    def writer(stop: threading.Event) -> None:
        conn = connect(store)
        i = 0
        while not stop.is_set() and i < samples:
            seq = conn.execute("SELECT MAX(seq) FROM rule_journal").fetchone()[0]
            if seq is None:
                stop.wait(0.1)
                continue
            cur = conn.execute(
                "INSERT INTO rule_fires (rule, hash, seq, at, target, level, effective_level,"
                " status, reasons, calls) VALUES (?, 'h', ?, 0, 'h01', 'annotate', 'annotate',"
                " 'fired', '[]', '[]')",
                (f"latency_probe_{i}", seq),
            )
            commits[int(cur.lastrowid or 0)] = time.perf_counter()
            i += 1
            stop.wait(0.25)
        conn.close()

    async def drive() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            pane = app.query_one(FiresPane)
            await pilot.pause(3.0)  # demo history written, evaluator and live feed running
            rows_before[0] = (
                connect(store).execute("SELECT COUNT(*) FROM rule_journal").fetchone()[0]
            )
            stop = threading.Event()
            thread = threading.Thread(target=writer, args=(stop,), daemon=True)
            thread.start()
            deadline = time.perf_counter() + samples * 0.25 + 10
            while len(seen) < samples and time.perf_counter() < deadline:
                now = time.perf_counter()
                for f in pane.window[-20:]:
                    if f.id in commits and f.id not in seen:
                        seen[f.id] = now
                await asyncio.sleep(0.005)
            stop.set()
            thread.join()

    asyncio.run(drive())
    rows_after = connect(store).execute("SELECT COUNT(*) FROM rule_journal").fetchone()[0]
    lat = sorted((seen[i] - commits[i]) * 1000 for i in seen)
    if not lat:
        return [Row("commit-to-screen latency p99", float("nan"), "ms", note="no probe seen")]
    p99 = lat[min(len(lat) - 1, round(0.99 * (len(lat) - 1)))]
    load = f"{rows_after - rows_before[0]:,} journal rows committed by the demo meanwhile"
    return [
        Row("commit-to-screen latency p50 (--demo)", statistics.median(lat), "ms", note=load),
        Row(
            "commit-to-screen latency p99 (--demo)",
            p99,
            "ms",
            target=500,
            higher_is_better=False,
            note=f"{len(lat)}/{samples} probes seen; the tail looks every 100 ms while the"
            f" store moves (0.5 s at most when idle); {_load()}",
        ),
    ]


def _demo_journal(path: Path, days: int) -> None:
    """The demo fleet over ``days`` days, evaluated by the lifecycle-wired evaluator."""
    from engine.config import HarnessConfig
    from engine.fleet.sim import DAY_MS, write_fleet
    from engine.rules.authority.lifecycle_run import open_live
    from engine.store.db import connect
    from engine.views.live import demo_config, write_demo_policy
    from engine.views.rules import load_console_rules

    conn = connect(path)
    end = int(time.time() * 1000)
    write_fleet(
        conn, days=days, start_ms=(end // DAY_MS - days) * DAY_MS, end_ms=end, validate=False
    )
    config = demo_config(HarnessConfig())
    rules = load_console_rules(config, write_demo_policy(path.parent / "policy")).rules
    evaluator, _policy = open_live(conn, rules, config, batch_size=5000)
    evaluator.run_until_idle()
    conn.close()


def _timeline_paints(store: Path) -> tuple[float, float]:
    """(first paint, worst repaint over the four zooms) of the Timeline pane, in ms."""
    from console.app import HarnessConsole
    from console.context import ConsoleContext
    from console.panes.timeline import TimelinePane
    from engine.views.session import ConsoleOptions

    opts = ConsoleOptions(store_path=store)
    context = ConsoleContext(opts, evaluate=False, live=False)
    app = HarnessConsole(context, initial="fleet", watch_files=False)
    paints: list[float] = []

    async def drive() -> None:
        async with app.run_test(size=(160, 45)) as pilot:
            pane = app.query_one(TimelinePane)
            await pilot.pause(3.0)  # the app is up and the other panes' first loads are done
            asked = time.perf_counter()
            await pilot.press("9")
            while not pane.painted_at:
                await pilot.pause(0.005)
            paints.append((pane.painted_at - asked) * 1000)
            for zoom in ("1h", "6h", "24h", "7d"):
                pane.zoom = zoom
                each = []
                for _ in range(3):
                    before = pane.painted_at
                    pane.action_refresh()
                    while pane.painted_at == before:
                        await pilot.pause(0.005)
                    each.append(pane.paint_ms)
                paints.append(statistics.median(each))

    asyncio.run(drive())
    return paints[0], max(paints[1:])


def _timeline(tmp: Path, quick: bool) -> list[Row]:
    from engine.store.db import connect

    days = 2 if quick else 45
    given = os.environ.get("BENCH_JOURNAL45")
    if given and not quick and Path(given).exists():
        store, built = Path(given), "reused $BENCH_JOURNAL45"
    else:
        # a $BENCH_JOURNAL45 that does not exist yet is built there, for the next run
        store = Path(given) if given and not quick else tmp / "timeline" / "journal.db"
        store.parent.mkdir(parents=True, exist_ok=True)
        t = time.perf_counter()
        _demo_journal(store, days)
        built = f"built and evaluated in {time.perf_counter() - t:.0f}s"
    conn = connect(store, readonly=True)
    rows, fires, holds = (
        conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
        for table in ("rule_journal", "rule_fires", "rule_holds")
    )
    conn.close()
    empty = tmp / "timeline-empty.db"
    connect(empty).close()
    base_first, base_zoom = _timeline_paints(empty)
    first, zoom = _timeline_paints(store)
    what = (
        f"{days}-day demo journal ({rows:,} rows, {fires:,} fires, {holds} holds; {built});"
        f" {_load()}"
    )
    return [
        Row(
            f"Timeline first paint, {days}-day journal",
            first,
            "ms",
            target=300,
            higher_is_better=False,
            baseline=base_first,
            note=f"{what}; key 9 (the pane was never shown) to grid painted, 160x45;"
            " baseline: empty store",
        ),
        Row(
            f"Timeline repaint, worst zoom, {days}-day journal",
            zoom,
            "ms",
            target=300,
            higher_is_better=False,
            baseline=base_zoom,
            note="refresh to grid painted, median of 3 per zoom (1h/6h/24h/7d), the slowest"
            " zoom; baseline: empty store",
        ),
    ]


_IDLE_APP = r"""
import os, sys, time
from pathlib import Path
warmup, seconds = float(sys.argv[2]), float(sys.argv[3])
if sys.argv[1] == "bare":
    from textual.app import App
    from textual.widgets import Footer, Header
    class Bare(App):
        def compose(self):
            yield Header(); yield Footer()
    app = Bare()
else:
    from console.app import HarnessConsole
    from console.context import ConsoleContext
    from engine.views.session import ConsoleOptions
    opts = ConsoleOptions(store_path=Path(sys.argv[4]))
    # as an operator runs it: embedded evaluator, live refresh, file watching
    app = HarnessConsole(ConsoleContext(opts), initial="fleet", watch_files=True)

def wakeups():
    # voluntary context switches of every thread: how often something woke up
    total = 0
    for task in Path("/proc/self/task").iterdir():
        try:
            status = (task / "status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("voluntary_ctxt_switches"):
                total += int(line.split()[1])
    return total

async def pilot(p):
    await p.pause(warmup)
    t = os.times()
    start, woke = t.user + t.system, wakeups()
    await p.pause(seconds)
    t = os.times()
    print(f"{(t.user + t.system - start) / seconds * 100:.3f} {(wakeups() - woke) / seconds:.1f}")
    app.exit()

app.run(headless=True, auto_pilot=pilot, size=(160, 45))
"""


def _idle_child(*args: str) -> tuple[float, float]:
    """(CPU in % of a core, thread wakeups per second) of an idle child app."""
    return _run_child(_IDLE_APP, *args)


def _load() -> str:
    """The 1-minute load average and the core count, for the notes (noisy figures say so)."""
    return f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"


def idle_cpu(tmp: Path, seconds: float) -> list[Row]:
    """CPU of an idle console on a static, fully evaluated store (% of one core).

    The child waits for start-up work to settle, then reads its own CPU time
    (all threads) over ``seconds``; baseline: a bare Textual app measured the same way.
    """
    from engine.config import HarnessConfig
    from engine.rules.authority.lifecycle_run import open_live
    from engine.store.db import connect
    from engine.views.rules import load_console_rules

    store = tmp / "idle.db"
    _small_store(store)
    conn = connect(store)
    rules = load_console_rules(HarnessConfig(), None).rules
    evaluator, _policy = open_live(conn, rules, HarnessConfig())
    evaluator.run_until_idle()
    conn.close()
    warmup = "8"
    console, woke = _idle_child("console", warmup, str(seconds), str(store))
    load = _load()
    bare, bare_woke = _idle_child("bare", warmup, str(seconds))
    return [
        Row(
            f"idle console CPU over {seconds:g} s (static store)",
            console,
            "% core",
            target=1.0,
            higher_is_better=False,
            note=f"{woke:.1f} thread wakeups/s; bare Textual app: {bare:.2f}% core,"
            f" {bare_woke:.1f} wakeups/s; {load}",
        )
    ]


def run(quick: bool) -> list[Row]:
    parts = {p.strip() for p in os.environ.get("BENCH_CONSOLE", "").split(",") if p.strip()}

    def wanted(part: str) -> bool:
        return not parts or part in parts

    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="bench-console-") as d:
        tmp = Path(d)
        if wanted("cold"):
            rows += _cold_start(tmp, runs=1 if quick else 3)
        if wanted("memory"):
            rows += _memory(tmp, fires=100_000 if quick else 1_000_000, pages=20 if quick else 100)
        if wanted("latency"):
            rows += _latency(tmp, samples=8 if quick else 40)
        if wanted("timeline"):
            rows += _timeline(tmp, quick)
        if wanted("idle"):
            rows += idle_cpu(tmp, seconds=10 if quick else 30)
    return rows
