"""Backtest pane: pick or edit a rule, run it over recorded history in a worker.

Every result names the rule and the version (semantic hash) that produced it
and the range it ran over; an edit to another version clears the result (it
belonged to the text before the edit), and a rerun clears the old rows while
it runs (issue 19 P2.8).

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

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import DataTable, ProgressBar, Select, Static, TextArea

from console.context import ConsoleContext
from console.keys import Field
from console.markup import escape
from console.messages import ShowPane
from console.panes.backtest_result import result_rows, summary_lines
from console.panes.base import StorePane
from console.panes.explain import ExplainPane
from console.widgets.progress import StillProgressBar
from console.widgets.rule_editor import RuleEditor, version
from console.widgets.table import PATH, Column, FitTable
from engine.errors import HarnessError
from engine.views.backtest import (
    BacktestRun,
    CompiledRule,
    Fire,
    Progress,
    lint_candidate,
    run_candidate,
)
from engine.views.fire_explain import FireExplanation, explain_backtest_fire
from engine.views.rules import load_console_rules

#: A progress callback whose result is ignored (``post_message`` returns a bool).
ProgressFn = Callable[[Progress], None]


class BacktestPane(StorePane[None]):
    """Run a rule, or an edited copy of it, over recorded history: would-be fires and their diff.

    Lint runs on every edit with the evaluator's loader (errors inline);
    results show the would-be fires, a per-day chart, totals by status, the
    fires gained and lost against the rule's current version (marked in the
    table, lost ones last) and the parity stamp: live = backtest, or the
    differences. Each result names the rule version and range it belongs to.

    Keys: ``ctrl+r`` run (also ``enter`` in the range fields), ``ctrl+x``
    cancel a run, ``f5`` reset the copy to the rule's source, ``enter`` on a
    result row explains that would-be fire; in the editor ``f7`` selects all.

    Messages: :class:`Rules` (the rule list), :class:`Advanced` (progress),
    :class:`Finished` (a run ended), :class:`Explained` (a result row's
    explanation); posts :class:`~console.messages.ShowPane`.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+r", "run", "Run", tooltip="the rule or your edited copy"),
        # priority: checked before the focused editor's ctrl+x (cut) while a run is going
        Binding("ctrl+x", "cancel", "Cancel", priority=True, tooltip="the run going on"),
        Binding("f5", "reset_editor", "Reset copy", tooltip="the rule's source again"),
    ]
    DEFAULT_CSS = """
    BacktestPane #backtest-top { height: 3; }
    BacktestPane #backtest-rule { width: 1fr; }
    BacktestPane #backtest-since { width: 18; }
    BacktestPane #backtest-until { width: 18; }
    BacktestPane #backtest-body { height: 3fr; min-height: 7; }
    BacktestPane #backtest-left { width: 1fr; }
    BacktestPane #backtest-editor { height: 1fr; }
    BacktestPane #backtest-lint { height: auto; max-height: 4; padding: 0 1; }
    BacktestPane #backtest-right { width: 1fr; }
    BacktestPane #backtest-summary { height: 1fr; padding: 0 1; }
    BacktestPane #backtest-progress { height: 1; padding: 0 1; }
    BacktestPane #backtest-fires { height: 2fr; min-height: 5; }
    """

    class Rules(Message):
        """The rules to pick from, by name (loaded in a worker)."""

        def __init__(self, rules: dict[str, CompiledRule]) -> None:
            super().__init__()
            self.rules = rules

    class Advanced(Message):
        """A run's progress (rows done of rows total)."""

        def __init__(self, progress: Progress) -> None:
            super().__init__()
            self.progress = progress

    class Finished(Message):
        """A run ended: its result, or the error that stopped it."""

        def __init__(self, run: BacktestRun | None, error: str = "") -> None:
            super().__init__()
            self.run = run
            self.error = error

    class Explained(Message):
        """The explanation of a result row's would-be fire, or why there is none."""

        def __init__(self, explanation: FireExplanation | None, error: str = "") -> None:
            super().__init__()
            self.explanation = explanation
            self.error = error

    def __init__(self, context: ConsoleContext) -> None:
        super().__init__(context)
        self.rules: dict[str, CompiledRule] = {}
        self.rule_name = ""
        self.candidate: CompiledRule | None = None
        self.cancel = threading.Event()
        self.running = False
        self.last_run: BacktestRun | None = None
        self._pending: str | None = None
        #: The fires behind the table's rows, in row order (Enter explains one).
        self.table_fires: list[Fire] = []
        #: The rule version the shown result belongs to ("" when none is shown).
        self.shown_version = ""
        #: The last progress of the run going on: (done, total).
        self._progress = (0, 0)
        #: What the run going on (or last run) belongs to, and its version.
        self.running_label = ""
        self.running_version = ""

    def compose(self) -> ComposeResult:
        with Horizontal(id="backtest-top"):
            yield Select([], prompt="rule to backtest", id="backtest-rule")
            yield Field(placeholder="since: 7d", id="backtest-since", on_enter=self._enter_run)
            yield Field(placeholder="until: seq/24h", id="backtest-until", on_enter=self._enter_run)
        with Horizontal(id="backtest-body"):
            with Vertical(id="backtest-left"):
                yield RuleEditor("", id="backtest-editor", language="yaml", soft_wrap=False)
                yield Static("", id="backtest-lint")
            with Vertical(id="backtest-right"):
                # A total from the start: a bar without one animates (16 Hz) even
                # while the pane is hidden, the largest share of an idle console's CPU.
                yield StillProgressBar(id="backtest-progress", total=1)
                with VerticalScroll(id="backtest-summary"):
                    yield Static("ctrl+r runs the rule (or your edited copy)", id="backtest-text")
        # the would-be fires take the whole width: their seqs, times and counts stay whole
        yield FitTable(
            [
                Column("Δ", "delta"),
                Column("seq", "seq", right=True),
                Column("at (UTC)", "at"),
                Column("target", "target", PATH, least=8),
                Column("level", "level"),
                Column("status", "status"),
                Column("aggregates", "aggregates"),
            ],
            id="backtest-fires",
            cursor_type="row",
        )

    def on_mount(self) -> None:
        self._load_rules()

    def _enter_run(self, _value: str) -> None:
        self.action_run()

    def reload_rules(self) -> None:
        """Called by the reloader when rule files change."""
        self._load_rules()

    @work(thread=True, exclusive=True, group="backtest-rules")
    def _load_rules(self) -> None:
        try:
            result = load_console_rules(self.context.current_config, self.context.policy_dir)
        except HarnessError as exc:
            self.report(exc)
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
        candidate = self.candidate
        if self.shown_version and (candidate is None or version(candidate) != self.shown_version):
            # the result shown belonged to the text before this edit
            self._clear_result(
                f"[dim]the result of {escape(self.rule_name)} {self.shown_version} was cleared:"
                " the editor holds another version now (ctrl+r runs it)[/]"
            )

    def _clear_result(self, note: str) -> None:
        self.shown_version = ""
        self.table_fires = []
        self.query_one(FitTable).show([])
        self.query_one("#backtest-text", Static).update(note)

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
        self._progress = (0, 0)
        self.query_one("#backtest-progress", ProgressBar).update(total=None, progress=0)
        since = self.query_one("#backtest-since", Field).value.strip() or None
        until = self.query_one("#backtest-until", Field).value.strip() or None
        self.running_label = self._label(candidate, current, since, until)
        self.running_version = version(candidate)
        # the old rows must not stand under "running" as if they were this run's
        self._clear_result(f"running {escape(self.running_label)} … (ctrl+x cancels)")
        self._run(candidate, current, since, until, self.cancel)

    def _label(
        self,
        candidate: CompiledRule,
        current: CompiledRule | None,
        since: str | None,
        until: str | None,
    ) -> str:
        """What a result belongs to: rule, version, whether it is the edited copy, range."""
        edited = current is None or candidate is not current
        which = "edited copy" if edited else "current version"
        span = f"since {since or 'the first row'}, until {until or 'the last row'}"
        return f"{candidate.rule.name} {version(candidate)} ({which}; {span})"

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
            with self.context.session() as conn:
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
        except HarnessError as exc:
            self.post_message(self.Finished(None, f"{exc.title}: {exc}"))
            return
        self.post_message(self.Finished(run))

    def on_backtest_pane_advanced(self, message: Advanced) -> None:
        p = message.progress
        self._progress = (p.rows_done, max(p.rows_total, 1))
        self.query_one("#backtest-progress", ProgressBar).update(
            total=max(p.rows_total, 1), progress=p.rows_done
        )

    def on_backtest_pane_finished(self, message: Finished) -> None:
        self.running = False
        self.query_one("#backtest-editor", TextArea).read_only = False
        bar_ = self.query_one("#backtest-progress", ProgressBar)
        run = message.run
        if run is not None and run.cancelled:
            # a cancelled run's bar stays where it stopped (a total, so it does not animate)
            done, total = self._progress
            bar_.update(total=max(total, 1), progress=done)
        else:
            # a finished run's bar is full (a short run may end before any progress
            # message, leaving the bar without a total: it would animate forever)
            bar_.update(total=1, progress=1)
        text = self.query_one("#backtest-text", Static)
        table = self.query_one(FitTable)
        if run is None:
            text.update(f"[red]{escape(message.error)}[/]")
            return
        self.last_run = run
        res = run.result
        if run.cancelled:
            # A cut-short replay is no result: no counts, no diff, no table.
            text.update(
                f"[yellow]cancelled[/] {escape(self.running_label)} after "
                f"{res.rows_scanned:,} of {res.range.rows:,} rows: no result and no comparison"
                " (ctrl+r runs again)"
            )
            table.show([])
            self.table_fires = []
            return
        self.shown_version = self.running_version
        text.update("\n".join(summary_lines(run, self.running_label)))
        rows = result_rows(run)
        self.table_fires = [f for f, _cells in rows]
        table.show([cells for _f, cells in rows], cursor=0)

    # -- explaining a result row ---------------------------------------------------

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id != "backtest-fires":
            return
        event.stop()
        if 0 <= event.cursor_row < len(self.table_fires):
            self._explain(self.table_fires[event.cursor_row])

    @work(thread=True, exclusive=True, group="backtest-explain")
    def _explain(self, fire: Fire) -> None:
        exp = self.with_store(lambda conn: explain_backtest_fire(conn, fire))
        if exp is not None:
            self.post_message(self.Explained(exp))

    def on_backtest_pane_explained(self, message: Explained) -> None:
        if message.explanation is None:
            self.app.notify(message.error, title="Cannot explain", severity="error")
            return
        self.app.query_one(ExplainPane).post_message(ExplainPane.Loaded(0, message.explanation))
        self.post_message(ShowPane("explain"))
