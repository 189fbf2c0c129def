"""The rule journal: one SQLite table, one seq, admission and the simulated fleet."""
