"""The strict rule-file loader: schema, locations, sources, overrides, starter pack."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from engine.config import RulesConfig
from engine.errors import Diagnostic
from engine.rules.language.loader import compile_rule_file, default_sources, load_rules, starter_dir
from engine.rules.language.model import CompiledRule

CFG = RulesConfig()

GOOD = """\
name: restart_loop
description: restarts
on: run_event
when: >-
  event.type == "restart" &&
  count({"harness": event.harness, "type": "restart"}, duration("1h")) >= 3
level: notify
target: harness
cooldown: 30m
message: "{harness} restarts"
"""


def errors(text: str, file: str = "r.yml") -> list[Diagnostic]:
    res = compile_rule_file(text, file, "file", CFG)
    assert not res.rules, "expected the rule to be rejected"
    return list(res.errors)


def one(text: str) -> CompiledRule:
    res = compile_rule_file(text, "r.yml", "file", CFG)
    assert not res.errors, [str(e) for e in res.errors]
    assert len(res.rules) == 1
    return res.rules[0]


def test_good_rule_loads_with_all_fields() -> None:
    r = one(GOOD).rule
    assert (r.name, r.on, r.level, r.target, r.cooldown_ms) == (
        "restart_loop",
        "run_event",
        "notify",
        "harness",
        30 * 60_000,
    )
    assert r.message == "{harness} restarts" and r.text == GOOD
    assert r.primitives[0].selector_keys == ("harness", "type")
    assert r.primitives[0].window_ms == 3_600_000
    assert len(r.hash) == 64


def test_unknown_key_is_an_error_at_its_line_and_column() -> None:
    errs = errors(GOOD + "  \nenforce: true\n")
    assert len(errs) == 1
    e = errs[0]
    assert "unknown key `enforce`" in e.message
    assert (e.location.line, e.location.col) == (12, 1)


@pytest.mark.parametrize("key", ["name", "on", "when", "level", "target"])
def test_required_keys(key: str) -> None:
    lines = [ln for ln in GOOD.splitlines() if not ln.startswith(f"{key}:")]
    if key == "when":
        lines = [ln for ln in lines if not ln.startswith("  ")]
    errs = errors("\n".join(lines) + "\n")
    assert any(f"missing required key `{key}`" in e.message for e in errs)


@pytest.mark.parametrize(
    ("old", "new", "needle", "line"),
    [
        ("name: restart_loop", "name: restart-loop", "not an identifier", 1),
        ("on: run_event", "on: journal", "`on` must be one of", 3),
        ("level: notify", "level: page", "`level` must be one of", 7),
        ("target: harness", "target: other_harness", "`target` must name a field", 8),
        ("cooldown: 30m", "cooldown: soon", "invalid duration", 9),
        ('message: "{harness} restarts"', 'message: "{harnes} restarts"', "{harnes}", 10),
        ('message: "{harness} restarts"', 'message: "{harness restarts"', "unbalanced", 10),
        ("level: notify", "level: 3", "must be a string", 7),
    ],
)
def test_field_errors_name_the_line(old: str, new: str, needle: str, line: int) -> None:
    errs = errors(GOOD.replace(old, new))
    assert any(needle in e.message and e.location.line == line for e in errs), [
        str(e) for e in errs
    ]


def test_on_is_a_string_key_not_yaml11_true() -> None:
    # YAML 1.1 would read `on:` as True and `on: yes` as a bool; we read strings.
    errs = errors(GOOD.replace("on: run_event", "on: yes"))
    assert any("got 'yes'" in e.message for e in errs)


def test_cel_error_is_mapped_into_the_file_with_its_column() -> None:
    bad = GOOD.replace('"harness": event.harness,', '"harness": event.harnes,')
    errs = errors(bad, "rules/x.yml")
    assert len(errs) == 1
    e = errs[0]
    assert "harnes" in e.message and e.location.file == "rules/x.yml"
    line = bad.splitlines()[e.location.line - 1]
    assert e.location.line == 6
    # the caret sits on the field access inside the file's line
    assert line[e.location.col - 1 :].startswith(".harnes")
    rendered = e.render(bad)
    assert "^" in rendered and "event.harnes" in rendered


def test_cel_error_location_in_a_quoted_single_line_when() -> None:
    text = 'name: r\non: tick\nlevel: notify\ntarget: type\nwhen: "event.type == 1"\n'
    (e,) = errors(text)
    assert e.location.line == 5
    assert text.splitlines()[4][e.location.col - 1 :].startswith("== 1")


def test_every_error_is_collected() -> None:
    text = "name: 1bad\non: run_event\nwhen: event.nope\nlevel: loud\ntarget: nothing\nextra: 1\n"
    msgs = " | ".join(e.message for e in errors(text))
    for needle in ("not an identifier", "nope", "`level`", "`target`", "unknown key"):
        assert needle in msgs


def test_rules_list_file_and_duplicate_names() -> None:
    body = GOOD.replace("\n", "\n    ").rstrip()
    text = f"rules:\n  - {body}\n  - {body.replace('restart_loop', 'other')}\n"
    res = compile_rule_file(text, "many.yml", "file", CFG)
    assert [c.rule.name for c in res.rules] == ["restart_loop", "other"] and not res.errors
    dup = f"rules:\n  - {body}\n  - {body}\n"
    res = compile_rule_file(dup, "many.yml", "file", CFG)
    assert [c.rule.name for c in res.rules] == ["restart_loop"]
    assert any("repeats" in e.message and e.location.line > 2 for e in res.errors)


def test_one_bad_rule_in_a_list_does_not_drop_the_others() -> None:
    body = GOOD.replace("\n", "\n    ").rstrip()
    bad = body.replace("restart_loop", "broken").replace("level: notify", "level: nope")
    res = compile_rule_file(f"rules:\n  - {bad}\n  - {body}\n", "m.yml", "file", CFG)
    assert [c.rule.name for c in res.rules] == ["restart_loop"]
    assert len(res.errors) == 1 and res.errors[0].path == "rules[0].level"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "empty rule file"),
        ("- a\n- b\n", "must be a mapping"),
        ("rules: 3\n", "must be a list"),
        ("rules: []\nname: x\n", "beside `rules:`"),
        ("name: [unclosed\n", ""),
        ("a: 1\na: 2\n", "duplicate"),
    ],
)
def test_malformed_files_are_errors_not_crashes(text: str, needle: str) -> None:
    errs = errors(text)
    assert errs and all(e.location.file == "r.yml" for e in errs)
    assert needle.lower() in " ".join(e.message.lower() for e in errs)


def write(d: Path, name: str, text: str) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    p = d / name
    p.write_text(text, encoding="utf-8")
    return p


def test_later_source_overrides_by_name_and_errors_do_not_stop_other_files(
    tmp_path: Path,
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    write(a, "r.yml", GOOD)
    write(a, "keep.yml", GOOD.replace("restart_loop", "keep_me"))
    write(b, "override.yml", GOOD.replace("level: notify", "level: annotate"))
    write(b, "broken.yml", "name: x\non: tick\n")
    write(b, "notes.txt", "not a rule")
    res = load_rules([(a, "starter"), (b, "policy")], CFG)
    by = {c.rule.name: c.rule for c in res.rules}
    assert set(by) == {"restart_loop", "keep_me"}
    assert by["restart_loop"].level == "annotate" and by["restart_loop"].source_kind == "policy"
    assert by["keep_me"].source_kind == "starter"
    assert any(str(e.location.file).endswith("broken.yml") for e in res.errors)


def test_broken_override_keeps_the_earlier_version(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    write(a, "r.yml", GOOD)
    write(b, "r.yml", GOOD.replace("level: notify", "level: loud"))
    res = load_rules([(a, "starter"), (b, "policy")], CFG)
    assert [c.rule.source_kind for c in res.rules] == ["starter"]
    assert len(res.errors) == 1


def test_same_name_twice_in_one_source_is_an_error(tmp_path: Path) -> None:
    write(tmp_path, "a.yml", GOOD)
    write(tmp_path, "b.yml", GOOD.replace("level: notify", "level: annotate"))
    res = load_rules([(tmp_path, "policy")], CFG)
    assert [c.rule.level for c in res.rules] == ["notify"]
    assert any("already defined" in e.message for e in res.errors)


def test_missing_source_is_reported(tmp_path: Path) -> None:
    res = load_rules([(tmp_path / "nope", "policy")], CFG)
    assert not res.rules and "not found" in res.errors[0].message


def test_binary_file_is_an_error_with_location(tmp_path: Path) -> None:
    p = tmp_path / "bin.yml"
    p.write_bytes(b"name: x\x00\xff\n")
    res = load_rules([(tmp_path, "policy")], CFG)
    assert not res.rules and res.errors and res.errors[0].location.file == str(p)


# --- the starter pack ------------------------------------------------------------------------

STARTER_NAMES = {
    "verify_same_failure",
    "budget_exhausted_repeatedly",
    "restart_same_error",
    "loop_guard_repeated",
    "file_collision",
    "file_churn",
}


def starter() -> dict[str, CompiledRule]:
    res = load_rules(default_sources(), CFG)
    assert not res.errors, [str(e) for e in res.errors]
    return {c.rule.name: c for c in res.rules}


def test_starter_pack_loads_cleanly_with_the_pinned_levels() -> None:
    rules = starter()
    assert set(rules) == STARTER_NAMES
    assert len(list(starter_dir().glob("*.yml"))) == len(STARTER_NAMES)
    for name, cr in rules.items():
        assert cr.rule.source_kind == "starter"
        if name == "restart_same_error":
            assert cr.rule.level == "hold"
        elif name == "file_collision":
            assert cr.rule.level == "annotate" and cr.rule.on == "graph_event"
        else:
            assert cr.rule.level in ("annotate", "notify")


class MemoryHost:
    """Primitives over an in-memory journal: rows with seq <= cur and at > now - window."""

    def __init__(self, rows: list[dict[str, object]]) -> None:
        self.rows = rows
        self.cur_seq = 0
        self.now = 0

    def _match(self, sel: Mapping[str, str], window_ms: int) -> list[dict[str, object]]:
        return [
            r
            for r in self.rows
            if int(str(r["seq"])) <= self.cur_seq
            and int(str(r["at"])) > self.now - window_ms
            and all(r.get(k) == v for k, v in sel.items())
        ]

    def count(self, selector: Mapping[str, str], window_ms: int) -> int:
        return len(self._match(selector, window_ms))

    def distinct(self, field: str, selector: Mapping[str, str], window_ms: int) -> int:
        return len({r.get(field) for r in self._match(selector, window_ms)} - {None})

    def exists(self, selector: Mapping[str, str], window_ms: int) -> bool:
        return bool(self._match(selector, window_ms))


def replay(rows: list[dict[str, object]]) -> dict[str, int]:
    """Matches per starter rule (no cooldown: that is the lifecycle's job)."""
    rules = starter()
    host = MemoryHost(rows)
    hits = dict.fromkeys(rules, 0)
    for r in rows:
        host.cur_seq, host.now = int(str(r["seq"])), int(str(r["at"]))
        for name, cr in rules.items():
            if cr.rule.on == r["kind"]:
                res = cr.evaluate(r, host.now, host)
                assert res.error is None
                hits[name] += res.matched
    return hits


def journal(events: list[dict[str, object]], step_ms: int = 60_000) -> list[dict[str, object]]:
    out = []
    for i, e in enumerate(events, start=1):
        row: dict[str, object] = {
            "seq": i,
            "at": 1_700_000_000_000 + i * step_ms,
            "source": "observer",
        }
        row.update(e)
        out.append(row)
    return out


D1, D2 = "sha256:" + "1" * 64, "sha256:" + "2" * 64


def quiet_fleet() -> list[dict[str, object]]:
    ev: list[dict[str, object]] = []
    for i in range(300):
        h = f"h{i % 5}"
        ev.append({"kind": "run_event", "type": "tool_call", "harness": h, "run": f"r{i // 20}"})
        if i % 60 == 0:  # rare events, each harness at most once
            h = f"h{i // 60}"
            ev.append(
                {
                    "kind": "run_event",
                    "type": "verify_failed",
                    "harness": h,
                    "run": f"r{i // 20}",
                    "cause_digest": f"sha256:{i:064d}",
                }
            )
            ev.append({"kind": "run_event", "type": "restart", "harness": h, "cause_digest": D1})
            ev.append({"kind": "run_event", "type": "loop_stopped", "harness": h})
            ev.append({"kind": "run_event", "type": "budget_exhausted", "harness": h})
            ev.append({"kind": "graph_event", "type": "file_edited", "harness": h, "path": "/a"})
            ev.append(
                {"kind": "graph_event", "type": "churn", "harness": h, "run": "r1", "path": "/a"}
            )
        if i % 50 == 0:
            ev.append({"kind": "tick", "type": "tick", "source": "tick"})
    return journal(ev, step_ms=10 * 60_000)


def test_starter_pack_is_silent_on_a_quiet_fleet() -> None:
    assert replay(quiet_fleet()) == dict.fromkeys(STARTER_NAMES, 0)


def test_each_starter_rule_fires_on_its_pattern() -> None:
    ev: list[dict[str, object]] = []
    for i in range(3):
        ev.append(
            {
                "kind": "run_event",
                "type": "verify_failed",
                "harness": "h1",
                "run": f"run{i}",
                "cause_digest": D1,
            }
        )
        ev.append({"kind": "run_event", "type": "restart", "harness": "h2", "cause_digest": D2})
        if i:  # two trips in a day are already "repeatedly"
            ev.append({"kind": "run_event", "type": "loop_stopped", "harness": "h3", "run": "x"})
        ev.append({"kind": "run_event", "type": "budget_exhausted", "harness": "h4"})
    for _ in range(10):
        ev.append({"kind": "graph_event", "type": "file_edited", "harness": "h5", "path": "a.py"})
    ev.append({"kind": "graph_event", "type": "churn", "harness": "h5", "path": "a.py", "n": 10})
    ev.append(
        {
            "kind": "graph_event",
            "type": "collision",
            "harness": "h1",
            "other_harness": "h2",
            "path": "src/app.py",
        }
    )
    hits = replay(journal(ev))
    assert hits == {name: 1 for name in STARTER_NAMES}


def test_quiet_churn_needs_ten_edits_in_three_hours() -> None:
    edits: list[dict[str, object]] = [
        {"kind": "graph_event", "type": "file_edited", "harness": "h5", "path": "a.py"}
    ] * 9
    churn = {"kind": "graph_event", "type": "churn", "harness": "h5", "path": "a.py", "n": 9}
    assert replay(journal([*edits, churn]))["file_churn"] == 0
    # ten edits, but spread over more than three hours: the older ones fall out of the window
    assert replay(journal([*edits, edits[0], churn], step_ms=30 * 60_000))["file_churn"] == 0
    assert replay(journal([*edits, edits[0], churn]))["file_churn"] == 1


@pytest.mark.slow
@pytest.mark.parametrize("quiet", [False, True])
def test_starter_pack_on_the_simulated_fleet(tmp_path: Path, quiet: bool) -> None:
    """Three simulated days hold every planted pattern (engine.fleet.sim docstring)."""
    from collections import Counter

    from engine.fleet.sim import write_fleet
    from engine.rules.evaluation.backtest import resolve_range, run_backtest
    from engine.store.db import connect

    conn = connect(tmp_path / "fleet.db")
    write_fleet(conn, days=3, quiet=quiet, validate=False)
    res = run_backtest(conn, list(starter().values()), resolve_range(conn, from_seq=1))
    per_rule = Counter(f.rule for f in res.fires)
    if quiet:
        assert per_rule == Counter()
    else:
        assert set(per_rule) == STARTER_NAMES, per_rule
        assert {f.target for f in res.fires if f.rule == "restart_same_error"} == {"h05"}
        assert {f.target for f in res.fires if f.rule == "loop_guard_repeated"} == {"h06"}
        assert {f.target for f in res.fires if f.rule == "budget_exhausted_repeatedly"} <= {
            "h11",
            "h12",
        }
        assert {f.target for f in res.fires if f.rule == "verify_same_failure"} <= {"h03", "h09"}


def test_an_empty_rules_list_is_an_error_not_silence() -> None:
    from engine.config import RulesConfig
    from engine.rules.language.loader import compile_rule_file

    res = compile_rule_file("rules: []\n", "empty.yml", "policy", RulesConfig())
    assert res.rules == ()
    assert [d.path for d in res.errors] == ["rules"]
    assert res.errors[0].location.line == 1


# -- issue 13, item 8: a rule file that fails to load disables itself and nothing else -----


def test_an_overflowing_cooldown_is_a_located_error_and_other_rules_load(
    tmp_path: Path,
) -> None:
    src = tmp_path / "rules"
    src.mkdir()
    (src / "a_bad.yml").write_text(GOOD.replace("cooldown: 30m", "cooldown: " + "9" * 400 + "d"))
    (src / "b_good.yml").write_text(GOOD.replace("restart_loop", "still_here"))
    res = load_rules([(starter_dir(), "starter"), (src, "policy")], CFG)
    names = {cr.rule.name for cr in res.rules}
    assert "still_here" in names and "restart_loop" not in names
    assert len(names) > 1  # the starter rules too
    (err,) = res.errors
    assert err.path == "cooldown" and err.location.file == str(src / "a_bad.yml")
    assert err.location.line == 9 and "longer than" in err.message


def test_a_bug_while_compiling_one_file_is_that_files_located_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import engine.rules.language.loader as loader

    real = loader.compile_rule_file

    def flaky(text: str, file: str, *args: object, **kwargs: object) -> object:
        if file.endswith("boom.yml"):
            raise ZeroDivisionError("a bug nobody foresaw")
        return real(text, file, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(loader, "compile_rule_file", flaky)
    (tmp_path / "boom.yml").write_text(GOOD)
    (tmp_path / "fine.yml").write_text(GOOD.replace("restart_loop", "fine_rule"))
    res = load_rules([(tmp_path, "policy")], CFG)
    assert [cr.rule.name for cr in res.rules] == ["fine_rule"]
    (err,) = res.errors
    assert err.location.file == str(tmp_path / "boom.yml") and err.code == "internal"
    assert "internal error" in err.message and "ZeroDivisionError" in err.message
