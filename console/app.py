"""The operator console: a Textual app over the engine's read models.

All logic lives in ``engine/``; the app composes panes, routes messages between
them (a fire selected in Fires opens Explain, a rule in Rules opens Backtest),
and owns the cross-cutting conventions: command palette, F1 help per pane,
light/dark theme, and file reload.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable
from typing import Any, ClassVar

from textual import work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Footer, Header, TabbedContent, TabPane

from console.context import ConsoleContext
from console.errors import ConsoleError
from console.help import HelpScreen
from console.messages import OpenBacktest, OpenExplain, ShowError, ShowPane
from console.panes.backtest import BacktestPane
from console.panes.decide import DecidePane
from console.panes.explain import ExplainPane
from console.panes.fires import FiresPane
from console.panes.fleet import FleetPane
from console.panes.holds import HoldsPane
from console.panes.proposals import ProposalsPane
from console.panes.rules import RulesPane
from console.panes.timeline import TimelinePane
from console.reload import FilesChanged, watch_files
from engine.config import load_config
from engine.errors import HarnessError
from engine.views.live import (
    DEMO_ENFORCE,
    demo_config,
    feed_live,
    mine_demo,
    run_evaluator,
    write_demo_history,
)
from engine.views.session import ConsoleOptions

PANES = (
    ("fleet", "Fleet"),
    ("fires", "Fires"),
    ("rules", "Rules"),
    ("holds", "Holds"),
    ("decide", "Decide"),
    ("explain", "Explain"),
    ("backtest", "Backtest"),
    ("proposals", "Proposals"),
    ("timeline", "Timeline"),
)

#: What takes focus when a pane is shown (never a hidden filter box).
FOCUS = {
    "fleet": "#fleet-table",
    "fires": "#fires-table",
    "rules": "#rules-table",
    "holds": "#holds-table",
    "decide": "#decide-input",
    "explain": "#explain-steps",
    "backtest": "#backtest-rule",
    "proposals": "#proposals-table",
    "timeline": "#timeline-grid",
}


class HarnessConsole(App[int]):
    """Tabbed panes over one store; see ``console/help.py`` for each pane's keys."""

    CSS_PATH = "app.tcss"
    #: Focus goes to the pane's main widget (see FOCUS), not the tab strip.
    AUTO_FOCUS = None
    TITLE = "harness console"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f1", "help", "Help"),
        Binding("ctrl+t", "toggle_theme", "Theme"),
        Binding("ctrl+q", "quit", "Quit", priority=True),
        *[
            Binding(str(i), f"show_pane('{pid}')", title, show=False)
            for i, (pid, title) in enumerate(PANES, start=1)
        ],
    ]

    def __init__(
        self, context: ConsoleContext, *, initial: str = "fleet", watch_files: bool = True
    ) -> None:
        super().__init__()
        self.context = context
        self.initial = initial
        self.watch_files = watch_files
        label = context.label if context.label is not None else str(context.store_path)
        self.sub_title = ("demo · " if context.options.demo else "") + label
        self._stop = threading.Event()
        self._eval_stop = threading.Event()
        self._watch_stop = asyncio.Event()
        self.config_error = ""

    def on_load(self) -> None:
        """Create/migrate the store before any pane's worker opens it."""
        try:
            self.context.connect().close()
        except HarnessError as exc:
            self.startup_error: ConsoleError | None = ConsoleError.from_harness(exc)
        else:
            self.startup_error = None

    def on_mount(self) -> None:
        if not self.context.cursor_blink:
            for widget in self.query("Input, TextArea"):
                widget.cursor_blink = False  # type: ignore[attr-defined]
        self._focus_pane(self.initial)
        self.set_interval(2.0, self._mark_serve_acting)
        if self.startup_error is not None:
            self.show_error(self.startup_error)
            return
        if self.context.evaluate:
            self._restart_evaluator()
            if self.context.options.demo:
                self._demo_feed()
                self.notify(
                    f"demo: `{DEMO_ENFORCE}` is enforced in memory for this session only "
                    "(so a hold can be seen); no file is written",
                    title="Demo fleet",
                    timeout=8,
                )
        if self.watch_files:
            self._watch()

    def on_unmount(self) -> None:
        self._stop.set()
        self._eval_stop.set()
        self._watch_stop.set()

    def _mark_serve_acting(self) -> None:
        """Say in the header when `harness serve` is the acting evaluator on this store."""
        from engine.views.acting import mark_title, serve_acting

        self.sub_title = mark_title(self.sub_title, serve_acting(self.context.store_path))

    def _restart_evaluator(self) -> None:
        """(Re)start the embedded evaluator with the current rules and config."""
        self._eval_stop.set()
        self._eval_stop = threading.Event()
        self._evaluate(self._eval_stop)

    @work(thread=True, group="evaluator")
    def _evaluate(self, stop: threading.Event) -> None:
        """The embedded evaluator: acts when it holds the store lease, else follows."""
        opts = self.context.options
        try:
            run_evaluator(opts.store_path, self.context.current_config, opts.policy_dir, stop)
        except HarnessError as exc:
            self.post_message(ShowError(f"Evaluator stopped: {exc.title}", str(exc)))

    @work(exclusive=True, group="reload")
    async def _watch(self) -> None:
        await watch_files(self.context.options, self, self._watch_stop)

    def on_files_changed(self, message: FilesChanged) -> None:
        """Reload what changed; a broken file keeps the last good version and shows why."""
        if "config" in message.kinds:
            self._reload_config()
        if "rules" in message.kinds or "config" in message.kinds:
            self.query_one(RulesPane).action_refresh()
            self.query_one(BacktestPane).reload_rules()
            if self.context.evaluate:
                self._restart_evaluator()
        if "spec" in message.kinds:
            self.query_one(DecidePane).specs_changed(message.paths)

    def _reload_config(self) -> None:
        opts = self.context.options
        try:
            config = load_config(opts.config_file)
        except HarnessError as exc:
            self.config_error = str(exc)
            self.notify(
                f"{exc}\n(keeping the last good configuration)",
                title=exc.title,
                severity="error",
                timeout=10,
            )
            return
        self.config_error = ""
        if opts.demo:
            config = demo_config(config)
        self.context.config = config
        self.notify(f"reloaded {opts.config_file}", timeout=3)

    @work(thread=True, group="demo")
    def _demo_feed(self) -> None:
        """--demo: two simulated days of history, then one more day replayed live."""
        store = self.context.store_path
        try:
            write_demo_history(store, self.context.clock())
            self._demo_mine()
            feed_live(store, self._stop)
        except HarnessError as exc:
            self.post_message(ShowError(f"Demo feed stopped: {exc.title}", str(exc)))

    @work(thread=True, group="demo-mine")
    def _demo_mine(self) -> None:
        """--demo: one mining of the simulated history, beside the live feed."""
        opts = self.context.options
        try:
            found = mine_demo(self.context.store_path, self.context.current_config, opts.policy_dir)
        except HarnessError as exc:
            self.post_message(ShowError(f"Demo mining stopped: {exc.title}", str(exc)))
            return
        if found:
            self.call_from_thread(self.query_one(ProposalsPane).action_refresh)

    def compose(self) -> ComposeResult:
        ctx = self.context
        yield Header()
        with TabbedContent(initial=self.initial, id="panes"):
            with TabPane("Fleet", id="fleet"):
                yield FleetPane(ctx)
            with TabPane("Fires", id="fires"):
                yield FiresPane(ctx)
            with TabPane("Rules", id="rules"):
                yield RulesPane(ctx)
            with TabPane("Holds", id="holds"):
                yield HoldsPane(ctx)
            with TabPane("Decide", id="decide"):
                yield DecidePane(ctx)
            with TabPane("Explain", id="explain"):
                yield ExplainPane(ctx)
            with TabPane("Backtest", id="backtest"):
                yield BacktestPane(ctx)
            with TabPane("Proposals", id="proposals"):
                yield ProposalsPane(ctx)
            with TabPane("Timeline", id="timeline"):
                yield TimelinePane(ctx)
        yield Footer()

    # -- navigation ----------------------------------------------------------

    @property
    def active_pane(self) -> str:
        return self.query_one("#panes", TabbedContent).active or self.initial

    def action_show_pane(self, pane: str) -> None:
        self.query_one("#panes", TabbedContent).active = pane
        self.call_after_refresh(self._focus_pane, pane)

    def _focus_pane(self, pane: str) -> None:
        target = FOCUS.get(pane)
        if target:
            self.query_one(f"#{pane} {target}").focus()

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.active_pane))

    def action_toggle_theme(self) -> None:
        self.theme = "textual-light" if self.theme != "textual-light" else "textual-dark"

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for pid, title in PANES:
            yield SystemCommand(
                f"Go to {title}", f"Show the {title} pane", lambda p=pid: self.action_show_pane(p)
            )
        yield SystemCommand("Toggle light/dark", "Switch theme", self.action_toggle_theme)
        yield SystemCommand("Help for this pane", "F1", self.action_help)

    # -- routing between panes ----------------------------------------------

    def on_open_explain(self, message: OpenExplain) -> None:
        self.query_one(ExplainPane).load_fire(message.fire_id)
        self.action_show_pane("explain")

    def on_open_backtest(self, message: OpenBacktest) -> None:
        self.query_one(BacktestPane).select_rule(message.rule)
        self.action_show_pane("backtest")

    def on_show_pane(self, message: ShowPane) -> None:
        self.action_show_pane(message.pane)

    def on_show_error(self, message: ShowError) -> None:
        self.notify(message.message, title=message.title, severity="error", timeout=8)

    def show_error(self, exc: ConsoleError) -> None:
        self.notify(exc.message, title=exc.title, severity="error", timeout=8)


def run_console(options: ConsoleOptions) -> int:
    """Entry point used by ``harness console``; returns the process exit code."""
    app = HarnessConsole(ConsoleContext(options))
    result = app.run()
    return int(result or 0)
