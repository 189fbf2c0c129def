"""``harness rules propose``: backtest a rule and prepare a policy-repo branch.

The branch is built with git plumbing in a private index (``hash-object``,
``update-index``, ``write-tree``, ``commit-tree``, ``update-ref``), so the
operator's checkout, its working tree and its current branch are never
touched: the change exists only as a new branch until someone pushes it
(``--push``) and reviews it. The commit message is the pull-request
description: what the rule matches, its hash, a per-day backtest table "on
recorded history", and a plain note when it never fired.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.config import PolicyRepo
from engine.policy.gitops import PolicyError, check_branch, check_remote, git
from engine.policy.proposals import PreparedRule
from engine.rules.evaluation.backtest import BacktestResult, resolve_range, run_backtest
from engine.timefmt import DAY_MS, day_ms

NEVER_FIRED = (
    "This rule never fired on recorded history. A rule about something that has not "
    "happened backtests silent: that is not evidence that it is right or wrong. "
    "Shadow mode will log its first real fires."
)


def backtest_summary(result: BacktestResult, days: int) -> dict[str, Any]:
    """A compact, JSON-safe summary: totals, every day in range (zeros included)."""
    counts = Counter(day_ms(f.at) for f in result.fires)
    per_day: list[list[Any]] = []
    rng = result.range
    if rng.rows:
        for day in range(rng.first_at // DAY_MS, rng.last_at // DAY_MS + 1):
            key = day_ms(day * DAY_MS)
            per_day.append([key, counts.get(key, 0)])
    by_status = Counter(f.status for f in result.fires)
    return {
        "on_recorded_history": True,
        "days": days,
        "rows": result.rows_scanned if result.cancelled else result.range.rows,
        "first_seq": rng.first_seq,
        "last_seq": rng.last_seq,
        "fires": len(result.fires),
        "by_status": dict(sorted(by_status.items())),
        "per_day": per_day,
        "silent": not result.fires,
        "rule_errors": [str(e) for e in result.rule_errors],
    }


def backtest_prepared(
    conn: sqlite3.Connection, prepared: PreparedRule, days: int
) -> dict[str, Any]:
    seq_range = resolve_range(conn, since=f"{days}d")
    result = run_backtest(conn, [prepared.compiled], seq_range)
    return backtest_summary(result, days)


def pr_description(prepared: PreparedRule, summary: dict[str, Any]) -> str:
    """The commit message that doubles as the pull-request description."""
    rule = prepared.compiled.rule
    lines = [
        f"Propose rule {rule.name} (level {rule.level})",
        "",
        f"What it matches: {rule.description or '(no description)'}",
        f"  on: {rule.on}",
        f"  when: {rule.normalized_when}",
        f"  target: {rule.target}",
        f"Hash: {rule.hash}",
        "",
    ]
    lines.extend(prepared.notes)
    if prepared.notes:
        lines.append("")
    lines.append(
        "This proposal cannot hold or stop anything: enforcement stays in the operator's "
        "hand-written harness.toml. Once merged, the rule runs in shadow first."
    )
    lines.append("")
    lines.append(
        f"Backtest over the last {summary['days']} days on recorded history "
        f"(seq {summary['first_seq']}..{summary['last_seq']}, {summary['rows']} rows):"
    )
    lines.append("")
    lines.append("| day | fires |")
    lines.append("|---|---|")
    for day, count in summary["per_day"]:
        lines.append(f"| {day} | {count} |")
    lines.append(f"| total | {summary['fires']} |")
    lines.append("")
    if summary["silent"]:
        lines.append(NEVER_FIRED)
    else:
        lines.append(
            "Results are on recorded history: after a would-be fire the history went on as it "
            "happened, so later fires are an estimate."
        )
    return "\n".join(lines) + "\n"


@dataclass(frozen=True, slots=True)
class PreparedBranch:
    repo: str
    branch: str
    commit: str
    path: str
    pushed: bool


def branch_name(prepared: PreparedRule) -> str:
    rule = prepared.compiled.rule
    return f"propose/{rule.name}-{rule.hash[:8]}"


def check_free_branch(repo: PolicyRepo, branch: str) -> None:
    """Refuse early (before anything is stored) when this version was already proposed."""
    if not (repo.path / ".git").exists():
        raise PolicyError(f"[policy_repo.{repo.name}] path {repo.path} is not a git checkout")
    exists = git(repo.path, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}", check=False)
    if exists:
        raise PolicyError(
            f"branch {branch} already exists in {repo.path}: this version was already proposed"
        )


def prepare_branch(
    repo: PolicyRepo, prepared: PreparedRule, message: str, *, push: bool = False
) -> PreparedBranch:
    """Create ``propose/<name>-<hash8>`` with ``rules/<name>.yml`` on top of the repo's branch."""
    path = repo.path
    if not (path / ".git").exists():
        raise PolicyError(f"[policy_repo.{repo.name}] path {path} is not a git checkout")
    branch = branch_name(prepared)
    check_free_branch(repo, branch)
    check_branch(repo.branch, f"[policy_repo.{repo.name}] branch")
    base = git(path, "rev-parse", "--verify", f"refs/heads/{repo.branch}^{{commit}}")
    rel = f"rules/{prepared.compiled.rule.name}.yml"
    with tempfile.TemporaryDirectory() as tmp:
        env = {"GIT_INDEX_FILE": os.path.join(tmp, "index")}
        env.update(_identity(path))
        git(path, "read-tree", base, env=env)
        blob = git(path, "hash-object", "-w", "--stdin", stdin=prepared.text, env=env)
        git(path, "update-index", "--add", "--cacheinfo", f"100644,{blob},{rel}", env=env)
        tree = git(path, "write-tree", env=env)
        commit = git(path, "commit-tree", tree, "-p", base, "-F", "-", stdin=message, env=env)
    git(path, "update-ref", f"refs/heads/{branch}", commit, "")
    pushed = False
    if push:
        remote = check_remote(repo.url, f"[policy_repo.{repo.name}] url") if repo.url else "origin"
        git(path, "push", "--quiet", "--end-of-options", remote, f"{branch}:{branch}")
        pushed = True
    return PreparedBranch(repo.name, branch, commit, str(Path(path) / rel), pushed)


def _identity(path: Path) -> dict[str, str]:
    """Use the checkout's git identity; fall back to a neutral one so commit-tree works."""
    name = git(path, "config", "user.name", check=False)
    email = git(path, "config", "user.email", check=False)
    env: dict[str, str] = {}
    if not name:
        env["GIT_AUTHOR_NAME"] = env["GIT_COMMITTER_NAME"] = "harness rules propose"
    if not email:
        env["GIT_AUTHOR_EMAIL"] = env["GIT_COMMITTER_EMAIL"] = "harness@localhost"
    return env
