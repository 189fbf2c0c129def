"""Rules engine benchmarks, measured as a user meets them, beside the in-process figures.

Figures (issue 21), all in this run, on the deterministic 45-day demo fleet:

- ``harness demo --days 45 --seed 9`` builds the store in this run (2.66M
  rows); the first command run on it is a backtest. A backtest opens the
  store read-only and writes nothing (``test_backtest_writes_nothing``), so
  every later run meets the same store a first run does;
- the plain Python scan of every row (a child process reading each row into a
  tuple) is the baseline; the starter pack backtest (``harness rules backtest
  starter_rules/*.yml --from-seq 1 --json``, the installed console script,
  with bytecode) and the 30-rule set (the starter pack plus 24 varied rules,
  as rule files) run interleaved with it, three times each, and each figure
  is the median, with its own peak RSS (``wait4``) and the in-process time of
  the same backtest (``backtest_with_lifecycle``, as the command wires it)
  beside it; the fires the command printed are digested and must equal the
  in-process ones, run after run;
- ``BENCH_BEFORE_VENV=/path/to/venv`` also runs the same commands with that
  venv's console script (an older checkout), interleaved, and says whether its
  fires are the same;
- each backtest again without the prefilter (every row read, every shape fed
  to the window index), in process, and whether its fires are the same;
- the naive way on a 100k-row slice (cel-python, one SQL query per primitive
  call) against the fast backtest on the same slice, and live latency from a
  row's commit to its fire's while a writer commits 1,000 rows/s
  (:mod:`tests.benchmarks._rules_inproc`).

``quick`` uses 2 days and a 5k-row slice. ``BENCH_RULES_STORE=/path/fleet.db``
reuses a store built by ``harness demo --days 45 --seed 9`` instead of
building one (then the first-run claim is the reader's to judge). Nothing
here asserts on time.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.benchmarks import _wholecmd as cmd
from tests.benchmarks._common import Row
from tests.benchmarks._rules_set import starter_rules, thirty_rules, write_rule_files

ROOT = Path(__file__).resolve().parents[2]
#: Interleaved runs of the scan and each backtest; each figure is the median.
REPEATS = 3
SEED = 9


def fires_digest(fires: list[dict[str, Any]] | list[Any]) -> str:
    """SHA-256 over every fire's seq, rule, hash, target, levels, status and aggregates."""
    h = hashlib.sha256()
    for f in fires:
        if not isinstance(f, dict):
            f = {
                "seq": f.seq,
                "rule": f.rule,
                "hash": f.hash,
                "target": f.target,
                "level": f.level,
                "effective_level": f.effective_level,
                "status": f.status,
                "aggregates": [[c.fn, c.field, sorted(map(list, c.selector)), c.window_ms, c.result]
                               for c in f.calls],
            }  # fmt: skip
        else:
            f = {**f, "aggregates": [[a["fn"], a["field"], sorted(map(list, a["selector"].items())),
                                      _window_ms(a["window"]), a["result"]]
                                     for a in f["aggregates"]]}  # fmt: skip
        key = [f[k] for k in ("seq", "rule", "hash", "target", "level", "effective_level")]
        h.update(json.dumps([*key, f["status"], f["aggregates"]], sort_keys=True).encode())
    return h.hexdigest()


def _window_ms(text: str) -> int:
    from engine.durations import parse_duration_ms

    return parse_duration_ms(text)


# -- children ----------------------------------------------------------------------------


