"""Proposal tables (migration 4): rules proposed by a client or the miner, never enforced."""

from engine.store.migrations import register_migration

SCHEMA_V1 = """
CREATE TABLE rule_proposals (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    hash TEXT NOT NULL,
    text TEXT NOT NULL,
    requested_level TEXT NOT NULL,
    level TEXT NOT NULL,
    who TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    notes TEXT NOT NULL,
    backtest TEXT,
    branch TEXT
);
CREATE INDEX rule_proposals_name ON rule_proposals (name, created_at)
"""

#: Handed to the store on import (the store never imports this package).
MIGRATION = register_migration(4, "proposals", SCHEMA_V1)
