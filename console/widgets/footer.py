"""The key footer, rebuilt once per change of the keys it shows instead of once per signal.

Textual's Footer recomposes all its keys (a score of widgets, each restyled)
every time the screen says its bindings may have changed, and switching a pane
says so several times in one frame (the old pane's focus is lost, the new
pane's widget takes it, the tab changes). Each rebuild took 50-200 ms, so a
pane switch drew its footer four times before the pane's first paint (the
Timeline's first paint missed its 300 ms target on that alone). This footer
coalesces the signals into one rebuild after the refresh, and skips it when
the keys it would show are the ones it shows.
"""

from __future__ import annotations

from textual.screen import Screen
from textual.widgets import Footer


class QuietFooter(Footer):
    """A :class:`~textual.widgets.Footer` that rebuilds only when its keys changed."""

    def __init__(self) -> None:
        super().__init__()
        self._pending = False
        #: What the keys were built from last time (see :meth:`_shown`).
        self._built: tuple[object, ...] | None = None
        #: How many times the keys were rebuilt (for tests).
        self.rebuilds = 0

    def bindings_changed(self, screen: Screen[object]) -> None:
        self._bindings_ready = True
        if not screen.app.app_focus or self._pending:
            return
        if self.is_attached and screen is self.screen:
            self._pending = True
            self.call_after_refresh(self._rebuild)

    def _shown(self) -> tuple[object, ...]:
        """Everything :meth:`Footer.compose` reads from the bindings, as one comparable value."""
        return tuple(
            (
                key,
                binding.key,
                binding.action,
                binding.description,
                binding.show,
                binding.group,
                binding.tooltip,
                enabled,
                tooltip,
            )
            for key, (_node, binding, enabled, tooltip) in self.screen.active_bindings.items()
        )

    async def _rebuild(self) -> None:
        self._pending = False
        if not self.is_attached:
            return
        shown = self._shown()
        if shown == self._built:
            return
        self._built = shown
        self.rebuilds += 1
        await self.recompose()
