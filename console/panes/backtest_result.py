"""A finished backtest as the Backtest pane shows it: the summary lines and the table rows.

Plain functions over ``engine.views.backtest.BacktestRun``, so the pane's
message handler only puts them on screen. Counts and seqs are written whole
(with thousands separators where they can grow).
"""

from __future__ import annotations

from rich.text import Text

from console.markup import escape
from console.widgets.spark import bar
from engine.timefmt import short_ms
from engine.views.backtest import BacktestRun, Fire

#: Rows the table shows at most (would-be fires, then lost ones).
MAX_ROWS = 500
Cells = tuple[str | Text, ...]


def summary_lines(run: BacktestRun, label: str) -> list[str]:
    """What the run belongs to, its totals, the comparison, parity and the per-day chart."""
    res = run.result
    lines = [
        f"[b]{escape(label)}[/b]",
        f"[b]{len(res.fires):,} would-be fires[/b] over {res.range.rows:,} rows"
        f" ({res.rows_scanned:,} candidate rows read)"
        " (on recorded history; a rule about something that never happened backtests silent)",
        "by status: " + (", ".join(f"{s} {n:,}" for s, n in run.by_status.items()) or "none"),
    ]
    if run.baseline is not None:
        lines.append(
            f"vs current version: [green]+{len(run.gained):,} gained[/], "
            f"[red]-{len(run.lost):,} lost[/] ({len(run.baseline.fires):,} before)"
            + (" · lost fires are listed last in the table" if run.lost else "")
        )
    if run.parity is not None:
        style = "green" if run.parity.equal else "yellow"
        if run.parity.compared is None:
            style = "dim"
        plines = run.parity.lines()
        lines.append(f"[{style}]{escape(plines[0])}[/]")
        lines.extend(escape(line) for line in plines[1:6])
    days = run.per_day
    top = max((n for _, n in days), default=0)
    for day, n in days[-10:]:
        lines.append(f"{day} {bar(n, top, 24):24} {n:,}")
    return lines


def result_rows(run: BacktestRun) -> list[tuple[Fire, Cells]]:
    """Each would-be fire (gained ones marked), then the fires the edit lost."""
    gained = {(f.seq, f.target) for f in run.gained}
    rows = [(f, "+" if (f.seq, f.target) in gained else "") for f in run.result.fires[:MAX_ROWS]]
    rows += [(f, "−") for f in run.lost[: max(0, MAX_ROWS - len(rows))]]
    marks = {"+": Text("+ gained", style="green"), "−": Text("− lost", style="red")}
    return [
        (
            f,
            (
                marks.get(mark, ""),
                str(f.seq),
                short_ms(f.at),
                f.target,
                f.effective_level,
                f.status,
                ", ".join(f"{c.fn}={c.result}" for c in f.calls),
            ),
        )
        for f, mark in rows
    ]
