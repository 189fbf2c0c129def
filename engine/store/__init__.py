"""The one SQLite store: connection settings and ordered schema migrations."""
