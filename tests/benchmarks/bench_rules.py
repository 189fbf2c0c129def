"""Rules engine benchmarks: backtest throughput and memory, the naive baseline, live latency.

Figures (all measured in this run, on the deterministic simulated fleet):

- backtest rows/s with the starter pack over the 45-day fleet (~2.6M rows),
  beside the same run's plain Python scan of the whole journal, and the peak
  RSS of the process doing it (a child process, so the figure is the
  backtest's own, not this runner's);
- the same with 30 rules (the starter pack plus 24 varied rules), and its peak
  RSS, which must not grow with the number of primitive calls. The scan, the
  starter pack and the 30 rules run interleaved, three times each, and each
  figure is the median (a busy machine slows them alike);
- each backtest again without the prefilter (every row read, every shape
  fed to the window index), and whether its fires are the same, fire for fire;
- the naive way on a 100k-row slice: cel-python interpreted evaluation (no
  short-circuit, so it calls the primitives on every row of the kind) and one
  SQL query per primitive call; the ratio is the fast backtest's rows/s on the
  same slice over the naive one;
- live latency from a row's commit to its fire's commit while a writer
  commits 1,000 rows/s.

``quick`` uses ~2 days and a 5k-row naive slice. ``BENCH_RULES_STORE=/path/fleet.db``
reuses a 45-day store built by this module (it is only read) instead of
building one. Nothing here asserts on time.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from tests.benchmarks._common import Row

ROOT = Path(__file__).resolve().parents[2]

EXTRA_RULES: list[tuple[str, str, str]] = [
    # (kind, when, level): varied types, windows and primitives, most of them guarded
    (
        "run_event",
        'event.type == "tool_call" && '
        'event.outcome == "error" && '
        'count({"harness": event.harness, "outcome": "error"}, duration("10m")) >= 4',
        "notify",
    ),
    (
        "run_event",
        'event.type == "tool_call" && '
        'event.outcome == "timeout" && '
        'count({"tool": event.tool, "outcome": "timeout"}, duration("1h")) >= 8',
        "annotate",
    ),
    (
        "run_event",
        'event.type == "tool_call" && '
        'event.tool == "bash" && '
        'count({"harness": event.harness, "args_digest": event.args_digest}, duration("1m")) >= 6',
        "notify",
    ),
    (
        "run_event",
        'event.type == "tool_call" && '
        'event.outcome == "failed" && '
        'distinct("tool", {"harness": event.harness, "outcome": "failed"}, duration("30m")) >= 3',
        "annotate",
    ),
    (
        "run_event",
        'event.type == "tool_call" && '
        'event.tool == "web_fetch" && '
        'event.outcome != "ok" && '
        'exists({"harness": event.harness, "type": "verify_failed"}, duration("2h"))',
        "annotate",
    ),
    (
        "run_event",
        'event.type == "run_started" && '
        'count({"harness": event.harness, "type": "run_started"}, duration("3h")) >= 4',
        "annotate",
    ),
    (
        "run_event",
        'event.type == "run_started" && '
        'exists({"harness": event.harness, "type": "restart"}, duration("30m"))',
        "notify",
    ),
    (
        "run_event",
        'event.type == "run_finished" && '
        'event.outcome == "failed" && '
        'count({"harness": event.harness, "type": "run_finished", "outcome": "failed"}, '
        'duration("12h")) >= 2',
        "notify",
    ),
    (
        "run_event",
        'event.type == "run_finished" && '
        'event.outcome == "cancelled" && '
        'distinct("harness", {"type": "run_finished", "outcome": "cancelled"}, '
        'duration("24h")) >= 2',
        "annotate",
    ),
    (
        "run_event",
        'event.type == "verify_failed" && '
        'count({"project": event.project, "type": "verify_failed"}, duration("6h")) >= 3',
        "notify",
    ),
    (
        "run_event",
        'event.type == "verify_failed" && '
        'distinct("harness", {"type": "verify_failed"}, duration("24h")) >= 4',
        "annotate",
    ),
    (
        "run_event",
        'event.type == "restart" && '
        'count({"project": event.project, "type": "restart"}, duration("24h")) >= 2',
        "notify",
    ),
    (
        "run_event",
        'event.type == "restart" && '
        'distinct("cause_digest", {"harness": event.harness, "type": "restart"}, '
        'duration("168h")) >= 2',
        "annotate",
    ),
    (
        "run_event",
        'event.type == "loop_stopped" && '
        'exists({"harness": event.harness, "type": "restart"}, duration("24h"))',
        "notify",
    ),
    (
        "run_event",
        'event.type == "budget_exhausted" && '
        'distinct("harness", {"type": "budget_exhausted"}, duration("24h")) >= 2',
        "notify",
    ),
    (
        "run_event",
        'event.type in ["restart", "loop_stopped"] && '
        'count({"harness": event.harness}, duration("5m")) >= 20',
        "annotate",
    ),
    (
        "graph_event",
        'event.type == "file_edited" && '
        'count({"path": event.path, "type": "file_edited"}, duration("10m")) >= 6',
        "annotate",
    ),
    (
        "graph_event",
        'event.type == "file_edited" && '
        'distinct("harness", {"path": event.path, "type": "file_edited"}, duration("10m")) >= 3',
        "annotate",
    ),
    (
        "graph_event",
        'event.type == "collision" && '
        'count({"path": event.path, "type": "collision"}, duration("24h")) >= 2',
        "notify",
    ),
    (
        "graph_event",
        'event.type == "churn" && '
        'exists({"path": event.path, "type": "collision"}, duration("48h"))',
        "notify",
    ),
    (
        "fact_event",
        'event.type == "fact_added" && '
        'count({"project": event.project, "type": "fact_added"}, duration("6h")) >= 3',
        "annotate",
    ),
    (
        "fact_event",
        'event.type == "fact_retracted" && '
        'exists({"fact": event.fact, "type": "fact_added"}, duration("168h"))',
        "annotate",
    ),
    (
        "tick",
        'event.type == "tick" && count({"type": "restart"}, duration("1h")) >= 2',
        "annotate",
    ),
    (
        "tick",
        'event.type == "tick" && '
        'distinct("harness", {"type": "loop_stopped"}, duration("6h")) >= 2',
        "annotate",
    ),
]

#: A frequently firing rule, so live latency has many fires to time.
LATENCY_RULE = (
    "graph_event",
    'event.type == "file_edited" && count({"path": event.path, "type": "file_edited"},'
    ' duration("10m")) >= 3',
    "annotate",
)


def _compile(kind: str, when: str, level: str, name: str) -> Any:
    from engine.config import RulesConfig
    from engine.rules.loader import compile_rule_text

    text = (
        f"name: {name}\non: {kind}\nwhen: {json.dumps(when)}\nlevel: {level}\n"
        f"target: {'harness' if kind != 'tick' else 'type'}\ncooldown: 10m\nmessage: m\n"
    )
    compiled, errors = compile_rule_text(text, f"{name}.yml", "file", RulesConfig())
    if compiled is None:
        raise RuntimeError(f"benchmark rule {name} does not compile: {errors}")
    return compiled


def starter_rules() -> list[Any]:
    from engine.config import RulesConfig
    from engine.rules.loader import default_sources, load_rules

    return list(load_rules(default_sources(), RulesConfig()).rules)


def thirty_rules() -> list[Any]:
    extra = [_compile(k, w, lv, f"bench_{i:02d}") for i, (k, w, lv) in enumerate(EXTRA_RULES)]
    return starter_rules() + extra


def build_store(path: Path, days: int) -> int:
    from engine.fleet.sim import write_fleet
    from engine.store.db import connect

    conn = connect(path)
    result = write_fleet(conn, days=days, validate=False)
    conn.close()
    return int(result.admitted)


# -- the fast backtest, in a child process (own peak RSS) ---------------------------------


def child_backtest(
    store: str, which: str, first: int, last: int, prefilter: bool = True
) -> dict[str, Any]:
    """Run in a child: backtest ``which`` rules over seqs first..last; report figures.

    ``digest`` hashes every fire's full key (seq, rule, hash, target, level,
    aggregates) plus its status and effective level, so a prefiltered and an
    unfiltered run can be compared fire for fire across processes.
    """
    import hashlib
    import resource

    from engine.rules.backtest import SeqRange, run_backtest
    from engine.store.db import connect

    rules = starter_rules() if which == "starter" else thirty_rules()
    conn = connect(store, readonly=True)
    stats = conn.execute(
        "SELECT count(*), min(at), max(at) FROM rule_journal WHERE seq BETWEEN ? AND ?",
        (first, last),
    ).fetchone()
    rng = SeqRange(first, last, int(stats[0]), int(stats[1]), int(stats[2]))
    t0 = time.perf_counter()
    result = run_backtest(conn, rules, rng, prefilter=prefilter)
    secs = time.perf_counter() - t0
    digest = hashlib.sha256()
    for f in result.fires:
        digest.update(repr((*f.key(), f.status, f.effective_level)).encode())
    return {
        "rows": rng.rows,
        "scanned": result.rows_scanned,
        "evaluated": result.rows_evaluated,
        "secs": secs,
        "fires": len(result.fires),
        "digest": digest.hexdigest(),
        "keys": [list(map(str, f.key()[:4])) for f in result.fires] if rng.rows <= 200_000 else [],
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "rules": len(rules),
    }


def child_scan(store: str) -> dict[str, Any]:
    """Run in a child: the plain Python scan, every row of the journal read into tuples."""
    import resource

    from engine.rules.window import ROW_SELECT
    from engine.store.db import connect

    conn = connect(store, readonly=True)
    t0 = time.perf_counter()
    cur = conn.execute(ROW_SELECT + " ORDER BY seq")
    rows = 0
    while batch := cur.fetchmany(20_000):
        rows += len(batch)
    secs = time.perf_counter() - t0
    return {
        "rows": rows,
        "secs": secs,
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def _in_child(
    store: Path, which: str, first: int, last: int, prefilter: bool = True
) -> dict[str, Any]:
    call = (
        f"child_scan({str(store)!r})"
        if which == "scan"
        else f"child_backtest({str(store)!r}, {which!r}, {first}, {last}, {prefilter})"
    )
    code = (
        "import json, sys; from tests.benchmarks.bench_rules import child_backtest, child_scan; "
        f"print(json.dumps({call}))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


# -- the naive way: cel-python + one SQL query per primitive call ------------------------


def naive_backtest(store: Path, rules: list[Any], first: int, last: int) -> dict[str, Any]:
    """Interpret each rule with cel-python per row, primitives answered by SQL queries."""
    import celpy
    from celpy import celtypes

    from engine.rules.host_sql import SqlHost
    from engine.rules.model import KIND_FIELDS
    from engine.rules.window import COLUMNS, ROW_SELECT
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
    from engine.rules.evaluator import LiveEvaluator
    from engine.store.db import connect

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
            from engine.rules.lifecycle_run import open_live

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


# -- the entry point -----------------------------------------------------------------------


#: Interleaved runs of the scan, the starter pack and the 30 rules; each figure is the median.
REPEATS = 3


def _store(tmp: Path, days: int, quick: bool) -> tuple[Path, int, str]:
    """The fleet store: ``$BENCH_RULES_STORE`` (a 45-day store, only read) or a fresh one."""
    from engine.store.db import connect

    given = os.environ.get("BENCH_RULES_STORE")
    if given and not quick:
        conn = connect(given, readonly=True)
        total = int(conn.execute("SELECT max(seq) FROM rule_journal").fetchone()[0])
        conn.close()
        return Path(given), total, "reused $BENCH_RULES_STORE"
    t0 = time.perf_counter()
    total = build_store(tmp / "fleet.db", days)
    return tmp / "fleet.db", total, f"built in {time.perf_counter() - t0:.0f}s"


def _median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median time, with every run's seconds and the highest peak RSS."""
    ordered = sorted(runs, key=lambda r: float(r["secs"]))
    out = dict(ordered[len(ordered) // 2])
    out["all_secs"] = ", ".join(f"{r['secs']:.2f}" for r in runs)
    out["rss_mb"] = max(float(r["rss_mb"]) for r in runs)
    out["stable"] = len({r.get("digest") for r in runs}) == 1
    return out


def run(quick: bool) -> list[Row]:
    days = 2 if quick else 45
    slice_rows = 5_000 if quick else 100_000
    rows_out: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="bench_rules_") as tmp:
        store, total, built = _store(Path(tmp), days, quick)
        print(f"  {days}-day fleet: {total:,} rows, {built}", file=sys.stderr)

        runs: dict[str, list[dict[str, Any]]] = {"scan": [], "starter": [], "thirty": []}
        for _ in range(REPEATS):
            for which, done in runs.items():
                done.append(_in_child(store, which, 1, total))
        scan, starter, thirty = (_median(runs[w]) for w in ("scan", "starter", "thirty"))
        scan_rate, how = scan["rows"] / scan["secs"], f"median of {REPEATS} interleaved runs"
        rows_out.append(
            Row(
                f"plain Python scan of the whole journal, {days}d",
                scan_rate,
                "rows/s",
                note=f"{scan['rows']:,} rows read into tuples in {scan['secs']:.2f}s"
                f" (runs: {scan['all_secs']} s), peak RSS {scan['rss_mb']:.0f} MiB"
                " (the baseline of the two rows below)",
            )
        )
        for label, fast, factor in (
            ("starter pack", starter, 3),
            (f"{thirty['rules']} rules", thirty, 1),
        ):
            rows_out.append(
                Row(
                    f"backtest {label}, {days}d fleet (vs scan)",
                    fast["rows"] / fast["secs"],
                    "rows/s",
                    target=factor * scan_rate,
                    baseline=scan_rate,
                    note=f"{fast['rows']:,} rows in {fast['secs']:.2f}s ({how}:"
                    f" {fast['all_secs']} s); {fast['scanned']:,} candidate rows read, rules"
                    f" decided on {fast['evaluated']:,}; {fast['fires']} fires, {fast['rules']}"
                    f" rules, the same in every run: {fast['stable']};"
                    f" target = {factor}x the scan's rows/s",
                )
            )
            rss = f"backtest {label}, peak RSS"
            note = "the highest of the runs"
            rows_out.append(Row(rss, fast["rss_mb"], "MiB", 500, False, note=note))
        for name, fast in (("starter pack", starter), (f"{thirty['rules']} rules", thirty)):
            which = "starter" if fast is starter else "thirty"
            plain = _in_child(store, which, 1, total, prefilter=False)
            same = plain["digest"] == fast["digest"] and plain["fires"] == fast["fires"]
            rows_out.append(
                Row(
                    f"unfiltered backtest {name}, {days}d (prefilter speed-up)",
                    plain["rows"] / plain["secs"],
                    "rows/s",
                    baseline=fast["rows"] / fast["secs"],
                    higher_is_better=False,
                    note=f"every row read: {plain['secs']:.2f}s, {plain['fires']} fires;"
                    f" prefiltered fires identical fire for fire: {same}",
                )
            )

        first = max(1, total // 2 - slice_rows // 2)
        last = first + slice_rows - 1
        fast = _in_child(store, "starter", first, last)
        naive = naive_backtest(store, starter_rules(), first, last)
        fast_rate = fast["rows"] / fast["secs"]
        naive_rate = naive["rows"] / naive["secs"]
        same = sorted((int(k[0]), k[1]) for k in fast["keys"]) == sorted(naive["fires"])
        rows_out.append(
            Row(
                f"naive backtest (cel-python + SQL/call), {slice_rows // 1000}k slice",
                naive_rate,
                "rows/s",
                note=f"{naive['queries']:,} SQL queries in {naive['secs']:.1f}s; "
                f"{len(naive['fires'])} fires, same fire list as the fast path: {same}",
            )
        )
        rows_out.append(
            Row(
                f"fast backtest, same {slice_rows // 1000}k slice (ratio vs naive)",
                fast_rate,
                "rows/s",
                target=30 * naive_rate,
                baseline=naive_rate,
                note="target = 30x the naive rows/s measured above",
            )
        )

    live = live_latency(3.0 if quick else 10.0)
    rows_out.append(
        Row(
            "live latency commit->fire committed, p99",
            live["p99"],
            "ms",
            target=100,
            higher_is_better=False,
            note=f"{live['rows']:,} rows at {live['rate']:.0f} rows/s, {live['fires']} fires;"
            f" p50 {live['p50']:.1f} ms, max {live['max']:.1f} ms",
        )
    )
    return rows_out
