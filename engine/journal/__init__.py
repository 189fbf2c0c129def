"""The rule journal: one SQLite table, one seq, admission and the simulated fleet.

What other parts use (all rows are tuples, no per-row objects):

- :mod:`engine.journal.rows`: ``COLUMNS`` (table order, ``seq`` first),
  ``INSERT_COLUMNS`` (``at`` first), the enums (``TYPES_BY_KIND``, ``SOURCES``,
  ``OUTCOMES``), ``FIELDS_BY_KIND`` (the CEL ``event`` fields per kind),
  ``check_values`` / ``row_from_mapping`` (admission check, raising
  ``RowError`` naming the field) and ``row_dict`` for display.
- :mod:`engine.journal.writer`: ``Committer(conn, clock=..., ticks=True)``
  with ``admit(rows)`` (admitted now, one transaction), ``import_history(rows)``
  (rows with their own ``at``), ``read_marks``, ``read_counters``.
- :mod:`engine.journal.queue`: ``JournalWriter(store)`` with the non-blocking,
  dropping ``offer(row)`` and a committer thread that also emits ticks.
- :mod:`engine.journal.reader`: ``read_after``, ``iter_rows``, ``follow``,
  ``seq_at_or_after``, ``journal_stats``, ``prune``.
- :mod:`engine.fleet.sim`: the deterministic fleet (``iter_fleet_tuples``,
  ``iter_fleet_rows``, ``day_rows``, ``write_fleet``); its docstring lists the
  planted patterns.
"""
