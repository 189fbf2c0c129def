"""Text sparklines and bars for table cells and charts (snapshot-stable, no canvas)."""

from __future__ import annotations

from collections.abc import Sequence

BLOCKS = " ▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[int], top: int | None = None) -> str:
    """One character per value, scaled to ``top`` (default: the largest); zero is a space.

    Pass one ``top`` for every row of a screen so rows compare: a row scaled to
    its own maximum makes a quiet hour look as busy as the busiest.
    """
    top = max(values, default=0) if top is None else top
    if top <= 0:
        return " " * len(values)
    out = []
    for v in values:
        idx = 0 if v <= 0 else min(len(BLOCKS) - 1, max(1, round(v / top * (len(BLOCKS) - 1))))
        out.append(BLOCKS[idx])
    return "".join(out)


def bar(value: int, top: int, width: int = 30) -> str:
    """A horizontal bar of ``width`` cells for ``value`` out of ``top``."""
    if top <= 0 or value <= 0:
        return ""
    return "█" * max(1, round(value / top * width))
