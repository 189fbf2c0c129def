"""Semantic hash: formatting never changes it, meaning always does."""

from __future__ import annotations

import json

import pytest

from engine.config import RulesConfig
from engine.rules.language.loader import compile_rule_file

BASE = {
    "name": "restart_same_error",
    "description": "A harness restarts into the same error.",
    "on": "run_event",
    "level": "hold",
    "target": "harness",
    "cooldown": "30m",
    "message": "{harness} keeps restarting",
}
WHEN = (
    'event.type == "restart" && has(event.cause_digest) && '
    'count({"harness": event.harness, "type": "restart", "cause_digest": event.cause_digest},'
    ' duration("1h")) >= 3'
)


def rule_text(when: str = WHEN, style: str = "plain", **over: str) -> str:
    fields = {**BASE, **over}
    lines = [f"{k}: {v!r}" if k != "on" else f"on: {v}" for k, v in fields.items()]
    if style == "folded":
        body = "\n".join("  " + ln for ln in when.split("\n"))
        lines.append(f"when: >-\n{body}")
    elif style == "literal":
        body = "\n".join("  " + ln for ln in when.split("\n"))
        lines.append(f"when: |\n{body}")
    else:  # a JSON string is a valid YAML double-quoted scalar, escapes and all
        lines.append(f"when: {json.dumps(when)}")
    return "\n".join(lines) + "\n"


def hash_of(text: str) -> str:
    res = compile_rule_file(text, "r.yml", "file", RulesConfig())
    assert not res.errors, [str(e) for e in res.errors]
    return res.rules[0].rule.hash


def base_hash() -> str:
    return hash_of(rule_text())


@pytest.mark.parametrize(
    ("when", "style"),
    [
        (WHEN.replace(" && ", "\n  &&   "), "literal"),
        (WHEN.replace(" && ", " &&\n"), "folded"),
        ("(" + WHEN.replace(" && ", ") && (", 1) + ")", "plain"),
        ("((" + WHEN + "))", "plain"),
        (WHEN.replace(" >= 3", " >= (3)"), "plain"),
        ("// restarts only\n" + WHEN.replace(" && ", " && // and\n", 1), "literal"),
        # the parser balances long && chains; regrouping must not change meaning
        (
            'event.type == "restart" && (has(event.cause_digest) && '
            + WHEN.split(" && ", 2)[2]
            + ")",
            "plain",
        ),
        (WHEN.replace('"harness": event.harness, ', '"harness":event.harness,'), "plain"),
    ],
)
def test_formatting_does_not_change_the_hash(when: str, style: str) -> None:
    assert hash_of(rule_text(when, style)) == base_hash()


@pytest.mark.parametrize(
    "over",
    [
        {"name": "renamed"},
        {"description": "Something else entirely."},
        {"message": "{cause_digest} again"},
    ],
)
def test_name_description_and_message_do_not_count(over: dict[str, str]) -> None:
    assert hash_of(rule_text(**over)) == base_hash()


@pytest.mark.parametrize(
    "when",
    [
        WHEN.replace(">= 3", ">= 4"),
        WHEN.replace(">= 3", "> 3"),
        WHEN.replace('"1h"', '"2h"'),
        WHEN.replace('event.type == "restart"', 'event.type != "restart"'),
        WHEN.replace('event.type == "restart"', 'event.type == "Restart"'),
        WHEN.replace("has(event.cause_digest)", "has(event.path)"),
        WHEN.replace("count(", "(count(").replace(">= 3", ">= 3) == true"),
        WHEN.replace(" && has(event.cause_digest)", " || has(event.cause_digest)"),
        WHEN.replace('"type": "restart", ', ""),
    ],
)
def test_any_change_of_meaning_changes_the_hash(when: str) -> None:
    assert hash_of(rule_text(when)) != base_hash()


@pytest.mark.parametrize(
    "over",
    [{"level": "stop"}, {"target": "run"}, {"cooldown": "31m"}],
)
def test_level_target_and_cooldown_count(over: dict[str, str]) -> None:
    assert hash_of(rule_text(**over)) != base_hash()


def test_on_counts() -> None:
    when = 'event.type == "collision"'
    a = hash_of(rule_text(when, on="run_event"))
    b = hash_of(rule_text(when, on="graph_event"))
    assert a != b


def test_equal_durations_spelled_differently_hash_the_same() -> None:
    assert hash_of(rule_text(cooldown="1800s")) == base_hash()
    assert hash_of(rule_text(WHEN.replace('"1h"', '"60m"'))) == base_hash()


def test_normalized_when_is_stable_and_readable() -> None:
    res = compile_rule_file(
        rule_text(WHEN.replace(" && ", "\n&& "), "literal"), "r.yml", "file", RulesConfig()
    )
    norm = res.rules[0].rule.normalized_when
    assert "\n" not in norm and norm.startswith(
        'event.type == "restart" && has(event.cause_digest)'
    )
    res2 = compile_rule_file(rule_text(), "r.yml", "file", RulesConfig())
    assert res2.rules[0].rule.normalized_when == norm


@pytest.mark.parametrize(
    "when",
    [
        "[1, 2].all(x, x > 0 && x < 3)",
        "[1].exists_one(x, x > 0)",
        "[1].map(x, x > 0, x + 1).size() > 0",
        "[1].filter(x, x > 0).size() == 1",
        'b"\\x00x" == b"\\x00x" && -(event.n) < 3 + 0 && 3u > 0u'
        " && !!true && -(-event.n) == 1 ? true : 1.5e3 > 2.0",
        '!(event.type in ["a", "b"]) || {"k": [1]}["k"][0] == 1',
    ],
)
def test_normalized_when_round_trips_through_cel(when: str) -> None:
    first = compile_rule_file(rule_text(when), "a.yml", "file", RulesConfig()).rules[0].rule
    second_text = rule_text(first.normalized_when)
    second = compile_rule_file(second_text, "b.yml", "file", RulesConfig()).rules[0].rule
    assert second.hash == first.hash and second.normalized_when == first.normalized_when
    assert "__comprehension__" not in first.normalized_when
