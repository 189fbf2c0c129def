"""Lifecycle tables (migration 3): shadow, cooldowns, holds, action outcomes, the lease.

Why each table exists:

- ``rule_shadow`` keeps, per (rule name, semantic hash), the journal time the
  version was first evaluated. Shadow is "now < first_seen_at + period", so it
  is a function of the journal, survives restarts, and a reverted version that
  already served its period is active again at once. Starter rules never get a
  row: they skip shadow, and an override of one (new policy content) must start
  its own period even when its hash is identical.
- ``rule_cooldowns`` keeps, per (rule, target), the journal time of the last
  fire and the matches suppressed since then (``suppressed``) and ever
  (``suppressed_total``, for metrics).
- ``rule_holds`` is the persisted admission refusal (skip reason ``rule_hold``);
  ``event_seq`` is the held fire's journal row, which each tick re-evaluates.
- ``rule_actions`` records an action "started" before exec and its outcome
  after, which is what makes actions at-most-once across crashes.
- ``evaluator_lease`` names the one evaluator allowed to act on a store.
"""

from engine.store.migrations import Migration, register_migration

SCHEMA_V1 = """
CREATE TABLE rule_shadow (
    name TEXT NOT NULL,
    hash TEXT NOT NULL,
    first_seen_seq INTEGER NOT NULL,
    first_seen_at INTEGER NOT NULL,
    PRIMARY KEY (name, hash)
);
CREATE TABLE rule_cooldowns (
    rule TEXT NOT NULL,
    target TEXT NOT NULL,
    last_fire_at INTEGER NOT NULL,
    last_fire_seq INTEGER NOT NULL,
    suppressed INTEGER NOT NULL DEFAULT 0,
    suppressed_total INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (rule, target)
);
CREATE TABLE rule_holds (
    id INTEGER PRIMARY KEY,
    harness TEXT NOT NULL,
    fire_id INTEGER,
    rule TEXT NOT NULL,
    hash TEXT NOT NULL,
    event_seq INTEGER NOT NULL,
    created_seq INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    reason TEXT NOT NULL,
    released_at INTEGER,
    released_seq INTEGER,
    released_by TEXT,
    release_reason TEXT
);
CREATE INDEX rule_holds_harness ON rule_holds (harness, released_at);
CREATE INDEX rule_holds_active ON rule_holds (released_at, id);
CREATE TABLE rule_actions (
    id INTEGER PRIMARY KEY,
    fire_id INTEGER NOT NULL,
    action TEXT NOT NULL,
    argv TEXT NOT NULL,
    status TEXT NOT NULL,
    started_at INTEGER,
    finished_at INTEGER,
    exit_status INTEGER,
    error TEXT
);
CREATE UNIQUE INDEX rule_actions_fire_action ON rule_actions (fire_id, action);
CREATE TABLE evaluator_lease (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    holder TEXT NOT NULL,
    pid INTEGER NOT NULL,
    host TEXT NOT NULL DEFAULT '',
    acquired_at INTEGER NOT NULL,
    renewed_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
)
"""

#: Handed to the store on import (the store never imports this package).
MIGRATION = register_migration(3, "lifecycle", SCHEMA_V1)

#: Migration 8: the lease row says who acts (``role``: serve, evaluate or console) and
#: with which rules (``ruleset``: ``engine.rules.authority.lease.ruleset_digest``), so a console can
#: say who acts on a store. Registered by ``engine.views.store_schema`` with the full
#: schema (as 6 and 7 are), not on import.
SCHEMA_LEASE_ROLE = """
ALTER TABLE evaluator_lease ADD COLUMN role TEXT NOT NULL DEFAULT '';
ALTER TABLE evaluator_lease ADD COLUMN ruleset TEXT
"""
MIGRATION_LEASE_ROLE = Migration(8, "lease_role", SCHEMA_LEASE_ROLE)
