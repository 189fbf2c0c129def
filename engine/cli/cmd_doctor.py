"""``harness doctor``: check config, store, lease, lag, drops, disabled rules, holds, retention.

Exit 0 when nothing is an error (warnings included), 1 when a check failed
(an invalid config, a corrupt or missing store), so it can gate a deploy.
"""

from __future__ import annotations

import argparse


def arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", metavar="PATH")
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--verbose", action="store_true", help="SQLite's full detail for a corrupt store"
    )


def cmd_doctor(args: argparse.Namespace) -> int:
    from engine.cli.common import print_json
    from engine.config import HarnessConfig, default_store_path, load_config
    from engine.errors import HarnessError
    from engine.rules.doctor import loaded_rule_names, run_doctor

    cfg: HarnessConfig | None
    try:
        cfg = load_config()
    except HarnessError:
        cfg = None  # reported by the config check
    if args.store:
        from pathlib import Path

        store = Path(args.store).expanduser()
    else:
        store = cfg.resolved_store_path() if cfg else default_store_path()
    names = loaded_rule_names(cfg) if cfg is not None else None
    report = run_doctor(store, rule_names=names, verbose=args.verbose)
    if args.json:
        print_json(report.to_json())
    else:
        print(report.render_text())
    return 0 if report.ok else 1
