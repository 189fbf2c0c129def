"""What every benchmark shares: a result row, a table printer, peak RSS.

Benchmarks print figures (and ratios against a baseline measured in the same
process); they never assert on time, because a loaded CI machine is not a
verdict on the code.
"""

from __future__ import annotations

import resource
import sys
from dataclasses import dataclass

from engine.views.store_schema import register_full_schema

# Benchmarks open stores directly (engine.store.db.connect) and expect every table.
register_full_schema()


@dataclass(frozen=True)
class Row:
    """One measured figure. ``higher_is_better`` decides how ``target`` is read."""

    benchmark: str
    figure: float
    unit: str
    target: float | None = None
    higher_is_better: bool = True
    baseline: float | None = None
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if self.baseline in (None, 0):
            return None
        assert self.baseline is not None
        return self.figure / self.baseline if self.higher_is_better else self.baseline / self.figure

    @property
    def meets_target(self) -> bool | None:
        if self.target is None:
            return None
        return self.figure >= self.target if self.higher_is_better else self.figure <= self.target


def peak_rss_mb() -> float:
    """Peak resident set size of this process, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def print_table(rows: list[Row], out=sys.stdout) -> None:  # type: ignore[no-untyped-def]
    header = f"{'benchmark':48} {'figure':>14} {'unit':10} {'target':>12} {'ratio':>8}  ok"
    out.write(header + "\n" + "-" * len(header) + "\n")
    for r in rows:
        target = "" if r.target is None else ("≥" if r.higher_is_better else "≤") + f"{r.target:g}"
        ratio = "" if r.ratio is None else f"{r.ratio:.1f}x"
        ok = {None: "", True: "yes", False: "NO"}[r.meets_target]
        out.write(
            f"{r.benchmark:48} {r.figure:>14,.1f} {r.unit:10} {target:>12} {ratio:>8}  {ok}\n"
        )
        if r.note:
            out.write(f"    {r.note}\n")
