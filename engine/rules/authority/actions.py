"""Notify and stop actions: argv templates, no shell, a timeout, at most once.

The operator configures ``[memory.rules.actions]`` as argv templates; this
module fills the placeholders ``{rule} {harness} {message} {target} {level}
{fire_id}`` in one pass (a value that itself contains ``{rule}`` is not
expanded again) and executes the argv directly, never through a shell, so a
journal identifier can never become shell syntax.

At-most-once: the evaluator commits the fire (and any hold) first, then
calls :meth:`ActionRunner.run`. The runner commits a ``started`` row before
exec (a unique index on (fire_id, action) refuses a second one) and the
outcome after. A crash before the row loses the action; a crash after it
leaves ``started`` with no outcome, which explain shows; nothing re-runs it.
"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from engine.vocab import ACTION_FOR_LEVEL

PLACEHOLDERS: tuple[str, ...] = ("rule", "harness", "message", "target", "level", "fire_id")
_PLACEHOLDER = re.compile(r"\{(" + "|".join(PLACEHOLDERS) + r")\}")
_ANY_FIELD = re.compile(r"\{([a-z_]+)\}")
DEFAULT_TIMEOUT_S = 10.0
MAX_ERROR_CHARS = 500


def wall_ms() -> int:
    return int(time.time() * 1000)


class _Refused(Exception):
    """An action not executed (its argv is unsafe); recorded as an error."""


class UnsafeArgument(ValueError):
    """A filled-in value would have turned an argument into an option (it starts with ``-``)."""


def render_argv(
    template: tuple[str, ...] | list[str], values: Mapping[str, str]
) -> tuple[str, ...]:
    """Fill placeholders in each argv element; unknown ``{x}`` stays literal.

    Each element stays one argument whatever a value holds (spaces, quotes,
    ``;``): there is no shell and no splitting. A value never makes an
    argument an option: an element that the template does not start with
    ``-`` but that starts with ``-`` once filled is refused (UnsafeArgument).
    Identifiers cannot start with ``-``; a message or a number can.
    """
    argv = tuple(
        _PLACEHOLDER.sub(lambda m: str(values.get(m.group(1), "")), part) for part in template
    )
    for i, (part, filled) in enumerate(zip(template, argv, strict=True)):
        if filled.startswith("-") and not part.startswith("-"):
            raise UnsafeArgument(
                f"argument {i} ({part!r}) would start with '-' once filled in, read as an option"
            )
    return argv


def render_message(template: str, row: Mapping[str, object]) -> str:
    """A rule's message with ``{field}`` taken from the event row (absent = empty)."""

    def field(m: re.Match[str]) -> str:
        if m.group(1) not in row:
            return m.group(0)
        value = row[m.group(1)]
        return "" if value is None else str(value)

    return _ANY_FIELD.sub(field, template)


def action_for(effective_level: str) -> str | None:
    """Which configured action a level triggers: notify for notify and hold, stop for stop."""
    return ACTION_FOR_LEVEL.get(effective_level)


@dataclass(frozen=True, slots=True)
class ActionRequest:
    fire_id: int
    action: str
    rule: str
    harness: str
    target: str
    level: str
    message: str

    def values(self) -> dict[str, str]:
        return {
            "rule": self.rule,
            "harness": self.harness,
            "message": self.message,
            "target": self.target,
            "level": self.level,
            "fire_id": str(self.fire_id),
        }


@dataclass(frozen=True, slots=True)
class ActionOutcome:
    fire_id: int
    action: str
    argv: tuple[str, ...]
    status: str  # "ok", "failed", "error", "skipped"
    exit_status: int | None
    error: str | None
    started_at: int
    finished_at: int


class ActionRunner:
    """Runs actions for committed fires, recording each before and after exec."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        templates: Mapping[str, tuple[str, ...]],
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        clock: Callable[[], int] = wall_ms,
    ) -> None:
        self.conn = conn
        self.templates = dict(templates)
        self.timeout_s = timeout_s
        self.clock = clock

    def run(self, req: ActionRequest) -> ActionOutcome | None:
        """Run one action unless unconfigured (None) or already attempted ("skipped")."""
        template = self.templates.get(req.action)
        if not template:
            return None
        if self.conn.in_transaction:
            raise RuntimeError("actions run only after the fire's transaction committed")
        try:
            argv = render_argv(template, req.values())
            unsafe = None
        except UnsafeArgument as exc:
            argv, unsafe = tuple(template), f"not run: {exc}"
        started = self.clock()
        cur = self.conn.execute(
            "INSERT OR IGNORE INTO rule_actions (fire_id, action, argv, status, started_at) "
            "VALUES (?, ?, ?, 'started', ?)",
            (req.fire_id, req.action, json.dumps(list(argv)), started),
        )
        if cur.rowcount == 0:
            return ActionOutcome(
                req.fire_id,
                req.action,
                argv,
                "skipped",
                None,
                "already attempted",
                started,
                started,
            )
        action_id = cur.lastrowid
        exit_status: int | None = None
        error: str | None = None
        try:
            if unsafe is not None:
                raise _Refused(unsafe)
            proc = subprocess.run(
                list(argv),
                shell=False,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                timeout=self.timeout_s,
                check=False,
            )
            exit_status = proc.returncode
            if proc.returncode != 0:
                tail = proc.stderr.decode("utf-8", "replace").strip()[-MAX_ERROR_CHARS:]
                error = f"exit status {proc.returncode}" + (f": {tail}" if tail else "")
            status = "ok" if proc.returncode == 0 else "failed"
        except _Refused as exc:
            status, error = "error", str(exc)
        except subprocess.TimeoutExpired:
            status, error = "error", f"timed out after {self.timeout_s:g}s (killed)"
        except OSError as exc:
            status, error = "error", f"cannot execute {argv[0]!r}: {exc.strerror or exc}"
        finished = self.clock()
        self.conn.execute(
            "UPDATE rule_actions SET status = ?, finished_at = ?, exit_status = ?, error = ? "
            "WHERE id = ?",
            (status, finished, exit_status, error, action_id),
        )
        return ActionOutcome(
            req.fire_id, req.action, argv, status, exit_status, error, started, finished
        )


@dataclass(frozen=True, slots=True)
class ActionRecord:
    id: int
    fire_id: int
    action: str
    argv: tuple[str, ...]
    status: str
    started_at: int | None
    finished_at: int | None
    exit_status: int | None
    error: str | None

    def describe(self) -> str:
        """One line for explain: a started action with no outcome says so plainly."""
        if self.status == "started":
            return (
                f"{self.action}: started, no outcome recorded (the evaluator stopped before it "
                "finished; at-most-once: it is never retried)"
            )
        extra = f" ({self.error})" if self.error else ""
        return f"{self.action}: {self.status}, exit status {self.exit_status}{extra}"


def actions_for_fire(conn: sqlite3.Connection, fire_id: int) -> list[ActionRecord]:
    rows = conn.execute(
        "SELECT id, fire_id, action, argv, status, started_at, finished_at, exit_status, error "
        "FROM rule_actions WHERE fire_id = ? ORDER BY id",
        (fire_id,),
    ).fetchall()
    return [
        ActionRecord(r[0], r[1], r[2], tuple(json.loads(r[3])), r[4], r[5], r[6], r[7], r[8])
        for r in rows
    ]
