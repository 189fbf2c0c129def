"""Attempts to make a hold or stop act without the operator naming the rule in the global config.

Every attempt builds a real setup (global config, policy rule files, project
files, environment), loads config and rules the way ``harness evaluate``
does, runs the live evaluator with hold/stop/notify actions configured, and
asserts that no hold was created and no stop action ran, and that the reason
was reported (in the fire row, or as a load/config error). The table of
outcomes is printed.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from engine.config import HarnessConfig, load_config
from engine.errors import HarnessError
from engine.rules.authority.lifecycle_run import open_live
from engine.rules.language.loader import default_sources, load_rules
from engine.rules.language.model import CompiledRule
from engine.store.db import connect
from tests.rules._lifecycle_util import MIN, Journal

ROOT = Path(__file__).resolve().parents[2]
STARTER_RESTART = (ROOT / "starter_rules" / "restart_same_error.yml").read_text()

EVIL = """\
name: {name}
description: acts on every restart
on: run_event
when: event.type == "restart"
level: {level}
target: harness
message: "{{harness}} stopped"
"""


@dataclass
class Outcome:
    fires: list[tuple[str, str, str, str]]  # rule, status, effective level, reasons
    holds: int
    stops_run: int
    notes: list[str]

    def acted(self) -> bool:
        hard = [f for f in self.fires if f[1] == "fired" and f[2] in ("hold", "stop")]
        return bool(hard) or self.holds > 0 or self.stops_run > 0

    def text(self) -> str:
        return "\n".join([*self.notes, *(f[3] for f in self.fires)])

    def reported(self) -> str:
        if self.notes:
            return "; ".join(self.notes)[:200]
        for _, status, level, reasons in self.fires:
            if "capped at notify" in reasons or status == "shadow":
                return f"{status} at {level}: " + reasons[:160]
        return ""


class Setup:
    def __init__(self, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.tmp = tmp
        self.mp = monkeypatch
        self.policy = tmp / "policy"
        (self.policy / "rules").mkdir(parents=True)
        self.out = tmp / "stops.txt"
        self.global_cfg = tmp / "global" / "harness.toml"
        self.global_cfg.parent.mkdir()
        self.mp.setenv("HARNESS_CONFIG", str(self.global_cfg))
        self.write_global("")

    def write_global(self, rules_toml: str) -> None:
        actions = (
            "[memory.rules.actions]\n"
            f'stop = ["{sys.executable}", "-c", "open({str(self.out)!r}, \'a\').write(\'x\')"]\n'
            'notify = ["true"]\n'
        )
        self.global_cfg.write_text(f"[memory.rules]\n{rules_toml}\n{actions}")

    def rule(self, name: str, text: str) -> Path:
        path = self.policy / "rules" / name
        path.write_text(text)
        return path

    def run(
        self,
        *,
        hours_before: int = 0,
        rules: list[CompiledRule] | None = None,
        store_name: str = "s.db",
        journal: Journal | None = None,
    ) -> Outcome:
        notes: list[str] = []
        try:
            cfg = load_config()
        except HarnessError as exc:
            notes.append(f"config refused: {exc}")
            cfg = HarnessConfig()
        if rules is None:
            loaded = load_rules(default_sources([self.policy / "rules"]), cfg.rules)
            notes.extend(f"not loaded: {d}" for d in loaded.errors)
            rules = list(loaded.rules)
        conn = connect(self.tmp / store_name)
        j = journal or Journal(conn)
        j.advance(hours_before * 60 * MIN + MIN)
        j.restarts("h1", 3)
        j.advance(2 * MIN)
        evaluator, _ = open_live(conn, rules, cfg)
        evaluator.run_until_idle()
        fires = [
            (r, s, lvl, reasons)
            for r, s, lvl, reasons in conn.execute(
                "SELECT rule, status, effective_level, reasons FROM rule_fires ORDER BY id"
            )
        ]
        holds = conn.execute("SELECT COUNT(*) FROM rule_holds").fetchone()[0]
        stops = len(self.out.read_text()) if self.out.exists() else 0
        return Outcome(fires, holds, stops, notes)


def a_rule_file_with_level_stop(s: Setup) -> Outcome:
    s.write_global('shadow_period = "1m"')
    s.rule("evil.yml", EVIL.format(name="evil", level="stop"))
    return s.run(hours_before=1)


def a_rule_file_with_level_hold(s: Setup) -> Outcome:
    s.write_global('shadow_period = "1m"')
    s.rule("evil.yml", EVIL.format(name="evil", level="hold"))
    return s.run(hours_before=1)


def an_enforce_key_in_the_rule_file(s: Setup) -> Outcome:
    s.write_global('shadow_period = "1m"')
    s.rule("evil.yml", EVIL.format(name="evil", level="stop") + "enforce: true\n")
    return s.run(hours_before=1)


def an_enforce_list_beside_rules_in_a_policy_file(s: Setup) -> Outcome:
    s.write_global('shadow_period = "1m"')
    body = EVIL.format(name="evil", level="stop").replace("\n", "\n    ")
    s.rule("evil.yml", f"enforce: [evil]\nrules:\n  - {body}\n")
    return s.run(hours_before=1)


def a_harness_toml_in_the_policy_repo(s: Setup) -> Outcome:
    s.write_global('shadow_period = "1m"')
    s.rule("evil.yml", EVIL.format(name="evil", level="stop"))
    for where in (s.policy, s.policy / "rules"):
        (where / "harness.toml").write_text('[memory.rules]\nenforce = ["evil"]\n')
    s.mp.chdir(s.policy)
    return s.run(hours_before=1)


def a_project_local_harness_toml(s: Setup) -> Outcome:
    s.write_global('shadow_period = "1m"')
    s.rule("evil.yml", EVIL.format(name="evil", level="stop"))
    project = s.tmp / "project"
    (project / ".harness").mkdir(parents=True)
    for path in (project / "harness.toml", project / ".harness" / "harness.toml"):
        path.write_text('[memory.rules]\nenforce = ["evil"]\n')
    s.mp.chdir(project)
    return s.run(hours_before=1)


def environment_variables(s: Setup) -> Outcome:
    s.write_global('shadow_period = "1m"')
    s.rule("evil.yml", EVIL.format(name="evil", level="stop"))
    for var in (
        "HARNESS_ENFORCE",
        "HARNESS_RULES_ENFORCE",
        "HARNESS_MEMORY_RULES_ENFORCE",
        "MEMORY_RULES_ENFORCE",
    ):
        s.mp.setenv(var, "evil")
    return s.run(hours_before=1)


def xdg_config_while_harness_config_is_set(s: Setup) -> Outcome:
    s.write_global('shadow_period = "1m"')
    s.rule("evil.yml", EVIL.format(name="evil", level="stop"))
    xdg = s.tmp / "xdg"
    (xdg / "harness").mkdir(parents=True)
    (xdg / "harness" / "harness.toml").write_text('[memory.rules]\nenforce = ["evil"]\n')
    s.mp.setenv("XDG_CONFIG_HOME", str(xdg))
    return s.run(hours_before=1)


def a_symlinked_rule_posing_as_the_starter(s: Setup) -> Outcome:
    # The operator enforces the starter; a policy file symlinks to a copy of its text.
    s.write_global('enforce = ["restart_same_error"]')
    elsewhere = s.tmp / "elsewhere.yml"
    elsewhere.write_text(STARTER_RESTART.replace("level: hold", "level: stop"))
    (s.policy / "rules" / "restart_same_error.yml").symlink_to(elsewhere)
    return s.run(hours_before=1)


def a_symlink_to_the_global_config_in_the_policy_repo(s: Setup) -> Outcome:
    s.write_global('shadow_period = "1m"')
    s.rule("evil.yml", EVIL.format(name="evil", level="stop"))
    fake = s.tmp / "fake.toml"
    fake.write_text('[memory.rules]\nenforce = ["evil"]\n')
    (s.policy / "harness.toml").symlink_to(fake)
    s.mp.chdir(s.policy)
    return s.run(hours_before=1)


def a_starter_override_with_the_enforced_name(s: Setup) -> Outcome:
    s.write_global('enforce = ["restart_same_error"]')
    s.rule("override.yml", EVIL.format(name="restart_same_error", level="stop"))
    return s.run(hours_before=1)


def an_identical_copy_of_the_enforced_starter(s: Setup) -> Outcome:
    s.write_global('enforce = ["restart_same_error"]')
    s.rule("override.yml", STARTER_RESTART)
    return s.run(hours_before=1)


def a_name_change_keeping_the_text(s: Setup) -> Outcome:
    # "evil" serves its shadow at notify, then is renamed to the enforced name.
    s.write_global('enforce = ["restart_same_error"]\nshadow_period = "1h"')
    s.rule("evil.yml", EVIL.format(name="evil", level="stop"))
    cfg = load_config()
    only_evil = list(load_rules([(s.policy / "rules", "policy")], cfg.rules).rules)
    first = s.run(hours_before=2, rules=only_evil)
    assert {(f[0], f[1], f[2]) for f in first.fires} == {("evil", "fired", "notify")}
    (s.policy / "rules" / "evil.yml").unlink()
    s.rule("evil.yml", EVIL.format(name="restart_same_error", level="stop"))
    conn = connect(s.tmp / "s.db")
    conn.execute("DELETE FROM rule_fires")
    j = Journal(conn, conn.execute("SELECT MAX(at) FROM rule_journal").fetchone()[0] + 1)
    j.next_tick = j.now + MIN
    return s.run(journal=j)


def a_changed_rule_under_a_pinned_enforce(s: Setup) -> Outcome:
    from engine.config import RulesConfig
    from engine.rules.language.loader import compile_rule_text

    original, _ = compile_rule_text(
        EVIL.format(name="evil", level="stop"), "o.yml", "policy", RulesConfig()
    )
    assert original is not None
    s.write_global(f'enforce = ["evil@{original.rule.hash[:8]}"]\nshadow_period = "1m"')
    s.rule(
        "evil.yml",
        EVIL.format(name="evil", level="stop").replace(
            'event.type == "restart"', 'event.type == "restart" || event.type == "run_started"'
        ),
    )
    return s.run(hours_before=1)


def a_wildcard_or_near_miss_enforce_entry(s: Setup) -> Outcome:
    s.write_global(
        'enforce = ["*", "evil*", "Evil", " evil", "evil@", "evil@zz12"]\nshadow_period = "1m"'
    )
    s.rule("evil.yml", EVIL.format(name="evil", level="stop"))
    return s.run(hours_before=1)


def enforce_in_the_wrong_config_table(s: Setup) -> Outcome:
    s.global_cfg.write_text('[memory]\nenforce = ["evil"]\n[rules]\nenforce = ["evil"]\n')
    s.rule("evil.yml", EVIL.format(name="evil", level="stop"))
    return s.run(hours_before=1)


def a_rules_list_mixing_the_enforced_name_and_a_stop(s: Setup) -> Outcome:
    s.write_global('enforce = ["restart_same_error"]\nshadow_period = "1m"')
    harmless = EVIL.format(name="restart_same_error", level="annotate").replace("\n", "\n    ")
    evil = EVIL.format(name="evil", level="stop").replace("\n", "\n    ")
    s.rule("pair.yml", f"rules:\n  - {harmless}\n  - {evil}\n")
    return s.run(hours_before=1)


def a_disabled_rule_renamed_around_disable(s: Setup) -> Outcome:
    s.write_global('disable = ["evil"]\nshadow_period = "1m"')
    s.rule("evil.yml", EVIL.format(name="evil2", level="stop"))
    return s.run(hours_before=1)


NOT_ENFORCED = "`evil` is not in [memory.rules] enforce"
SHADOWED = "shadow fires never act"

#: Each attempt and the report that must explain why it did not act.
ATTEMPTS: list[tuple[Callable[[Setup], Outcome], str]] = [
    (a_rule_file_with_level_stop, "level stop capped at notify: " + NOT_ENFORCED),
    (a_rule_file_with_level_hold, "level hold capped at notify: " + NOT_ENFORCED),
    (an_enforce_key_in_the_rule_file, "unknown key `enforce`"),
    (an_enforce_list_beside_rules_in_a_policy_file, "unknown key `enforce` beside `rules:`"),
    (a_harness_toml_in_the_policy_repo, NOT_ENFORCED),
    (a_project_local_harness_toml, NOT_ENFORCED),
    (environment_variables, NOT_ENFORCED),
    (xdg_config_while_harness_config_is_set, NOT_ENFORCED),
    (a_symlinked_rule_posing_as_the_starter, SHADOWED),
    (a_symlink_to_the_global_config_in_the_policy_repo, NOT_ENFORCED),
    (a_starter_override_with_the_enforced_name, SHADOWED),
    (an_identical_copy_of_the_enforced_starter, SHADOWED),
    (a_name_change_keeping_the_text, SHADOWED),
    (a_changed_rule_under_a_pinned_enforce, "re-pin it to enforce"),
    (a_wildcard_or_near_miss_enforce_entry, NOT_ENFORCED),
    (enforce_in_the_wrong_config_table, "config refused"),
    (a_rules_list_mixing_the_enforced_name_and_a_stop, NOT_ENFORCED),
    (a_disabled_rule_renamed_around_disable, "`evil2` is not in [memory.rules] enforce"),
]


@pytest.mark.parametrize(("attempt", "expect"), ATTEMPTS, ids=[a.__name__ for a, _ in ATTEMPTS])
def test_no_attempt_acts_and_each_is_reported(
    attempt: Callable[[Setup], Outcome],
    expect: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    outcome = attempt(Setup(tmp_path, monkeypatch))
    assert not outcome.acted(), outcome
    assert expect in outcome.text(), outcome
    # the attacker's rule was either refused at load/config or did fire (and was capped)
    assert outcome.notes or any("starter rule: skips shadow" not in f[3] for f in outcome.fires)
    why = outcome.reported()
    assert why, f"{attempt.__name__}: nothing reported: {outcome}"
    sys.stderr.write(f"\n{attempt.__name__}: did not act; {why}\n")


def test_the_same_setup_does_act_when_the_operator_enforces_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control: without it, the attempts above could pass by never firing at all."""
    s = Setup(tmp_path, monkeypatch)
    s.write_global('enforce = ["evil"]\nshadow_period = "1m"')
    s.rule("evil.yml", EVIL.format(name="evil", level="stop"))
    outcome = s.run(hours_before=1)
    assert outcome.acted() and outcome.stops_run >= 1
    assert ("evil", "fired", "stop") in {(f[0], f[1], f[2]) for f in outcome.fires}


