"""``harness policy sync``: fast-forward policy repos and report rule changes."""

from __future__ import annotations

import argparse

from engine.cli.common import EXIT_FAILED, EXIT_OK, print_json


def sync_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--repo", metavar="NAME", help="only this [policy_repo.NAME]")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def cmd_sync(args: argparse.Namespace) -> int:
    from engine.config import load_config
    from engine.errors import InputError
    from engine.policy.gitops import PolicyError
    from engine.policy.sync import sync_repo

    config = load_config()
    repos = [r for r in config.policy_repos if args.repo in (None, r.name)]
    if not repos:
        message = (
            f"[policy_repo.{args.repo}] is not configured in harness.toml"
            if args.repo
            else "no [policy_repo.*] is configured in harness.toml"
        )
        raise InputError(message, title="Policy repo")
    reports, failures = [], []
    for repo in repos:
        try:
            reports.append(sync_repo(repo, config.rules))
        except PolicyError as exc:
            failures.append({"repo": repo.name, "error": exc.message})
    if args.json:
        print_json(
            {"ok": not failures, "repos": [r.to_json() for r in reports], "failures": failures}
        )
    else:
        for report in reports:
            head = f"{report.old_head[:10]} → {report.new_head[:10]}"
            print(f"{report.repo}: {report.status} ({head})")
            for change in report.changes:
                if change.kind == "changed":
                    old = (change.old_hash or "")[:12]
                    new = (change.new_hash or "")[:12]
                    print(f"  changed  {change.name}  {old} → {new} (shadows again)")
                else:
                    print(f"  {change.kind:8} {change.name}")
            for error in report.errors:
                print(f"  error    {error}")
        for failure in failures:
            print(f"{failure['repo']}: refused: {failure['error']}")
    return EXIT_FAILED if failures else EXIT_OK
