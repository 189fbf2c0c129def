"""The operator's hand-written ``harness.toml``: read-only, global-only, strict.

Authority lives here: only ``[memory.rules] enforce`` lets a rule hold or stop
a harness. So the file is found in exactly one way (``$HARNESS_CONFIG``, else
the XDG config dir), never from a project directory, a policy repo or any
other environment variable, and nothing in this code base writes it. Unknown
keys are errors, because a typo in ``enforce`` that silently enforced nothing
(or a stray key that looked like it granted something) would be worse than a
refusal to load.

This module holds what a configuration *is* (its value classes and defaults)
and how the file is found and read; :mod:`engine.config_text` turns its text
into those values, strictly.

Importing and reading it stay cheap, because ``harness hook`` reads the
config once per agent tool call: a plain file is read by
:mod:`engine.plaintoml` (tomllib only for anything else, and for every
syntax error), the regular expressions are compiled on first use, and the
value classes are :class:`~engine.record.Record` s: defining frozen
dataclasses would import ``dataclasses`` and ``inspect`` on every call.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

from engine.capped import CappedReadError, read_capped
from engine.errors import Diagnostic, InputError, Location
from engine.record import Record

DEFAULT_RETENTION_DAYS = 45
DEFAULT_SHADOW_PERIOD_MS = 72 * 3_600_000
#: A running harness with no event for this long is shown as stale in the Fleet pane.
DEFAULT_STALE_AFTER_MS = 2 * 3_600_000
DEFAULT_COST_LIMIT = 10_000
MAX_CONFIG_BYTES = 1024 * 1024


def config_path() -> Path:
    """Where the global config is read from (it need not exist)."""
    explicit = os.environ.get("HARNESS_CONFIG")
    if explicit:
        try:
            return Path(explicit).expanduser()
        except RuntimeError:  # ~nouser: read the literal path, which reports clearly
            return Path(explicit)
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "harness" / "harness.toml"


def config_signature(path: Path) -> tuple[int, int, int] | None:
    """What tells an edit or a rename-save of ``harness.toml``: inode, mtime (ns), size.

    The acting process and the console poll this rather than watch the file's
    directory: that directory often holds the store too, and a watch there
    wakes on every write to the journal's WAL. None when the file is absent.
    """
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def default_store_path() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return Path(base) / "harness" / "journal.db"


class PolicyRepo(Record):
    """``[policy_repo.NAME]``: a git repository of rule files (DESIGN.md)."""

    __slots__ = ("branch", "name", "path", "url")
    __match_args__ = ("name", "path", "url", "branch")

    def __init__(self, name: str, path: Path, url: str | None = None, branch: str = "main") -> None:
        self.name: Final = name
        self.path: Final = path
        self.url: Final = url
        self.branch: Final = branch


class RulesConfig(Record):
    """``[memory.rules]``: which rules may act (enforce), which are off, and their limits."""

    __slots__ = ("actions", "cost_limit", "disable", "enforce", "shadow_period_ms")
    __match_args__ = ("enforce", "disable", "shadow_period_ms", "cost_limit", "actions")

    def __init__(
        self,
        enforce: tuple[str, ...] = (),
        disable: tuple[str, ...] = (),
        shadow_period_ms: int = DEFAULT_SHADOW_PERIOD_MS,
        cost_limit: int = DEFAULT_COST_LIMIT,
        actions: dict[str, tuple[str, ...]] | None = None,
    ) -> None:
        self.enforce: Final = enforce
        self.disable: Final = disable
        self.shadow_period_ms: Final = shadow_period_ms
        self.cost_limit: Final = cost_limit
        self.actions: Final[dict[str, tuple[str, ...]]] = {} if actions is None else actions


DEFAULT_LISTEN = "127.0.0.1:4318"
DEFAULT_COLLISION_WINDOW_MS = 10 * 60_000
DEFAULT_LOOP_GUARD = 8
DEFAULT_MAX_BODY = 4 * 1024 * 1024
DEFAULT_GATE_WAIT_MS = 250
DEFAULT_DRAIN_TIMEOUT_MS = 10_000
DEFAULT_MAX_CONNECTIONS = 256
DEFAULT_MERGE_WAIT_MS = 1_500


class ServeConfig(Record):
    """``[serve]``: where ``harness serve`` listens and what it derives (DESIGN.md)."""

    __slots__ = (
        "collision_window_ms",
        "drain_timeout_ms",
        "gate_wait_ms",
        "listen",
        "loop_guard",
        "max_body",
        "max_connections",
        "merge_wait_ms",
        "token_file",
    )
    __match_args__ = (
        "listen",
        "token_file",
        "collision_window_ms",
        "loop_guard",
        "max_body",
        "gate_wait_ms",
        "drain_timeout_ms",
        "max_connections",
        "merge_wait_ms",
    )

    def __init__(
        self,
        listen: str = DEFAULT_LISTEN,
        token_file: Path | None = None,
        collision_window_ms: int = DEFAULT_COLLISION_WINDOW_MS,
        loop_guard: int = DEFAULT_LOOP_GUARD,
        max_body: int = DEFAULT_MAX_BODY,
        gate_wait_ms: int = DEFAULT_GATE_WAIT_MS,
        drain_timeout_ms: int = DEFAULT_DRAIN_TIMEOUT_MS,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        merge_wait_ms: int = DEFAULT_MERGE_WAIT_MS,
    ) -> None:
        self.listen: Final = listen
        self.token_file: Final = token_file
        self.collision_window_ms: Final = collision_window_ms
        self.loop_guard: Final = loop_guard
        self.max_body: Final = max_body
        #: How long a gated hook waits for the evaluator to catch up with its harness.
        self.gate_wait_ms: Final = gate_wait_ms
        #: How long SIGTERM waits for rows not yet acknowledged.
        self.drain_timeout_ms: Final = drain_timeout_ms
        self.max_connections: Final = max_connections
        #: How long a Codex hook report waits for its OTLP record's outcome (see README).
        self.merge_wait_ms: Final = merge_wait_ms


class HarnessConfig(Record):
    """The parsed config. ``source`` is None when no file exists (all defaults).

    ``console_stale_after_ms``: ``[console] stale_after``, how long a running harness may be silent
    before the console shows it as stale. Rebuild one with :meth:`Record.replace`.
    """

    __slots__ = (
        "console_specs",
        "console_stale_after_ms",
        "policy_repos",
        "retention_days",
        "rule_miners",
        "rules",
        "serve",
        "source",
        "store_path",
    )
    __match_args__ = (
        "source",
        "store_path",
        "retention_days",
        "rules",
        "rule_miners",
        "policy_repos",
        "console_specs",
        "serve",
        "console_stale_after_ms",
    )

    def __init__(
        self,
        source: Path | None = None,
        store_path: Path | None = None,
        retention_days: int = DEFAULT_RETENTION_DAYS,
        rules: RulesConfig | None = None,
        rule_miners: tuple[str, ...] = (),
        policy_repos: tuple[PolicyRepo, ...] = (),
        console_specs: tuple[str, ...] = (),
        serve: ServeConfig | None = None,
        console_stale_after_ms: int = DEFAULT_STALE_AFTER_MS,
    ) -> None:
        self.source: Final = source
        self.store_path: Final = store_path
        self.retention_days: Final = retention_days
        self.rules: Final[RulesConfig] = RulesConfig() if rules is None else rules
        self.rule_miners: Final = rule_miners
        self.policy_repos: Final = policy_repos
        self.console_specs: Final = console_specs
        self.serve: Final[ServeConfig] = ServeConfig() if serve is None else serve
        self.console_stale_after_ms: Final = console_stale_after_ms

    def resolved_store_path(self) -> Path:
        return self.store_path or default_store_path()

    def policy_rule_dirs(self, *, existing: bool = False) -> list[Path]:
        """The ``rules/`` directory of each policy repo, in config order.

        ``existing=True`` keeps only the ones that are directories now: what a
        command loads. Without it a missing directory stays in the list, so a
        watcher still sees it appear and a loader can say it is missing.
        """
        dirs = [repo.path / "rules" for repo in self.policy_repos]
        return [d for d in dirs if d.is_dir()] if existing else dirs


def expand_path(value: str) -> Path | None:
    """``~`` expansion that returns None for an unknown user instead of raising."""
    try:
        return Path(value).expanduser()
    except RuntimeError:
        return None


def _unreadable(target: Path, reason: str, loc: Location | None = None) -> InputError:
    where = loc or Location(str(target))
    return InputError(
        f"{where}: cannot read config: {reason}",
        title="Unreadable harness.toml",
        diagnostics=[Diagnostic(reason, where, code="io")],
    )


def _read_config_text(target: Path) -> str:
    """Read a regular file of at most MAX_CONFIG_BYTES as UTF-8.

    ``HARNESS_CONFIG=/dev/zero`` or a FIFO must be a refusal, not a hang or a
    MemoryError, and a bad byte is reported at its line:col so it can be found.
    Raises FileNotFoundError for a missing file (= defaults).
    """
    try:
        raw = read_capped(target, MAX_CONFIG_BYTES)
    except CappedReadError as exc:
        if exc.kind == "missing" and exc.os_error is not None:
            raise exc.os_error from None
        if exc.kind in ("directory", "not_regular"):
            raise _unreadable(target, "not a regular file") from None
        if exc.kind == "too_large":
            raise _unreadable(target, f"file is larger than {MAX_CONFIG_BYTES} bytes") from None
        raise _unreadable(target, exc.reason) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        loc = Location(str(target), line, col)
        raise _unreadable(target, f"not valid UTF-8 (byte 0x{raw[exc.start]:02x})", loc) from None


def load_config(path: Path | None = None) -> HarnessConfig:
    """Load the global config (or ``path``, for tests). Missing file = defaults."""
    target = path or config_path()
    try:
        text = _read_config_text(target)
    except FileNotFoundError:
        return HarnessConfig()
    from engine.config_text import parse_config

    parsed = parse_config(text, str(target))
    return HarnessConfig(
        source=target,
        store_path=parsed.store_path,
        retention_days=parsed.retention_days,
        rules=parsed.rules,
        rule_miners=parsed.rule_miners,
        policy_repos=parsed.policy_repos,
        console_specs=parsed.console_specs,
        serve=parsed.serve,
        console_stale_after_ms=parsed.console_stale_after_ms,
    )


def resolve_store(cli_value: str | None, config: HarnessConfig | None = None) -> Path:
    """``--store`` if given, else ``[store] path``, else the XDG state dir."""
    if cli_value:
        expanded = expand_path(cli_value)
        if expanded is None:
            raise InputError(
                f"--store {cli_value}: cannot expand {cli_value.split('/', 1)[0]!r}: no such user",
                title="Bad --store",
            )
        return expanded
    cfg = config if config is not None else load_config()
    return cfg.resolved_store_path()
