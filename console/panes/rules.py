"""Rules pane: each rule's source, levels, state and counts; source with lint; backtest it."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import DataTable, Static

from console.context import ConsoleContext
from console.keys import focus_now
from console.markup import escape
from console.messages import OpenBacktest
from console.panes.base import StorePane, plural
from console.widgets.table import TEXT, Column, FitTable
from engine.timefmt import short_ms
from engine.views.rules import (
    FireCounter,
    LoadResult,
    RuleRow,
    keep_last_good,
    lint_lines,
    load_console_rules,
    rule_rows,
)

STATE_STYLE = {"active": "green", "shadow": "magenta", "disabled": "red", "enforced": "bold yellow"}
#: Lines of the rule-error box (one per broken file; the rest are counted).
ERROR_LINES = 4


def error_lines(result: LoadResult) -> str:
    """The rule-error box: how many files are broken, one line per file, how many more."""
    by_file: dict[str, list[str]] = {}
    for d in result.errors:
        file = d.location.file or "?"
        first = str(d).splitlines()[0]
        # the file's name leads its line (its directory is one of the rule directories)
        by_file.setdefault(file, []).append(Path(file).name + first.removeprefix(file))
    head = (
        f"{plural(len(by_file), 'rule file')} with errors (last good kept;"
        " `harness rules lint` lists all):"
    )
    lines = []
    for errors in list(by_file.values())[:ERROR_LINES]:
        extra = f" (+{len(errors) - 1} more)" if errors[1:] else ""
        lines.append(errors[0] + extra)
    more = len(by_file) - len(lines)
    if more > 0:
        lines.append(f"… and {plural(more, 'more file')}")
    return "\n".join([head, *lines])


class RulesPane(StorePane[tuple[LoadResult, list[RuleRow]]]):
    """Each loaded rule: the level it acts at, its state (active, shadow, disabled), counts.

    The level column shows what the rule acts at today, with the level it
    was written at when the operator's config caps it (``notify (≤hold)``).
    Rule files are read again when they change; a broken file keeps the last
    good version and is listed in the error box.

    Keys: ``enter`` view the source with its lint result (``esc`` closes it),
    ``b`` backtest the rule, ``e`` the promotion view (what it would have held
    if enforced, and the ``enforce`` line to paste; nothing is written), ``r``
    refresh.

    Messages: posts :class:`~console.messages.OpenBacktest`; reads arrive as
    :class:`StorePane.Read`; the app calls :meth:`show_backlog` with the acting
    evaluator's progress.
    """

    REFRESH_S = 5.0
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "view_source", "Source + lint"),
        Binding("b", "backtest", "Backtest"),
        Binding("e", "promote", "Promote", tooltip="what it would have held if enforced"),
        Binding("r", "refresh", "Refresh", tooltip="read the rule files and the store now"),
        Binding("escape", "close_source", "Close source", show=False),
    ]
    DEFAULT_CSS = """
    RulesPane #rules-body { height: 1fr; }
    RulesPane #rules-table { width: 1fr; }
    RulesPane #rules-source { width: 60%; max-width: 90; border: round $primary; padding: 0 1; }
    RulesPane #rules-errors { max-height: 8; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self, context: ConsoleContext) -> None:
        super().__init__(context)
        self.result: LoadResult | None = None
        self.rows: list[RuleRow] = []
        self.counter = FireCounter()
        #: The acting evaluator's (cursor, head) while it is behind the journal, else None.
        self.backlog: tuple[int, int] | None = None
        self._summary = ""
        #: Set by the app when rule files changed: the next read says what it loaded.
        self.reloading = False

    def compose(self) -> ComposeResult:
        yield Static("", id="rules-status", classes="status-line")
        yield Static("", id="rules-errors", classes="error-box hidden")
        with Horizontal(id="rules-body"):
            yield FitTable(
                [
                    Column("rule", "rule", TEXT, least=10),
                    Column("level", "level"),
                    Column("state", "state", TEXT, least=24),
                    Column("fires", "fires", right=True),
                    Column("suppr.", "suppressed", right=True),
                    Column("source", "source", TEXT, least=4),
                ],
                id="rules-table",
                cursor_type="row",
            )
            with VerticalScroll(id="rules-source", classes="hidden"):
                yield Static("enter: view a rule's source and lint result", id="rules-source-text")

    def force_read(self) -> bool:
        return self.result is None

    def read(self, conn: sqlite3.Connection) -> tuple[LoadResult, list[RuleRow]]:
        config = self.context.current_config
        # rule files are re-read on a forced refresh (the app forces one when they change)
        result = keep_last_good(self.result, load_console_rules(config, self.context.policy_dir))
        compiled = [c.rule for c in result.rules]
        return result, rule_rows(conn, compiled, config, self.counter)

    def show(self, result: tuple[LoadResult, list[RuleRow]]) -> None:
        loaded, rows = result
        self.result = loaded
        errors = self.query_one("#rules-errors", Static)
        if loaded.errors:
            errors.update(escape(error_lines(loaded)))
            errors.remove_class("hidden")
        else:
            errors.add_class("hidden")
        if self.reloading:
            self.reloading = False
            broken = f"; {plural(len(loaded.errors), 'error')}" if loaded.errors else ""
            self.app.notify(f"rules reloaded: {plural(len(loaded.rules), 'rule')}{broken}")
        if rows == self.rows and self.query_one(FitTable).rows_shown:
            return
        self.rows = rows
        self.query_one(FitTable).show([self._cells(r) for r in rows], [r.name for r in rows])
        counts: dict[str, int] = {}
        for r in rows:
            counts[r.state] = counts.get(r.state, 0) + 1
        self._summary = f"{plural(len(rows), 'rule')}: " + ", ".join(
            f"{n} {s}" for s, n in sorted(counts.items())
        )
        self._show_status()

    @staticmethod
    def _cells(r: RuleRow) -> tuple[str | Text, ...]:
        state = r.state
        if r.shadow_until is not None:
            state = f"shadow until {short_ms(r.shadow_until, seconds=False)}"
        elif r.state == "disabled" and r.error:
            state = f"disabled: {r.error}"
        level = r.effective_level
        if r.level != r.effective_level:
            level = f"{r.effective_level} (≤{r.level})"
        return (
            r.name,
            level,
            Text(state, style=STATE_STYLE.get(r.state, "")),
            f"{r.fires:,}",
            f"{r.suppressed:,}",
            r.source_kind,
        )

    def show_backlog(self, cursor: int, head: int) -> None:
        """Say the evaluator is catching up (fire counts are still growing), or stop saying it."""
        was = self.backlog
        self.backlog = (cursor, head) if cursor < head else None
        if was is None and self.backlog is None:
            return  # the usual case while following a live store: nothing to say
        self._show_status()
        if self.backlog is None:
            self.action_refresh()  # just caught up: show the final counts now

    def _show_status(self) -> None:
        text = self._summary
        if self.backlog is not None:
            cursor, head = self.backlog
            text = f"[b yellow]evaluating backlog: seq {cursor:,} of {head:,}[/] · " + text
        self.query_one("#rules-status", Static).update(text)

    def selected(self) -> RuleRow | None:
        table = self.query_one(FitTable)
        if not self.rows or not 0 <= table.cursor_row < len(self.rows):
            return None
        return self.rows[table.cursor_row]

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_view_source()

    def action_view_source(self) -> None:
        row = self.selected()
        if row is None or self.result is None:
            return
        rule = next((c.rule for c in self.result.rules if c.rule.name == row.name), None)
        if rule is None:
            return
        lint = lint_lines(self.result, rule.source_file)
        verdict = (
            "[green]lint: clean[/]"
            if not lint
            else "\n".join(f"[yellow]{escape(str(d))}[/]" for d in lint)
        )
        self.query_one("#rules-source").remove_class("hidden")
        self.query_one("#rules-source-text", Static).update(
            f"[b]{escape(rule.name)}[/b]  [dim](esc closes)[/dim]\n{escape(rule.source_file)}\n"
            f"hash {rule.hash[:16]}… · cost {rule.static_cost:,} · {escape(row.state_detail)}\n"
            f"{verdict}\n\n{escape(rule.text)}"
        )

    async def action_promote(self) -> None:
        """`e`: the promotion view for a rule not enforced today (never writes harness.toml)."""
        from console.panes.promotion import PromotionScreen

        row = self.selected()
        if row is None or self.result is None:
            return
        if row.state == "enforced":
            self.app.notify(f"{row.name} is already enforced: {row.state_detail}", timeout=5)
            return
        compiled = next((c for c in self.result.rules if c.rule.name == row.name), None)
        if compiled is not None:
            await self.app.push_screen(PromotionScreen(self.context, compiled))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Esc closes the source panel when it is open; otherwise it goes back (the app's)."""
        if action == "close_source":
            return not self.query_one("#rules-source").has_class("hidden")
        return True

    def action_close_source(self) -> None:
        self.query_one("#rules-source").add_class("hidden")
        focus_now(self.query_one(FitTable))

    def action_backtest(self) -> None:
        row = self.selected()
        if row is not None:
            self.post_message(OpenBacktest(row.name))
