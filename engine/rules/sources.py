"""Which rule files a process loads: the one answer, from ``harness.toml`` and ``--policy``.

Every command that evaluates, lints, backtests or shows rules must load the
same set the acting evaluator loads, or a backtest would not reproduce live
fires and ``rules list`` would show rules nobody runs. So the answer lives
here: the starter pack, then each configured policy repo's ``rules/`` (those
that exist; :func:`engine.rules.lint.policy_dir_problems` reports the
missing ones), then each ``--policy`` directory, a later rule of the same
name overriding an earlier one. A ``--policy`` that is not a directory is
refused here, with one message, for every command.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Final

from engine.config import HarnessConfig
from engine.errors import Diagnostic, InputError, Location
from engine.record import Record
from engine.rules.loader import default_sources, load_rules
from engine.rules.model import LoadResult, SourceKind


class RuleSources(Record):
    """The rule sources of one process, in load order, and the directories to watch."""

    __slots__ = ("dirs", "watch")
    __match_args__ = ("dirs", "watch")

    def __init__(self, dirs: tuple[tuple[Path, SourceKind], ...], watch: tuple[Path, ...]) -> None:
        self.dirs: Final = dirs
        self.watch: Final = watch


def rule_sources(config: HarnessConfig, policy: Sequence[str] = ()) -> RuleSources:
    """The sources for ``config`` plus ``--policy`` directories; InputError for a bad one."""
    extra: list[Path] = []
    for given in policy:
        path = Path(given).expanduser()
        if not path.is_dir():
            raise InputError(
                f"--policy {given}: not a directory",
                title="Cannot load rules",
                diagnostics=[Diagnostic("not a directory", Location(given), path="--policy")],
            )
        extra.append(path)
    dirs = tuple(default_sources(config.policy_rule_dirs(existing=True), extra))
    # Watch every configured repo's rules/ (a missing one may appear), not only those loaded.
    watch = tuple(dict.fromkeys([d for d, _ in dirs] + config.policy_rule_dirs()))
    return RuleSources(dirs, watch)


def load_rule_set(sources: RuleSources, config: HarnessConfig) -> LoadResult:
    """Load ``sources`` in order (see :func:`engine.rules.loader.load_rules`)."""
    return load_rules(sources.dirs, config.rules)
