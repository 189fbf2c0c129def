"""Which rule files a process loads, and how the acting process follows them as they change.

Every command that evaluates, lints, backtests or shows rules must load the
same set the acting evaluator loads, or a backtest would not reproduce live
fires and ``rules list`` would show rules nobody runs. So the answer lives
here: the starter pack, then each configured policy repo's ``rules/`` (those
that exist; :func:`policy_dir_problems` reports the missing ones), then each
``--policy`` directory, a later rule of the same name overriding an earlier
one. A ``--policy`` that is not a directory is refused here, with one
message, for every command.

The acting process (``harness serve``, ``harness evaluate --follow``) follows
those files and ``harness.toml`` with :class:`FollowedRules`: a change reloads
them; a broken ``harness.toml`` keeps the last good configuration and a
broken rule file the last good version of its rules
(:func:`keep_last_good`), each said in one line.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Final

from engine.config import HarnessConfig, config_signature
from engine.errors import Diagnostic, InputError, Location
from engine.record import Record
from engine.rules.language.loader import default_sources, load_rules
from engine.rules.language.model import CompiledRule, LoadResult, SourceKind


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
    """Load ``sources`` in order (see :func:`engine.rules.language.loader.load_rules`)."""
    return load_rules(sources.dirs, config.rules)


def load_listed(config: HarnessConfig, policy: Sequence[str] = ()) -> LoadResult:
    """The rules a command lists, shows or mines, with a warning per missing policy repo.

    :func:`load_rule_set` of :func:`rule_sources`, plus :func:`policy_dir_problems`
    among the warnings: a command that shows rules says why a repo's are absent.
    """
    result = load_rule_set(rule_sources(config, policy), config)
    missing = policy_dir_problems(config)
    if not missing:
        return result
    return LoadResult(result.rules, result.errors, (*result.warnings, *missing))


def policy_dir_problems(config: HarnessConfig) -> list[Diagnostic]:
    """Warnings for configured policy repos whose path or rules/ dir is missing.

    The loader only sees directories that exist, so without this a typo in
    ``[policy_repo.X] path`` would silently load no policy rules at all.
    """
    out = []
    for repo in config.policy_repos:
        rules = repo.path / "rules"
        if not repo.path.is_dir():
            msg = f"policy repo `{repo.name}`: {repo.path} does not exist (not synced yet?)"
        elif not rules.is_dir():
            msg = f"policy repo `{repo.name}`: no rules/ directory in {repo.path}"
        else:
            continue
        out.append(
            Diagnostic(
                msg,
                Location(str(config.source) if config.source else None),
                path=f"policy_repo.{repo.name}.path",
                severity="warning",
                code="policy_repo",
            )
        )
    return out


def keep_last_good(previous: LoadResult | None, new: LoadResult) -> LoadResult:
    """``new``, plus each previous rule whose file now fails to load (last good version).

    The loader already keeps a starter rule when its override breaks; this
    covers a broken edit of a rule that exists only in a policy or ``--policy``
    file, which would otherwise vanish until fixed.
    """
    if previous is None:
        return new
    broken = {d.location.file for d in new.errors if d.location.file}
    present = {c.rule.name for c in new.rules}
    kept = [
        c for c in previous.rules if c.rule.name not in present and c.rule.source_file in broken
    ]
    if not kept:
        return new
    return LoadResult((*new.rules, *kept), new.errors, new.warnings)


class FollowedRules:
    """The rules and config the acting process acts with, reloaded when their files change.

    A watcher thread (watchfiles on the rule directories, a poll of
    ``harness.toml``) sets :attr:`changed`; the acting loop then rebuilds its
    evaluator after :meth:`reload`. ``say`` writes one line per event.
    """

    def __init__(
        self,
        config: HarnessConfig,
        loaded: LoadResult,
        policy: Sequence[str] = (),
        *,
        say: Callable[[str], None],
    ) -> None:
        self.config = config
        self.loaded = loaded
        self.policy = tuple(policy)
        self.say = say
        self.changed = threading.Event()
        #: Set once the watcher sees the files (a change after it is never missed).
        self.ready = threading.Event()

    @property
    def rules(self) -> list[CompiledRule]:
        return list(self.loaded.rules)

    def watch(self, stop: threading.Event) -> None:
        """Start watching (a daemon thread that ends with ``stop``)."""
        from engine.config import config_path

        roots = sorted(str(d) for d in rule_sources(self.config, self.policy).watch if d.is_dir())
        threading.Thread(
            target=self._watch, args=(roots, config_path(), stop), name="rule-watch", daemon=True
        ).start()
        self.ready.wait(5)

    def _watch(self, roots: list[str], config: Path, stop: threading.Event) -> None:
        """Set :attr:`changed` on a rule file's change (watched) or ``harness.toml``'s (polled).

        ``harness.toml`` is looked at (:func:`~engine.config.config_signature`)
        each time the watcher yields, at least twice a second, rather than
        watched: in serve, with the store beside it, a sixth of the CPU per
        OTLP record went to the watch's events.
        """
        seen = config_signature(config)
        for changes in _changes(roots, stop):
            self.ready.set()
            now = config_signature(config)
            if now != seen:
                seen = now
                self.changed.set()
            if any(Path(p).suffix in (".yml", ".yaml", ".toml") for _c, p in changes):
                self.changed.set()

    def reload(self) -> bool:
        """Read config and rules again; False (and the old set kept) when nothing loads."""
        from engine.config import load_config
        from engine.errors import HarnessError

        self.changed.clear()
        try:
            config = load_config()
            loaded = keep_last_good(
                self.loaded, load_rule_set(rule_sources(config, self.policy), config)
            )
        except HarnessError as exc:
            self.say(f"reload refused, keeping the last good rules: {exc}")
            return False
        for diag in loaded.errors:
            self.say(f"rule not loaded (last good version kept): {diag}")
        self.config, self.loaded = config, loaded
        self.say(f"rules reloaded: {len(loaded.rules)} rule(s)")
        return True


def _changes(roots: list[str], stop: threading.Event) -> Iterator[AbstractSet[tuple[object, str]]]:
    """watchfiles' change sets under ``roots``, and an empty one at least every 0.5 s.

    The first (empty) set says the watches are in place.
    """
    if not roots:
        while True:
            yield set()
            if stop.wait(0.25):
                return
    from watchfiles import watch

    yield from watch(
        *roots,
        stop_event=stop,
        debounce=150,
        step=250,
        rust_timeout=500,
        yield_on_timeout=True,
        recursive=True,
    )
