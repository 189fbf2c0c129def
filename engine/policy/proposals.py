"""Rule proposals: validated with the shared loader, capped at notify, stored, backtested.

One function, :func:`store_proposal`, is the only way a proposal enters the
store, whoever makes it (a person with ``harness rules propose`` or the
miner). It validates with the same loader the evaluator uses, and caps the
level at ``notify`` whatever the file asks, saying so, because a proposal is
review material: authority to hold or stop stays in the operator's
hand-written harness.toml, which nothing here reads for writing.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from typing import Any

from engine.config import RulesConfig
from engine.errors import CheckFailed, Diagnostic, Location
from engine.rules.language.loader import compile_rule_file
from engine.rules.language.model import CompiledRule
from engine.vocab import CAP_LEVEL, ENFORCED_LEVELS
from engine.yamlsrc import LocDict, parse_yaml


@dataclass(frozen=True, slots=True)
class PreparedRule:
    """A proposal's rule after validation and capping, not yet stored."""

    compiled: CompiledRule
    text: str
    requested_level: str
    notes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Proposal:
    id: int
    name: str
    hash: str
    text: str
    requested_level: str
    level: str
    who: str
    created_at: int
    notes: tuple[str, ...]
    backtest: dict[str, Any] | None
    branch: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "hash": self.hash,
            "requested_level": self.requested_level,
            "level": self.level,
            "who": self.who,
            "created_at": self.created_at,
            "notes": list(self.notes),
            "backtest": self.backtest,
            "branch": self.branch,
            "text": self.text,
        }


def _replace_level(text: str, data: LocDict) -> str:
    """``text`` with the ``level:`` value replaced by notify, formatting kept."""
    loc = data.where_value("level")
    lines = text.splitlines(keepends=True)
    line = lines[loc.line - 1]
    start = loc.col - 1
    value = str(data["level"])
    end = line.find(value, start)
    if end < 0:  # quoted or odd spelling: replace the rest of the value token
        end = start
        stop = len(line.rstrip("\r\n"))
        lines[loc.line - 1] = line[:start] + CAP_LEVEL + line[stop:]
    else:
        quote_end = end + len(value)
        if start < end and line[start] in "'\"":  # keep quotes balanced
            lines[loc.line - 1] = line[:start] + CAP_LEVEL + line[quote_end + 1 :]
        else:
            lines[loc.line - 1] = line[:start] + CAP_LEVEL + line[quote_end:]
    return "".join(lines)


def prepare_rule(text: str, file: str, config: RulesConfig) -> PreparedRule:
    """Validate one proposed rule and cap its level; raise CheckFailed with every error."""
    result = compile_rule_file(text, file, "policy", config)
    if result.errors:
        raise CheckFailed(f"{file}: the proposed rule does not load", diagnostics=result.errors)
    if len(result.rules) != 1:
        raise CheckFailed(
            f"{file}: a proposal holds exactly one rule, found {len(result.rules)}",
            diagnostics=[Diagnostic("a proposal holds exactly one rule", Location(file, 1, 1))],
        )
    compiled = result.rules[0]
    requested = compiled.rule.level
    notes: list[str] = []
    if requested in ENFORCED_LEVELS:
        doc = parse_yaml(text, file)
        assert isinstance(doc.data, LocDict)  # the loader accepted it as one rule mapping
        text = _replace_level(text, doc.data)
        recompiled = compile_rule_file(text, file, "policy", config)
        if recompiled.errors or len(recompiled.rules) != 1:
            raise CheckFailed(
                f"{file}: could not cap the level at notify", diagnostics=recompiled.errors
            )
        compiled = recompiled.rules[0]
        notes.append(
            f"level capped at notify (the file asked for {requested}): a proposal never holds "
            "or stops; only the operator's harness.toml enforce list can grant that"
        )
    return PreparedRule(compiled, text, requested, tuple(notes))


def store_proposal(
    conn: sqlite3.Connection,
    text: str,
    file: str,
    *,
    who: str,
    config: RulesConfig,
    backtest: dict[str, Any] | None = None,
    now_ms: int | None = None,
) -> Proposal:
    """The one path into ``rule_proposals``: validate, cap, store. Returns the stored row."""
    prepared = prepare_rule(text, file, config)
    return store_prepared(conn, prepared, who=who, backtest=backtest, now_ms=now_ms)


def store_prepared(
    conn: sqlite3.Connection,
    prepared: PreparedRule,
    *,
    who: str,
    backtest: dict[str, Any] | None = None,
    now_ms: int | None = None,
) -> Proposal:
    rule = prepared.compiled.rule
    created = now_ms if now_ms is not None else int(time.time() * 1000)
    cur = conn.execute(
        "INSERT INTO rule_proposals (name, hash, text, requested_level, level, who, created_at,"
        " notes, backtest) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            rule.name,
            rule.hash,
            prepared.text,
            prepared.requested_level,
            rule.level,
            who,
            created,
            json.dumps(list(prepared.notes)),
            json.dumps(backtest) if backtest is not None else None,
        ),
    )
    return Proposal(
        id=int(cur.lastrowid or 0),
        name=rule.name,
        hash=rule.hash,
        text=prepared.text,
        requested_level=prepared.requested_level,
        level=rule.level,
        who=who,
        created_at=created,
        notes=prepared.notes,
        backtest=backtest,
    )


def _row_to_proposal(row: sqlite3.Row | tuple[Any, ...]) -> Proposal:
    (pid, name, hash_, text, requested, level, who, created, notes, backtest, branch) = row
    return Proposal(
        id=int(pid),
        name=str(name),
        hash=str(hash_),
        text=str(text),
        requested_level=str(requested),
        level=str(level),
        who=str(who),
        created_at=int(created),
        notes=tuple(json.loads(notes)),
        backtest=json.loads(backtest) if backtest else None,
        branch=branch,
    )


_COLUMNS = "id, name, hash, text, requested_level, level, who, created_at, notes, backtest, branch"


def list_proposals(conn: sqlite3.Connection, limit: int = 200) -> list[Proposal]:
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM rule_proposals ORDER BY id DESC LIMIT ?", (limit,)
    ).fetchall()
    return [_row_to_proposal(r) for r in rows]


def get_proposal(conn: sqlite3.Connection, proposal_id: int) -> Proposal | None:
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM rule_proposals WHERE id = ?", (proposal_id,)
    ).fetchone()
    return _row_to_proposal(row) if row else None


def update_backtest(conn: sqlite3.Connection, proposal_id: int, summary: dict[str, Any]) -> None:
    conn.execute(
        "UPDATE rule_proposals SET backtest = ? WHERE id = ?", (json.dumps(summary), proposal_id)
    )


def set_branch(conn: sqlite3.Connection, proposal_id: int, branch: str) -> None:
    conn.execute("UPDATE rule_proposals SET branch = ? WHERE id = ?", (branch, proposal_id))
