"""The operator's hand-written ``harness.toml``: read-only, global-only, strict.

Authority lives here: only ``[memory.rules] enforce`` lets a rule hold or stop
a harness. So the file is found in exactly one way (``$HARNESS_CONFIG``, else
the XDG config dir), never from a project directory, a policy repo or any
other environment variable, and nothing in this code base writes it. Unknown
keys are errors, because a typo in ``enforce`` that silently enforced nothing
(or a stray key that looked like it granted something) would be worse than a
refusal to load.

Importing and reading it stay cheap, because ``harness hook claude-code``
reads the config once per agent tool call: a plain file is read by
:mod:`engine.plaintoml` (tomllib only for anything else, and for every
syntax error), the regular expressions are compiled on first use, and the
value classes are :class:`~engine.record.Record` s: defining frozen
dataclasses would import ``dataclasses`` and ``inspect`` on every call.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from engine import plaintoml
from engine.capped import CappedReadError, path_refusal, read_capped
from engine.durations import DurationError, parse_duration_ms
from engine.errors import Diagnostic, InputError, Location
from engine.record import Record
from engine.vocab import ACTION_NAMES

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
_SIZE = r"^\s*(\d+)\s*(B|KiB|MiB|GiB|KB|MB|GB)?\s*$"
_SIZE_UNITS = {
    None: 1,
    "B": 1,
    "KiB": 1024,
    "MiB": 1024**2,
    "GiB": 1024**3,
    "KB": 1000,
    "MB": 1000**2,
    "GB": 1000**3,
}


def parse_size(text: str) -> int:
    """``"4MiB"`` -> bytes; ValueError with the accepted spelling otherwise."""
    m = re.match(_SIZE, text)
    if m is None:
        raise ValueError(
            f"invalid size {text!r}; use a number and a unit (B, KiB, MiB, GiB), e.g. '4MiB'"
        )
    return int(m.group(1)) * _SIZE_UNITS[m.group(2)]


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


_SCHEMA: dict[str, Any] = {
    "store": {"path": str, "retention_days": int},
    "memory": {
        "rule_miners": list,
        "rules": {
            "enforce": list,
            "disable": list,
            "shadow_period": str,
            "cost_limit": int,
            "actions": {name: list for name in ACTION_NAMES},
        },
    },
    "policy_repo": "*repo",
    "console": {"specs": list, "stale_after": str},
    "serve": {
        "listen": str,
        "token_file": str,
        "collision_window": str,
        "loop_guard": int,
        "max_body": str,
        "gate_wait": str,
        "drain_timeout": str,
        "max_connections": int,
        "merge_wait": str,
    },
}
_REPO_SCHEMA = {"path": str, "url": str, "branch": str}


class _Locator:
    """Finds the line of ``[table]`` / ``key =`` so type errors can say line:col.

    tomllib reports positions only for syntax errors; for a well-formed file
    with a wrong value type we scan the text for the key inside its table.
    """

    _HEADER = r"^\s*\[+\s*([^\]]+?)\s*\]+"

    def __init__(self, text: str, file: str) -> None:
        self.lines = text.splitlines()
        self.file = file

    def find(self, dotted: str) -> Location:
        *table_parts, key = dotted.split(".")
        table = ".".join(table_parts)
        current = ""
        for i, line in enumerate(self.lines, start=1):
            header = re.match(self._HEADER, line)
            if header:
                current = header.group(1).replace('"', "").replace(" ", "")
                if current == dotted:
                    return Location(self.file, i, line.index("[") + 1)
                continue
            m = re.match(rf"^(\s*)\"?{re.escape(key)}\"?\s*=", line)
            if m and current == table:
                return Location(self.file, i, len(m.group(1)) + 1)
        return Location(self.file, 1, 1)


def _expand(value: str) -> Path | None:
    """``~`` expansion that returns None for an unknown user instead of raising."""
    try:
        return Path(value).expanduser()
    except RuntimeError:
        return None


def _type_name(t: type) -> str:
    return {str: "a string", int: "an integer", list: "an array", dict: "a table"}[t]


def _load_toml(text: str, file: str) -> dict[str, Any]:
    """The TOML document as a dict; InputError at the syntax error's line:col."""
    raw = plaintoml.loads(text)  # None unless the text is plain TOML: then tomllib reads it
    if raw is not None:
        return raw
    import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
        loc = Location(file, int(m.group(1)), int(m.group(2))) if m else Location(file)
        problem = re.sub(r"\s*\(at line \d+, column \d+\)", "", msg) or "malformed TOML"
        raise InputError(
            f"{loc}: {problem}",
            title="Invalid harness.toml",
            diagnostics=[Diagnostic(problem, loc, code="toml")],
        ) from None


