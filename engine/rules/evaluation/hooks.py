"""The hooks the evaluator calls on each match and commit, so the rule lifecycle can plug in.

Why a protocol: the evaluator decides *whether a rule matched*; the lifecycle
decides *what that match means* (fired, shadow, suppressed; the level it acts
at and why). Keeping the second behind :class:`FireHooks` lets the same
evaluator run live, in a backtest and in tests, with the lifecycle plugged in
or not. The hooks' state must be a pure function of the journal (journal time,
never the wall clock) so that a backtest replaying the same rows reaches the
same decisions.

Call order for one batch of rows (live evaluation)::

    for each row:  hooks.on_row(row, conn)          (only for kinds in row_kinds, when due())
                   hooks.on_match(rule, target, row, now_ms) per match
    BEGIN IMMEDIATE
      INSERT fires; hooks.before_commit(fires_with_ids, conn); advance cursor
    COMMIT
    if acting: hooks.after_commit(fires)             (actions run here, at most once)

The rows are evaluated before ``BEGIN IMMEDIATE`` so that journal writers are
not kept waiting while Python evaluates; ``on_match`` may read through the
store but never writes. ``on_row`` may write: a batch holding a row of
``row_kinds`` is evaluated inside the write transaction instead (see
:mod:`.live_evaluator`). In a backtest ``conn`` is ``None`` (nothing may be written) and
``after_commit`` is never called.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from engine.vocab import CAP_LEVEL, ENFORCED_LEVELS, FIRED

if TYPE_CHECKING:
    from engine.rules.evaluation.fires import Fire
    from engine.rules.language.model import Rule

#: The row the hooks see: pinned journal column names to values (absent = None).
RowView = Mapping[str, object]


@dataclass(frozen=True, slots=True)
class FireDecision:
    """What a match becomes: its status, the level it acts at, and every reason for both."""

    status: str
    effective_level: str
    reasons: tuple[str, ...] = ()

    @property
    def acts(self) -> bool:
        """Whether the fire acts (shadow, suppressed and disabled fires only record)."""
        return self.status == FIRED


class FireHooks(Protocol):
    """What the lifecycle plugs into the evaluator (see the module docstring for call order).

    ``row_kinds`` names the journal kinds ``on_row`` wants (``None`` = every
    row); the evaluator skips building a row view for the others, which keeps
    a backtest over millions of ``tool_call`` rows fast.
    """

    row_kinds: frozenset[str] | None

    def due(self) -> bool:
        """Whether ``on_row`` has anything to do on the next row of ``row_kinds``.

        While it is False the evaluator skips ``on_row`` and a backtest need
        not read those rows at all (it reads them again as soon as it is
        True). Hooks without this method are always due.
        """
        ...

    def on_match(self, rule: Rule, target: str, row: RowView, now_ms: int) -> FireDecision: ...

    def on_row(self, row: RowView, conn: sqlite3.Connection | None) -> None: ...

    def before_commit(self, fires: Sequence[Fire], conn: sqlite3.Connection | None) -> None: ...

    def after_commit(self, fires: Sequence[Fire]) -> None: ...


class DefaultHooks:
    """Every match fires; hold and stop are capped at notify because nothing is enforced.

    These are the hooks when no lifecycle is configured (and the backtest's
    default): it never lets a rule act beyond notify, so forgetting to plug in
    the lifecycle can never grant authority.
    """

    row_kinds: frozenset[str] | None = frozenset()

    def due(self) -> bool:
        return False

    def on_match(self, rule: Rule, target: str, row: RowView, now_ms: int) -> FireDecision:
        if rule.level in ENFORCED_LEVELS:
            return FireDecision(
                FIRED,
                CAP_LEVEL,
                (f"level {rule.level} capped at notify: not enforced",),
            )
        return FireDecision(FIRED, rule.level, ())

    def on_row(self, row: RowView, conn: sqlite3.Connection | None) -> None:
        return None

    def before_commit(self, fires: Sequence[Fire], conn: sqlite3.Connection | None) -> None:
        return None

    def after_commit(self, fires: Sequence[Fire]) -> None:
        return None
