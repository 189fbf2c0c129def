"""The pane tabs: switched by the app only, never behind its back by a late focus message.

Textual's TabbedContent makes a tab active when a widget inside it takes
focus, by a message that arrives after the keys already queued. Esc in
Decide moved focus within Decide, then ``3`` showed Rules, and the late
message switched back to Decide while focus stayed on Rules (issue 19 P1.3,
a key burst). The app sets the active tab itself before it moves focus, so
that message is ignored here.
"""

from __future__ import annotations

from textual.widgets import TabbedContent, TabPane


class PaneTabs(TabbedContent):
    """A TabbedContent whose active tab follows the app's pane switches and mouse clicks only."""

    def _on_tab_pane_focused(self, event: TabPane.Focused) -> None:
        event.stop()
        event.prevent_default()  # TabbedContent's own handler would switch tabs late
