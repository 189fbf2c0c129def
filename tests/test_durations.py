"""Durations: the one parser and formatter for cooldowns, windows and spans."""

from __future__ import annotations

import pytest

from engine.durations import DurationError, format_duration_ms, parse_duration_ms


def test_durations_round_trip() -> None:
    assert parse_duration_ms("1h30m") == 5_400_000
    assert parse_duration_ms("72h") == 259_200_000
    assert parse_duration_ms("250ms") == 250
    assert format_duration_ms(5_400_000) == "1h30m"
    for bad in ("", "10", "h", "1x", "1h 30m", "-1h"):
        with pytest.raises(DurationError):
            parse_duration_ms(bad)


def test_an_overflowing_duration_is_a_duration_error_not_overflow() -> None:
    # issue 13, item 8: `cooldown: <400 nines>d` raised OverflowError in round(inf)
    from engine.durations import DurationError, DurationRangeError

    for text in ("9" * 400 + "d", "1" + "0" * 30 + "ms", "99999999999h"):
        with pytest.raises(DurationRangeError):
            parse_duration_ms(text)
    assert issubclass(DurationRangeError, DurationError)
