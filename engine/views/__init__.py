"""UI-free read models for the operator console.

The console only shows and asks; every query it runs against the store lives
here, as plain functions over a ``sqlite3.Connection`` (or as SQL text plus a
row mapper, for the console's aiosqlite tail), so the same queries are tested
without a screen and the console never grows logic of its own.
"""
