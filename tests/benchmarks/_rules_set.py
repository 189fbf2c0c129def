"""The benchmark's rule sets: the starter pack, and 24 varied rules that make the 30-rule set.

Shared by the whole-command figures (as rule files, :func:`write_rule_files`)
and the in-process ones (compiled, :func:`thirty_rules`), so both run exactly
the same rules.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

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


def write_rule_files(folder: Path) -> list[Path]:
    """The 30-rule set as rule files: the starter pack's files and one file per extra rule."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for path in sorted((ROOT / "starter_rules").glob("*.yml")):
        paths.append(Path(shutil.copy(path, folder / path.name)))
    for i, (kind, when, level) in enumerate(EXTRA_RULES):
        name = f"bench_{i:02d}"
        target = folder / f"{name}.yml"
        target.write_text(_rule_text(kind, when, level, name), encoding="utf-8")
        paths.append(target)
    return paths


def _rule_text(kind: str, when: str, level: str, name: str) -> str:
    return (
        f"name: {name}\non: {kind}\nwhen: {json.dumps(when)}\nlevel: {level}\n"
        f"target: {'harness' if kind != 'tick' else 'type'}\ncooldown: 10m\nmessage: m\n"
    )


def _compile(kind: str, when: str, level: str, name: str) -> Any:
    from engine.config import RulesConfig
    from engine.rules.language.loader import compile_rule_text

    compiled, errors = compile_rule_text(
        _rule_text(kind, when, level, name), f"{name}.yml", "file", RulesConfig()
    )
    if compiled is None:
        raise RuntimeError(f"benchmark rule {name} does not compile: {errors}")
    return compiled


def starter_rules() -> list[Any]:
    from engine.config import RulesConfig
    from engine.rules.language.loader import default_sources, load_rules

    return list(load_rules(default_sources(), RulesConfig()).rules)


def thirty_rules() -> list[Any]:
    extra = [_compile(k, w, lv, f"bench_{i:02d}") for i, (k, w, lv) in enumerate(EXTRA_RULES)]
    return starter_rules() + extra
