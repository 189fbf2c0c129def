"""Rules-engine tables (migration 2): cursor, fires, rule state and versions, store errors.

Why these tables: a fire and the cursor that says "row N is evaluated" must
commit together (so a crash never loses or duplicates a fire), explain must be
able to show the exact rule version that fired long after the file changed
(``rule_versions`` keeps its text by hash), and a disabled rule's error must
survive a restart (``rule_state``). ``rule_store_errors`` holds the one
documented exception to live/backtest equivalence: a primitive that could not
read the store.
"""

from engine.store.migrations import register_migration

#: The live evaluator's cursor in ``rule_cursor``: the last seq it evaluated (its watermark).
LIVE_CURSOR = "live"

SCHEMA_V1 = """
CREATE TABLE rule_cursor (
    name TEXT PRIMARY KEY,
    seq INTEGER NOT NULL,
    at INTEGER NOT NULL DEFAULT 0
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
    calls TEXT NOT NULL,
    cost INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX rule_fires_seq_rule ON rule_fires (seq, rule);
CREATE INDEX rule_fires_rule_at ON rule_fires (rule, at);
CREATE INDEX rule_fires_at ON rule_fires (at);
CREATE TABLE rule_state (
    name TEXT PRIMARY KEY,
    hash TEXT NOT NULL,
    state TEXT NOT NULL,
    error TEXT,
    error_seq INTEGER,
    updated_at INTEGER NOT NULL
);
CREATE TABLE rule_versions (
    hash TEXT NOT NULL,
    name TEXT NOT NULL,
    source_file TEXT,
    source_kind TEXT NOT NULL,
    text TEXT NOT NULL,
    first_seen_seq INTEGER NOT NULL,
    first_seen_at INTEGER NOT NULL,
    PRIMARY KEY (hash, name)
);
CREATE TABLE rule_store_errors (
    id INTEGER PRIMARY KEY,
    seq INTEGER NOT NULL,
    rule TEXT NOT NULL,
    error TEXT NOT NULL,
    at INTEGER NOT NULL
);
CREATE INDEX rule_store_errors_seq ON rule_store_errors (seq);
CREATE TABLE rule_counters (
    name TEXT PRIMARY KEY,
    value INTEGER NOT NULL
)
"""

#: Handed to the store on import (the store never imports this package).
MIGRATION = register_migration(2, "rules", SCHEMA_V1)