def test_the_enforced_starter_holds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = Setup(tmp_path, monkeypatch)
    s.write_global('enforce = ["restart_same_error"]')
    outcome = s.run(hours_before=1)
    assert outcome.holds == 1 and outcome.acted()


def test_no_command_writes_the_global_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Authority lives in a file only the operator's editor writes: every command leaves it be."""
    import subprocess

    s = Setup(tmp_path, monkeypatch)
    s.write_global('enforce = ["restart_same_error"]')
    s.rule("evil.yml", EVIL.format(name="evil", level="stop"))
    s.global_cfg.chmod(0o444)
    before = (s.global_cfg.read_bytes(), s.global_cfg.stat().st_mtime_ns)
    s.run(hours_before=1)
    store = str(tmp_path / "s.db")
    env = {**os.environ, "HARNESS_CONFIG": str(s.global_cfg)}
    for argv in (
        ["evaluate", "--store", store, "--policy", str(s.policy / "rules")],
        ["holds", "list", "--store", store],
        ["holds", "release", "1", "--reason", "x", "--store", store],
        ["holds", "check", "h1", "--store", store],
        ["doctor", "--store", store],
        ["metrics", "--store", store],
        ["rules", "list", "--store", store],
    ):
        res = subprocess.run(
            [sys.executable, "-m", "engine.cli.harness", *argv],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert "Traceback" not in res.stderr, (argv, res.stderr)
    assert (s.global_cfg.read_bytes(), s.global_cfg.stat().st_mtime_ns) == before
    assert (
        not list(s.global_cfg.parent.glob("*.tmp"))
        and len(list(s.global_cfg.parent.iterdir())) == 1
    )
