"""Promotion view (Rules → `e`): what enforcing a rule would have done, and the line to paste.

A modal screen over ``engine.views.promotion``: the quick facts at once, then
a backtest of the rule as if this version were enforced (a thread worker with
progress; Esc cancels and closes), then the ``enforce`` line with its pin.
It never writes ``harness.toml``; `c` copies the line for the operator to paste.
"""

from __future__ import annotations

import threading
from typing import ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import ProgressBar, Static

from console.context import ConsoleContext
from console.markup import escape
from engine.errors import HarnessError
from engine.timefmt import minute_ms
from engine.views.backtest import CompiledRule, Progress
from engine.views.promotion import (
    PromotionHeader,
    PromotionReport,
    promotion_header,
    simulate_enforced,
)

MAX_SPANS = 12


def _min(ms: int) -> str:
    return minute_ms(ms)


def _hours(ms: int | None) -> str:
    return "still held at the end" if ms is None else f"{ms / 3_600_000:.1f} h"


def report_lines(head: PromotionHeader, rep: PromotionReport) -> list[str]:
    """The backtest as if enforced, in plain words (markup-escaped)."""
    res = rep.result
    r = res.range
    lines = [
        f"[b]As if `{escape(head.pin)}` had been enforced[/b] over recorded history:"
        f" seq {r.first_seq}..{r.last_seq} ({r.rows:,} rows"
        + (f", {_min(r.first_at)} → {_min(r.last_at)}" if r.rows else "")
        + ")",
        f"{len(res.fires)} fires · acting: "
        + (", ".join(f"{k} {v}" for k, v in sorted(rep.acting.items())) or "none")
        + f" · suppressed by cooldown: {rep.suppressed}",
        f"would have held: [b]{len(rep.holds)}[/b] time(s) · stopped: [b]{rep.stops}[/b]"
        f" · harnesses affected: {escape(', '.join(rep.harnesses)) or 'none'}",
    ]
    for hold in rep.holds[:MAX_SPANS]:
        released = (
            " · [yellow]an operator released a hold on it then[/]" if hold.operator_released else ""
        )
        end = _min(hold.end_at) if hold.end_at is not None else "…"
        lines.append(
            f"  hold {escape(hold.harness)}: {_min(hold.start_at)} → {end}"
            f" ({_hours(hold.duration_ms)}){released}"
        )
    if len(rep.holds) > MAX_SPANS:
        lines.append(f"  … and {len(rep.holds) - MAX_SPANS} more hold spans")
    flagged = sum(1 for h in rep.holds if h.operator_released)
    lines.append(
        f"operator releases: {flagged} would-be hold(s) overlap a hold an operator released;"
        f" {rep.operator_released_live} live hold(s) of this rule were released by an operator"
    )
    if not head.can_act:
        lines.append(
            f"[yellow]level {escape(head.level)}: enforcing changes nothing[/] (enforce only lets"
            " a hold or stop rule act)"
        )
    lines.append("[dim]on recorded history: after a would-be hold the history went on as it"
                 " happened; shadow skipped for this simulation[/]")  # fmt: skip
    return lines


