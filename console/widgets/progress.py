"""A progress bar that does not wake the console once a second while nothing runs.

Textual's ProgressBar starts a one-second timer on mount to refresh its ETA,
even with ``show_eta=False``; the Backtest pane shows no ETA, and the timer
woke an idle console every second for nothing (issue 11: an idle console on a
static store uses no measurable CPU).
"""

from __future__ import annotations

from textual.events import Mount
from textual.widgets import ProgressBar


class StillProgressBar(ProgressBar):
    """A :class:`~textual.widgets.ProgressBar` without the ETA timer (no ETA is shown)."""

    def __init__(self, *, id: str | None = None, total: float | None = None) -> None:
        super().__init__(id=id, total=total, show_eta=False)

    def _on_mount(self, event: Mount) -> None:
        # ProgressBar.on_mount only draws the bar once and starts the ETA timer:
        # draw it here and keep the handlers further up the MRO from running
        event.prevent_default()
        self.update()
