"""Journal tables (migrations 1, 6 and 7). Columns of ``rule_journal`` are pinned in DESIGN.md.

Indexes: every index slows admission, so there are exactly four: the third (migration 6)
serves the backtest prefilter (see SCHEMA_PREFILTER_INDEX), the fourth (migration 7)
per-harness windows of any type (see SCHEMA_HARNESS_AT_INDEX). The first two end in
``at`` so a window ``at > now - w`` is a range scan: ``(harness, type, at)``
serves per-harness aggregates (restarts, verify failures, loop trips) and the
console's per-harness views; ``(type, at)`` serves fleet-wide aggregates,
``stats`` and ``explain``. ``seq`` is the rowid; since ``at`` is
non-decreasing in ``seq``, a time bound on the whole table is found by binary
search over ``seq`` (``engine.journal.reader.seq_at_or_after``) rather than an
index on ``at`` alone.

``journal_counters`` persists what other processes need to see: ``dropped``
and ``refused`` (doctor, metrics, stats), and the committer's high-water marks
``last_seq``, ``last_at`` and ``last_tick_at``, which survive pruning so that
``seq`` never restarts and ``at`` never goes back after old rows are deleted.
"""

from engine.store.migrations import Migration, register_migration

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
CREATE TABLE journal_counters (
    name TEXT PRIMARY KEY,
    value INTEGER NOT NULL
) WITHOUT ROWID
"""

#: Handed to the store on import (the store never imports this package).
MIGRATION = register_migration(1, "journal", SCHEMA_V1)

#: Migration 6: the backtest prefilter's index. A rule's necessary condition
#: always names its ``kind`` and usually its ``type``; entries of this index
#: are ordered (kind, type, seq) (``seq`` is the rowid every index ends in), so
#: "every tick" or "these types of this kind" are range scans, and rows of one
#: (kind, type) come back in seq order without a sort (``engine.rules.language.prefilter``).
SCHEMA_PREFILTER_INDEX = """
CREATE INDEX IF NOT EXISTS rule_journal_kind_type ON rule_journal (kind, type)
"""

#: Registered by ``engine.views.store_schema`` with the full schema, not on import: a
#: journal-only process (a source's writer) registers version 1 alone, with no gap.
MIGRATION_PREFILTER_INDEX = Migration(6, "prefilter_index", SCHEMA_PREFILTER_INDEX)

#: Migration 7: per-harness windows whatever the type. A rule such as
#: ``count({"harness": event.harness}, duration("5m")) >= 20`` names no type, so
#: ``(harness, type, at)`` cannot bound its window by time; without this index a
#: backtest must feed every journal row to the window index to answer it. With
#: it, the window is one index range (``engine.rules.evaluation.aggsql``), read only for the
#: rows that ask. ``args_digest`` rides along so that the repeated-call count
#: (``{"harness": event.harness, "args_digest": event.args_digest}``, what the
#: loop guard watches) is answered from the index without reading the table.
#: Entries append at the end of each harness's stretch (``at`` only grows), so
#: admission pays one b-tree insert per row.
SCHEMA_HARNESS_AT_INDEX = """
CREATE INDEX IF NOT EXISTS rule_journal_harness_at ON rule_journal (harness, at, args_digest)
"""

#: Registered by ``engine.views.store_schema`` with the full schema (as migration 6).
MIGRATION_HARNESS_AT_INDEX = Migration(7, "harness_at_index", SCHEMA_HARNESS_AT_INDEX)
