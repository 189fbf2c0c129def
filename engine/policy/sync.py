"""``harness policy sync``: fast-forward a policy checkout and say what changed.

A sync never merges, rebases or overwrites: a checkout with local changes, on
another branch, or diverged from its remote is refused with a message saying
what to do. What the operator needs to know afterwards is which rules were
added, changed (old → new semantic hash, so they will shadow again) or
removed; that report comes from loading ``rules/`` before and after with the
same loader the evaluator uses. Nothing here can grant enforcement: that stays
in the hand-written harness.toml, which this module never opens for writing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from engine.config import PolicyRepo, RulesConfig
from engine.policy.gitops import PolicyError, check_branch, check_remote, git, is_ancestor

RULES_DIR = "rules"


@dataclass(frozen=True, slots=True)
class RuleChange:
    name: str
    old_hash: str | None
    new_hash: str | None

    @property
    def kind(self) -> str:
        if self.old_hash is None:
            return "added"
        if self.new_hash is None:
            return "removed"
        return "changed"


@dataclass(frozen=True, slots=True)
class SyncReport:
    repo: str
    path: str
    old_head: str
    new_head: str
    status: str  # "fast-forwarded" | "up to date" | "ahead of remote" | "no remote"
    changes: tuple[RuleChange, ...] = ()
    errors: tuple[str, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, object]:
        return {
            "repo": self.repo,
            "path": self.path,
            "old_head": self.old_head,
            "new_head": self.new_head,
            "status": self.status,
            "added": [c.name for c in self.changes if c.kind == "added"],
            "changed": [
                {"name": c.name, "old_hash": c.old_hash, "new_hash": c.new_hash}
                for c in self.changes
                if c.kind == "changed"
            ],
            "removed": [c.name for c in self.changes if c.kind == "removed"],
            "errors": list(self.errors),
        }


def rule_hashes(
    repo_path: Path, config: RulesConfig | None = None
) -> tuple[dict[str, str], list[str]]:
    """Semantic hash of every rule in ``repo_path/rules`` (name → hash), plus load errors.

    Unknown top-level folders (``weights/`` and the like) are never read.
    """
    rules_dir = repo_path / RULES_DIR
    if not rules_dir.is_dir():
        return {}, []
    from engine.rules.language.loader import load_rules

    result = load_rules([(rules_dir, "policy")], config or RulesConfig())
    hashes = {compiled.rule.name: compiled.rule.hash for compiled in result.rules}
    errors = [str(d) for d in result.errors if d.severity == "error"]
    return hashes, errors


def diff_hashes(before: dict[str, str], after: dict[str, str]) -> tuple[RuleChange, ...]:
    changes = []
    for name in sorted(set(before) | set(after)):
        old, new = before.get(name), after.get(name)
        if old != new:
            changes.append(RuleChange(name, old, new))
    return tuple(changes)


def _check_clean(repo: PolicyRepo) -> None:
    path = repo.path
    if not (path / ".git").exists():
        raise PolicyError(f"[policy_repo.{repo.name}] path {path} is not a git checkout")
    dirty = git(path, "status", "--porcelain", "--untracked-files=normal")
    if dirty:
        files = ", ".join(line[3:] for line in dirty.splitlines()[:5])
        raise PolicyError(
            f"{path} has local changes ({files}); commit or discard them, then sync again"
        )
    branch = git(path, "rev-parse", "--abbrev-ref", "HEAD")
    if branch != repo.branch:
        raise PolicyError(
            f"{path} is on branch {branch!r}, but [policy_repo.{repo.name}] branch is "
            f"{repo.branch!r}; switch branches or fix the config"
        )


def sync_repo(repo: PolicyRepo, config: RulesConfig | None = None) -> SyncReport:
    """Fetch and fast-forward one policy repo; refuse anything but a fast-forward."""
    check_branch(repo.branch, f"[policy_repo.{repo.name}] branch")
    if repo.url is not None:
        check_remote(repo.url, f"[policy_repo.{repo.name}] url")
    _check_clean(repo)
    path = repo.path
    before, _ = rule_hashes(path, config)
    old_head = git(path, "rev-parse", "HEAD")
    source = repo.url
    if source is None:
        remotes = git(path, "remote").split()
        if "origin" not in remotes:
            return SyncReport(repo.name, str(path), old_head, old_head, "no remote")
        source = "origin"
    git(path, "fetch", "--quiet", "--end-of-options", source, repo.branch)
    fetched = git(path, "rev-parse", "FETCH_HEAD")
    if fetched == old_head:
        status = "up to date"
    elif is_ancestor(path, old_head, fetched):
        git(path, "merge", "--ff-only", "--quiet", fetched)
        status = "fast-forwarded"
    elif is_ancestor(path, fetched, old_head):
        status = "ahead of remote"
    else:
        raise PolicyError(
            f"{path} has diverged from {source} {repo.branch} "
            f"(local {old_head[:12]}, remote {fetched[:12]}); "
            "reconcile by hand — sync only fast-forwards"
        )
    new_head = git(path, "rev-parse", "HEAD")
    after, errors = rule_hashes(path, config)
    return SyncReport(
        repo.name,
        str(path),
        old_head,
        new_head,
        status,
        diff_hashes(before, after),
        tuple(errors),
    )