class _Checker:
    """Collects every problem of one document, each located at its key's line:col.

    Strict on purpose: an unknown key is an error, so a typo in ``enforce``
    never silently grants (or withholds) authority.
    """

    def __init__(self, text: str, file: str) -> None:
        self.locator = _Locator(text, file)
        self.problems: list[Diagnostic] = []

    def bad(self, path: str, message: str) -> None:
        self.problems.append(Diagnostic(message, self.locator.find(path), path=path, code="config"))

    def check(self, table: dict[str, Any], schema: dict[str, Any], prefix: str) -> None:
        for key, value in table.items():
            path = f"{prefix}.{key}" if prefix else key
            expected = schema.get(key)
            if expected is None:
                known = ", ".join(sorted(schema))
                self.bad(path, f"unknown key `{key}` (expected one of: {known})")
            elif expected == "*repo":
                self._repos(value, path)
            elif isinstance(expected, dict):
                if not isinstance(value, dict):
                    self.bad(path, "must be a table")
                else:
                    self.check(value, expected, path)
            elif not isinstance(value, expected) or isinstance(value, bool):
                self.bad(path, f"must be {_type_name(expected)}, got {type(value).__name__}")
            elif expected is list and not all(isinstance(v, str) for v in value):
                self.bad(path, "must be an array of strings")

    def _repos(self, value: object, path: str) -> None:
        if not isinstance(value, dict):
            self.bad(path, "must be a table of [policy_repo.NAME] tables")
            return
        for name, repo in value.items():
            if not isinstance(repo, dict):
                self.bad(f"{path}.{name}", "must be a table")
                continue
            self.check(repo, _REPO_SCHEMA, f"{path}.{name}")
            if "path" not in repo:
                self.bad(f"{path}.{name}", "missing required key `path`")
            else:
                self.check_path(repo["path"], f"{path}.{name}.path")

    def check_path(self, value: Any, where: str) -> None:
        if not isinstance(value, str):
            return
        if not value.strip():
            self.bad(where, "must not be empty")
        elif "\x00" in value:
            self.bad(where, "must not contain a NUL character")
        elif _expand(value) is None:
            self.bad(where, f"cannot expand {value.split('/', 1)[0]!r}: no such user")
        else:
            refusal = path_refusal(str(_expand(value)))
            if refusal is not None:
                self.bad(where, refusal)


def _table(parent: dict[str, Any], key: str) -> dict[str, Any]:
    value = parent.get(key)
    return value if isinstance(value, dict) else {}


def parse_config(text: str, file: str = "harness.toml") -> HarnessConfig:
    """Parse config text. Raises :class:`InputError` listing every problem found."""
    raw = _load_toml(text, file)
    checker = _Checker(text, file)
    checker.check(raw, _SCHEMA, "")
    store = _table(raw, "store")
    if "path" in store:
        checker.check_path(store["path"], "store.path")
    memory = _table(raw, "memory")
    rules = _parse_rules(_table(memory, "rules"), checker)
    stale_ms = _duration(
        _table(raw, "console"), "stale_after", DEFAULT_STALE_AFTER_MS, "console", checker.bad
    )
    retention = store.get("retention_days", DEFAULT_RETENTION_DAYS)
    if isinstance(retention, int) and retention < 1:
        checker.bad("store.retention_days", "must be at least 1")
    serve = _parse_serve(raw.get("serve"), checker.bad, checker.check_path)
    if checker.problems:
        raise InputError(
            f"{file}: {len(checker.problems)} problem(s)",
            title="Invalid harness.toml",
            diagnostics=checker.problems,
        )
    store_path = store.get("path")
    return HarnessConfig(
        source=None,
        store_path=(_expand(store_path) or Path(store_path)) if store_path else None,
        retention_days=retention if isinstance(retention, int) else DEFAULT_RETENTION_DAYS,
        rules=rules,
        rule_miners=_strings(memory, "rule_miners"),
        policy_repos=_parse_repos(raw),
        console_specs=_strings(_table(raw, "console"), "specs"),
        serve=serve,
        console_stale_after_ms=stale_ms,
    )


def _strings(table: dict[str, Any], key: str) -> tuple[str, ...]:
    """An array of strings (the schema reported anything else: then nothing is used)."""
    value = table.get(key, ())
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    return ()


