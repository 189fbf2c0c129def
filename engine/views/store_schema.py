"""The full store schema: every owning package's migration, registered with the store in order.

The store (``engine.store``) sits below the packages whose tables it holds, so
it never imports their schemas; each schema module registers its step when
imported. This module is the one place that imports them all, for whatever
opens a store for the whole program (the ``harness`` command, the console's
read models, the test suite): after :func:`register_full_schema` the store
migrates a new or older store to the latest version and refuses a newer one,
exactly as it did when it listed the migrations itself (versions 1..6 keep
their numbers, names and SQL; 8 records the lease holder's role and rule set).
"""

from __future__ import annotations

from engine.journal import schema as journal_schema
from engine.policy import schema as proposals_schema
from engine.rules.authority import lifecycle_schema
from engine.rules.authority import stops as stops_schema
from engine.rules.evaluation import schema as rules_schema
from engine.store.migrations import Migration, mark_complete, register_migration

#: Every migration of this program, in version order.
FULL_SCHEMA: tuple[Migration, ...] = (
    journal_schema.MIGRATION,
    rules_schema.MIGRATION,
    lifecycle_schema.MIGRATION,
    proposals_schema.MIGRATION,
    stops_schema.MIGRATION,
    journal_schema.MIGRATION_PREFILTER_INDEX,
    journal_schema.MIGRATION_HARNESS_AT_INDEX,
    lifecycle_schema.MIGRATION_LEASE_ROLE,
)


def register_full_schema() -> int:
    """Register every package's migration (idempotent) and return the latest version."""
    for step in FULL_SCHEMA:
        register_migration(step.version, step.name, step.sql)
    return mark_complete()
