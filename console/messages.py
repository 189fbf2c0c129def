"""Typed messages that workers post to the UI thread (the UI never blocks on I/O)."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message


@dataclass
class OpenExplain(Message):
    """Ask the app to show the Explain pane for a fire."""

    fire_id: int


@dataclass
class OpenBacktest(Message):
    """Ask the app to show the Backtest pane with a rule selected."""

    rule: str


@dataclass
class ShowError(Message):
    """A worker failed in a way the operator should see."""

    title: str
    message: str


@dataclass
class EvaluatorFault(Message):
    """The acting evaluator met a store error and retries (``why``), or works again (None)."""

    why: str | None


@dataclass
class Backlog(Message):
    """The embedded evaluator's position: journal rows evaluated up to ``cursor`` of ``head``."""

    cursor: int
    head: int


@dataclass
class ShowPane(Message):
    """Ask the app to switch to a pane (by its id)."""

    pane: str