def _parse_rules(rules_raw: dict[str, Any], checker: _Checker) -> RulesConfig:
    """``[memory.rules]`` and its ``actions`` (types were checked by the schema)."""
    shadow_ms = _duration(
        rules_raw, "shadow_period", DEFAULT_SHADOW_PERIOD_MS, "memory.rules", checker.bad
    )
    cost_limit = rules_raw.get("cost_limit", DEFAULT_COST_LIMIT)
    if isinstance(cost_limit, int) and cost_limit < 1:
        checker.bad("memory.rules.cost_limit", "must be at least 1")
    actions: dict[str, tuple[str, ...]] = {}
    actions_raw = rules_raw.get("actions", {})
    if isinstance(actions_raw, dict):
        for name in ACTION_NAMES:
            argv = actions_raw.get(name)
            if isinstance(argv, list):
                if not argv:
                    checker.bad(f"memory.rules.actions.{name}", "argv template must not be empty")
                actions[name] = tuple(str(a) for a in argv)
    return RulesConfig(
        enforce=_strings(rules_raw, "enforce"),
        disable=_strings(rules_raw, "disable"),
        shadow_period_ms=shadow_ms,
        cost_limit=cost_limit if isinstance(cost_limit, int) else DEFAULT_COST_LIMIT,
        actions=actions,
    )


def _parse_repos(raw: dict[str, Any]) -> tuple[PolicyRepo, ...]:
    """``[policy_repo.NAME]`` tables, by name (already checked)."""
    return tuple(
        PolicyRepo(
            name=name,
            path=_expand(repo["path"]) or Path(repo["path"]),
            url=repo.get("url"),
            branch=repo.get("branch", "main"),
        )
        for name, repo in sorted((raw.get("policy_repo") or {}).items())
    )


def _duration(
    table: dict[str, Any], key: str, default: int, section: str, bad: Callable[[str, str], None]
) -> int:
    """``table[key]`` as milliseconds, else ``default``; a bad duration goes to ``bad``.

    The schema has already checked the type: only a string is parsed here.
    """
    value = table.get(key)
    if not isinstance(value, str):
        return default
    try:
        return parse_duration_ms(value)
    except DurationError as exc:
        bad(f"{section}.{key}", str(exc))
        return default


def _parse_serve(table: Any, bad: Any, check_path: Any) -> ServeConfig:
    """``[serve]`` values (types were checked by the schema); problems go to ``bad``."""
    if not isinstance(table, dict):
        return ServeConfig()
    listen = table.get("listen", DEFAULT_LISTEN)
    if isinstance(listen, str):
        host, sep, port = listen.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            bad("serve.listen", f"must be HOST:PORT with a port 1-65535, got {listen!r}")
    window = _duration(table, "collision_window", DEFAULT_COLLISION_WINDOW_MS, "serve", bad)
    loop_guard = table.get("loop_guard", DEFAULT_LOOP_GUARD)
    if isinstance(loop_guard, int) and not 0 <= loop_guard <= 1_000_000:
        bad("serve.loop_guard", "must be between 0 (off) and 1000000")
    max_body = DEFAULT_MAX_BODY
    if isinstance(table.get("max_body"), str):
        try:
            max_body = parse_size(table["max_body"])
        except ValueError as exc:
            bad("serve.max_body", str(exc))
        else:
            if not 1024 <= max_body <= 1024**3:
                bad("serve.max_body", "must be between 1KiB and 1GiB")
    token = table.get("token_file")
    if isinstance(token, str):
        check_path(token, "serve.token_file")
    gate_wait = _duration(table, "gate_wait", DEFAULT_GATE_WAIT_MS, "serve", bad)
    if gate_wait > 10_000:
        bad("serve.gate_wait", "must be at most 10s (an agent's hook times out)")
    drain = _duration(table, "drain_timeout", DEFAULT_DRAIN_TIMEOUT_MS, "serve", bad)
    if drain > 600_000:
        bad("serve.drain_timeout", "must be at most 10m")
    merge_wait = _duration(table, "merge_wait", DEFAULT_MERGE_WAIT_MS, "serve", bad)
    if merge_wait > 10_000:
        bad("serve.merge_wait", "must be at most 10s (an agent's hook times out)")
    connections = table.get("max_connections", DEFAULT_MAX_CONNECTIONS)
    if isinstance(connections, int) and not 8 <= connections <= 65_536:
        bad("serve.max_connections", "must be between 8 and 65536")
    return ServeConfig(
        listen=listen if isinstance(listen, str) else DEFAULT_LISTEN,
        token_file=(_expand(token) or Path(token)) if isinstance(token, str) and token else None,
        collision_window_ms=window,
        loop_guard=loop_guard if isinstance(loop_guard, int) else DEFAULT_LOOP_GUARD,
        max_body=max_body,
        gate_wait_ms=gate_wait,
        drain_timeout_ms=drain,
        max_connections=(connections if isinstance(connections, int) else DEFAULT_MAX_CONNECTIONS),
    )


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
        expanded = _expand(cli_value)
        if expanded is None:
            raise InputError(
                f"--store {cli_value}: cannot expand {cli_value.split('/', 1)[0]!r}: no such user",
                title="Bad --store",
            )
        return expanded
    cfg = config if config is not None else load_config()
    return cfg.resolved_store_path()
