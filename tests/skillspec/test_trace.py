"""Decision traces on disk, compaction, and trace align."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from engine.errors import InputError
from engine.skillspec.align import FAIL, PASS, UNPROVEN, align
from engine.skillspec.decide import CompiledSpec, compile_spec, decide
from engine.skillspec.trace import (
    EVENT_KINDS,
    TRACE_SCHEMA,
    compact,
    read_envelopes,
    write_decision_trace,
)

FP = "sha256:" + "ab" * 32


def make_spec(prefer: str = "browser", record: list[str] | None = None) -> CompiledSpec:
    data: dict[str, Any] = {
        "schema": "skillspec/v0",
        "id": "t.trace",
        "routes": [
            {"id": "local", "label": "L", "rank": 1, "checks": ["gh_ready"]},
            {"id": "browser", "label": "B", "rank": 2},
        ],
        "rules": [
            {
                "id": "b",
                "when": {"user_says_any": ["browse"]},
                "prefer": prefer,
                "forbid": ["curl"],
                "elicit": ["mode"],
                "after_success": ["save"],
                "reason": "R",
            },
            {"id": "other", "when": {"user_says_any": ["zzz"]}},
        ],
    }
    if record is not None:
        data["trace"] = {"mode": "event_log", "record": record}
    return compile_spec(data)


def write(tmp: Path, compiled: CompiledSpec, text: str = "Browse it", fp: str | None = FP) -> Path:
    result = write_decision_trace(tmp, compiled, decide(compiled, text, events=True), fp)
    return result.run_dir


def test_run_layout_and_envelope(tmp_path: Path) -> None:
    run_dir = write(tmp_path, make_spec())
    assert run_dir.parent == tmp_path and run_dir.name.startswith("run-")
    ms, pid = run_dir.name.split("-")[1:]
    assert ms.isdigit() and int(pid) > 0
    files = sorted(p.name for p in (run_dir / "events").iterdir())
    assert not [f for f in files if f.endswith(".tmp")]
    assert files[0] == "000001.input_received.json"
    assert files[-1].endswith(".outcome_recorded.json")
    envs = read_envelopes(run_dir)
    assert [e["seq"] for e in envs] == list(range(1, len(envs) + 1))
    first = envs[0]
    assert first["schema"] == TRACE_SCHEMA and first["run_id"] == run_dir.name
    assert first["skill_id"] == "t.trace" and first["spec_schema"] == "skillspec/v0"
    assert first["spec_fingerprint"] == FP
    assert first["input_sha256"] == "sha256:" + hashlib.sha256(b"Browse it").hexdigest()
    assert first["data"] == {"event": "input_received", "input": "Browse it"}
    for env in envs:
        assert env["event"] == env["event_name"] == env["data"]["event"]
        assert isinstance(env["timestamp_unix_ms"], int)
    lines = (run_dir / "trace.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == envs
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["event_count"] == len(envs)
    assert summary["events"]["rule_evaluated"] == 2 and summary["events"]["rule_matched"] == 1
    assert list(summary["events"]) == [k for k in EVENT_KINDS if k in summary["events"]]


def test_record_filters_events(tmp_path: Path) -> None:
    run_dir = write(tmp_path, make_spec(record=["input_received", "route_selected"]))
    kinds = [e["event"] for e in read_envelopes(run_dir)]
    assert kinds == ["input_received", "route_selected"]
    assert [e["seq"] for e in read_envelopes(run_dir)] == [1, 2]


def test_two_runs_never_share_a_directory(tmp_path: Path) -> None:
    compiled = make_spec()
    dirs = {write(tmp_path, compiled) for _ in range(5)}
    assert len(dirs) == 5


def test_compact_picks_up_appended_events(tmp_path: Path) -> None:
    run_dir = write(tmp_path, make_spec())
    envs = read_envelopes(run_dir)
    extra = {**envs[-1], "seq": len(envs) + 1}
    (run_dir / "events" / f"{len(envs) + 1:06d}.outcome_recorded.json").write_text(
        json.dumps(extra)
    )
    result = compact(run_dir)
    assert result.event_count == len(envs) + 1
    assert len((run_dir / "trace.jsonl").read_text().splitlines()) == len(envs) + 1


def test_bad_event_files_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no events/ folder"):
        compact(tmp_path)
    run_dir = write(tmp_path, make_spec())
    bad = run_dir / "events" / "000999.rule_matched.json"
    bad.write_text('{"schema": "x",\n  oops}')
    with pytest.raises(InputError) as err:
        compact(run_dir)
    loc = err.value.diagnostics[0].location
    assert loc.file == str(bad) and loc.line == 2
    bad.write_text('{"schema": "x"}')
    with pytest.raises(InputError, match="missing envelope field"):
        compact(run_dir)
    bad.write_bytes(b"\xff\xfe")
    with pytest.raises(InputError, match="not UTF-8"):
        compact(run_dir)


def test_align_reproducible_decision_is_unproven_not_failed(tmp_path: Path) -> None:
    compiled = make_spec()
    run_dir = write(tmp_path, compiled)
    report = align(compiled, "spec.yml", FP, run_dir)
    assert {c.id: c.status for c in report.checks} == {
        "skill_id": PASS,
        "spec_schema": PASS,
        "spec_fingerprint": PASS,
        "input_sha256": PASS,
        "route_selected": PASS,
        "route_selection_basis": PASS,
        "matched_rules": PASS,
        "forbids": PASS,
        "elicitations": PASS,
        "after_success": PASS,
    }
    assert report.status == UNPROVEN and report.ok
    assert [(o.kind, o.id) for o in report.obligations] == [
        ("route", "browser"),
        ("forbid", "curl"),
        ("elicitation", "mode"),
        ("after_success", "save"),
    ]
    assert all(o.status == UNPROVEN for o in report.obligations)
    written = json.loads((run_dir / "alignment.json").read_text())
    assert written["status"] == "unproven" and written["summary"]["selected_route"] == "browser"


def test_align_detects_drift(tmp_path: Path) -> None:
    run_dir = write(tmp_path, make_spec())
    changed = make_spec(prefer="local")
    report = align(changed, "spec.yml", "sha256:other", run_dir)
    status = {c.id: c.status for c in report.checks}
    assert status["route_selected"] == FAIL and status["spec_fingerprint"] == FAIL
    assert status["route_selection_basis"] == FAIL and status["matched_rules"] == PASS
    assert report.status == FAIL and not report.ok
    assert ("route_check", "gh_ready") in [(o.kind, o.id) for o in report.obligations]


def test_align_unrecorded_facts_are_unproven(tmp_path: Path) -> None:
    compiled = make_spec(record=["input_received", "outcome_recorded"])
    run_dir = write(tmp_path, compiled, fp=None)
    report = align(compiled, "spec.yml", FP, run_dir)
    status = {c.id: c.status for c in report.checks}
    assert status["spec_fingerprint"] == UNPROVEN
    assert status["forbids"] == UNPROVEN and status["elicitations"] == UNPROVEN
    assert status["route_selected"] == PASS and report.status == UNPROVEN


def test_align_without_input_event_is_refused(tmp_path: Path) -> None:
    compiled = make_spec(record=["route_selected"])
    run_dir = write(tmp_path, compiled)
    with pytest.raises(InputError, match="input_received"):
        align(compiled, "spec.yml", FP, run_dir)


def test_align_tampered_input_hash_fails(tmp_path: Path) -> None:
    compiled = make_spec()
    run_dir = write(tmp_path, compiled)
    first = run_dir / "events" / "000001.input_received.json"
    env = json.loads(first.read_text())
    env["data"]["input"] = "something else"
    first.write_text(json.dumps(env))
    report = align(compiled, "spec.yml", FP, run_dir)
    status = {c.id: c.status for c in report.checks}
    assert status["input_sha256"] == FAIL and status["matched_rules"] == FAIL


def test_compact_refuses_a_fifo_event_file_without_hanging(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    events = tmp_path / "run-1" / "events"
    events.mkdir(parents=True)
    os.mkfifo(events / "0001.json")
    out = subprocess.run(
        [sys.executable, "-m", "engine.cli.skillspec", "trace", "compact", str(tmp_path / "run-1")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 2
    assert "FIFO" in out.stderr and "Traceback" not in out.stderr
