"""Modal confirmations that ask for one line of text (a reason, a name)."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.await_complete import AwaitComplete
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from console.keys import Field
from console.markup import escape


class AskText(ModalScreen[str | None]):
    """Ask a question with a text answer; dismisses with the text, or None on cancel.

    ``required`` keeps the OK button from accepting an empty answer, which is
    how a hold release insists on a reason. Focus is in the answer as soon as
    the question is mounted and Enter answers at once, so a reason typed in
    one burst after the key that asked lands whole (issue 19 P1.3).

    Keys: ``enter`` answers, ``esc`` cancels.
    """

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]
    DEFAULT_CSS = """
    AskText { align: center middle; }
    AskText > Vertical {
        width: 70; height: auto; border: thick $warning; background: $surface; padding: 1 2;
    }
    AskText .ask-detail { color: $text-muted; margin-bottom: 1; }
    AskText .ask-error { color: $error; height: auto; }
    AskText Horizontal { height: auto; margin-top: 1; align-horizontal: right; }
    AskText Button { margin-left: 1; }
    """

    def __init__(
        self,
        question: str,
        *,
        detail: str = "",
        value: str = "",
        placeholder: str = "",
        ok_label: str = "OK",
        required: bool = True,
    ) -> None:
        super().__init__()
        self.question = question
        self.detail = detail
        self.value = value
        self.placeholder = placeholder
        self.ok_label = ok_label
        self.required = required

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(f"[b]{self.question}[/b]")
            if self.detail:
                yield Static(self.detail, classes="ask-detail", markup=False)
            yield Field(
                value=self.value,
                placeholder=self.placeholder,
                id="ask-input",
                on_enter=self._accept,
            )
            yield Static("", classes="ask-error", id="ask-error")
            with Horizontal():
                yield Button("Cancel", id="ask-cancel")
                yield Button(self.ok_label, variant="warning", id="ask-ok")

    def on_mount(self) -> None:
        self.set_focus(self.query_one("#ask-input", Field))

    def _accept(self, _value: str = "") -> AwaitComplete | None:
        text = self.query_one("#ask-input", Field).value.strip()
        if self.required and not text:
            self.query_one("#ask-error", Static).update("an answer is required")
            return None
        return self.dismiss(text)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "ask-ok":
            self._accept()
        else:
            self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ConfirmDiff(ModalScreen[bool]):
    """Show the full path and a diff of what will be written; dismisses True to write.

    Keys: ``y`` writes, ``n`` or ``esc`` cancels.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,n", "cancel", "Cancel"),
        Binding("y", "accept", "Write"),
    ]
    DEFAULT_CSS = """
    ConfirmDiff { align: center middle; }
    ConfirmDiff > Vertical {
        width: 90%; max-width: 110; height: auto; max-height: 90%;
        border: thick $warning; background: $surface; padding: 1 2;
    }
    ConfirmDiff #diff-body { height: auto; max-height: 24; border: round $primary; }
    ConfirmDiff Horizontal { height: auto; margin-top: 1; align-horizontal: right; }
    ConfirmDiff Button { margin-left: 1; }
    """

    def __init__(self, question: str, path: str, diff: str, *, ok_label: str = "Write") -> None:
        super().__init__()
        self.question = question
        self.path = path
        self.diff = diff
        self.ok_label = ok_label

    def compose(self) -> ComposeResult:
        lines = []
        for line in self.diff.splitlines():
            style = "green" if line.startswith("+") else "red" if line.startswith("-") else "dim"
            if line.startswith(("+++", "---", "@@")):
                style = "bold"
            lines.append(f"[{style}]{escape(line)}[/]")
        with Vertical():
            yield Static(f"[b]{escape(self.question)}[/b]")
            yield Static(self.path, id="diff-path", markup=False)
            with VerticalScroll(id="diff-body"):
                yield Static("\n".join(lines), id="diff-text")
            with Horizontal():
                yield Button("Cancel (n)", id="diff-cancel")
                yield Button(f"{self.ok_label} (y)", variant="warning", id="diff-ok")

    def on_mount(self) -> None:
        self.set_focus(self.query_one("#diff-ok", Button))

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "diff-ok")

    def action_accept(self) -> None:
        self.dismiss(True)

    def action_cancel(self) -> None:
        self.dismiss(False)
