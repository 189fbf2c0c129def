"""Every key is handled whole, in the order it was typed, before the next one is read.

Textual reads a key on the app, then hands it to the focused widget's own
queue and goes on reading. A binding that moves focus (``/`` opens the Fires
filter, ``5`` shows Decide, ``esc`` leaves a text box) therefore ran after the
keys typed behind it had already been handed to the widget that had focus
before: ``/h05⏎`` typed in one burst or pasted opened the filter but gave the
``5`` to the pane switcher (issue 19 P1.3). Here the app does, for each key,
what the widgets would do, in Textual's own order (priority bindings, the
focused widget's own typing, then the bindings from the focused widget up),
and finishes before it reads the next key. Focus moves made by those
bindings are immediate (:func:`focus_now`, not ``Widget.focus``, which only
queues the move), text fields act on Enter at once (:class:`Field`), and
screens opened by a key are awaited until they are mounted with focus set.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, cast

from textual import events
from textual.app import App
from textual.widget import Widget
from textual.widgets import Input


def types_text(widget: Widget) -> bool:
    """Whether ``widget`` handles keys itself before bindings (Input, TextArea, Select's list)."""
    return type(widget)._on_key is not Widget._on_key


async def key_in_order(app: App[Any], event: events.Key) -> bool:
    """Handle ``event`` completely now; False leaves it to Textual (nothing else wanted it)."""
    if not app.screen_stack:
        return False  # closing
    settle_focus(app)
    screen = app.screen
    if screen.maximized is not None:
        return False  # Textual's escape-to-minimize
    if await app._check_bindings(event.key, priority=True):
        return True
    if _alt_char(event.key) and (
        await app._check_bindings(event.key) or await _esc_then_key(app, event)
    ):
        return True  # before a text field could type the character of an Esc-then-key
    focused = screen.focused
    if focused is not None and types_text(focused):
        handled = focused._on_key(event)
        if inspect.isawaitable(handled):
            await handled
        if event._stop_propagation:  # it typed the key
            return True
    if await app._check_bindings(event.key):
        return True
    # a typing widget already had the key; nothing else would take it
    return focused is not None and types_text(focused)


def _alt_char(key: str) -> bool:
    """``alt+3``, ``alt+a``: Alt with one character (what a terminal makes of Esc, then it)."""
    return key.startswith("alt+") and len(key) == len("alt+") + 1


async def _esc_then_key(app: App[Any], event: events.Key) -> bool:
    """``esc`` typed fast before a key reaches a terminal app as ``alt+key``: do both.

    A terminal cannot tell Esc followed at once by ``3`` from Alt+3, so a quick
    "leave this box, show Rules" arrived as one ``alt+3`` that nothing bound.
    """
    rest = event.key.removeprefix("alt+")
    await key_in_order(app, events.Key("escape", "\x1b"))
    await key_in_order(app, events.Key(rest, rest if len(rest) == 1 else None))
    return True


async def paste_in_order(app: App[Any], event: events.Paste) -> bool:
    """Give pasted text to the focused text field now, between the keys around it."""
    if not app.screen_stack:
        return False
    settle_focus(app)
    focused = app.screen.focused
    if focused is None or not types_text(focused):
        return False
    handled = focused._on_paste(event)  # type: ignore[attr-defined]
    if inspect.isawaitable(handled):
        await handled
    return True


def esc_then_digit_is_two_keys() -> None:
    """Let a terminal's Esc-then-digit reach the app as two keys, not a macOS symbol.

    Textual reads ESC followed by ``1``…``0``, ``-`` or ``=`` as the character
    WezTerm sends for Option+key on macOS (``£`` for ESC 3): an operator's
    quick "esc 3" (leave the text box, show Rules) typed ``£`` into the box.
    Without those entries the parser reports ``alt+3``, which
    :func:`key_in_order` turns into Esc then 3. A ``£`` typed as such (its own
    UTF-8 bytes, not ESC 3) still types ``£``. The table is Textual's and
    global; the console is the only app of its process.
    """
    from textual._ansi_sequences import ANSI_SEQUENCES_KEYS

    table = cast(dict[str, object], ANSI_SEQUENCES_KEYS)  # typed read-only, a dict at run time
    for tail in "1234567890-=":
        table.pop("\x1b" + tail, None)


def focus_now(widget: Widget) -> None:
    """Move focus to ``widget`` at once (the next key already goes to it)."""
    widget.screen.set_focus(widget)


#: The app attribute holding the widget :func:`focus_soon` promised focus to (it dies
#: with the app; a module-level table would keep a closed app's widgets alive).
_PROMISE = "_harness_focus_promise"


def focus_soon(widget: Widget) -> None:
    """Focus ``widget`` after the next frame, or at once if a key comes first.

    A pane switch that moved focus at once made Textual restyle and rebuild the
    footer before the new pane's first frame (the Timeline's first paint took
    twice as long); after the frame it costs the operator nothing. A key typed
    before that frame (a burst: ``5`` then digits) settles the promise first
    (:func:`settle_focus`), so it still reaches the widget the switch chose.
    """
    app = widget.app
    setattr(app, _PROMISE, widget)

    def keep() -> None:
        if getattr(app, _PROMISE, None) is widget:
            settle_focus(app)

    app.call_after_refresh(keep)


def settle_focus(app: App[Any]) -> None:
    """Give focus now to the widget :func:`focus_soon` promised it to, if any."""
    widget: Widget | None = vars(app).pop(_PROMISE, None)
    if widget is not None and widget.is_attached:
        focus_now(widget)


class Field(Input):
    """A one-line text field whose Enter acts at once (``on_enter``), not after later keys.

    ``on_enter(value)`` runs inside the Enter key's handling, so a key typed
    right after Enter (a pane number) already finds focus where ``on_enter``
    put it. Without ``on_enter`` the field posts ``Input.Submitted`` as usual.
    """

    def __init__(
        self,
        *,
        on_enter: Callable[[str], object] | None = None,
        value: str = "",
        placeholder: str = "",
        id: str | None = None,
        classes: str | None = None,
        select_on_focus: bool = True,
    ) -> None:
        super().__init__(
            value=value,
            placeholder=placeholder,
            id=id,
            classes=classes,
            select_on_focus=select_on_focus,
        )
        self.on_enter = on_enter

    async def action_submit(self) -> None:
        if self.on_enter is None:
            await super().action_submit()
            return
        done = self.on_enter(self.value)
        if inspect.isawaitable(done):
            await done