class PromotionScreen(ModalScreen[None]):
    """The promotion view for one rule: facts, the backtest as if enforced, the line to paste.

    Keys: ``c`` copies the ``enforce`` line, ``esc``/``q`` cancels the backtest and closes.

    Messages: :class:`Header` (the facts), :class:`Advanced` (progress),
    :class:`Done` (the backtest's report, or why there is none).
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "close", "Close"),
        Binding("c", "copy", "Copy enforce line"),
    ]
    DEFAULT_CSS = """
    PromotionScreen { align: center middle; }
    PromotionScreen > Vertical {
        width: 90%; max-width: 120; height: 90%;
        border: thick $primary; background: $surface; padding: 0 1;
    }
    PromotionScreen #promotion-body { height: 1fr; }
    PromotionScreen #promotion-progress { height: 1; }
    PromotionScreen #promotion-line { height: auto; border: round $success; padding: 0 1; }
    """

    class Header(Message):
        """The quick facts and the line to paste, read before the backtest runs."""

        def __init__(self, header: PromotionHeader) -> None:
            super().__init__()
            self.header = header

    class Advanced(Message):
        """The backtest's progress."""

        def __init__(self, progress: Progress) -> None:
            super().__init__()
            self.progress = progress

    class Done(Message):
        """The backtest as if enforced finished: its report, or the error that stopped it."""

        def __init__(self, report: PromotionReport | None, error: str = "") -> None:
            super().__init__()
            self.report = report
            self.error = error

    def __init__(self, context: ConsoleContext, rule: CompiledRule) -> None:
        super().__init__()
        self.context = context
        self.rule = rule
        self.cancel = threading.Event()
        self.header: PromotionHeader | None = None
        self.report: PromotionReport | None = None

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(
                f"[b]Promote {escape(self.rule.rule.name)}[/b] · esc closes · c copies the line",
                id="promotion-title",
            )
            with VerticalScroll(id="promotion-body"):
                yield Static("reading …", id="promotion-facts")
                yield ProgressBar(id="promotion-progress", show_eta=False)
                yield Static("", id="promotion-report")
            yield Static("", id="promotion-line")

    def on_mount(self) -> None:
        self._run(self.cancel)

    def _advance(self, progress: Progress) -> None:
        self.post_message(self.Advanced(progress))

    @work(thread=True, exclusive=True, group="promotion")
    def _run(self, cancel: threading.Event) -> None:
        config = self.context.current_config
        granted = self.context.granted_config
        try:
            with self.context.session() as conn:
                header = promotion_header(conn, self.rule, config, granted=granted)
                self.post_message(self.Header(header))
                report = simulate_enforced(
                    conn,
                    self.rule,
                    config,
                    progress=self._advance,
                    cancel=cancel,
                )
        except HarnessError as exc:
            self.post_message(self.Done(None, f"{exc.title}: {exc}"))
            return
        self.post_message(self.Done(report))

    def _facts(self, head: PromotionHeader, running: bool) -> str:
        state = (
            "[b yellow]enforced[/]: " + escape(head.why)
            if head.enforced
            else "not enforced: " + escape(head.why)
        )
        return (
            f"{escape(head.name)} · level {escape(head.level)} · {escape(head.source_kind)}"
            f" · hash {head.hash[:16]}\n{state}\n{escape(head.age_line())}"
            + ("\nrunning the backtest as if enforced …" if running else "")
        )

    def on_promotion_screen_header(self, message: Header) -> None:
        head = self.header = message.header
        self.query_one("#promotion-facts", Static).update(self._facts(head, running=True))
        self.query_one("#promotion-line", Static).update(
            "paste under [b]\\[memory.rules][/b] in your global harness.toml"
            " (this console never writes it):\n"
            f"[b]{escape(head.enforce_line)}[/b]"
        )

    def on_promotion_screen_advanced(self, message: Advanced) -> None:
        p = message.progress
        self.query_one("#promotion-progress", ProgressBar).update(
            total=max(p.rows_total, 1), progress=p.rows_done
        )

    def on_promotion_screen_done(self, message: Done) -> None:
        self.query_one("#promotion-progress").display = False
        body = self.query_one("#promotion-report", Static)
        facts = self.query_one("#promotion-facts", Static)
        if self.header is not None:
            facts.update(self._facts(self.header, running=False))
        if message.report is None:
            body.update(f"[red]{escape(message.error)}[/]")
            return
        self.report = message.report
        if message.report.cancelled:
            body.update("[yellow]cancelled[/]: no result")
            return
        if self.header is not None:
            body.update("\n".join(report_lines(self.header, message.report)))

    def action_copy(self) -> None:
        if self.header is not None:
            self.app.copy_to_clipboard(self.header.enforce_line)
            self.app.notify("enforce line copied (paste it into harness.toml)", timeout=3)

    def action_close(self) -> None:
        self.cancel.set()
        self.dismiss(None)
