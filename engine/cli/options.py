"""argparse types and option sets several commands share (``rules``, ``backtest``, ``propose`` …).

Their own module so that a command module never imports another to declare
its arguments (tests/cli/test_cli_imports.py). Like every module the parser
imports, it loads nothing heavy: the duration parser is imported when a
value is checked.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

MAX_ID = 2**63 - 1
MAX_DAYS = 3650
MAX_SPAN_MS = MAX_DAYS * 86_400_000


def int_in(lo: int, hi: int) -> Callable[[str], int]:
    """argparse type: an integer in [lo, hi] (so SQLite never sees an out-of-range value)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text[:40]!r}") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"must be between {lo} and {hi}, got {text[:40]}")
        return value

    return parse


def span(text: str) -> str:
    """argparse type: a duration of at most MAX_DAYS days (checked, passed on as text)."""
    from engine.durations import DurationError, parse_duration_ms

    try:
        value = parse_duration_ms(text)
    except DurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if value > MAX_SPAN_MS:
        raise argparse.ArgumentTypeError(f"{text[:40]} is longer than {MAX_DAYS} days")
    return text


def until(text: str) -> str:
    """argparse type for --until: a seq in range, a bounded duration, or a time (checked later)."""
    from engine.durations import DurationError, DurationRangeError, parse_duration_ms

    stripped = text.strip()
    if stripped.isdigit():
        int_in(0, MAX_ID)(stripped)
        return text
    try:
        value = parse_duration_ms(stripped)
    except DurationRangeError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    except DurationError:
        return text  # an ISO time; resolve_range reports a bad one
    if value > MAX_SPAN_MS:
        raise argparse.ArgumentTypeError(f"{text[:40]} is longer than {MAX_DAYS} days")
    return text


def rule_set_options(p: argparse.ArgumentParser) -> None:
    """``--policy DIR`` (repeatable), ``--store PATH``, ``--json``: a command over the rule set."""
    p.add_argument("--policy", metavar="DIR", action="append", default=[], help="extra rule dir")
    p.add_argument("--store", metavar="PATH")
    p.add_argument("--json", action="store_true")
