"""Proposals pane: list with backtests, re-run the backtest, prepare the branch."""

from __future__ import annotations

import subprocess
from pathlib import Path

from textual.widgets import Static

from console.panes.proposals import ProposalsPane
from console.widgets.confirm import AskText
from engine.config import HarnessConfig, PolicyRepo, RulesConfig
from engine.policy.proposals import get_proposal, store_proposal
from engine.store.db import connect
from engine.views.live import demo_config
from tests.console.conftest import AppFactory, until

RULE = """\
name: restarts_again
description: The harness restarts into the same error.
on: run_event
when: >-
  event.type == "restart" && has(event.cause_digest) &&
  count({"harness": event.harness, "type": "restart",
         "cause_digest": event.cause_digest}, duration("1h")) >= 3
level: stop
target: harness
cooldown: 30m
message: "{harness} keeps restarting"
"""
CREATED_MS = 1_772_400_000_000


def add_proposal(store: Path) -> int:
    conn = connect(store)
    proposal = store_proposal(
        conn, RULE, "restarts_again.yml", who="model", config=RulesConfig(), now_ms=CREATED_MS
    )
    conn.close()
    return proposal.id


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


async def test_proposals_rebacktest_and_prepare_branch(
    make_app: AppFactory, store: Path, tmp_path: Path
) -> None:
    pid = add_proposal(store)
    repo = tmp_path / "policy-checkout"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "README").write_text("policy\n")
    git(repo, "add", "-A")
    git(repo, "-c", "user.email=o@x", "-c", "user.name=o", "commit", "-qm", "init")
    head = git(repo, "rev-parse", "HEAD")
    config = demo_config(HarnessConfig(policy_repos=(PolicyRepo("main", repo),)))
    app = make_app(initial="proposals", config=config)
    async with app.run_test(size=(140, 40)) as pilot:
        pane = app.query_one(ProposalsPane)
        await until(pilot, lambda: pane.rows)
        assert [p.id for p in pane.rows] == [pid]
        detail = str(app.query_one("#proposal-text", Static).render())
        assert "asked for stop; capped at notify" in detail
        assert "no backtest yet" in detail
        await pilot.press("b")
        await until(pilot, lambda: pane.rows and pane.rows[0].backtest is not None)
        stored = get_proposal(connect(store), pid)
        assert stored is not None and stored.backtest is not None
        assert stored.backtest["on_recorded_history"] is True
        assert stored.backtest["fires"] >= 1  # the simulated fleet restarts into one error
        await pilot.press("p")
        assert isinstance(app.screen, AskText)
        await pilot.press("enter")
        await until(pilot, lambda: pane.rows and pane.rows[0].branch)
        branch = pane.rows[0].branch
        assert branch is not None and branch.startswith("propose/restarts_again-")
        assert "level: notify" in git(repo, "show", f"{branch}:rules/restarts_again.yml")
        assert git(repo, "rev-parse", "HEAD") == head  # the checkout is untouched
        assert git(repo, "status", "--porcelain") == ""


async def test_prepare_without_policy_repo_says_so(make_app: AppFactory, store: Path) -> None:
    add_proposal(store)
    app = make_app(initial="proposals")
    async with app.run_test(size=(140, 40)) as pilot:
        pane = app.query_one(ProposalsPane)
        await until(pilot, lambda: pane.rows)
        await pilot.press("p")
        await until(pilot, lambda: app._notifications)
        assert not isinstance(app.screen, AskText)  # issue 11 item 12: no question to fail on
        messages = [n.message for n in app._notifications]
        assert any("no [policy_repo.*] is configured" in m for m in messages)
        assert any("[policy_repo.NAME]" in m and "path =" in m for m in messages)
        assert pane.rows[0].branch is None