def child_backtest(
    store: str,
    which: str,
    first: int,
    last: int,
    prefilter: bool = True,
    lifecycle: bool = True,
    files: list[str] | None = None,
) -> dict[str, Any]:
    """Run in a child: backtest ``which`` rules over seqs first..last in process; report figures.

    With ``lifecycle`` the backtest is wired as ``harness rules backtest``
    wires it (:func:`backtest_with_lifecycle`, the default config), and with
    ``files`` the rules are loaded from those rule files as the command loads
    them (so the starter pack's files are file rules, which serve shadow), so
    its fires can be compared with the command's.
    """
    import resource

    from engine.rules.authority.enforcement import Authority
    from engine.rules.authority.lifecycle_run import backtest_with_lifecycle
    from engine.rules.evaluation.backtest import run_backtest
    from engine.rules.evaluation.ranges import SeqRange
    from engine.store.db import connect

    if files:
        from engine.cli.cmd_backtest import resolve_rules
        from engine.config import HarnessConfig

        rules = resolve_rules(files, HarnessConfig())
    else:
        rules = starter_rules() if which == "starter" else thirty_rules()
    conn = connect(store, readonly=True)
    stats = conn.execute(
        "SELECT count(*), min(at), max(at) FROM rule_journal WHERE seq BETWEEN ? AND ?",
        (first, last),
    ).fetchone()
    rng = SeqRange(first, last, int(stats[0]), int(stats[1]), int(stats[2]))
    cpu, t0 = time.process_time(), time.perf_counter()
    if lifecycle:
        authority = Authority.from_rules_config(_default_rules_config())
        result = backtest_with_lifecycle(conn, rules, rng, authority, prefilter=prefilter)
    else:
        result = run_backtest(conn, rules, rng, prefilter=prefilter)
    secs, cpu = time.perf_counter() - t0, time.process_time() - cpu
    return {
        "rows": rng.rows,
        "scanned": result.rows_scanned,
        "evaluated": result.rows_evaluated,
        "secs": secs,
        "cpu": cpu,
        "fires": len(result.fires),
        "digest": fires_digest(list(result.fires)),
        "keys": [list(map(str, f.key()[:4])) for f in result.fires] if rng.rows <= 200_000 else [],
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "rules": len(rules),
    }


def _default_rules_config() -> Any:
    from engine.config import RulesConfig

    return RulesConfig()


SCAN = """
import json, sqlite3, sys, time
t0, c0 = time.perf_counter(), time.process_time()
conn = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
cur = conn.execute(sys.argv[2] + " ORDER BY seq")
rows = 0
while batch := cur.fetchmany(20_000):
    rows += len(batch)
print(json.dumps({"rows": rows, "secs": time.perf_counter() - t0, "cpu": time.process_time() - c0}))
"""


def _in_child(store: Path, which: str, **kw: Any) -> dict[str, Any]:
    args = ", ".join(f"{k}={v!r}" for k, v in kw.items())
    code = (
        "import json; from tests.benchmarks.bench_rules import child_backtest; "
        f"print(json.dumps(child_backtest({str(store)!r}, {which!r}, {args})))"
    )
    out = Path(tempfile.mkstemp(prefix="bench_child_", suffix=".json")[1])
    cmd.run([sys.executable, "-c", code], out)
    text = out.read_text()
    out.unlink()
    return dict(json.loads(text.strip().splitlines()[-1]))


# -- the store ---------------------------------------------------------------------------


def _store(tmp: Path, days: int, quick: bool) -> tuple[Path, str]:
    """A store built now by ``harness demo`` (or ``$BENCH_RULES_STORE``, only read)."""
    given = os.environ.get("BENCH_RULES_STORE")
    if given and not quick:
        return Path(given), "reused $BENCH_RULES_STORE (built earlier, not in this run)"
    path = tmp / "fleet.db"
    t0 = time.perf_counter()
    argv = [cmd.script("harness"), "demo", "--days", str(days), "--seed", str(SEED)]
    cmd.run([*argv, "--store", str(path)], tmp / "demo.out")
    return path, f"built in this run by `harness demo --days {days} --seed {SEED}` in " + (
        f"{time.perf_counter() - t0:.0f}s"
    )


def _journal(store: Path) -> tuple[int, int, int]:
    import sqlite3

    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    first = conn.execute("SELECT seq FROM rule_journal ORDER BY seq LIMIT 1").fetchone()[0]
    last = conn.execute("SELECT seq FROM rule_journal ORDER BY seq DESC LIMIT 1").fetchone()[0]
    rows = conn.execute("SELECT count(*) FROM rule_journal").fetchone()[0]
    conn.close()
    return int(first), int(last), int(rows)


# -- whole commands ----------------------------------------------------------------------


