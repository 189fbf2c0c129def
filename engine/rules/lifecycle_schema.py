"""Lifecycle tables (migration 3): holds, action outcomes, the evaluator lease."""

SCHEMA_V1 = """
CREATE TABLE rule_holds (
    id INTEGER PRIMARY KEY,
    harness TEXT NOT NULL,
    fire_id INTEGER NOT NULL,
    rule TEXT NOT NULL,
    hash TEXT NOT NULL,
    created_seq INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    released_at INTEGER,
    released_seq INTEGER,
    released_by TEXT,
    release_reason TEXT
);
CREATE INDEX rule_holds_harness ON rule_holds (harness, released_at);
CREATE TABLE rule_actions (
    id INTEGER PRIMARY KEY,
    fire_id INTEGER NOT NULL,
    action TEXT NOT NULL,
    argv TEXT NOT NULL,
    started_at INTEGER,
    finished_at INTEGER,
    exit_status INTEGER,
    error TEXT
);
CREATE INDEX rule_actions_fire ON rule_actions (fire_id);
CREATE TABLE evaluator_lease (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    holder TEXT NOT NULL,
    pid INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
)
"""
