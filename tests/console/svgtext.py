"""The text of a Textual SVG screenshot, line by line (what the terminal shows, unstyled).

Tests that must see the screen (a number drawn whole, a cut marked ``…``, a
key in the footer) read the same SVG the snapshots store, not a widget's data.
"""

from __future__ import annotations

import html
import re

_TEXT = re.compile(
    r'<text class="[^"]*-r\d+"[^>]*?x="([\d.]+)" y="([\d.]+)" '
    r'textLength="([\d.]+)"[^>]*>(.*?)</text>',
    re.S,
)


def svg_lines(svg: str) -> list[str]:
    """The screen's lines; each text run placed at its column (cell width from the SVG)."""
    runs = [
        (float(x), float(y), float(length), html.unescape(body).replace("\xa0", " "))
        for x, y, length, body in _TEXT.findall(svg)
    ]
    cell = next((length / len(body) for _x, _y, length, body in runs if body), 12.2)
    rows: dict[float, list[tuple[int, str]]] = {}
    for x, y, _length, body in runs:
        rows.setdefault(y, []).append((round(x / cell), body))
    lines = []
    for y in sorted(rows):
        line = ""
        for col, body in sorted(rows[y]):
            line = line.ljust(col)[:col] + body
        lines.append(line.rstrip())
    return lines