def _commands(
    store: Path, tmp: Path, starter: list[Path], thirty: list[Path]
) -> dict[str, list[str]]:
    from engine.rules.evaluation.window import ROW_SELECT

    def backtest(venv_bin: Path, files: list[Path]) -> list[str]:
        bt = [cmd.script("harness", venv_bin), "rules", "backtest", *map(str, files)]
        return [*bt, "--from-seq", "1", "--json", "--store", str(store)]

    commands = {
        "scan": [sys.executable, "-c", SCAN, str(store), ROW_SELECT],
        "starter": backtest(cmd.BIN, starter),
        "thirty": backtest(cmd.BIN, thirty),
    }
    before = os.environ.get("BENCH_BEFORE_VENV")
    if before:
        commands["starter_before"] = backtest(Path(before) / "bin", starter)
        commands["thirty_before"] = backtest(Path(before) / "bin", thirty)
    return commands


def _interleaved(commands: dict[str, list[str]], tmp: Path) -> dict[str, list[cmd.Run]]:
    # The commands read no operator config: the default authority, as in process.
    config = {"HARNESS_CONFIG": str(tmp / "absent-harness.toml")}
    runs: dict[str, list[cmd.Run]] = {name: [] for name in commands}
    for i in range(REPEATS):
        for name, argv in commands.items():
            runs[name].append(cmd.run(argv, tmp / f"{name}.{i}.out", extra_env=config))
    return runs


def _printed(run: cmd.Run) -> dict[str, Any]:
    return dict(json.loads(run.out.read_bytes()))


def run(quick: bool) -> list[Row]:
    days = 2 if quick else 45
    slice_rows = 5_000 if quick else 100_000
    rows_out: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="bench_rules_") as tmp_name:
        tmp = Path(tmp_name)
        cmd.compile_tree()
        if os.environ.get("BENCH_BEFORE_VENV"):
            cmd.compile_tree(Path(os.environ["BENCH_BEFORE_VENV"]) / "bin")
        store, built = _store(tmp, days, quick)
        first, last, total = _journal(store)
        print(f"  {days}-day fleet: {total:,} rows, {built}", file=sys.stderr)
        starter_files = sorted((ROOT / "starter_rules").glob("*.yml"))
        thirty_files = write_rule_files(tmp / "rules30")
        runs = _interleaved(_commands(store, tmp, starter_files, thirty_files), tmp)
        files = {"starter": list(map(str, starter_files)), "thirty": list(map(str, thirty_files))}
        rows_out += _whole_rows(runs, store, days, (first, last), files)
        rows_out += _unfiltered_rows(store, days, first, last)
        rows_out += _naive_rows(store, total, slice_rows)
    return rows_out + _live_rows(quick)


def _whole_rows(
    runs: dict[str, list[cmd.Run]],
    store: Path,
    days: int,
    bounds: tuple[int, int],
    files: dict[str, list[str]],
) -> list[Row]:
    first, last = bounds
    scan_runs = runs["scan"]
    scan = cmd.median(scan_runs)
    scan_inner = _printed(scan)
    total = int(scan_inner["rows"])
    scan_rate = total / scan.secs
    out = [
        Row(
            f"plain Python scan of every row, {days}d (whole process)",
            scan_rate,
            "rows/s",
            note=f"{total:,} rows in {scan.secs:.2f}s (runs: {cmd.spread(scan_runs)} s;"
            f" CPU {cmd.cpu_median(scan_runs):.2f}s; in process {scan_inner['secs']:.2f}s),"
            f" peak RSS {scan.rss_mb:.0f} MiB; the baseline of the backtests below;"
            f" {cmd.load_note()}",
        )
    ]
    for which, label, factor in (("starter", "starter pack", 10), ("thirty", "30 rules", 3)):
        done = runs[which]
        best = cmd.median(done)
        printed = [_printed(r) for r in done]
        digests = {fires_digest(p["fires"]) for p in printed}
        inner = _in_child(store, which, first=first, last=last, files=files[which])
        same = digests == {inner["digest"]}
        before = _before_note(runs, which, digests)
        out.append(
            Row(
                f"backtest {label}, {days}d, whole command (vs scan)",
                total / best.secs,
                "rows/s",
                target=factor * scan_rate,
                baseline=scan_rate,
                note=f"`harness rules backtest ... --from-seq 1 --json`: {best.secs:.2f}s"
                f" (runs: {cmd.spread(done)} s; the first was the first command on the"
                f" store; CPU {cmd.cpu_median(done):.2f}s); in process the backtest takes"
                f" {inner['secs']:.2f}s ({total / inner['secs']:,.0f} rows/s, CPU"
                f" {inner['cpu']:.2f}s), reading {inner['scanned']:,} rows, rules decided on"
                f" {inner['evaluated']:,}; {inner['fires']} fires, the command's fires equal"
                f" the in-process ones in every run: {same}; target = {factor}x the scan"
                f"{before}",
            )
        )
        out.append(
            Row(f"backtest {label}, whole command, peak RSS", best.rss_mb, "MiB", 500, False)
        )
    return out


