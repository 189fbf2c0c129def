"""Journal time (integer ms since the epoch, UTC) as text: one function per format shown anywhere.

Why one module: the CLI, the store reports, rule reasons and the console all
print journal time; when each formatted it itself, the same instant read
differently from pane to pane. The formats:

- :func:`iso_ms`: ``2026-01-02T03:04:05Z``, for reasons, reports and JSON;
- :func:`iso_ms_precise`: ``2026-01-02T03:04:05.678+00:00``, where two rows
  within one second must stay apart (fire explanations, shadow ends);
- :func:`iso_ms_precise_z`: ``2026-01-02T03:04:05.678Z``, one journal row per line
  (``harness journal tail``);
- :func:`readable_ms`: ``2026-01-02 03:04:05.678Z``, a journal time an operator reads;
- :func:`minute_ms`: ``2026-01-02 03:04``, spans read at a glance;
- :func:`day_ms`: ``2026-01-02``, per-day totals and proposal dates;
- :func:`short_ms`: ``01-02 03:04:05`` (or ``01-02 03:04``), for table cells;
- :func:`compact_ms`: ``01-02T03:04``, where a space would split a word (a filter);
- :func:`month_day_ms`: ``01-02`` and :func:`clock_ms`: ``03:04``, ruler labels.

tests/test_vocabulary.py fails when a module outside this one formats a time
itself (``strftime``, ``fromtimestamp``, ``isoformat`` …).
"""

from __future__ import annotations

from datetime import UTC, datetime


def _utc(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


#: One day of journal time.
DAY_MS = 86_400_000
#: Date parts by day number, so a report formatting many times reads the calendar once a day.
_DAYS: dict[int, str] = {}


def iso_ms(ms: int) -> str:
    """``ms`` as ISO-8601 UTC to the second; an out-of-range value prints as ``<ms> ms``.

    The date comes from the calendar once per day (memoised) and the clock
    time from integer arithmetic: the same text ``strftime`` gives, without
    a ``datetime`` per call (a backtest report formats tens of thousands).
    """
    if type(ms) is not int:
        return _iso_slow(ms)
    day, rest = divmod(ms, DAY_MS)
    date = _DAYS.get(day)
    if date is None:
        date = _iso_slow(day * DAY_MS)
        if not date.endswith("T00:00:00Z"):
            return _iso_slow(ms)
        date = date[:-9]
        if len(_DAYS) < 100_000:
            _DAYS[day] = date
    secs = rest // 1000
    return f"{date}{secs // 3600:02d}:{secs // 60 % 60:02d}:{secs % 60:02d}Z"


def _iso_slow(ms: int) -> str:
    try:
        return _utc(ms).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return f"{ms} ms"


def iso_ms_precise(ms: int) -> str:
    """``ms`` as ISO-8601 UTC to the millisecond, with a ``+00:00`` offset."""
    return _utc(ms).isoformat(timespec="milliseconds")


def iso_ms_precise_z(ms: int) -> str:
    """``ms`` as ISO-8601 UTC to the millisecond with a ``Z``: ``2026-01-02T03:04:05.678Z``."""
    return _utc(ms).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def readable_ms(ms: int) -> str:
    """``ms`` as an operator reads a journal time: ``2026-03-02 14:03:07.120Z``."""
    return _utc(ms).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def minute_ms(ms: int) -> str:
    """``ms`` as date and clock time to the minute (UTC), for spans a person reads at a glance."""
    return _utc(ms).strftime("%Y-%m-%d %H:%M")


def short_ms(ms: int, *, seconds: bool = True) -> str:
    """``ms`` as month-day and clock time (UTC), for a table cell."""
    return _utc(ms).strftime("%m-%d %H:%M:%S" if seconds else "%m-%d %H:%M")


def day_ms(ms: int) -> str:
    """``ms`` as its UTC date, ``2026-01-02`` (the date of :func:`iso_ms`, memoised per day)."""
    return iso_ms(ms).partition("T")[0]


def compact_ms(ms: int) -> str:
    """``ms`` as month-day and clock time to the minute with no space: ``01-02T03:04``."""
    return _utc(ms).strftime("%m-%dT%H:%M")


def month_day_ms(ms: int) -> str:
    """``ms`` as its UTC month and day, ``01-02`` (a ruler label for wide buckets)."""
    return _utc(ms).strftime("%m-%d")


def clock_ms(ms: int) -> str:
    """``ms`` as UTC clock time to the minute, ``03:04`` (a ruler label for narrow buckets)."""
    return _utc(ms).strftime("%H:%M")
