"""Decision traces: one file per event, then a compacted ``trace.jsonl``.

The layout follows the reference's ``spec/trace.md``: a run directory
``run-<unix ms>-<pid>/`` holding ``events/000001.<event>.json`` files, each
written to a temporary name and renamed into place so a reader never sees a
half-written event and parallel writers never share a mutable file. Every
event carries the same envelope (schema ``skillspec.trace/v0``) with the
skill id, spec schema, spec fingerprint and input hash, which is what lets
``trace align`` prove later that a decision is reproducible.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.capped import path_refusal
from engine.errors import Diagnostic, InputError, Location
from engine.jsontext import MAX_DEPTH as MAX_EVENT_DEPTH
from engine.jsontext import escape_surrogates, nested_deeper_than
from engine.skillspec.decide import CompiledSpec, Decision
from engine.skillspec.files import UnreadableFile, read_regular_file
from engine.skillspec.schema import TRACE_EVENT_KINDS

TRACE_SCHEMA = "skillspec.trace/v0"
EVENT_KINDS: tuple[str, ...] = TRACE_EVENT_KINDS  # one list: the spec schema's `trace.record`
_REQUIRED = (
    "schema",
    "run_id",
    "seq",
    "timestamp_unix_ms",
    "skill_id",
    "spec_schema",
    "event",
    "data",
)


@dataclass(frozen=True, slots=True)
class TraceWriteResult:
    run_id: str
    run_dir: Path
    event_count: int
    trace_jsonl: Path
    summary_json: Path

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "run_dir": str(self.run_dir),
            "event_count": self.event_count,
            "trace_jsonl": str(self.trace_jsonl),
            "summary_json": str(self.summary_json),
        }


def input_sha256(text: str) -> str:
    """The hash stored in envelopes: sha256 over the input's UTF-8 bytes."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def selected_kinds(compiled: CompiledSpec) -> frozenset[str]:
    """``trace.record`` when it lists kinds; every v0 kind when it is empty or absent."""
    return frozenset(compiled.trace_record) if compiled.trace_record else frozenset(EVENT_KINDS)


def _unix_ms() -> int:
    return time.time_ns() // 1_000_000


def _new_run_dir(root: Path) -> tuple[str, Path]:
    """Create ``run-<ms>-<pid>`` exclusively; a second run in the same ms waits a tick."""
    root.mkdir(parents=True, exist_ok=True)
    while True:
        run_id = f"run-{_unix_ms()}-{os.getpid()}"
        run_dir = root / run_id
        try:
            run_dir.mkdir()
        except FileExistsError:
            time.sleep(0.001)
            continue
        (run_dir / "events").mkdir()
        return run_id, run_dir


