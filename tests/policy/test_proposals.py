"""Proposals: validated by the shared loader, capped at notify, stored, branch prepared."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest

from engine.cli.harness import main as harness_main
from engine.config import HarnessConfig, RulesConfig
from engine.config_text import parse_config
from engine.errors import CheckFailed
from engine.fleet.sim import write_fleet
from engine.policy.proposals import list_proposals, store_proposal
from engine.rules.authority.enforcement import Authority, decide_level
from engine.rules.language.lint import run_lint
from engine.rules.language.loader import compile_rule_file, load_rules
from engine.store.db import connect

HOLD_RULE = """\
# restarts are bad: hold the harness
name: restarts_again
description: The harness restarts into the same error.
on: run_event
when: >-
  event.type == "restart" && has(event.cause_digest) &&
  count({"harness": event.harness, "type": "restart",
         "cause_digest": event.cause_digest}, duration("1h")) >= 3
level: hold   # the author wants a hold
target: harness
cooldown: 30m
message: "{harness} keeps restarting"
"""

NEVER_RULE = """\
name: never_happens
description: A fact that is never retracted twice.
on: fact_event
when: event.type == "fact_retracted" && event.n > 1000000
level: notify
target: harness
cooldown: 1h
message: "{harness}"
"""


@pytest.fixture
def store(tmp_path: Path) -> sqlite3.Connection:
    return connect(tmp_path / "j.db")


@pytest.mark.parametrize("asked", ["hold", "stop", '"stop"', "'hold'"])
def test_acting_levels_are_capped_at_notify_and_said(store: sqlite3.Connection, asked: str) -> None:
    text = HOLD_RULE.replace("level: hold", f"level: {asked}")
    proposal = store_proposal(store, text, "p.yml", who="model", config=RulesConfig())
    assert proposal.level == "notify"
    assert proposal.requested_level == asked.strip("'\"")
    assert any("capped at notify" in n for n in proposal.notes)
    # formatting and comments survive; only the level value changed
    assert "# restarts are bad: hold the harness" in proposal.text
    assert "level: notify   # the author wants a hold" in proposal.text
    assert proposal.text.replace("level: notify", f"level: {asked}") == text
    # the stored hash is the loader's hash of the stored text
    reloaded = compile_rule_file(proposal.text, "p.yml", "policy", RulesConfig())
    assert reloaded.rules[0].rule.hash == proposal.hash
    row = store.execute("SELECT level, requested_level, who FROM rule_proposals").fetchone()
    assert row == ("notify", asked.strip("'\""), "model")


def test_notify_rule_is_stored_unchanged(store: sqlite3.Connection) -> None:
    proposal = store_proposal(store, NEVER_RULE, "n.yml", who="me", config=RulesConfig())
    assert proposal.text == NEVER_RULE
    assert proposal.notes == ()
    assert [p.id for p in list_proposals(store)] == [proposal.id]


@pytest.mark.parametrize(
    "bad",
    [
        HOLD_RULE.replace("on: run_event", "on: run_evnt"),
        HOLD_RULE.replace("event.cause_digest)", "event.cause)"),
        HOLD_RULE + "enforce: true\n",
        HOLD_RULE + "---\n",
        "rules:\n  - "
        + NEVER_RULE.replace("\n", "\n    ").rstrip()
        + "\n  - "
        + NEVER_RULE.replace("never_happens", "twin").replace("\n", "\n    ").rstrip()
        + "\n",
    ],
)
def test_invalid_proposals_are_refused_and_nothing_is_stored(
    store: sqlite3.Connection, bad: str
) -> None:
    with pytest.raises(CheckFailed):
        store_proposal(store, bad, "bad.yml", who="model", config=RulesConfig())
    assert store.execute("SELECT count(*) FROM rule_proposals").fetchone()[0] == 0


def test_merged_proposal_is_an_ordinary_rule_and_enforcement_needs_the_operator(
    store: sqlite3.Connection, tmp_path: Path
) -> None:
    proposal = store_proposal(store, HOLD_RULE, "p.yml", who="model", config=RulesConfig())
    rules_dir = tmp_path / "policy" / "rules"
    rules_dir.mkdir(parents=True)
    (rules_dir / "restarts_again.yml").write_text(proposal.text)
    lint = run_lint([str(rules_dir)], HarnessConfig())
    assert lint.exit_code == 0 and not lint.result.errors
    loaded = load_rules([(rules_dir, "policy")], RulesConfig())
    rule = loaded.rules[0].rule
    assert (rule.name, rule.hash, rule.level) == ("restarts_again", proposal.hash, "notify")
    # Even when the operator enforces the name, the merged rule's level is notify:
    # a hold needs the operator to edit the rule's level too, through review.
    authority = Authority.from_rules_config(
        parse_config('[memory.rules]\nenforce = ["restarts_again"]\n').rules
    )
    level, _ = decide_level(rule, authority)
    assert level == "notify"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def policy_setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    checkout = tmp_path / "policy"
    checkout.mkdir()
    _git(checkout, "init", "-q", "-b", "main")
    (checkout / "rules").mkdir()
    (checkout / "rules" / ".keep").write_text("")
    (checkout / "weights").mkdir()
    (checkout / "weights" / "w.txt").write_text("unknown folder, left alone\n")
    _git(checkout, "add", "-A")
    _git(checkout, "-c", "user.email=o@x", "-c", "user.name=o", "commit", "-qm", "init")
    _git(checkout, "remote", "add", "origin", str(remote))
    _git(checkout, "push", "-q", "origin", "main")
    db = tmp_path / "j.db"
    conn = connect(db)
    write_fleet(conn, days=2, harnesses=12, seed=7)
    conn.close()
    cfg = tmp_path / "harness.toml"
    cfg.write_text(f'[store]\npath = "{db}"\n\n[policy_repo.main]\npath = "{checkout}"\n')
    monkeypatch.setenv("HARNESS_CONFIG", str(cfg))
    return {"checkout": checkout, "remote": remote, "db": db, "cfg": cfg, "tmp": tmp_path}


def test_cli_propose_prepares_a_branch_without_touching_the_checkout(
    policy_setup: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    checkout, cfg = policy_setup["checkout"], policy_setup["cfg"]
    rule_file = policy_setup["tmp"] / "restarts_again.yml"
    rule_file.write_text(HOLD_RULE)
    head_before = _git(checkout, "rev-parse", "HEAD")
    cfg_before = cfg.read_bytes()
    assert harness_main(["rules", "propose", str(rule_file), "--days", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["level"] == "notify" and out["requested_level"] == "hold"
    branch = out["branch"]
    assert branch == f"propose/restarts_again-{out['hash'][:8]}"
    # the checkout is untouched: same HEAD, same branch, clean tree
    assert _git(checkout, "rev-parse", "HEAD") == head_before
    assert _git(checkout, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert _git(checkout, "status", "--porcelain") == ""
    assert cfg.read_bytes() == cfg_before
    # the branch holds the capped rule; its message is the PR description
    committed = _git(checkout, "show", f"{branch}:rules/restarts_again.yml")
    assert "level: notify" in committed
    message = _git(checkout, "log", "-1", "--format=%B", branch)
    assert out["hash"] in message
    assert "on recorded history" in message
    assert "| day | fires |" in message
    assert "capped at notify" in message
    assert out["backtest"]["fires"] > 0  # the simulated fleet restarts into one error
    assert "never fired" not in message
    # not pushed without --push
    remote_branches = _git(policy_setup["remote"], "branch", "--list")
    assert "propose/" not in remote_branches
    # the proposal is stored with its branch
    conn = connect(policy_setup["db"])
    assert conn.execute("SELECT branch FROM rule_proposals").fetchone()[0] == branch


def test_cli_propose_silent_rule_says_so_and_pushes(
    policy_setup: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    rule_file = policy_setup["tmp"] / "never.yml"
    rule_file.write_text(NEVER_RULE)
    assert harness_main(["rules", "propose", str(rule_file), "--push"]) == 0
    text = capsys.readouterr().out
    assert "never fired on recorded history" in text
    remote_branches = _git(policy_setup["remote"], "branch", "--list")
    assert "propose/never_happens-" in remote_branches


def test_cli_propose_refuses_bad_rule_before_writing(
    policy_setup: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    rule_file = policy_setup["tmp"] / "bad.yml"
    rule_file.write_text(HOLD_RULE.replace("target: harness", "target: nosuchfield"))
    assert harness_main(["rules", "propose", str(rule_file)]) == 1
    err = capsys.readouterr().err
    assert "bad.yml:" in err and "target" in err
    conn = connect(policy_setup["db"])
    assert conn.execute("SELECT count(*) FROM rule_proposals").fetchone()[0] == 0
    assert "propose/" not in _git(policy_setup["checkout"], "branch", "--list")


def test_cli_propose_same_version_twice_stores_nothing_more(
    policy_setup: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    rule_file = policy_setup["tmp"] / "never.yml"
    rule_file.write_text(NEVER_RULE)
    assert harness_main(["rules", "propose", str(rule_file)]) == 0
    for _ in range(2):
        assert harness_main(["rules", "propose", str(rule_file)]) == 1
        assert "already proposed" in capsys.readouterr().err
    conn = connect(policy_setup["db"])
    assert conn.execute("SELECT count(*) FROM rule_proposals").fetchone()[0] == 1


def test_cli_propose_refuses_a_multiline_who(policy_setup: dict[str, Path]) -> None:
    rule_file = policy_setup["tmp"] / "never.yml"
    rule_file.write_text(NEVER_RULE)
    assert harness_main(["rules", "propose", str(rule_file), "--who", "a\nb"]) == 2
    conn = connect(policy_setup["db"])
    assert conn.execute("SELECT count(*) FROM rule_proposals").fetchone()[0] == 0
