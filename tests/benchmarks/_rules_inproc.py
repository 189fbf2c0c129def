"""The rules benchmark's in-process parts: the naive backtest and live latency.

Kept apart from :mod:`tests.benchmarks.bench_rules` (the whole-command
figures) so each module stays readable: the naive way (cel-python interpreted
per row, one SQL query per primitive call) is the baseline the fast backtest's
in-process rows/s is compared with on a slice, and live latency times a
fire's commit after its row's while a writer commits 1,000 rows/s.
"""

from __future__ import annotations

import datetime as _dt
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

# -- the naive way: cel-python + one SQL query per primitive call ------------------------


def naive_backtest(store: Path, rules: list[Any], first: int, last: int) -> dict[str, Any]:
    """Interpret each rule with cel-python per row, primitives answered by SQL queries."""
    import celpy
    from celpy import celtypes

    from engine.rules.evaluation.host_sql import SqlHost
    from engine.rules.evaluation.window import COLUMNS, ROW_SELECT
    from engine.rules.language.model import KIND_FIELDS
    from engine.store.db import connect

    conn = connect(store, readonly=True)
    host = SqlHost(conn)
    env = celpy.Environment()

    def ms(win: Any) -> int:
        return round(win.total_seconds() * 1000)

    def sel(m: Any) -> dict[str, str]:
        return {str(k): str(v) for k, v in m.items()}

    functions = {
        "count": lambda m, w: celtypes.IntType(host.count(sel(m), ms(w))),
        "exists": lambda m, w: celtypes.BoolType(host.exists(sel(m), ms(w))),
        "distinct": lambda f, m, w: celtypes.IntType(host.distinct(str(f), sel(m), ms(w))),
    }
    programs = [
        (cr.rule.on, cr.rule.name, env.program(env.compile(cr.rule.when), functions=functions))
        for cr in rules
    ]
    rows = conn.execute(ROW_SELECT + " WHERE seq BETWEEN ? AND ? ORDER BY seq", (first, last))
    fires: list[tuple[int, str]] = []
    done = 0
    t0 = time.perf_counter()
    for row in rows.fetchall():
        done += 1
        host.feed(row)
        values = dict(zip(COLUMNS, row, strict=True))
        kind = values["kind"]
        event = {f: values[f] for f in KIND_FIELDS[str(kind)] if values.get(f) not in (None, "")}
        now = _dt.datetime.fromtimestamp(row[1] / 1000, _dt.UTC)
        activation = {"event": celpy.json_to_cel(event), "now": celtypes.TimestampType(now)}
        for on, name, program in programs:
            if on != kind:
                continue
            try:
                matched = program.evaluate(activation)
            except celpy.CELEvalError:
                continue
            if matched is True or (isinstance(matched, celtypes.BoolType) and bool(matched)):
                fires.append((int(row[0]), name))
    secs = time.perf_counter() - t0
    return {"rows": done, "secs": secs, "fires": fires, "queries": host.queries}


# -- live latency ------------------------------------------------------------------------


def live_latency(seconds: float, rate: int = 1000) -> dict[str, Any]:
    """A writer commits ``rate`` rows/s (10 ms batches); a follower evaluates; time each fire.

    Every stored fire counts, whatever its status (fired, shadow, suppressed).
    """
    from engine.fleet.sim import iter_fleet_tuples
    from engine.journal.rows import INSERT_COLUMNS
    from engine.rules.evaluation.live_evaluator import LiveEvaluator
    from engine.store.db import connect
    from tests.benchmarks._rules_set import LATENCY_RULE, _compile, starter_rules

    rules = [*starter_rules(), _compile(*LATENCY_RULE, "edit_burst")]
    tmp = Path(tempfile.mkdtemp(prefix="bench_live_"))
    path = tmp / "live.db"
    writer = connect(path, check_same_thread=False)
    committed: dict[int, float] = {}
    fired: dict[int, float] = {}
    stop = threading.Event()

    def follow() -> None:
        conn = connect(path, check_same_thread=False)
        try:  # through the lifecycle (shadow, cooldown, levels), as `harness evaluate` runs
            from engine.config import HarnessConfig
            from engine.rules.authority.lifecycle_run import open_live

            ev, _policy = open_live(conn, rules, HarnessConfig())
        except ImportError:
            ev = LiveEvaluator(conn, rules)

        def record(res: Any) -> None:
            now = time.perf_counter()
            for f in res.fires:
                fired.setdefault(f.seq, now)

        ev.follow(stop, poll_s=0.002, on_step=record)
        conn.close()

    thread = threading.Thread(target=follow)
    thread.start()
    sql = (
        f"INSERT INTO rule_journal ({', '.join(INSERT_COLUMNS)}) "
        f"VALUES ({', '.join('?' * len(INSERT_COLUMNS))})"
    )
    source = iter_fleet_tuples(days=2)
    per_batch = max(1, rate // 100)
    start = time.perf_counter()
    batches = 0
    try:
        while time.perf_counter() - start < seconds:
            batch = [next(source) for _ in range(per_batch)]
            writer.execute("BEGIN IMMEDIATE")
            cur = writer.executemany(sql, batch)
            last = writer.execute("SELECT max(seq) FROM rule_journal").fetchone()[0]
            writer.execute("COMMIT")
            t = time.perf_counter()
            for seq in range(last - (cur.rowcount or per_batch) + 1, last + 1):
                committed[seq] = t
            batches += 1
            wait = start + batches * 0.01 - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
        time.sleep(0.3)
    finally:
        stop.set()
        thread.join()
        writer.close()
    lat = sorted((fired[s] - committed[s]) * 1000 for s in fired if s in committed)
    elapsed = time.perf_counter() - start
    return {
        "rows": len(committed),
        "rate": len(committed) / max(elapsed - 0.3, 1e-9),
        "fires": len(lat),
        "p50": lat[len(lat) // 2] if lat else float("nan"),
        "p99": lat[min(len(lat) - 1, int(len(lat) * 0.99))] if lat else float("nan"),
        "max": lat[-1] if lat else float("nan"),
    }
