"""Operator actions on stored proposals: re-run the backtest, prepare the branch.

Shared by the console's Proposals pane and anything else that acts on a
proposal after it was stored. Both re-validate the stored text with the
shared loader first, so a proposal stored by an older release that no longer
loads is reported, not silently backtested or pushed.
"""

from __future__ import annotations

import sqlite3

from engine.config import HarnessConfig, PolicyRepo
from engine.errors import InputError
from engine.policy.proposals import (
    PreparedRule,
    Proposal,
    get_proposal,
    prepare_rule,
    set_branch,
    update_backtest,
)
from engine.policy.propose import (
    PreparedBranch,
    backtest_prepared,
    pr_description,
    prepare_branch,
)

DEFAULT_DAYS = 7


def _load(
    conn: sqlite3.Connection, proposal_id: int, config: HarnessConfig
) -> tuple[Proposal, PreparedRule]:
    proposal = get_proposal(conn, proposal_id)
    if proposal is None:
        raise InputError(f"no proposal #{proposal_id} in this store")
    prepared = prepare_rule(proposal.text, f"<proposal #{proposal_id}>", config.rules)
    # keep the notes recorded when it was proposed (e.g. the level cap)
    prepared = PreparedRule(
        prepared.compiled, prepared.text, proposal.requested_level, proposal.notes
    )
    return proposal, prepared


def rerun_backtest(
    conn: sqlite3.Connection, proposal_id: int, config: HarnessConfig, days: int = DEFAULT_DAYS
) -> Proposal:
    """Backtest the stored rule again over the last ``days`` and store the summary."""
    _, prepared = _load(conn, proposal_id, config)
    summary = backtest_prepared(conn, prepared, days)
    update_backtest(conn, proposal_id, summary)
    fresh = get_proposal(conn, proposal_id)
    assert fresh is not None
    return fresh


def pick_repo(
    config: HarnessConfig, name: str | None = None, *, unique: bool = False
) -> PolicyRepo:
    """The named policy repo, else the only (``unique``) or first configured one."""
    repos = config.policy_repos
    if name is not None:
        for repo in repos:
            if repo.name == name:
                return repo
        raise InputError(f"[policy_repo.{name}] is not configured in harness.toml")
    if not repos:
        raise InputError(
            "no [policy_repo.*] is configured in harness.toml; add one with its `path` "
            "(a git checkout) to prepare proposals"
        )
    if unique and len(repos) > 1:
        names = ", ".join(r.name for r in repos)
        raise InputError(f"several policy repos are configured ({names}); pick one with --repo")
    return repos[0]


def prepare_proposal_branch(
    conn: sqlite3.Connection,
    proposal_id: int,
    config: HarnessConfig,
    *,
    repo_name: str | None = None,
    push: bool = False,
) -> PreparedBranch:
    """Prepare ``propose/<name>-<hash8>`` in the policy checkout; record it on the proposal."""
    proposal, prepared = _load(conn, proposal_id, config)
    repo = pick_repo(config, repo_name)
    summary = proposal.backtest or backtest_prepared(conn, prepared, DEFAULT_DAYS)
    branch = prepare_branch(repo, prepared, pr_description(prepared, summary), push=push)
    set_branch(conn, proposal_id, branch.branch)
    return branch
