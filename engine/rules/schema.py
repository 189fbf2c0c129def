"""Rules-engine tables (migration 2): fires, primitive calls, rule state, cursor."""

SCHEMA_V1 = """
CREATE TABLE rule_cursor (
    name TEXT PRIMARY KEY,
    seq INTEGER NOT NULL
);
CREATE TABLE rule_fires (
    id INTEGER PRIMARY KEY,
    rule TEXT NOT NULL,
    hash TEXT NOT NULL,
    seq INTEGER NOT NULL,
    at INTEGER NOT NULL,
    target TEXT,
    level TEXT NOT NULL,
    effective_level TEXT NOT NULL,
    status TEXT NOT NULL,
    reasons TEXT NOT NULL,
    calls TEXT NOT NULL
);
CREATE INDEX rule_fires_rule_seq ON rule_fires (rule, seq);
CREATE INDEX rule_fires_seq ON rule_fires (seq);
CREATE TABLE rule_state (
    name TEXT PRIMARY KEY,
    hash TEXT NOT NULL,
    state TEXT NOT NULL,
    error TEXT,
    updated_at INTEGER NOT NULL
)
"""
