"""The Proposals pane's model: stored rule proposals, and what an operator does with one.

Re-running a proposal's backtest and preparing its policy-repo branch are view
operations so the console reaches the engine only through ``engine.views``
(issue 20); ``harness rules propose`` calls the same workflow underneath.
Nothing here can grant enforcement: a proposal is at notify, and its branch
is written in the policy checkout (never harness.toml), not pushed.
"""

from __future__ import annotations

import sqlite3

from engine.config import HarnessConfig
from engine.policy.proposals import Proposal as Proposal  # one stored proposal
from engine.policy.proposals import list_proposals as list_proposals
from engine.policy.propose import PreparedBranch as PreparedBranch  # where a branch was made
from engine.policy.workflow import DEFAULT_DAYS


def rebacktest(
    conn: sqlite3.Connection, proposal_id: int, config: HarnessConfig, days: int = DEFAULT_DAYS
) -> Proposal:
    """Backtest proposal ``proposal_id`` again over the last ``days`` of journal; store it."""
    from engine.policy.workflow import rerun_backtest

    return rerun_backtest(conn, proposal_id, config, days)


def prepare_branch(
    conn: sqlite3.Connection, proposal_id: int, config: HarnessConfig, repo: str | None = None
) -> PreparedBranch:
    """Prepare the proposal's branch in policy repo ``repo`` (None: the first configured)."""
    from engine.policy.workflow import prepare_proposal_branch

    return prepare_proposal_branch(conn, proposal_id, config, repo_name=repo)
