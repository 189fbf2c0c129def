"""Doctor reports each problem it can see; metrics agree with the store, in Prometheus format."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from engine.rules.authority.lease import Lease
from engine.rules.authority.lifecycle_run import open_live
from engine.rules.doctor import run_doctor
from engine.rules.metrics import collect, render_prometheus
from engine.store.db import connect
from tests.rules._lifecycle_util import MIN, Journal, config, starter

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = re.compile(r"^([a-z_]+)(\{[^}]*\})? (-?[0-9.e+]+)$")


def parse_prom(text: str) -> dict[str, float]:
    """Every sample line as "name{labels}" -> value; fails on any malformed line."""
    out: dict[str, float] = {}
    declared: set[str] = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            declared.add(line.split()[2])
            continue
        if line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, f"not a Prometheus sample: {line!r}"
        base = re.sub(r"_total$", "_total", m.group(1))
        assert base in declared, f"sample {base} has no # TYPE"
        out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return out


def busy_store(tmp_path: Path) -> Path:
    store = tmp_path / "s.db"
    conn = connect(store)
    j = Journal(conn)
    j.advance(3 * MIN)
    j.restarts("h1", 5)
    j.restarts("h2", 3)
    conn.execute("INSERT INTO journal_counters (name, value) VALUES ('dropped', 4), ('refused', 2)")
    evaluator, _ = open_live(conn, starter(), config(enforce=("restart_same_error",)))
    evaluator.run_until_idle()
    j.advance(5 * MIN)  # rows the evaluator has not seen yet: lag
    conn.close()
    return store


def test_metrics_match_the_store(tmp_path: Path) -> None:
    store = busy_store(tmp_path)
    conn = connect(store)
    values = parse_prom(render_prometheus(collect(conn)))
    ticks = conn.execute("SELECT COUNT(*) FROM rule_journal WHERE kind='tick'").fetchone()[0]
    assert values['harness_journal_rows{kind="tick"}'] == ticks
    assert values['harness_journal_rows{kind="run_event"}'] == 8
    assert values["harness_journal_dropped_total"] == 4
    assert values["harness_journal_refused_total"] == 2
    assert values['harness_rule_fires_total{rule="restart_same_error",status="fired"}'] == 2
    # h1: 5 restarts, fires on the 3rd, the 4th and 5th fall in the 30m cooldown
    assert values['harness_rule_fires_total{rule="restart_same_error",status="suppressed"}'] == 2
    assert values['harness_rule_suppressed_total{rule="restart_same_error"}'] == 2
    assert values["harness_rule_holds_active"] == 2
    assert values["harness_evaluator_lag_rows"] == 5
    assert values["harness_evaluator_lag_seconds"] == 300
    evaluations = conn.execute("SELECT value FROM rule_counters WHERE name='evaluations'")
    assert values["harness_rule_evaluations_total"] == evaluations.fetchone()[0] > 0
    assert values["harness_evaluator_lease_held"] == 0


def test_metrics_escape_label_values() -> None:
    from engine.rules.metrics import StoreFacts

    text = render_prometheus(StoreFacts(fires={('we"ird\\rule\n', "fired"): 1}))
    assert 'rule="we\\"ird\\\\rule\\n"' in text
    parse_prom(text)


def test_doctor_reports_lag_drops_holds_and_a_lease(tmp_path: Path) -> None:
    store = busy_store(tmp_path)
    report = run_doctor(
        store,
        config_loader=lambda: config(enforce=("restart_same_error", "nope@zz")),
        rule_names={"restart_same_error"},
    )
    by = {c.name: c for c in report.checks}
    assert report.ok
    assert by["store integrity"].status == "ok" and by["store WAL"].detail == "journal_mode=wal"
    assert by["lease"].status == "warn" and "nothing is acting" in by["lease"].detail
    assert by["evaluator lag"].status == "warn" and "5 row(s)" in by["evaluator lag"].detail
    assert by["journal admission"].detail.startswith("4 dropped")
    assert len(by["holds"].items) == 2 and "h1" in by["holds"].items[0]
    assert by["enforce"].status == "warn" and any("nope@zz" in i for i in by["enforce"].items)
    lease = Lease(connect(store), holder="evaluator-x")
    assert lease.try_acquire()
    by = {c.name: c for c in run_doctor(store, config_loader=config).checks}
    assert by["lease"].status == "ok" and "evaluator-x" in by["lease"].detail


def _harness(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        [sys.executable, "-m", "engine.cli.harness", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def test_doctor_cli_fails_on_a_bad_config_with_its_line(tmp_path: Path) -> None:
    store = busy_store(tmp_path)
    cfg = tmp_path / "harness.toml"
    cfg.write_text('[memory.rules]\nenforce = ["a"]\nshadow_period = 5\n')
    res = _harness("doctor", "--store", str(store), "--json", env={"HARNESS_CONFIG": str(cfg)})
    assert res.returncode == 1
    report = json.loads(res.stdout)
    [bad] = [c for c in report["checks"] if c["name"] == "config"]
    assert bad["status"] == "error" and any(f"{cfg}:3:1" in i for i in bad["items"])
    missing = _harness("doctor", "--store", str(tmp_path / "none.db"))
    assert missing.returncode == 1 and "no store at" in missing.stdout


@pytest.mark.parametrize("store_exists", [True, False])
def test_metrics_cli(tmp_path: Path, store_exists: bool) -> None:
    store = busy_store(tmp_path) if store_exists else tmp_path / "none.db"
    res = _harness("metrics", "--store", str(store))
    if store_exists:
        assert res.returncode == 0
        assert parse_prom(res.stdout)["harness_rule_holds_active"] == 2
    else:
        assert res.returncode == 2 and "no store here" in res.stderr
