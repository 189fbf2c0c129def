"""Backtest pane: pick or edit a rule, run it over recorded history in a worker.

The run happens in a thread worker that posts progress messages; ``ctrl+x``
(a priority binding, so the editor's cut never sees it while a run is going)
sets the cancel event the engine checks between batches, and the editor is
read-only until the run ends. A cancelled run shows "cancelled" and no diff.
Enter on a result row explains that would-be fire; gained and lost fires of an
edited rule are marked in the table (lost ones listed after the rest), and the
parity stamp says whether live fires over the same rows equal the backtest's. Lint runs on every
edit with the evaluator's loader, so the errors shown are the ones the
evaluator would report.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import ClassVar, cast

from rich.markup import escape
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import DataTable, Input, ProgressBar, Select, Static, TextArea

from console.context import ConsoleContext
from console.messages import ShowPane
from console.panes.explain import ExplainPane
from console.widgets.progress import StillProgressBar
from console.widgets.spark import bar
from engine.errors import HarnessError
from engine.rules.backtest import Progress
from engine.rules.fires import Fire
from engine.rules.model import CompiledRule
from engine.timefmt import short_ms
from engine.views.backtest import BacktestRun, lint_candidate, run_candidate
from engine.views.fire_explain import FireExplanation, explain_backtest_fire
from engine.views.rules import load_console_rules

MAX_ROWS = 500


#: A progress callback whose result is ignored (``post_message`` returns a bool).
ProgressFn = Callable[[Progress], None]


class BacktestPane(Vertical):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+r", "run", "Run backtest"),
        # priority: checked before the focused editor's ctrl+x (cut) while a run is going
        Binding("ctrl+x", "cancel", "Cancel run", priority=True),
        Binding("ctrl+e", "reset_editor", "Reset copy"),
    ]
    DEFAULT_CSS = """
    BacktestPane #backtest-top { height: 3; }
    BacktestPane #backtest-rule { width: 1fr; }
    BacktestPane #backtest-since { width: 30; }
    BacktestPane #backtest-until { width: 30; }
    BacktestPane #backtest-body { height: 1fr; }
    BacktestPane #backtest-left { width: 1fr; }
    BacktestPane #backtest-editor { height: 1fr; }
    BacktestPane #backtest-lint { height: auto; max-height: 6; padding: 0 1; }
    BacktestPane #backtest-right { width: 1fr; }
    BacktestPane #backtest-summary { height: auto; max-height: 16; padding: 0 1; }
    BacktestPane #backtest-progress { height: 1; padding: 0 1; }
    """

    class Rules(Message):
        def __init__(self, rules: dict[str, CompiledRule]) -> None:
            super().__init__()
            self.rules = rules

    class Advanced(Message):
        def __init__(self, progress: Progress) -> None:
            super().__init__()
            self.progress = progress

    class Finished(Message):
        def __init__(self, run: BacktestRun | None, error: str = "") -> None:
            super().__init__()
            self.run = run
            self.error = error

    class Explained(Message):
        def __init__(self, explanation: FireExplanation | None, error: str = "") -> None:
            super().__init__()
            self.explanation = explanation
            self.error = error

    def __init__(self, context: ConsoleContext) -> None:
        super().__init__(classes="pane")
        self.context = context
        self.rules: dict[str, CompiledRule] = {}
        self.rule_name = ""
        self.candidate: CompiledRule | None = None
        self.cancel = threading.Event()
        self.running = False
        self.last_run: BacktestRun | None = None
        self._pending: str | None = None
        #: The fires behind the table's rows, in row order (Enter explains one).
        self.table_fires: list[Fire] = []

    def compose(self) -> ComposeResult:
        with Horizontal(id="backtest-top"):
            yield Select([], prompt="rule to backtest", id="backtest-rule")
            yield Input(placeholder="since (e.g. 7d; empty = all)", id="backtest-since")
            yield Input(placeholder="until (seq, 24h or ISO time)", id="backtest-until")
        with Horizontal(id="backtest-body"):
            with Vertical(id="backtest-left"):
                yield TextArea("", id="backtest-editor", language="yaml", soft_wrap=False)
                yield Static("", id="backtest-lint")
            with Vertical(id="backtest-right"):
                # A total from the start: a bar without one animates (16 Hz) even
                # while the pane is hidden, the largest share of an idle console's CPU.
                yield StillProgressBar(id="backtest-progress", total=1)
                with VerticalScroll(id="backtest-summary"):
                    yield Static("ctrl+r runs the rule (or your edited copy)", id="backtest-text")
                table: DataTable[str] = DataTable(id="backtest-fires", cursor_type="row")
                table.add_columns("Δ", "seq", "at (UTC)", "target", "level", "status", "aggregates")
                yield table

    def on_mount(self) -> None:
        self._load_rules()

    def reload_rules(self) -> None:
        """Called by the reloader when rule files change."""
        self._load_rules()

    @work(thread=True, exclusive=True, group="backtest-rules")
    def _load_rules(self) -> None:
        try:
            result = load_console_rules(
                self.context.current_config, self.context.options.policy_dir
            )
        except HarnessError as exc:
            self.app.call_from_thread(self.app.notify, str(exc), title=exc.title, severity="error")
            return
        self.post_message(self.Rules({c.rule.name: c for c in result.rules}))

    def on_backtest_pane_rules(self, message: Rules) -> None:
        self.rules = message.rules
        select = self.query_one("#backtest-rule", Select)
        current = select.value
        select.set_options([(n, n) for n in sorted(self.rules)])
        wanted = self._pending or (current if isinstance(current, str) else None)
        if wanted in self.rules:
            select.value = wanted
        self._pending = None

    def select_rule(self, name: str) -> None:
        """Open ``name`` (from the Rules pane); waits for the rule list if needed."""
        if name in self.rules:
            self.query_one("#backtest-rule", Select).value = name
        else:
            self._pending = name

    def on_select_changed(self, event: Select.Changed) -> None:
        if event.select.id != "backtest-rule" or not isinstance(event.value, str):
            return
        self.rule_name = event.value
        self.action_reset_editor()

    def action_reset_editor(self) -> None:
        rule = self.rules.get(self.rule_name)
        if rule is not None:
            self.query_one("#backtest-editor", TextArea).load_text(rule.rule.text)

    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        self._lint(event.text_area.text)

    def _lint(self, text: str) -> None:
        lint = self.query_one("#backtest-lint", Static)
        if not text.strip():
            self.candidate = None
            lint.update("")
            return
        compiled, errors = lint_candidate(text, self.context.current_config)
        self.candidate = compiled
        if errors:
            lint.update("\n".join(f"[red]{escape(str(d))}[/]" for d in errors[:5]))
            return
        current = self.rules.get(self.rule_name)
        same = (
            compiled is not None and current is not None and current.rule.hash == compiled.rule.hash
        )
        note = "same meaning as the current version" if same else "edited: will compare"
        lint.update(f"[green]lint: clean[/] · {note}")

    # -- running -----------------------------------------------------------------

    def action_run(self) -> None:
        if self.running:
            return
        if self.candidate is None:
            self.app.notify(
                "nothing to run: pick a rule or fix the lint errors", severity="warning"
            )
            return
        current = self.rules.get(self.rule_name)
        candidate = self.candidate
        if current is not None and current.rule.hash == candidate.rule.hash:
            candidate = current  # unchanged meaning: replay the loaded version (its source kind)
        self.running = True
        self.query_one("#backtest-editor", TextArea).read_only = True
        self.cancel = threading.Event()
        self.query_one("#backtest-progress", ProgressBar).update(total=None, progress=0)
        self.query_one("#backtest-text", Static).update("running … (ctrl+x cancels)")
        since = self.query_one("#backtest-since", Input).value.strip() or None
        until = self.query_one("#backtest-until", Input).value.strip() or None
        self._run(candidate, current, since, until, self.cancel)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """ctrl+x is "cancel" only while a run is going; otherwise the editor's cut gets it."""
        if action == "cancel":
            return self.running
        return True

    def action_cancel(self) -> None:
        if self.running:
            self.cancel.set()
            self.query_one("#backtest-text", Static).update("cancelling …")

    @work(thread=True, exclusive=True, group="backtest")
    def _run(
        self,
        candidate: CompiledRule,
        current: CompiledRule | None,
        since: str | None,
        until: str | None,
        cancel: threading.Event,
    ) -> None:
        try:
            conn = self.context.connect()
            try:
                run = run_candidate(
                    conn,
                    candidate,
                    current,
                    self.context.current_config,
                    since=since,
                    until=until,
                    progress=cast(ProgressFn, lambda p: self.post_message(self.Advanced(p))),
                    cancel=cancel,
                )
            finally:
                conn.close()
        except HarnessError as exc:
            self.post_message(self.Finished(None, f"{exc.title}: {exc}"))
            return
        self.post_message(self.Finished(run))

    def on_backtest_pane_advanced(self, message: Advanced) -> None:
        p = message.progress
        self.query_one("#backtest-progress", ProgressBar).update(
            total=max(p.rows_total, 1), progress=p.rows_done
        )

    def on_backtest_pane_finished(self, message: Finished) -> None:
        self.running = False
        self.query_one("#backtest-editor", TextArea).read_only = False
        # a finished run's bar is full (a short run may end before any progress
        # message, leaving the bar without a total: it would animate forever)
        self.query_one("#backtest-progress", ProgressBar).update(total=1, progress=1)
        text = self.query_one("#backtest-text", Static)
        table = self.query_one("#backtest-fires", DataTable)
        if message.run is None:
            text.update(f"[red]{escape(message.error)}[/]")
            return
        self.last_run = run = message.run
        res = run.result
        if run.cancelled:
            # A cut-short replay is no result: no counts, no diff, no table.
            text.update(
                f"[yellow]cancelled[/] after {res.rows_scanned:,} of {res.range.rows:,} rows:"
                " no result and no comparison (ctrl+r runs again)"
            )
            table.clear()
            self.table_fires = []
            return
        lines = [
            f"[b]{len(res.fires)} would-be fires[/b] over {res.range.rows:,} rows"
            f" ({res.rows_scanned:,} candidate rows read)"
            " (on recorded history; a rule about something that never happened backtests silent)",
            "by status: " + (", ".join(f"{s} {n}" for s, n in run.by_status.items()) or "none"),
        ]
        if run.baseline is not None:
            lines.append(
                f"vs current version: [green]+{len(run.gained)} gained[/], "
                f"[red]-{len(run.lost)} lost[/] ({len(run.baseline.fires)} before)"
                + (" · lost fires are listed last in the table" if run.lost else "")
            )
        if run.parity is not None:
            style = "green" if run.parity.equal else "yellow"
            if run.parity.compared is None:
                style = "dim"
            plines = run.parity.lines()
            lines.append(f"[{style}]{escape(plines[0])}[/]")
            lines.extend(escape(line) for line in plines[1:6])
        days = run.per_day
        top = max((n for _, n in days), default=0)
        for day, n in days[-10:]:
            lines.append(f"{day} {bar(n, top, 24):24} {n}")
        text.update("\n".join(lines))
        table.clear()
        gained = {(f.seq, f.target) for f in run.gained}
        rows = [(f, "+" if (f.seq, f.target) in gained else "") for f in res.fires[:MAX_ROWS]]
        rows += [(f, "−") for f in run.lost[: max(0, MAX_ROWS - len(rows))]]
        self.table_fires = [f for f, _ in rows]
        for f, mark in rows:
            aggs = ", ".join(f"{c.fn}={c.result}" for c in f.calls)
            cell = {"+": "[green]+ gained[/]", "−": "[red]− lost[/]"}.get(mark, "")
            table.add_row(
                cell, str(f.seq), short_ms(f.at), f.target, f.effective_level, f.status, aggs
            )

    # -- explaining a result row ---------------------------------------------------

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id != "backtest-fires":
            return
        event.stop()
        if 0 <= event.cursor_row < len(self.table_fires):
            self._explain(self.table_fires[event.cursor_row])

    @work(thread=True, exclusive=True, group="backtest-explain")
    def _explain(self, fire: Fire) -> None:
        try:
            conn = self.context.connect()
            try:
                exp = explain_backtest_fire(conn, fire)
            finally:
                conn.close()
        except HarnessError as exc:
            self.post_message(self.Explained(None, f"{exc.title}: {exc}"))
            return
        self.post_message(self.Explained(exp))

    def on_backtest_pane_explained(self, message: Explained) -> None:
        if message.explanation is None:
            self.app.notify(message.error, title="Cannot explain", severity="error")
            return
        self.app.query_one(ExplainPane).post_message(ExplainPane.Loaded(0, message.explanation))
        self.post_message(ShowPane("explain"))
