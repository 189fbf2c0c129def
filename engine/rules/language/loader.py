"""Strict rule files -> validated, compiled rules. The one loader.

The evaluator, backtest, lint, ``rules list/show`` and the console all call
:func:`load_rules` (or :func:`compile_rule_file`), so a rule lint passes is a
rule the evaluator runs (seed 004, "Lint shares the loader"). Every problem is
collected as a :class:`Diagnostic` naming file:line:col — CEL errors are
mapped from the ``when`` text back into the YAML file — and a bad rule never
stops another rule or file from loading.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.capped import CappedReadError, path_refusal, read_capped
from engine.config import RulesConfig
from engine.durations import DurationError, parse_duration_ms
from engine.errors import Diagnostic, HarnessError, Location, traceback_id
from engine.rules.language.celast import (
    AstDecodeError,
    canonical,
    decode_checked,
    type_guard,
    unparse,
)
from engine.rules.language.celenv import CelEnvironment, default_environment
from engine.rules.language.checks import check_ast
from engine.rules.language.model import (
    KIND_FIELDS,
    KIND_NAMES,
    LEVELS,
    CompiledRule,
    LoadResult,
    Rule,
    SourceKind,
)
from engine.rules.language.prefilter import derive
from engine.vocab import ENFORCED_LEVELS
from engine.yamlsrc import MAX_BYTES, LocDict, LocList, decode_source, parse_yaml

RULE_KEYS = ("name", "description", "on", "when", "level", "target", "cooldown", "message")
REQUIRED_KEYS = ("name", "on", "when", "level", "target")
NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
MAX_WHEN_CHARS = 8192
RULE_SUFFIXES = (".yml", ".yaml")
ENFORCE_WARNING = "acts at notify until the operator enforces it in harness.toml"


@dataclass(frozen=True, slots=True)
class FileResult:
    """Everything one file yielded: rules, errors and warnings (non-fatal)."""

    rules: tuple[CompiledRule, ...]
    errors: tuple[Diagnostic, ...]
    warnings: tuple[Diagnostic, ...]


def semantic_hash(on: str, canonical_when: str, level: str, target: str, cooldown_ms: int) -> str:
    """sha256 over what a rule *does*; names, descriptions and messages excluded."""
    payload = json.dumps(
        {
            "on": on,
            "when": canonical_when,
            "level": level,
            "target": target,
            "cooldown_ms": cooldown_ms,
        },
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class _WhenMap:
    """Maps code-point offsets in the ``when`` value back to file line:col.

    The YAML value differs from the file text only by indentation, line
    folding, quotes and escapes, so walking both texts and matching each
    non-space character of the value to the next equal character of the file
    recovers its place, whatever scalar style the author used.
    """

    def __init__(self, file_text: str, start: Location, when: str) -> None:
        self.when = when
        lines = file_text.split("\n")
        base = sum(len(x) + 1 for x in lines[: max(start.line - 1, 0)]) + max(start.col - 1, 0)
        self.file_text = file_text
        self.start = start
        self.offsets: list[int] = []
        j = base
        n = len(file_text)
        for ch in when:
            if ch.isspace():
                self.offsets.append(min(j, n))
                continue
            k = j
            while k < n and file_text[k] != ch:
                k += 1
            if k >= n:  # escapes made the texts diverge; stop mapping here
                break
            self.offsets.append(k)
            j = k + 1

    def location(self, offset: int) -> Location:
        if not self.offsets:
            return self.start
        idx = self.offsets[min(max(offset, 0), len(self.offsets) - 1)]
        line = self.file_text.count("\n", 0, idx) + 1
        col = idx - (self.file_text.rfind("\n", 0, idx) + 1) + 1
        return Location(self.start.file, line, col)

    def offset_of(self, line: int, col: int) -> int:
        lines = self.when.split("\n")
        return sum(len(x) + 1 for x in lines[: max(line - 1, 0)]) + max(col - 1, 0)


def _placeholders(message: str) -> tuple[list[str], str | None]:
    """``{field}`` names in ``message``; ``{{``/``}}`` are literal braces."""
    names: list[str] = []
    stripped = message.replace("{{", "").replace("}}", "")
    for m in re.finditer(r"\{([^{}]*)\}", stripped):
        names.append(m.group(1))
    rest = re.sub(r"\{[^{}]*\}", "", stripped)
    if "{" in rest or "}" in rest:
        return names, "unbalanced brace in message (write {{ or }} for a literal brace)"
    return names, None


class _RuleBuilder:
    """Validates one rule mapping; collects diagnostics rather than raising."""

    def __init__(
        self,
        doc_text: str,
        file: str,
        source_kind: SourceKind,
        config: RulesConfig,
        env: CelEnvironment,
    ) -> None:
        self.text = doc_text
        self.file = file
        self.source_kind = source_kind
        self.config = config
        self.env = env
        self.errors: list[Diagnostic] = []
        self.warnings: list[Diagnostic] = []

    def err(self, message: str, loc: Location, path: str, code: str, hint: str = "") -> None:
        self.errors.append(Diagnostic(message, loc, path=path, code=code, hint=hint))

    def _string(self, m: LocDict, key: str, prefix: str) -> str | None:
        if key not in m:
            return None
        value = m[key]
        if not isinstance(value, str):
            kind = "nothing" if value is None else type(value).__name__
            self.err(
                f"`{key}` must be a string, got {kind}", m.where_value(key), prefix + key, "type"
            )
            return None
        return value

    def build(self, m: Any, where: Location, prefix: str) -> CompiledRule | None:
        """The compiled rule of mapping ``m``, or None with every problem in :attr:`errors`."""
        if not isinstance(m, LocDict):
            self.err("a rule must be a mapping", where, prefix.rstrip("."), "schema")
            return None
        before = len(self.errors)
        self._check_keys(m, prefix)
        name = self._name(m, prefix)
        description = self._string(m, "description", prefix) or ""
        on = self._on(m, prefix)
        level = self._level(m, prefix)
        target = self._string(m, "target", prefix)
        fields = KIND_FIELDS.get(on or "", ())
        if target is not None and on is not None and target not in fields:
            self.err(
                f"`target` must name a field of {on} events, got {target!r}",
                m.where_value("target"),
                prefix + "target",
                "target",
                "fields: " + ", ".join(fields),
            )
        cooldown_ms = self._cooldown_ms(m, prefix)
        message = self._message(m, prefix, on, fields)
        when = self._string(m, "when", prefix)
        compiled = None
        if when is not None and on is not None:
            compiled = self._compile_when(when, on, m.where_value("when"), prefix + "when")
        if level in ENFORCED_LEVELS:
            self._warn_not_enforced(m, prefix, name, level)
        if len(self.errors) > before or compiled is None:
            return None
        assert name is not None and level is not None and target is not None and when is not None
        expr, canon, normalized, report, guard, prefilter = compiled
        rule = Rule(
            name=name,
            description=description,
            on=on or "",
            when=when,
            level=level,
            target=target,
            cooldown_ms=cooldown_ms,
            message=message,
            source_file=self.file,
            source_kind=self.source_kind,
            text=self.text,
            hash=semantic_hash(on or "", canon, level, target, cooldown_ms),
            normalized_when=normalized,
            static_cost=report.static_cost,
            primitives=report.primitives,
        )
        cost_limit = self.config.cost_limit
        runner = self.env.make_runner(on or "", expr, report.base_cost, cost_limit, guard)
        return CompiledRule(rule, runner, prefilter)

    def _check_keys(self, m: LocDict, prefix: str) -> None:
        """Unknown keys, then missing required ones."""
        for key in m:
            if key not in RULE_KEYS:
                self.err(
                    f"unknown key `{key}`",
                    m.where(key),
                    prefix + str(key),
                    "unknown_key",
                    "expected one of: " + ", ".join(RULE_KEYS),
                )
        for key in REQUIRED_KEYS:
            if key not in m:
                self.err(f"missing required key `{key}`", m.pos, prefix + key, "missing_key")

    def _name(self, m: LocDict, prefix: str) -> str | None:
        name = self._string(m, "name", prefix)
        if name is not None and not NAME_RE.match(name):
            self.err(
                f"name {name!r} is not an identifier (letters, digits, _; at most 64)",
                m.where_value("name"),
                prefix + "name",
                "name",
            )
        return name

    def _on(self, m: LocDict, prefix: str) -> str | None:
        """The event kind, or None when absent or not a kind (its fields are then unknown)."""
        on = self._string(m, "on", prefix)
        if on is not None and on not in KIND_NAMES:
            self.err(
                f"`on` must be one of {', '.join(KIND_NAMES)}, got {on!r}",
                m.where_value("on"),
                prefix + "on",
                "on",
            )
            return None
        return on

    def _level(self, m: LocDict, prefix: str) -> str | None:
        level = self._string(m, "level", prefix)
        if level is not None and level not in LEVELS:
            self.err(
                f"`level` must be one of {', '.join(LEVELS)}, got {level!r}",
                m.where_value("level"),
                prefix + "level",
                "level",
            )
        return level

    def _cooldown_ms(self, m: LocDict, prefix: str) -> int:
        cooldown = self._string(m, "cooldown", prefix)
        if cooldown is None:
            return 0
        try:
            return parse_duration_ms(cooldown)
        except DurationError as exc:
            self.err(str(exc), m.where_value("cooldown"), prefix + "cooldown", "cooldown")
            return 0

    def _message(self, m: LocDict, prefix: str, on: str | None, fields: tuple[str, ...]) -> str:
        """The message template; its braces balanced and each placeholder a field of ``on``."""
        message = self._string(m, "message", prefix) or ""
        names, brace_err = _placeholders(message)
        if brace_err:
            self.err(brace_err, m.where_value("message"), prefix + "message", "message")
        if on is not None:
            for ph in names:
                if ph not in fields:
                    self.err(
                        f"message placeholder {{{ph}}} is not a field of {on} events",
                        m.where_value("message"),
                        prefix + "message",
                        "message",
                        "fields: " + ", ".join(fields),
                    )
        return message

    def _warn_not_enforced(self, m: LocDict, prefix: str, name: str | None, level: str) -> None:
        self.warnings.append(
            Diagnostic(
                f"{name} is a {level} rule: it {ENFORCE_WARNING}",
                m.where_value("level"),
                path=prefix + "level",
                severity="warning",
                code="not_enforced",
                hint=f'add "{name}" to [memory.rules] enforce to let it {level}',
            )
        )

    def _compile_when(self, when: str, on: str, start: Location, path: str) -> Any:
        if not when.strip():
            self.err("`when` is empty", start, path, "when")
            return None
        if len(when) > MAX_WHEN_CHARS:
            self.err(f"`when` is longer than {MAX_WHEN_CHARS} characters", start, path, "when")
            return None
        wmap = _WhenMap(self.text, start, when)
        expr, cel_errors = self.env.compile(on, when)
        if expr is None:
            for ce in cel_errors:
                loc = wmap.location(wmap.offset_of(ce.line, ce.col))
                self.err(ce.message, loc, path, "cel")
            return None
        try:
            ast = decode_checked(expr.serialize())
        except AstDecodeError as exc:
            self.err(f"cannot analyse the compiled expression: {exc}", start, path, "cel")
            return None
        report = check_ast(ast, self.config.cost_limit)
        for f in report.findings:
            self.err(f.message, wmap.location(f.offset), path, f.code)
        if report.findings:
            return None
        canon = canonical(ast.root, ast.references)
        normalized = unparse(ast.root, ast.references)
        guard = type_guard(ast.root, ast.references)
        return expr, canon, normalized, report, guard, derive(ast.root, ast.references, on)


def compile_rule_file(
    text: str,
    file: str,
    source_kind: SourceKind,
    config: RulesConfig,
    env: CelEnvironment | None = None,
) -> FileResult:
    """Parse one rule file (one rule, or a ``rules:`` list) and compile every rule."""
    env = env or default_environment()
    try:
        doc = parse_yaml(text, file)
    except HarnessError as exc:
        diags = exc.diagnostics or (Diagnostic(exc.message, Location(file), code="yaml"),)
        return FileResult((), tuple(diags), ())
    builder = _RuleBuilder(text, file, source_kind, config, env)
    data = doc.data
    rules: list[CompiledRule] = []
    if data is None:
        builder.err("empty rule file", Location(file, 1, 1), "", "schema")
    elif isinstance(data, LocDict) and "rules" in data:
        extra = [k for k in data if k != "rules"]
        for key in extra:
            builder.err(
                f"unknown key `{key}` beside `rules:`",
                data.where(key),
                str(key),
                "unknown_key",
                "a file holds either one rule or a `rules:` list",
            )
        items = data["rules"]
        if not isinstance(items, LocList):
            builder.err(
                "`rules` must be a list of rules", data.where_value("rules"), "rules", "schema"
            )
        elif not items:
            builder.err(
                "`rules` is empty: a rule file holds at least one rule",
                data.where_value("rules"),
                "rules",
                "schema",
            )
        else:
            seen: dict[str, Location] = {}
            for i, item in enumerate(items):
                built = builder.build(item, items.where(i), f"rules[{i}].")
                if built is None:
                    continue
                if built.rule.name in seen:
                    builder.err(
                        f"rule name `{built.rule.name}` repeats the one at {seen[built.rule.name]}",
                        item.where_value("name"),
                        f"rules[{i}].name",
                        "duplicate_name",
                    )
                    continue
                seen[built.rule.name] = item.where_value("name")
                rules.append(built)
    else:
        loc = data.pos if isinstance(data, LocDict) else Location(file, 1, 1)
        built = builder.build(data, loc, "")
        if built is not None:
            rules.append(built)
    return FileResult(tuple(rules), tuple(builder.errors), tuple(builder.warnings))


def compile_rule_text(
    text: str, file: str, source_kind: SourceKind, config: RulesConfig
) -> tuple[CompiledRule | None, list[Diagnostic]]:
    """One-rule convenience for backtest/tests: the first rule, or None with its errors."""
    res = compile_rule_file(text, file, source_kind, config)
    errors = list(res.errors)
    if not res.rules and not errors:
        errors.append(Diagnostic("no rule in file", Location(file, 1, 1), code="schema"))
    return (res.rules[0] if res.rules else None), errors


def rule_files(path: Path) -> list[Path]:
    """The rule files of a source: ``path`` itself, or its *.yml/*.yaml, sorted."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        return []
    return sorted(p for p in path.iterdir() if p.suffix in RULE_SUFFIXES and p.is_file())


def load_rules(
    dirs: Sequence[tuple[Path, SourceKind]],
    config: RulesConfig,
    env: CelEnvironment | None = None,
) -> LoadResult:
    """Load every source in order; a later source's rule of the same name wins.

    Within one source a repeated name is an error (the first stays). When an
    overriding rule fails to load, the earlier valid version stays in effect
    and the error is reported, so a broken policy edit never silently removes
    a starter rule.
    """
    env = env or default_environment()
    by_name: dict[str, CompiledRule] = {}
    errors: list[Diagnostic] = []
    warnings: list[Diagnostic] = []
    for source, kind in dirs:
        refusal = path_refusal(str(source))
        if refusal is not None:  # Path.exists() would raise, not answer
            errors.append(
                Diagnostic(f"rule source refused: {refusal}", Location(str(source)), code="io")
            )
            continue
        if not source.exists():
            errors.append(
                Diagnostic(f"rule source not found: {source}", Location(str(source)), code="io")
            )
            continue
        in_source: dict[str, str] = {}
        for path in rule_files(source):
            try:
                raw = read_capped(path, MAX_BYTES)
            except CappedReadError as exc:
                if exc.kind == "too_large":
                    size = f"{exc.size} bytes" if exc.size is not None else "over the limit"
                    problem, code = f"file is {size}; the limit is {MAX_BYTES}", "size"
                else:
                    problem, code = f"cannot read: {exc.os_error or exc.reason}", "io"
                errors.append(Diagnostic(problem, Location(str(path)), code=code))
                continue
            try:
                text = decode_source(raw, str(path))
            except HarnessError as exc:
                errors.extend(exc.diagnostics or (Diagnostic(exc.message, Location(str(path))),))
                continue
            try:
                res = compile_rule_file(text, str(path), kind, config, env)
            except Exception as exc:  # a bug: reported with an id, and it stops this file only
                errors.append(_internal_error(path, exc))
                continue
            errors.extend(res.errors)
            warnings.extend(res.warnings)
            for cr in res.rules:
                first = in_source.get(cr.rule.name)
                if first is not None:
                    errors.append(
                        Diagnostic(
                            f"rule name `{cr.rule.name}` is already defined in {first}",
                            Location(str(path)),
                            path="name",
                            code="duplicate_name",
                        )
                    )
                    continue
                in_source[cr.rule.name] = str(path)
                by_name[cr.rule.name] = cr
    return LoadResult(tuple(by_name.values()), tuple(errors), tuple(warnings))


def _internal_error(path: Path, exc: Exception) -> Diagnostic:
    """A file whose loading hit a bug: located, with the traceback id, never silent.

    Seed 004's first promise is that a bad rule disables itself and nothing
    else; that must hold even for a failure nobody foresaw, so the loader
    keeps going and the error is reported like any other load error.
    """
    return Diagnostic(
        f"internal error while loading this file ({type(exc).__name__}, id {traceback_id(exc)}); "
        "its rules are not loaded",
        Location(str(path)),
        code="internal",
        hint="a bug in harness-console: please report it with the id",
    )


def starter_dir() -> Path:
    """The starter pack directory (works whether starter_rules imports as a package
    or, in an editable install made before it had ``__init__.py``, a namespace)."""
    import starter_rules

    found = getattr(starter_rules, "STARTER_DIR", None)
    if isinstance(found, Path):
        return found
    return Path(next(iter(starter_rules.__path__))).resolve()


def default_sources(
    policy_dirs: Sequence[Path] = (), extra: Sequence[Path] = ()
) -> list[tuple[Path, SourceKind]]:
    """starter_rules/, then policy repos' rules/ dirs, then extra dirs (e.g. --policy)."""
    out: list[tuple[Path, SourceKind]] = [(starter_dir(), "starter")]
    out.extend((p, "policy") for p in policy_dirs)
    out.extend((p, "policy") for p in extra)
    return out