def _before_note(runs: dict[str, list[cmd.Run]], which: str, digests: set[str]) -> str:
    """With ``BENCH_BEFORE_VENV``: the older checkout's median and whether its fires agree."""
    done = runs.get(f"{which}_before")
    if not done:
        return ""
    best = cmd.median(done)
    theirs = {fires_digest(_printed(r)["fires"]) for r in done}
    return (
        f"; before ($BENCH_BEFORE_VENV): {best.secs:.2f}s (runs: {cmd.spread(done)} s), peak"
        f" RSS {best.rss_mb:.0f} MiB, fires digest equal to now: {theirs == digests}"
    )


def _unfiltered_rows(store: Path, days: int, first: int, last: int) -> list[Row]:
    out = []
    for which, name in (("starter", "starter pack"), ("thirty", "30 rules")):
        fast = _in_child(store, which, first=first, last=last, lifecycle=False)
        plain = _in_child(store, which, first=first, last=last, prefilter=False, lifecycle=False)
        same = plain["digest"] == fast["digest"] and plain["fires"] == fast["fires"]
        out.append(
            Row(
                f"unfiltered backtest {name}, {days}d, in process",
                plain["rows"] / plain["secs"],
                "rows/s",
                baseline=fast["rows"] / fast["secs"],
                higher_is_better=False,
                note=f"every row read: {plain['secs']:.2f}s, {plain['fires']} fires; prefiltered"
                f" ({fast['secs']:.2f}s) fires identical fire for fire: {same}",
            )
        )
    return out


def _naive_rows(store: Path, total: int, slice_rows: int) -> list[Row]:
    from tests.benchmarks._rules_inproc import naive_backtest

    first = max(1, total // 2 - slice_rows // 2)
    last = first + slice_rows - 1
    fast = _in_child(store, "starter", first=first, last=last, lifecycle=False)
    naive = naive_backtest(store, starter_rules(), first, last)
    fast_rate = fast["rows"] / fast["secs"]
    naive_rate = naive["rows"] / naive["secs"]
    same = sorted((int(k[0]), k[1]) for k in fast["keys"]) == sorted(naive["fires"])
    return [
        Row(
            f"naive backtest (cel-python + SQL/call), {slice_rows // 1000}k slice",
            naive_rate,
            "rows/s",
            note=f"{naive['queries']:,} SQL queries in {naive['secs']:.1f}s; "
            f"{len(naive['fires'])} fires, same fire list as the fast path: {same}",
        ),
        Row(
            f"fast backtest, same {slice_rows // 1000}k slice, in process (vs naive)",
            fast_rate,
            "rows/s",
            target=30 * naive_rate,
            baseline=naive_rate,
            note="target = 30x the naive rows/s measured above",
        ),
    ]


def _live_rows(quick: bool) -> list[Row]:
    from tests.benchmarks._rules_inproc import live_latency

    live = live_latency(3.0 if quick else 10.0)
    return [
        Row(
            "live latency commit->fire committed, p99",
            live["p99"],
            "ms",
            target=100,
            higher_is_better=False,
            note=f"{live['rows']:,} rows at {live['rate']:.0f} rows/s, {live['fires']} fires;"
            f" p50 {live['p50']:.1f} ms, max {live['max']:.1f} ms",
        )
    ]


if __name__ == "__main__":
    from tests.benchmarks._common import print_table

    print_table(run(quick="--quick" in sys.argv))
