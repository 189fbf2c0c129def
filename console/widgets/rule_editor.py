"""The Backtest pane's rule editor, and how a rule version is named beside its results."""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.widgets import TextArea

from engine.views.backtest import CompiledRule

#: Hex digits of a rule version shown beside its results (the rest marked ``…``).
VERSION_DIGITS = 12


def version(rule: CompiledRule) -> str:
    """``@3f9a0c1d22e4…``: the semantic hash of a rule version, visibly shortened."""
    return f"@{rule.rule.hash[:VERSION_DIGITS]}…"


class RuleEditor(TextArea):
    """The YAML editor of a rule copy; names its own keys so the footer and ``?`` show them.

    Keys: ``f7`` select all, ``f6`` select the line, ``ctrl+z``/``ctrl+y``
    undo/redo, and every TextArea key (``ctrl+e`` is the end of the line here:
    the pane's reset is ``f5``).
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f7", "select_all", "Select all"),
        Binding("f6", "select_line", "Select line", show=False),
        Binding("ctrl+z", "undo", "Undo", show=False),
        Binding("ctrl+y", "redo", "Redo", show=False),
    ]