def _atomic_write(path: Path, content: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(escape_surrogates(content), encoding="utf-8")  # an input may hold "\\ud800"
    os.replace(tmp, path)


def write_decision_trace(
    root: Path | str,
    compiled: CompiledSpec,
    decision: Decision,
    spec_fingerprint: str | None,
) -> TraceWriteResult:
    """Write the decision's events (filtered by ``trace.record``) as a new run, then compact."""
    if not decision.events:
        raise ValueError("decision was made without events=True")
    refusal = path_refusal(str(root))
    if refusal is not None:
        raise InputError(f"cannot write a trace there: {refusal}", title="Bad trace directory")
    try:
        run_id, run_dir = _new_run_dir(Path(root))
        keep = selected_kinds(compiled)
        digest = input_sha256(decision.input)
        seq = 0
        for event in decision.events:
            if event.event not in keep:
                continue
            seq += 1
            envelope: dict[str, Any] = {
                "schema": TRACE_SCHEMA,
                "run_id": run_id,
                "seq": seq,
                "timestamp_unix_ms": _unix_ms(),
                "skill_id": compiled.skill_id,
                "spec_schema": compiled.schema,
                "spec_fingerprint": spec_fingerprint,
                "input_sha256": digest,
                "event": event.event,
                "event_name": event.event,
                "data": {"event": event.event, **event.data},
            }
            if spec_fingerprint is None:
                del envelope["spec_fingerprint"]
            path = run_dir / "events" / f"{seq:06d}.{event.event}.json"
            _atomic_write(path, json.dumps(envelope, indent=2, ensure_ascii=False, default=str))
    except OSError as exc:
        raise InputError(f"cannot write trace under {root}: {exc.strerror or exc}") from exc
    return compact(run_dir)


def _bad_event(path: Path, message: str) -> InputError:
    diag = Diagnostic(message, Location(str(path)))
    return InputError(f"{path}: {message}", title="Bad trace event", diagnostics=[diag])


def read_envelopes(run_dir: Path | str) -> list[dict[str, Any]]:
    """Every event file of a run, sorted by name, each checked for the envelope fields."""
    events_dir = Path(run_dir) / "events"
    refusal = path_refusal(str(events_dir))
    if refusal is not None:
        raise InputError(f"not a trace run directory: {refusal}", title="Bad trace")
    try:
        names = sorted(p for p in events_dir.iterdir() if p.suffix == ".json")
    except OSError:
        raise InputError(
            f"{run_dir}: not a trace run directory (no events/ folder)", title="Bad trace"
        ) from None
    out: list[dict[str, Any]] = []
    for path in names:
        try:
            raw = read_regular_file(path, cap=8 * 1024 * 1024)
            value = json.loads(raw.decode("utf-8"))
        except RecursionError:
            raise _bad_event(path, f"nested deeper than {MAX_EVENT_DEPTH} levels") from None
        except UnreadableFile as exc:
            raise _bad_event(path, f"cannot read: {exc.reason}") from None
        except UnicodeDecodeError as exc:
            raise _bad_event(path, f"not UTF-8 ({exc.reason})") from exc
        except json.JSONDecodeError as exc:
            diag = Diagnostic(
                f"invalid JSON: {exc.msg}", Location(str(path), exc.lineno, exc.colno)
            )
            raise InputError(str(diag), title="Bad trace event", diagnostics=[diag]) from exc
        except OSError as exc:
            raise _bad_event(path, f"cannot read: {exc.strerror or exc}") from exc
        if nested_deeper_than(value, MAX_EVENT_DEPTH):
            # An event this deep was not written by a trace; re-encoding it for
            # trace.jsonl or comparing it could exhaust the stack.
            raise _bad_event(path, f"nested deeper than {MAX_EVENT_DEPTH} levels")
        if not isinstance(value, dict):
            raise _bad_event(path, "an event must be a JSON object")
        missing = [key for key in _REQUIRED if key not in value]
        if missing:
            raise _bad_event(path, f"missing envelope field(s): {', '.join(missing)}")
        if value["event"] not in EVENT_KINDS:
            raise _bad_event(path, f"unknown event kind {value['event']!r}")
        if not isinstance(value["data"], dict):
            raise _bad_event(path, "data must be a JSON object")
        out.append(value)
    return out


def summarize(envelopes: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for env in envelopes:
        counts[env["event"]] = counts.get(env["event"], 0) + 1
    summary: dict[str, Any] = {
        "schema": TRACE_SCHEMA,
        "run_id": envelopes[0]["run_id"] if envelopes else "empty",
        "skill_id": envelopes[0]["skill_id"] if envelopes else "unknown",
    }
    for key in ("spec_fingerprint", "input_sha256"):
        found = next((e[key] for e in envelopes if e.get(key)), None)
        if found is not None:
            summary[key] = found
    summary["event_count"] = len(envelopes)
    summary["events"] = {kind: counts[kind] for kind in EVENT_KINDS if kind in counts}
    return summary


def compact(run_dir: Path | str) -> TraceWriteResult:
    """Write ``trace.jsonl`` (events in order) and ``summary.json`` for a run directory."""
    run_dir = Path(run_dir)
    envelopes = read_envelopes(run_dir)
    lines = "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in envelopes)
    summary = summarize(envelopes)
    try:
        _atomic_write(run_dir / "trace.jsonl", lines)
        _atomic_write(run_dir / "summary.json", json.dumps(summary, indent=2, ensure_ascii=False))
    except OSError as exc:
        raise InputError(f"cannot write to {run_dir}: {exc.strerror or exc}") from exc
    return TraceWriteResult(
        str(summary["run_id"]),
        run_dir,
        len(envelopes),
        run_dir / "trace.jsonl",
        run_dir / "summary.json",
    )
