"""``?`` and F1: the keys, built from the bindings themselves, opened at the pane you are on.

Nothing here restates a key: each section lists the bindings of a pane and
of the widgets it is made of (description, and the tooltip as the longer
"what it does"), under the first paragraph of the pane's docstring. So help
cannot drift from the keys, and a key added to a pane is in help at once.
``?`` shows every section scrolled to the current pane's; F1 shows that one
only. The scroll has focus from the start, so up/down, ``j``/``k``,
PgUp/PgDn, space, Home/End move at once (issue 19 P2.4).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from console.markup import escape

#: Keys in a section: (keys as shown, what they do).
KeyRows = list[tuple[str, str]]


@dataclass(frozen=True, slots=True)
class HelpSection:
    """One pane's help: its title, what it shows, and its keys (from its bindings)."""

    id: str
    title: str
    about: str
    keys: tuple[tuple[str, str], ...]


def key_rows(
    bindings: Iterable[BindingType],
    display: Callable[[str], str],
    skip: Callable[[Binding], bool] = lambda _b: False,
) -> KeyRows:
    """(keys, what) for each binding; a binding's tooltip says more than its description."""
    rows: KeyRows = []
    seen: set[tuple[str, str]] = set()
    for item in bindings:
        if not isinstance(item, Binding) or skip(item):
            continue
        keys = " / ".join(display(k.strip()) for k in item.key.split(","))
        what = item.description or item.action.replace("_", " ")
        if item.tooltip:
            what = f"{what}: {item.tooltip}"
        if (keys, what) not in seen:
            seen.add((keys, what))
            rows.append((keys, what))
    return rows


class HelpScroll(VerticalScroll):
    """The help text, focused when the help opens, with the pager keys people expect.

    Keys: up/down and ``k``/``j`` a line, PgUp/PgDn and ``b``/space a page,
    Home/End and ``g``/``G`` the top and bottom.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j", "scroll_down", "Down", show=False),
        Binding("k", "scroll_up", "Up", show=False),
        Binding("space", "page_down", "Page down", show=False),
        Binding("b", "page_up", "Page up", show=False),
        Binding("g", "scroll_home", "Top", show=False),
        Binding("G", "scroll_end", "Bottom", show=False),
    ]


class KeysScreen(ModalScreen[None]):
    """``?``: every pane's keys, opened at ``start``; F1: ``only`` that pane, with what it shows."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark,f1", "dismiss", "Close"),
    ]
    DEFAULT_CSS = """
    KeysScreen { align: center middle; }
    KeysScreen > HelpScroll {
        width: 90%; max-width: 100; height: auto; max-height: 90%;
        border: thick $primary; background: $surface; padding: 0 1;
    }
    KeysScreen .help-title { text-style: bold; margin-top: 1; }
    """

    def __init__(self, sections: list[HelpSection], start: str, *, only: bool = False) -> None:
        super().__init__()
        self.sections = [s for s in sections if not only or s.id == start]
        self.start = start
        self.only = only

    @property
    def pane(self) -> str:
        """The pane the help was opened at."""
        return self.start

    def compose(self) -> ComposeResult:
        with HelpScroll(id="help-scroll"):
            yield Static(
                "[b]Keys[/b]  ?/esc/q closes · ↑↓ j k PgUp PgDn space Home End move · "
                + (
                    "? lists every pane's keys" if self.only else "F1: this pane with what it shows"
                ),
                classes="help-lead",
            )
            for section in self.sections:
                yield Static(escape(section.title), id=f"help-{section.id}", classes="help-title")
                if self.only and section.about:
                    yield Static(escape(section.about))
                width = max((len(k) for k, _ in section.keys), default=4)
                lines = [f"  {escape(k.ljust(width))}  {escape(what)}" for k, what in section.keys]
                yield Static("\n".join(lines) or "  (no keys of its own)")

    def on_mount(self) -> None:
        scroll = self.query_one(HelpScroll)
        self.set_focus(scroll)
        if not self.only:
            self.call_after_refresh(self._scroll_to_start)

    def _scroll_to_start(self) -> None:
        target = self.query(f"#help-{self.start}")
        if target:
            self.query_one(HelpScroll).scroll_to_widget(target.first(), top=True, animate=False)


#: F1 is the same screen showing one pane (kept as a name for what tests and callers open).
HelpScreen = KeysScreen
