"""``harness doctor``: is this installation able to do what the operator configured?

Each check answers one question an operator asks when rules seem not to act:
is my config the one being read, and valid; is the store sound and in WAL
mode; is some evaluator holding the lease (acting) and keeping up; were rows
dropped or refused; which rules disabled themselves and why; which holds are
refusing runs; did an action start and never finish; is retention keeping
the history the windows need. Everything is read-only: doctor never repairs,
so running it can never change what the evaluator does.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.config import HarnessConfig, config_path, load_config
from engine.errors import HarnessError
from engine.rules.authority.enforcement import parse_enforce
from engine.rules.authority.holds import list_holds
from engine.rules.metrics import StoreFacts, collect
from engine.timefmt import iso_ms

OK, WARN, ERROR = "ok", "warn", "error"
DAY_MS = 86_400_000
MAX_WINDOW_DAYS = 7


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    status: str
    detail: str
    items: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "detail": self.detail,
            "items": list(self.items),
        }


@dataclass(frozen=True, slots=True)
class DoctorReport:
    checks: tuple[Check, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return all(c.status != ERROR for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "checks": [c.to_json() for c in self.checks]}

    def render_text(self) -> str:
        lines = []
        for c in self.checks:
            lines.append(f"[{c.status:5}] {c.name}: {c.detail}")
            lines.extend(f"          - {item}" for item in c.items)
        lines.append("doctor: " + ("no errors" if self.ok else "errors found"))
        return "\n".join(lines)


def _config_checks(
    loader: Callable[[], HarnessConfig], rule_names: set[str] | None
) -> tuple[list[Check], HarnessConfig | None]:
    path = config_path()
    try:
        cfg = loader()
    except HarnessError as exc:
        items = tuple(str(d) for d in exc.diagnostics) or (exc.message,)
        return [
            Check(
                "config",
                ERROR,
                f"{path} is invalid (the evaluator keeps its last good "
                "config; a fresh start uses none)",
                items,
            )
        ], None
    checks = []
    if cfg.source is None:
        checks.append(
            Check("config", OK, f"no file at {path}: defaults (nothing enforced, no actions)")
        )
    else:
        checks.append(Check("config", OK, f"{cfg.source} is valid"))
    _, problems = parse_enforce(cfg.rules.enforce)
    unknown: list[str] = []
    if rule_names is not None:
        for entry in cfg.rules.enforce:
            name = entry.split("@", 1)[0].strip()
            if name and name not in rule_names:
                unknown.append(f"enforce names `{name}`, which no loaded rule is called")
        for name in cfg.rules.disable:
            if name not in rule_names:
                unknown.append(f"disable names `{name}`, which no loaded rule is called")
    enforce_text = ", ".join(cfg.rules.enforce) or "(empty: no rule may hold or stop)"
    status = WARN if problems or unknown else OK
    checks.append(
        Check("enforce", status, f"enforce: {enforce_text}", tuple(problems) + tuple(unknown))
    )
    actions = ", ".join(f"{k}={list(v)}" for k, v in sorted(cfg.rules.actions.items()))
    checks.append(Check("actions", OK, actions or "none configured: fires are recorded only"))
    return checks, cfg


def _store_checks(conn: sqlite3.Connection, verbose: bool = False) -> list[Check]:
    checks = []
    result = [str(r[0]) for r in conn.execute("PRAGMA quick_check").fetchall()]
    if result == ["ok"]:
        checks.append(Check("store integrity", OK, "quick_check ok"))
    else:
        # SQLite lists every damaged page; one line says what an operator needs.
        detail = f"quick_check found {len(result)} problem(s): the store is corrupt"
        if not verbose:
            detail += " (harness doctor --verbose lists them)"
        checks.append(
            Check("store integrity", ERROR, detail, tuple(result[:20]) if verbose else ())
        )
    mode = str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower()
    checks.append(Check("store WAL", OK if mode == "wal" else WARN, f"journal_mode={mode}"))
    return checks


def _fact_checks(
    facts: StoreFacts, cfg: HarnessConfig | None, conn: sqlite3.Connection
) -> list[Check]:
    """Every check read from the store's facts, in the order doctor prints them."""
    live = facts.lease is not None and not facts.lease.expired(facts.now_ms)
    checks = [_lease_check(facts, live), _lag_check(facts, live), _admission_check(facts)]
    serve = _serve_check(facts)
    if serve is not None:
        checks.append(serve)
    checks += [_rules_check(facts), _holds_check(conn), _actions_check(conn, live)]
    checks.append(_retention_check(facts, cfg))
    return checks


