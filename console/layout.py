"""The one pane table: tabs, number keys, palette commands, help and focus derive from it.

Kept apart from the app so the table reads as a list of the console's panes
(and so help and tests can read it without the app's wiring).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.binding import Binding

from console.panes.backtest import BacktestPane
from console.panes.base import StorePane
from console.panes.decide import DecidePane
from console.panes.explain import ExplainPane
from console.panes.fires import FiresPane
from console.panes.fleet import FleetPane
from console.panes.holds import HoldsPane
from console.panes.proposals import ProposalsPane
from console.panes.rules import RulesPane
from console.panes.timeline import TimelinePane


@dataclass(frozen=True, slots=True)
class PaneSpec:
    """One pane: its id (also its tab id), tab title, widget class and what takes focus.

    ``focus`` is the pane's main widget, never a hidden filter box; ``home`` is
    where Esc leaves focus when the operator was typing in one of its inputs
    (so the number keys switch panes again).
    """

    id: str
    title: str
    cls: type[StorePane[Any] | TimelinePane]
    focus: str
    home: str = ""
    #: Widgets of the pane whose own keys belong in its help (e.g. the rule editor).
    parts: tuple[str, ...] = ()


#: The one pane table: tabs, number keys, palette commands, help and focus derive from it.
PANES: tuple[PaneSpec, ...] = (
    PaneSpec("fleet", "Fleet", FleetPane, "#fleet-table"),
    PaneSpec("fires", "Fires", FiresPane, "#fires-table", parts=("#fires-table",)),
    PaneSpec("rules", "Rules", RulesPane, "#rules-table"),
    PaneSpec("holds", "Holds", HoldsPane, "#holds-table"),
    # the pane opens on its result, not in the input: the number keys keep switching panes
    PaneSpec("decide", "Decide", DecidePane, "#decide-decision"),
    PaneSpec("explain", "Explain", ExplainPane, "#explain-steps", parts=("#explain-steps",)),
    PaneSpec("backtest", "Backtest", BacktestPane, "#backtest-rule", parts=("#backtest-editor",)),
    PaneSpec("proposals", "Proposals", ProposalsPane, "#proposals-table"),
    PaneSpec("timeline", "Timeline", TimelinePane, "#timeline-grid", parts=("#timeline-grid",)),
)
PANE_BY_ID = {spec.id: spec for spec in PANES}
#: The footer shows the number keys as one group.
PANE_KEYS = Binding.Group("Panes", compact=True)
