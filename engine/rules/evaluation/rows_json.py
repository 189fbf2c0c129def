"""Journal rows read as one JSON array: many rows for one SQLite step.

Why: Python's sqlite3 steps once per row, and each step lets go of the GIL and
takes it back. Where another thread is busy in Python (serve's request
threads beside its evaluator; a backtest's replay beside its candidate
reader), every retake waits for that thread, and the reader crawls. A
statement whose one result is ``json_group_array(json_array(...))`` of the
rows takes the GIL once for the lot, and ``json.loads`` builds them in C.

JSON holds integers, text and NULL exactly. It does not hold every REAL
(SQLite prints 15 digits) and refuses a BLOB; the journal stores neither, but
a row written by hand might. :data:`EXACT` is the SQL test that a row holds
only what JSON carries: aggregate with ``FILTER (WHERE EXACT)`` and compare
the count, and :func:`decoded` answers None for any batch that lost a row
(or whose text is not UTF-8), so the caller reads that batch row by row with
``ROW_SELECT`` and gets exactly the values and errors it always got.
"""

from __future__ import annotations

import json
from operator import itemgetter
from typing import Any

from engine.rules.evaluation.window import COLUMNS, ROW_VALUES

#: SQL: true for a row each of whose values JSON carries exactly.
EXACT = " AND ".join(f"typeof({c}) NOT IN ('real', 'blob')" for c in COLUMNS)

#: SQL: the exactly-carried rows as one JSON array (as a BLOB: see :func:`decoded`).
ROWS_JSON = f"CAST(json_group_array(json_array({ROW_VALUES})) FILTER (WHERE {EXACT}) AS BLOB)"

_SEQ = itemgetter(0)


def decoded(blob: bytes | None, count: int) -> list[tuple[Any, ...]] | None:
    """The ``count`` rows of a :data:`ROWS_JSON`-style array, in seq order, or None.

    None when some row was left out (a value JSON does not carry exactly) or
    the text is not UTF-8: decoded as strictly as sqlite3 decodes a column, so
    the row sqlite3 would refuse is read again row by row and refused the same way.
    """
    try:
        text = (blob or b"[]").decode("utf-8")
    except UnicodeDecodeError:
        return None
    rows = list(map(tuple, json.loads(text)))
    if len(rows) != count:
        return None
    rows.sort(key=_SEQ)  # in seq order already (linear then); SQL does not promise it
    return rows