def _lease_check(facts: StoreFacts, live: bool) -> Check:
    lease = facts.lease
    if lease is None:
        return Check("lease", WARN, "no evaluator holds the lease: nothing is acting now")
    if live:
        return Check(
            "lease",
            OK,
            f"held by {lease.holder} (pid {lease.pid} on "
            f"{lease.host}) until {iso_ms(lease.expires_at)}",
        )
    return Check(
        "lease",
        WARN,
        f"expired lease of {lease.holder} (pid {lease.pid}) "
        f"at {iso_ms(lease.expires_at)}: no evaluator is acting",
    )


def _lag_check(facts: StoreFacts, live: bool) -> Check:
    if facts.cursor_seq is None:
        return Check(
            "evaluator lag",
            WARN if facts.last_seq else OK,
            f"never evaluated; {facts.last_seq} row(s) waiting",
        )
    lag = f"{facts.lag_rows} row(s), {facts.lag_ms / 1000:.0f}s of journal time behind"
    return Check(
        "evaluator lag",
        WARN if facts.lag_rows and not live else OK,
        f"cursor at seq {facts.cursor_seq}; {lag}",
    )


def _admission_check(facts: StoreFacts) -> Check:
    dropped = facts.journal_counters.get("dropped", 0)
    refused = facts.journal_counters.get("refused", 0)
    return Check(
        "journal admission",
        WARN if dropped or refused else OK,
        f"{dropped} dropped (queue full), {refused} refused (malformed)",
    )


def _serve_check(facts: StoreFacts) -> Check | None:
    """What serve counted (flushed to the store), when serve runs or ran on this store."""
    serve = {
        k.removeprefix("serve_"): v
        for k, v in facts.journal_counters.items()
        if k.startswith("serve_") and v
    }
    if not serve and not (facts.lease is not None and facts.lease.holder.startswith("serve@")):
        return None
    problems = ("gate_errors", "store_unavailable", "rows_refused", "records_rejected", "gate_late")
    return Check(
        "serve",
        WARN if any(serve.get(p) for p in problems) else OK,
        f"{serve.get('gate_errors', 0)} gate answer(s) failed on a store error (HTTP 503), "
        f"{serve.get('store_unavailable', 0)} request(s) not stored: the store could not "
        "be written (HTTP 503), "
        f"{serve.get('gate_late', 0)} gate answer(s) late (gate_wait reached before the "
        "evaluator caught up), "
        f"{serve.get('rows_refused', 0)} refused, "
        f"{serve.get('records_rejected', 0)} OTLP record(s) rejected",
        tuple(f"{k}: {v}" for k, v in sorted(serve.items())),
    )


def _rules_check(facts: StoreFacts) -> Check:
    disabled = tuple(f"{name}: {err}" for name, err in sorted(facts.rule_errors.items()))
    detail = f"{len(disabled)} disabled by their own errors"
    if facts.store_errors:
        detail += f"; {facts.store_errors} store read error(s) (excluded from equivalence)"
    return Check("rules", WARN if disabled or facts.store_errors else OK, detail, disabled)


def _holds_check(conn: sqlite3.Connection) -> Check:
    holds = tuple(
        f"hold {h.id}: {h.harness} by `{h.rule}` since {iso_ms(h.created_at)}: {h.reason}"
        for h in list_holds(conn)
    )
    return Check("holds", OK, f"{len(holds)} active (new runs refused with rule_hold)", holds)


