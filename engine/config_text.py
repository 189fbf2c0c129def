"""``harness.toml``'s text into a :class:`~engine.config.HarnessConfig`: strict, located.

Unknown keys are errors and every problem is collected, each at its key's
file:line:col (tomllib reports positions only for syntax errors, so a
:class:`_Locator` finds the key in the text). A plain document is read by
:mod:`engine.plaintoml`; tomllib reads anything else.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine import plaintoml
from engine.capped import path_refusal
from engine.config import (
    DEFAULT_COLLISION_WINDOW_MS,
    DEFAULT_COST_LIMIT,
    DEFAULT_DRAIN_TIMEOUT_MS,
    DEFAULT_GATE_WAIT_MS,
    DEFAULT_LISTEN,
    DEFAULT_LOOP_GUARD,
    DEFAULT_MAX_BODY,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MERGE_WAIT_MS,
    DEFAULT_RETENTION_DAYS,
    DEFAULT_SHADOW_PERIOD_MS,
    DEFAULT_STALE_AFTER_MS,
    HarnessConfig,
    PolicyRepo,
    RulesConfig,
    ServeConfig,
    expand_path,
)
from engine.durations import DurationError, parse_duration_ms
from engine.errors import Diagnostic, InputError, Location
from engine.vocab import ACTION_NAMES

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
        elif expand_path(value) is None:
            self.bad(where, f"cannot expand {value.split('/', 1)[0]!r}: no such user")
        else:
            refusal = path_refusal(str(expand_path(value)))
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
        store_path=(expand_path(store_path) or Path(store_path)) if store_path else None,
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
            path=expand_path(repo["path"]) or Path(repo["path"]),
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
        token_file=(expand_path(token) or Path(token))
        if isinstance(token, str) and token
        else None,
        collision_window_ms=window,
        loop_guard=loop_guard if isinstance(loop_guard, int) else DEFAULT_LOOP_GUARD,
        max_body=max_body,
        gate_wait_ms=gate_wait,
        drain_timeout_ms=drain,
        max_connections=(connections if isinstance(connections, int) else DEFAULT_MAX_CONNECTIONS),
    )
