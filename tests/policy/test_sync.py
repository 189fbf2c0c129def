"""``harness policy sync`` against real git repositories in temporary directories."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from engine.cli.harness import main as harness_main
from engine.config import PolicyRepo
from engine.policy.gitops import PolicyError
from engine.policy.sync import sync_repo

RULE = """\
name: {name}
description: test rule
on: run_event
when: >-
  event.type == "{type}" &&
  count({{"harness": event.harness}}, duration("1h")) >= {n}
level: notify
target: harness
cooldown: 30m
message: "{{harness}} matched"
"""


def run(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def commit_all(repo: Path, message: str) -> None:
    run(repo, "add", "-A")
    run(repo, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", message)


def write_rule(repo: Path, name: str, type_: str = "restart", n: int = 3) -> None:
    (repo / "rules").mkdir(exist_ok=True)
    (repo / "rules" / f"{name}.yml").write_text(RULE.format(name=name, type=type_, n=n))


@pytest.fixture
def upstream_and_checkout(tmp_path: Path) -> tuple[Path, Path]:
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    run(upstream, "init", "-q", "-b", "main")
    write_rule(upstream, "alpha")
    write_rule(upstream, "beta", "verify_failed")
    (upstream / "weights").mkdir()
    (upstream / "weights" / "w.bin").write_bytes(b"\x00\x01")
    commit_all(upstream, "initial rules")
    checkout = tmp_path / "checkout"
    subprocess.run(
        ["git", "clone", "-q", str(upstream), str(checkout)], check=True, capture_output=True
    )
    return upstream, checkout


def repo_cfg(checkout: Path) -> PolicyRepo:
    return PolicyRepo(name="main", path=checkout, url=None, branch="main")


def test_fast_forward_reports_added_changed_removed(
    upstream_and_checkout: tuple[Path, Path],
) -> None:
    upstream, checkout = upstream_and_checkout
    write_rule(upstream, "alpha", n=5)  # meaning changes: new hash
    (upstream / "rules" / "beta.yml").unlink()
    write_rule(upstream, "gamma", "loop_stopped")
    commit_all(upstream, "change rules")
    report = sync_repo(repo_cfg(checkout))
    assert report.status == "fast-forwarded"
    assert report.new_head == run(upstream, "rev-parse", "HEAD")
    kinds = {c.name: c.kind for c in report.changes}
    assert kinds == {"alpha": "changed", "beta": "removed", "gamma": "added"}
    alpha = next(c for c in report.changes if c.name == "alpha")
    assert alpha.old_hash and alpha.new_hash and alpha.old_hash != alpha.new_hash
    # unknown top-level folders are left as git put them
    assert (checkout / "weights" / "w.bin").read_bytes() == b"\x00\x01"


def test_message_only_change_is_not_a_rule_change(upstream_and_checkout: tuple[Path, Path]) -> None:
    upstream, checkout = upstream_and_checkout
    path = upstream / "rules" / "alpha.yml"
    path.write_text(path.read_text().replace("matched", "matched again"))
    commit_all(upstream, "reword message")
    report = sync_repo(repo_cfg(checkout))
    assert report.status == "fast-forwarded"
    assert report.changes == ()


def test_up_to_date(upstream_and_checkout: tuple[Path, Path]) -> None:
    _, checkout = upstream_and_checkout
    report = sync_repo(repo_cfg(checkout))
    assert report.status == "up to date"
    assert report.changes == ()


def test_refuses_local_changes(upstream_and_checkout: tuple[Path, Path]) -> None:
    upstream, checkout = upstream_and_checkout
    write_rule(upstream, "gamma")
    commit_all(upstream, "more")
    write_rule(checkout, "alpha", n=9)
    before = run(checkout, "rev-parse", "HEAD")
    with pytest.raises(PolicyError, match="local changes"):
        sync_repo(repo_cfg(checkout))
    assert run(checkout, "rev-parse", "HEAD") == before
    # the local edit is kept, not overwritten by the remote's version
    assert ">= 9" in (checkout / "rules" / "alpha.yml").read_text()


def test_refuses_divergence(upstream_and_checkout: tuple[Path, Path]) -> None:
    upstream, checkout = upstream_and_checkout
    write_rule(upstream, "gamma")
    commit_all(upstream, "upstream work")
    write_rule(checkout, "delta")
    commit_all(checkout, "local work")
    local = run(checkout, "rev-parse", "HEAD")
    with pytest.raises(PolicyError, match="diverged"):
        sync_repo(repo_cfg(checkout))
    assert run(checkout, "rev-parse", "HEAD") == local


def test_refuses_wrong_branch(upstream_and_checkout: tuple[Path, Path]) -> None:
    _, checkout = upstream_and_checkout
    run(checkout, "checkout", "-q", "-b", "feature")
    with pytest.raises(PolicyError, match="branch"):
        sync_repo(repo_cfg(checkout))


def test_cli_json_and_config(
    upstream_and_checkout: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    upstream, checkout = upstream_and_checkout
    write_rule(upstream, "gamma")
    commit_all(upstream, "add gamma")
    cfg = tmp_path / "harness.toml"
    cfg.write_text(f'[policy_repo.main]\npath = "{checkout}"\nurl = "{upstream}"\n')
    monkeypatch.setenv("HARNESS_CONFIG", str(cfg))
    before = cfg.read_bytes()
    assert harness_main(["policy", "sync", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is True
    assert out["repos"][0]["added"] == ["gamma"]
    assert cfg.read_bytes() == before  # sync never writes the config


def test_cli_without_config_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert harness_main(["policy", "sync"]) == 2
    assert "no [policy_repo.*] is configured" in capsys.readouterr().err
    assert harness_main(["policy", "sync", "--repo", "nope"]) == 2
    assert "[policy_repo.nope] is not configured" in capsys.readouterr().err


@pytest.mark.parametrize(
    "url",
    ["--upload-pack=touch {tmp}/PWNED", "-oProxyCommand=touch {tmp}/PWNED", "ext::sh -c touch% x"],
)
def test_remote_that_git_would_read_as_an_option_is_refused(
    upstream_and_checkout: tuple[Path, Path], tmp_path: Path, url: str
) -> None:
    _, checkout = upstream_and_checkout
    bad = PolicyRepo(name="main", path=checkout, url=url.format(tmp=tmp_path), branch="main")
    with pytest.raises(PolicyError, match=r"not a usable git remote|ext::"):
        sync_repo(bad)
    assert not (tmp_path / "PWNED").exists()
    assert not (checkout / "main").exists()


def test_bad_branch_names_are_refused(upstream_and_checkout: tuple[Path, Path]) -> None:
    _, checkout = upstream_and_checkout
    for branch in ("--force", "a..b", "has space", ""):
        with pytest.raises(PolicyError, match="not a valid branch name"):
            sync_repo(PolicyRepo(name="main", path=checkout, url=None, branch=branch))


def test_synced_override_of_a_starter_rule_replaces_it_and_shadows(
    upstream_and_checkout: tuple[Path, Path],
) -> None:
    from engine.config import RulesConfig
    from engine.rules.authority.enforcement import Authority
    from engine.rules.authority.lifecycle import SHADOW, Lifecycle
    from engine.rules.language.loader import default_sources, load_rules

    upstream, checkout = upstream_and_checkout
    starter = {c.rule.name: c.rule for c in load_rules(default_sources(), RulesConfig()).rules}
    # the policy repo overrides the starter rule with the same name and a stricter threshold
    write_rule(upstream, "restart_same_error", "restart", n=2)
    commit_all(upstream, "stricter restart rule")
    report = sync_repo(repo_cfg(checkout))
    assert {c.name: c.kind for c in report.changes} == {"restart_same_error": "added"}
    loaded = load_rules(default_sources([checkout / "rules"]), RulesConfig())
    rules = {c.rule.name: c.rule for c in loaded.rules}
    override = rules["restart_same_error"]
    assert override.source_kind == "policy"
    assert override.hash != starter["restart_same_error"].hash
    # enforced by name, the override still shadows first: new content, new hash
    lifecycle = Lifecycle(Authority.from_rules_config(RulesConfig(enforce=("restart_same_error",))))
    decision = lifecycle.decide_fire(override, "h05", seq=10, now_ms=1_000_000)
    assert decision.status == SHADOW
    # while the starter version it replaced would have acted at once
    assert (
        lifecycle.decide_fire(starter["restart_same_error"], "h06", 11, 1_000_000).status != SHADOW
    )
