"""A command hook for the end-to-end suite: records its stdin payload and answers per a rule file.

Usage (as a client's hook command): ``python3 -I -S record_hook.py LOG RULES [TAG]``.
Appends ``{"tag", "at", "mono", "payload", "answer", "exit"}`` to the JSONL file ``LOG``
and prints the answer of the first rule in the JSON file ``RULES`` that matches (``{}``
when none does or the file is absent). Only the standard library: it starts fast.

A rule is an object: ``event`` (the payload's ``hook_event_name``, optional),
``contains`` (a substring of the JSON of the payload's ``tool_input``, else of the whole
payload; optional), ``answer`` (a JSON object printed on stdout; by default ``{}``, or
nothing at all when ``exit`` is not 0), ``exit`` (the exit code, default 0) and ``stderr``
(text written to stderr).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any


def matches(rule: dict[str, Any], payload: dict[str, Any]) -> bool:
    """Whether ``rule`` applies to the hook call ``payload``."""
    event = rule.get("event")
    if event is not None and payload.get("hook_event_name") != event:
        return False
    needle = rule.get("contains")
    if needle is None:
        return True
    subject = payload.get("tool_input", payload)
    return str(needle) in json.dumps(subject, sort_keys=True, ensure_ascii=False)


def rule_for(rules: list[dict[str, Any]], payload: dict[str, Any]) -> dict[str, Any]:
    """The first matching rule, or the empty rule (answer ``{}``, exit 0)."""
    for rule in rules:
        if matches(rule, payload):
            return rule
    return {}


def load_rules(path: str) -> list[dict[str, Any]]:
    try:
        with open(path, encoding="utf-8") as handle:
            rules = json.load(handle)
    except FileNotFoundError:
        return []
    if not isinstance(rules, list):
        raise SystemExit(f"{path}: a JSON list of rules was expected")
    return rules


def append(log: str, line: dict[str, Any]) -> None:
    """One write(2) of one line with O_APPEND: concurrent hooks never interleave lines."""
    data = (json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8")
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        sys.stderr.write("usage: record_hook.py LOG RULES [TAG]\n")
        return 64
    log, rules_path = argv[1], argv[2]
    tag = argv[3] if len(argv) > 3 else ""
    raw = sys.stdin.read()
    try:
        payload = json.loads(raw)
    except ValueError:
        payload = {"_unparsed": raw}
    rule = rule_for(load_rules(rules_path), payload if isinstance(payload, dict) else {})
    code = int(rule.get("exit", 0))
    answer = rule.get("answer", {} if code == 0 else None)
    line = {
        "tag": tag,
        "at": time.time(),
        "mono": time.monotonic(),
        "payload": payload,
        "answer": answer,
        "exit": code,
    }
    append(log, line)
    if rule.get("stderr"):
        sys.stderr.write(str(rule["stderr"]))
    if answer is not None:
        sys.stdout.write(json.dumps(answer))
        sys.stdout.flush()
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
