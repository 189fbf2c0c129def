"""How a replay hands its rows to the evaluator: in seq order, with hook rows and answers first.

Why apart from :mod:`engine.rules.evaluation.backtest`: that module sets a
replay up (plan, host, candidate rows, the result); this is the per-row loop
it runs, the part every candidate row goes through. Before a candidate row,
the fire hooks get the rows of their kinds that fell due
(:mod:`engine.rules.evaluation.hook_rows`); a row carrying answer columns
hands them to the host before it is processed (see
:attr:`~engine.rules.evaluation.replay.ReplayPlan.answers`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from engine.rules.evaluation.fires import Fire
from engine.rules.evaluation.hook_rows import HookRows
from engine.rules.evaluation.host_replay import ReplayHost
from engine.rules.evaluation.window import COL, COLUMNS
from engine.rules.language.gates import Gate
from engine.rules.language.prefilter import Clause


class ReplayLoop:
    """Processes candidate rows, and before each the hook rows that fell due (see ``hook_rows``)."""

    def __init__(
        self,
        process: Callable[[Any], list[Fire]],
        prime: Callable[[Any], Any] | None,
        on_demand: HookRows | None,
        due: Callable[[], bool] | None,
        fires: list[Fire],
    ) -> None:
        self.process = process
        self.prime = prime
        self.on_demand = on_demand
        self.due = due
        self.fires = fires
        self.last = 0  # the last candidate seq processed

    def run(self, rows: list[Any]) -> None:
        process, prime, fires = self.process, self.prime, self.fires
        on_demand, due = self.on_demand, self.due
        if on_demand is None or due is None:
            for row in rows:
                found = process(row if prime is None else prime(row))
                if found:
                    fires.extend(found)
            self.last = int(rows[-1][0])
            return
        last = self.last
        for row in rows:
            if due():
                for extra in on_demand.before(row[0], last):
                    found = process(extra)
                    if found:
                        fires.extend(found)
            elif on_demand.open:
                on_demand.close()
            found = process(row if prime is None else prime(row))
            if found:
                fires.extend(found)
            last = row[0]
        self.last = int(last)

    def finish(self, last_seq: int) -> None:
        """After the last candidate: the hook rows still due up to the range's end."""
        if self.on_demand is None or self.due is None or not self.due():
            return
        for extra in self.on_demand.before(last_seq + 1, self.last):
            found = self.process(extra)
            if found:
                self.fires.extend(found)


def answer_primer(
    answers: Sequence[tuple[Gate, Clause]], host: object
) -> Callable[[Any], Any] | None:
    """Row with answer columns -> the row, the answers handed to the host first (or None).

    ``answers`` are :attr:`ReplayPlan.answers <engine.rules.evaluation.replay.ReplayPlan.answers>`:
    each extra column is one call's exact answer, or NULL where no rule asks it.
    """
    if not answers or not isinstance(host, ReplayHost):
        return None
    width = len(COLUMNS)
    calls = []
    for i, (gate, _) in enumerate(answers):
        lits = tuple((k, v) for k, (tag, v) in gate.selector if tag == "lit")
        cols = tuple((k, COL[v]) for k, (tag, v) in gate.selector if tag == "row")
        calls.append((width + i, gate, lits, cols, gate.fn == "exists"))
    give = host.prime

    nothing = (None,) * len(calls)

    def prime(row: Any) -> Any:
        if row[width:] == nothing:  # most rows: no rule that asks these calls applies
            return row[:width]
        seq = row[0]
        for at, gate, lits, cols, is_exists in calls:
            value = row[at]
            if value is not None:
                sel = dict(lits)
                for key, col in cols:
                    sel[key] = row[col]
                call = (gate.fn, gate.field, tuple(sorted(sel.items())), gate.window_ms)
                give(seq, call, bool(value) if is_exists else int(value))
        return row[:width]

    return prime
