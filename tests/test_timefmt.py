"""engine/timefmt.py: each format prints what its callers printed when they formatted it.

The expected values are the ``datetime`` formulas the callers used before the
formats moved here (issue 20), checked over the whole range journal time takes.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from engine import timefmt

#: From before 1970 to the year 9000 (negative journal times are refused by the writer,
#: but a format must not depend on that).
MS = st.integers(min_value=-(10**11), max_value=220_000_000_000_000)


def _dt(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


@given(MS)
def test_each_format_matches_the_datetime_formula_it_replaced(ms: int) -> None:
    when = _dt(ms)
    assert timefmt.iso_ms_precise_z(ms) == when.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    assert timefmt.day_ms(ms) == when.strftime("%Y-%m-%d") == when.date().isoformat()
    assert timefmt.compact_ms(ms) == when.strftime("%m-%dT%H:%M")
    assert timefmt.month_day_ms(ms) == when.strftime("%m-%d")
    assert timefmt.clock_ms(ms) == when.strftime("%H:%M")
    assert timefmt.iso_ms(ms) == when.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_formats_at_known_instants() -> None:
    ms = 1_767_323_045_678  # 2026-01-02T03:04:05.678Z
    assert timefmt.iso_ms_precise_z(ms) == "2026-01-02T03:04:05.678Z"
    assert timefmt.day_ms(ms) == "2026-01-02"
    assert timefmt.compact_ms(ms) == "01-02T03:04"
    assert timefmt.month_day_ms(ms) == "01-02"
    assert timefmt.clock_ms(ms) == "03:04"
    assert timefmt.day_ms(-1) == "1969-12-31"
    assert timefmt.day_ms(0) == "1970-01-01"


@given(st.integers(min_value=0, max_value=10**13), st.integers(min_value=0, max_value=40))
def test_consecutive_day_numbers_are_consecutive_dates(first: int, days: int) -> None:
    """propose's per-day totals step day numbers (ms // DAY_MS) instead of dates."""
    start = first // timefmt.DAY_MS
    got = [timefmt.day_ms(d * timefmt.DAY_MS) for d in range(start, start + days)]
    day0 = _dt(first).date()
    assert got == [(day0 + timedelta(days=i)).isoformat() for i in range(days)]