def _actions_check(conn: sqlite3.Connection, live: bool) -> Check:
    lost = conn.execute(
        "SELECT fire_id, action FROM rule_actions WHERE status = 'started' ORDER BY id"
    ).fetchall()
    running = live and lost
    return Check(
        "actions",
        WARN if lost and not running else OK,
        f"{len(lost)} started with no outcome (lost to a crash unless running now; never retried)",
        tuple(f"fire {f}: {a}" for f, a in lost[:20]),
    )


def _retention_check(facts: StoreFacts, cfg: HarnessConfig | None) -> Check:
    days = cfg.retention_days if cfg else 45
    items: list[str] = []
    status = OK
    if days < MAX_WINDOW_DAYS:
        status = WARN
        items.append(f"retention {days}d is shorter than the longest rule window (7d)")
    if facts.first_at is not None and facts.last_at - facts.first_at > (days + 1) * DAY_MS:
        status = WARN
        items.append(
            f"oldest row {iso_ms(facts.first_at)} is older than {days}d: "
            "run `harness journal prune`"
        )
    span = 0 if facts.first_at is None else (facts.last_at - facts.first_at) / DAY_MS
    return Check(
        "retention", status, f"retention_days={days}; journal spans {span:.1f} day(s)", tuple(items)
    )


def run_doctor(
    store: Path,
    *,
    config_loader: Callable[[], HarnessConfig] = load_config,
    rule_names: set[str] | None = None,
    now_ms: int | None = None,
    verbose: bool = False,
) -> DoctorReport:
    """Run every check; never raises for a user-caused problem (it becomes a check).

    ``verbose`` keeps SQLite's own detail (every damaged page); without it a
    corrupt store is one summarised line.
    """
    checks, cfg = _config_checks(config_loader, rule_names)
    if cfg is not None:
        checks.append(rule_file_check(cfg))
    if not store.exists():
        checks.append(Check("store", ERROR, f"no store at {store}"))
        return DoctorReport(tuple(checks))
    try:
        conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True, isolation_level=None)
        conn.execute("PRAGMA busy_timeout = 5000")
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        checks.append(Check("store", OK, f"{store} (schema version {version})"))
        checks.extend(_store_checks(conn, verbose))
        checks.extend(_fact_checks(collect(conn, now_ms=now_ms), cfg, conn))
        conn.close()
    except sqlite3.DatabaseError as exc:
        text = str(exc) if verbose else str(exc).splitlines()[0][:200]
        checks.append(Check("store", ERROR, f"{store}: not a usable store: {text}"))
    except UnicodeDecodeError:
        # a damaged schema page puts bytes that are not text into SQLite's own error message
        text = "SQLite's error message is not text (a damaged page)"
        checks.append(Check("store", ERROR, f"{store}: not a usable store: {text}"))
    return DoctorReport(tuple(checks))


def rule_file_check(cfg: HarnessConfig) -> Check:
    """Rule files that fail to load and configured policy dirs that are missing.

    The evaluator skips a rule file it cannot load and keeps running, so a
    broken policy edit would otherwise only show up as a rule that never fires.
    """
    from engine.rules.language.sources import load_rule_set, policy_dir_problems, rule_sources

    res = load_rule_set(rule_sources(cfg), cfg)
    missing = policy_dir_problems(cfg)
    items = tuple(str(d) for d in (*res.errors, *missing))
    status = ERROR if res.errors else WARN if missing else OK
    detail = f"{len(res.rules)} loaded, {len(res.errors)} load error(s)"
    if missing:
        detail += f", {len(missing)} policy dir(s) missing"
    return Check("rule files", status, detail, items[:50])


def loaded_rule_names(cfg: HarnessConfig) -> set[str] | None:
    """Names of the rules the evaluator would load (None if the loader is unavailable)."""
    try:
        from engine.rules.language.sources import load_rule_set, rule_sources
    except ImportError:  # pragma: no cover - the loader is part of the package
        return None
    res = load_rule_set(rule_sources(cfg), cfg)
    return {cr.rule.name for cr in res.rules}
