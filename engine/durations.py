"""Durations as people write them in config and rules: ``90s``, ``30m``, ``1h30m``, ``7d``.

One parser for harness.toml (shadow_period), rule files (cooldown), and CLI
flags (``--since``), so ``72h`` means the same thing everywhere. Results are
integer milliseconds because journal time (``at``) is integer milliseconds.
"""

from __future__ import annotations

import re

_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
#: Longest duration accepted: 10,000 years, past any journal time (year 9999).
MAX_DURATION_MS = 10_000 * 365 * 86_400_000
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")


class DurationError(ValueError):
    """Raised with a message that says what a valid duration looks like."""


class DurationRangeError(DurationError):
    """Well-formed, but longer than :data:`MAX_DURATION_MS` (``<400 nines>d``)."""


def parse_duration_ms(text: str) -> int:
    """Parse ``text`` into milliseconds; raise :class:`DurationError` when malformed."""
    if not isinstance(text, str):
        raise DurationError(f"expected a duration string like '30m', got {type(text).__name__}")
    s = text.strip()
    if not s:
        raise DurationError("empty duration; expected something like '30m' or '72h'")
    pos = 0
    total = 0.0
    for match in _PART.finditer(s):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT_MS[match.group(2)]
        pos = match.end()
    if pos != len(s) or pos == 0:
        raise DurationError(
            f"invalid duration {_shown(text)}; use a number and a unit "
            "(ms, s, m, h, d), e.g. '90s', '1h30m'"
        )
    if not total <= MAX_DURATION_MS:  # also catches inf from `<400 nines>d`
        raise DurationRangeError(
            f"duration {_shown(text)} is longer than {MAX_DURATION_MS // _UNIT_MS['d']:,}d"
        )
    return round(total)


def _shown(text: str) -> str:
    """``text`` quoted for a message, shortened so a 400-digit typo stays one line."""
    return repr(text) if len(text) <= 40 else repr(text[:37] + "...")


def format_duration_ms(ms: int) -> str:
    """The shortest exact spelling of ``ms`` (inverse of :func:`parse_duration_ms`)."""
    if ms == 0:
        return "0s"
    parts = []
    rest = ms
    for unit in ("d", "h", "m", "s"):
        size = _UNIT_MS[unit]
        if rest >= size:
            parts.append(f"{rest // size}{unit}")
            rest %= size
    if rest:
        parts.append(f"{rest}ms")
    return "".join(parts)
