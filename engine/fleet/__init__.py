"""A simulated fleet of harnesses writing the journal (demo data, tests, benchmarks)."""
