"""Journal tables (migration 1). Columns of ``rule_journal`` are pinned in DESIGN.md."""

SCHEMA_V1 = """
CREATE TABLE rule_journal (
    seq INTEGER PRIMARY KEY,
    at INTEGER NOT NULL,
    kind TEXT NOT NULL,
    type TEXT NOT NULL,
    source TEXT NOT NULL,
    harness TEXT,
    project TEXT,
    run TEXT,
    tool TEXT,
    outcome TEXT,
    path TEXT,
    cause_digest TEXT,
    args_digest TEXT,
    other_harness TEXT,
    fact TEXT,
    n INTEGER
);
CREATE INDEX rule_journal_harness_type ON rule_journal (harness, type, at);
CREATE INDEX rule_journal_type_at ON rule_journal (type, at);
CREATE INDEX rule_journal_at ON rule_journal (at);
CREATE TABLE journal_counters (
    name TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
"""
