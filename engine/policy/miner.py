"""The rule miner: recurring patterns in the journal that no active rule covers.

It reads only the journal's identifiers (types, digests, paths, run and
harness ids; there is no agent text to read), and its only write is a stored
proposal at notify, through the same :func:`store_prepared` path a person
uses. Each miner is a rule template: the miner backtests the template over
the range with the real evaluator, groups the would-be fires into instances
(the same cause digest, the same harness and args digest, …), and proposes
the template only if at least one instance is something no active rule fired
on. Everything is a function of the journal (the proposal's time is the last
row's ``at``), so mining the same journal twice proposes the same rules, and
a hash already proposed is not proposed again.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from engine.config import RulesConfig
from engine.policy.proposals import PreparedRule, Proposal, prepare_rule, store_prepared
from engine.policy.propose import backtest_summary
from engine.rules.evaluation.backtest import SeqRange, resolve_range, run_backtest
from engine.rules.language.model import CompiledRule


@dataclass(frozen=True, slots=True)
class Miner:
    """A named pattern: a rule template and the event fields that identify an instance."""

    name: str
    description: str
    rule_text: str
    instance_fields: tuple[str, ...]


def _rule(name: str, description: str, on: str, when: str, target: str, cooldown: str) -> str:
    indented = "\n".join("  " + line for line in when.strip().splitlines())
    return (
        f"name: {name}\n"
        f"description: >-\n  {description}\n"
        f"on: {on}\n"
        f"when: >-\n{indented}\n"
        "level: notify\n"
        f"target: {target}\n"
        f"cooldown: {cooldown}\n"
        f'message: "mined pattern {name} on {{{target}}}"\n'
    )


MINERS: tuple[Miner, ...] = (
    Miner(
        "same_cause",
        "the same verify failure cause in several distinct runs",
        _rule(
            "mined_same_cause_across_runs",
            "A verify command fails with the same cause digest in 3 or more runs within 24h.",
            "run_event",
            'event.type == "verify_failed" && has(event.cause_digest) &&\n'
            'distinct("run", {"type": "verify_failed", "cause_digest": event.cause_digest},\n'
            '         duration("24h")) >= 3',
            "harness",
            "6h",
        ),
        ("cause_digest",),
    ),
    Miner(
        "restart_streak",
        "a harness restarting into the same error",
        _rule(
            "mined_restart_streak",
            "A harness restarts 3 or more times within an hour with the same cause digest.",
            "run_event",
            'event.type == "restart" && has(event.cause_digest) &&\n'
            'count({"harness": event.harness, "type": "restart",\n'
            '       "cause_digest": event.cause_digest}, duration("1h")) >= 3',
            "harness",
            "30m",
        ),
        ("harness", "cause_digest"),
    ),
    Miner(
        "repeated_tool_call",
        "identical tool calls repeated by one harness",
        _rule(
            "mined_repeated_tool_call",
            "One harness makes the same tool call (same args digest) 8 or more times in 5 minutes.",
            "run_event",
            'event.type == "tool_call" && has(event.args_digest) &&\n'
            'count({"harness": event.harness, "type": "tool_call",\n'
            '       "args_digest": event.args_digest}, duration("5m")) >= 8',
            "harness",
            "1h",
        ),
        ("harness", "args_digest"),
    ),
    Miner(
        "churn_across_runs",
        "a file churned in several runs",
        _rule(
            "mined_churn_across_runs",
            "The graph reports churn on the same file in 2 or more runs within 72h.",
            "graph_event",
            'event.type == "churn" && has(event.path) &&\n'
            'distinct("run", {"type": "churn", "path": event.path}, duration("72h")) >= 2',
            "path",
            "24h",
        ),
        ("path",),
    ),
)
MINER_NAMES = tuple(m.name for m in MINERS)


@dataclass(frozen=True, slots=True)
class MinedPattern:
    miner: str
    rule: str
    instances: tuple[dict[str, str], ...]  # uncovered instances
    covered: int  # instances an active rule already fired on
    fires: int
    proposal: Proposal | None
    already_proposed: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "miner": self.miner,
            "rule": self.rule,
            "uncovered_instances": list(self.instances),
            "covered_instances": self.covered,
            "would_be_fires": self.fires,
            "proposal_id": self.proposal.id if self.proposal else None,
            "already_proposed": self.already_proposed,
        }


def _instance_rows(
    conn: sqlite3.Connection, miner: Miner, key: dict[str, str], rng: SeqRange
) -> list[int]:
    clauses = [f"{k} = ?" for k in key]
    params: list[Any] = list(key.values())
    sql = (
        "SELECT seq FROM rule_journal WHERE "
        + " AND ".join(clauses)
        + " AND seq BETWEEN ? AND ? ORDER BY seq"
    )
    return [int(r[0]) for r in conn.execute(sql, (*params, rng.first_seq, rng.last_seq))]


def mine(
    conn: sqlite3.Connection,
    active_rules: Sequence[CompiledRule],
    config: RulesConfig,
    *,
    since: str | None = None,
    miners: Sequence[str] = MINER_NAMES,
    store: bool = True,
    progress: Callable[[str], None] | None = None,
) -> list[MinedPattern]:
    """Run the named miners over the range; store a proposal for each uncovered pattern."""
    unknown = [m for m in miners if m not in MINER_NAMES]
    if unknown:
        from engine.errors import InputError

        raise InputError(
            f"unknown miner(s): {', '.join(unknown)} (known: {', '.join(MINER_NAMES)})"
        )
    rng = resolve_range(conn, since=since)
    if not rng.rows:
        return []
    chosen = [m for m in MINERS if m.name in miners]
    prepared_by_miner = {
        m.name: prepare_rule(m.rule_text, f"<miner:{m.name}>", config) for m in chosen
    }
    # One replay serves every template and the coverage check: the evaluator
    # keeps each rule's state apart, so this equals separate backtests.
    mined_names = {p.compiled.rule.name for p in prepared_by_miner.values()}
    active = [r for r in active_rules if r.rule.name not in mined_names]
    everything = [*active, *(p.compiled for p in prepared_by_miner.values())]
    if progress:
        progress(f"replaying {rng.rows} rows through {len(everything)} rules")
    replay = run_backtest(conn, everything, rng)
    covered_seqs = {f.seq for f in replay.fires if f.rule not in mined_names}
    days = max(1, round((rng.last_at - rng.first_at) / 86_400_000))
    out: list[MinedPattern] = []
    for miner in chosen:
        prepared = prepared_by_miner[miner.name]
        name = prepared.compiled.rule.name
        fires = tuple(f for f in replay.fires if f.rule == name)
        if not fires:
            continue
        result = replace(replay, rules=((name, prepared.compiled.rule.hash),), fires=fires)
        seqs = sorted({f.seq for f in result.fires})
        keys: dict[tuple[str, ...], dict[str, str]] = {}
        cols = ", ".join(miner.instance_fields)
        for start in range(0, len(seqs), 500):
            chunk = seqs[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for row in conn.execute(
                f"SELECT {cols} FROM rule_journal WHERE seq IN ({marks}) ORDER BY seq", chunk
            ):
                key = tuple(str(v) for v in row)
                keys.setdefault(key, dict(zip(miner.instance_fields, key, strict=True)))
        uncovered, covered = [], 0
        for key_map in keys.values():
            rows = _instance_rows(conn, miner, key_map, rng)
            if covered_seqs.intersection(rows):
                covered += 1
            else:
                uncovered.append(key_map)
        if not uncovered:
            continue
        rule = prepared.compiled.rule
        existing = conn.execute(
            "SELECT 1 FROM rule_proposals WHERE hash = ? LIMIT 1", (rule.hash,)
        ).fetchone()
        proposal = None
        if store and not existing:
            summary = backtest_summary(result, days)
            summary["uncovered_instances"] = uncovered[:20]
            notes = (
                *prepared.notes,
                f"mined by {miner.name}: {miner.description}; "
                f"{len(uncovered)} instance(s) no active rule fired on",
            )
            proposal = store_prepared(
                conn,
                PreparedRule(prepared.compiled, prepared.text, prepared.requested_level, notes),
                who=f"miner:{miner.name}",
                backtest=summary,
                now_ms=rng.last_at,
            )
        out.append(
            MinedPattern(
                miner=miner.name,
                rule=rule.name,
                instances=tuple(uncovered),
                covered=covered,
                fires=len(result.fires),
                proposal=proposal,
                already_proposed=bool(existing),
            )
        )
    return out
