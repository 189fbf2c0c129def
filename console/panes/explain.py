"""Explain pane: step forward and back through one fire's explanation."""

from __future__ import annotations

from typing import ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widgets import Static

from console.context import ConsoleContext
from console.keys import Field, focus_now
from console.markup import escape
from console.panes.base import StorePane
from engine.views.demo import DEMO_ENFORCE
from engine.views.fire_explain import FireExplanation, explain_fire

#: The footer shows the two step keys as one group.
STEPS = Binding.Group("Step", compact=True)


class StepScroll(VerticalScroll):
    """The steps, scrolled; its step keys win over the scroll keys of the same names.

    A plain VerticalScroll took ``home``/``end`` (and ``left``/``right``) for
    scrolling, so Explain's "first step" never ran (issue 19 P3).

    Keys: ``right``/``n`` next step, ``left``/``p`` previous, ``home`` first,
    ``end`` last; up/down/page keys scroll.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("left,p", "step(-1)", "Prev", group=STEPS),
        Binding("right,n", "step(1)", "Next", group=STEPS),
        Binding("home", "edge(0)", "First step", show=False),
        Binding("end", "edge(1)", "Last step", show=False),
    ]

    def action_step(self, delta: int) -> None:
        self.query_ancestor(ExplainPane).action_step(delta)

    def action_edge(self, last: int) -> None:
        pane = self.query_ancestor(ExplainPane)
        if last:
            pane.action_last()
        else:
            pane.action_first()


class ExplainPane(StorePane[None]):
    """One fire, step by step: the event row, now, each aggregate call, the level decision, actions.

    Each aggregate call shows its arguments, result and the journal rows it
    counted; the decision gives its reasons; the last step says what acted
    (the hold it created, actions run). Opened from Fires, Holds, Timeline or
    a backtest result; or type a fire id.

    Keys: ``right``/``n`` next step, ``left``/``p`` previous, ``home`` first,
    ``end`` last, ``f`` type a fire id, ``esc`` back to the pane you came from.

    Messages: :class:`Loaded` (an explanation was read).
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f", "fire_id", "Fire id", tooltip="type a fire id to explain"),
    ]
    DEFAULT_CSS = """
    ExplainPane #explain-fire { width: 60; }
    ExplainPane #explain-steps { height: 1fr; border: round $primary; padding: 0 1; }
    """

    class Loaded(Message):
        """The explanation of ``fire_id`` (0: a backtest's would-be fire) was read."""

        def __init__(self, fire_id: int, explanation: FireExplanation) -> None:
            super().__init__()
            self.fire_id = fire_id
            self.explanation = explanation

    def __init__(self, context: ConsoleContext) -> None:
        super().__init__(context)
        self.explanation: FireExplanation | None = None
        self.step = 0

    def compose(self) -> ComposeResult:
        yield Field(
            placeholder="fire id (enter), or enter on a fire in Fires",
            id="explain-fire",
            on_enter=self._typed_id,
        )
        yield Static("no fire selected", id="explain-title", classes="status-line")
        with StepScroll(id="explain-steps"):
            yield Static("", id="explain-body")
            yield Static("", id="explain-current")

    def load_fire(self, fire_id: int) -> None:
        self.query_one("#explain-fire", Field).value = str(fire_id)
        self._load(fire_id)

    @work(thread=True, exclusive=True, group="explain")
    def _load(self, fire_id: int) -> None:
        demo = (DEMO_ENFORCE,) if self.context.options.demo else ()
        exp = self.with_store(lambda conn: explain_fire(conn, fire_id, in_memory_enforce=demo))
        if exp is not None:
            self.post_message(self.Loaded(fire_id, exp))

    def on_explain_pane_loaded(self, message: Loaded) -> None:
        self.explanation = message.explanation
        self.step = 0
        self._show_step()
        if not isinstance(self.app.focused, Field):
            focus_now(self.query_one(StepScroll))

    def _typed_id(self, value: str) -> None:
        text = value.strip()
        if not text.isdigit():
            self.app.notify("a fire id is a number", severity="error")
            return
        focus_now(self.query_one(StepScroll))
        self._load(int(text))

    def action_fire_id(self) -> None:
        focus_now(self.query_one("#explain-fire", Field))

    def action_step(self, delta: int) -> None:
        if self.explanation is None:
            return
        self.step = max(0, min(self.step + delta, len(self.explanation.steps) - 1))
        self._show_step()

    def action_first(self) -> None:
        self.step = 0
        self._show_step()

    def action_last(self) -> None:
        if self.explanation is not None:
            self.step = len(self.explanation.steps) - 1
            self._show_step()

    def _show_step(self) -> None:
        exp = self.explanation
        if exp is None:
            return
        total = len(exp.steps)
        self.query_one("#explain-title", Static).update(
            (f"fire {exp.fire_id}" if exp.fire_id else "backtest fire (not stored)")
            + f" · rule {escape(exp.rule)} · step {self.step + 1} of {total}"
            + ("" if exp.consistent else " · [red]RECOMPUTE MISMATCH[/]")
            + "  (←/→ step, home/end)"
        )
        parts = []
        for i, step in enumerate(exp.steps[: self.step]):
            body = "\n".join(f"   {escape(line)}" for line in step.lines)
            parts.append(f"[dim]{i + 1}. {escape(step.title)}\n{body}[/dim]")
        earlier = self.query_one("#explain-body", Static)
        earlier.update("\n".join(parts))
        earlier.display = bool(parts)
        step = exp.steps[self.step]
        current = self.query_one("#explain-current", Static)
        current.update(
            f"[reverse b] {self.step + 1}. {escape(step.title)} [/]\n"
            + "\n".join(f"   {escape(line)}" for line in step.lines)
        )
        # the newest step is the last one drawn: bring its head into view
        self.call_after_refresh(self._scroll_to_current)

    def _scroll_to_current(self) -> None:
        steps = self.query_one(StepScroll)
        steps.scroll_to_widget(self.query_one("#explain-current"), animate=False, top=True)
