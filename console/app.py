"""The operator console: a Textual app over the engine's read models.

All logic lives in ``engine/``; the app composes panes, routes messages between
them (a fire selected in Fires opens Explain, a rule in Rules opens Backtest),
and owns the cross-cutting conventions: command palette, F1 help per pane,
light/dark theme, and file reload.
"""

from __future__ import annotations

import asyncio
import shutil
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

from textual import work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Input, TabbedContent, TabPane, TextArea

from console.context import ConsoleContext
from console.errors import ConsoleError
from console.help import HelpScreen, KeysScreen
from console.messages import ActingChanged, Backlog, OpenBacktest, OpenExplain, ShowError, ShowPane
from console.panes.backtest import BacktestPane
from console.panes.base import StorePane
from console.panes.decide import DecidePane
from console.panes.explain import ExplainPane
from console.panes.fires import FiresPane
from console.panes.fleet import FleetPane
from console.panes.holds import HoldsPane
from console.panes.proposals import ProposalsPane
from console.panes.rules import RulesPane
from console.panes.timeline import TimelinePane
from console.reload import FilesChanged, watch_files
from console.widgets.footer import QuietFooter
from console.widgets.header import ConsoleHeader
from engine.config import load_config
from engine.errors import HarnessError
from engine.views.acting import acting_on
from engine.views.changes import file_stamp
from engine.views.live import (
    DEMO_ENFORCE,
    demo_config,
    feed_live,
    mine_demo_apart,
    prepare_demo_store_apart,
    run_evaluator,
)
from engine.views.session import ConsoleOptions

#: How many panes Esc can step back through.
MAX_HISTORY = 20


@dataclass(frozen=True, slots=True)
class PaneSpec:
    """One pane: its id (also its tab id), tab title, widget class and what takes focus.

    ``focus`` is the pane's main widget, never a hidden filter box; ``home`` is
    where Esc leaves focus when the operator was typing in one of its inputs
    (so the number keys switch panes again).
    """

    id: str
    title: str
    cls: type[StorePane | BacktestPane | TimelinePane]
    focus: str
    home: str = ""


#: The one pane table: tabs, number keys, palette commands, help and focus derive from it.
PANES: tuple[PaneSpec, ...] = (
    PaneSpec("fleet", "Fleet", FleetPane, "#fleet-table"),
    PaneSpec("fires", "Fires", FiresPane, "#fires-table"),
    PaneSpec("rules", "Rules", RulesPane, "#rules-table"),
    PaneSpec("holds", "Holds", HoldsPane, "#holds-table"),
    PaneSpec("decide", "Decide", DecidePane, "#decide-input", home="#decide-decision"),
    PaneSpec("explain", "Explain", ExplainPane, "#explain-steps"),
    PaneSpec("backtest", "Backtest", BacktestPane, "#backtest-rule"),
    PaneSpec("proposals", "Proposals", ProposalsPane, "#proposals-table"),
    PaneSpec("timeline", "Timeline", TimelinePane, "#timeline-grid"),
)
PANE_BY_ID = {spec.id: spec for spec in PANES}
#: The footer shows the number keys as one group.
PANE_KEYS = Binding.Group("Panes", compact=True)


class HarnessConsole(App[int]):
    """Tabbed panes over one store; see ``console/help.py`` for each pane's keys."""

    CSS_PATH = "app.tcss"
    #: Focus goes to the pane's main widget (see PANES), not the tab strip.
    AUTO_FOCUS = None
    TITLE = "harness console"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f1", "help", "Help"),
        Binding("ctrl+t", "toggle_theme", "Theme"),
        Binding("ctrl+q", "quit", "Quit", priority=True),
        Binding("question_mark", "keys", "Keys"),
        Binding("escape", "go_back", "Back", show=False),
        *[
            Binding(str(i), f"show_pane('{spec.id}')", spec.title, group=PANE_KEYS)
            for i, spec in enumerate(PANES, start=1)
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
        #: Set when rule files or harness.toml changed: the acting evaluator reloads.
        self._eval_reload = threading.Event()
        self._watch_stop = asyncio.Event()
        self.config_error = ""
        #: Panes shown before the current one, for Esc (newest last).
        self._history: list[str] = []
        #: The store's files when the header's "who acts" was last read, and what it said.
        self._acting_stamp: tuple[int, ...] = ()
        self.acting = ""

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
        self.query_one(ConsoleHeader).where = self.sub_title
        self._read_acting()
        self.set_interval(2.0, self._poll_acting)
        self._hang_up_exits()
        if self.startup_error is not None:
            self.show_error(self.startup_error)
            return
        if self.context.evaluate:
            if self.context.options.demo:
                # the demo feed starts the evaluator once its history is written: the
                # history writer holds the write lock batch after batch, and an
                # evaluator waiting on it reached the live rows seconds late
                self._demo_feed()
            elif self.context.options.act:
                self._evaluate()
            if self.context.options.demo:
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
        self._watch_stop.set()

    def _hang_up_exits(self) -> None:
        """A closed terminal (SIGHUP) or SIGTERM ends the console as `ctrl+q` does.

        So ``--demo``'s temporary store is removed (see :func:`run_console`)
        when the terminal is killed, not only on a clean quit.
        """
        import signal

        loop = asyncio.get_running_loop()
        for sig in (signal.SIGHUP, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, self.exit)
            except (NotImplementedError, RuntimeError, ValueError):
                return  # not the main thread (tests) or no signals here

    # -- who acts --------------------------------------------------------------

    def _poll_acting(self) -> None:
        """Re-read who acts when the store's files moved, or while someone acts.

        A stat first: taking or renewing the lease is a write, so while the
        store's files stand still only an actor's lease lapsing (its process
        killed) can change the answer.
        """
        stamp = file_stamp(self.context.store_path)
        if stamp == self._acting_stamp and self.acting.startswith("nobody"):
            return
        self._acting_stamp = stamp
        self._read_acting()

    @work(thread=True, exclusive=True, group="acting")
    def _read_acting(self) -> None:
        acting = acting_on(self.context.store_path)
        line = acting.line() if acting is not None else "who acts: store not readable"
        self.post_message(ActingChanged(line))

    def on_acting_changed(self, message: ActingChanged) -> None:
        self.acting = message.line
        self.query_one(ConsoleHeader).acting = message.line

    # -- the acting evaluator (--act) ------------------------------------------

    def _backlog(self, cursor: int, head: int) -> None:
        self.post_message(Backlog(cursor, head))

    @work(thread=True, exclusive=True, group="evaluator")
    def _evaluate(self) -> None:
        """Act when this console holds the store lease (only with --act), else follow."""
        opts = self.context.options
        try:
            run_evaluator(
                opts.store_path,
                lambda: self.context.current_config,
                opts.policy_dir,
                self._stop,
                reload=self._eval_reload,
                on_progress=self._backlog,
            )
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
            self._eval_reload.set()  # the acting evaluator (--act) reloads and records the digest
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
        self.context.file_config = config
        if opts.demo:
            config = demo_config(config)
        self.context.config = config
        self.notify(f"reloaded {opts.config_file}", timeout=3)

    @work(thread=True, group="demo")
    def _demo_feed(self) -> None:
        """--demo: a simulated day of history (evaluated, then mined), then a live replay."""
        store, policy_dir = self.context.store_path, self.context.options.policy_dir
        try:
            prepare_demo_store_apart(store, self.context.clock(), policy_dir)
            self.call_from_thread(self._evaluate)
            self._demo_mine()
            feed_live(store, self._stop)
        except HarnessError as exc:
            self.post_message(ShowError(f"Demo feed stopped: {exc.title}", str(exc)))

    @work(thread=True, group="demo-mine")
    def _demo_mine(self) -> None:
        """--demo: one mining of the simulated history (in a child process), beside the feed."""
        try:
            found = mine_demo_apart(self.context.store_path, self.context.options.policy_dir)
        except HarnessError as exc:
            self.post_message(ShowError(f"Demo mining stopped: {exc.title}", str(exc)))
            return
        if found:
            self.call_from_thread(self.query_one(ProposalsPane).action_refresh)

    def compose(self) -> ComposeResult:
        ctx = self.context
        yield ConsoleHeader()
        with TabbedContent(initial=self.initial, id="panes"):
            for spec in PANES:
                with TabPane(spec.title, id=spec.id):
                    yield spec.cls(ctx)
        yield QuietFooter()

    # -- navigation ----------------------------------------------------------

    @property
    def active_pane(self) -> str:
        return self.query_one("#panes", TabbedContent).active or self.initial

    def action_show_pane(self, pane: str) -> None:
        current = self.active_pane
        if pane != current:
            self._history = [*self._history[-(MAX_HISTORY - 1) :], current]
        if pane == "timeline":
            self.query_one(TimelinePane).prepare()  # its first load overlaps the tab switch
        self.query_one("#panes", TabbedContent).active = pane
        self.call_after_refresh(self._focus_pane, pane)

    def _focus_pane(self, pane: str) -> None:
        spec = PANE_BY_ID.get(pane)
        if spec is not None:
            self.query_one(f"#{pane} {spec.focus}").focus()

    def action_go_back(self) -> None:
        """Esc: leave a text box for its pane, else return to the pane shown before."""
        focused = self.focused
        spec = PANE_BY_ID.get(self.active_pane)
        if isinstance(focused, Input | TextArea) and spec is not None:
            target = spec.home or spec.focus
            home = self.query_one(f"#{spec.id} {target}")
            if home is not focused:
                home.focus()
                return
        if self._history:
            pane = self._history.pop()
            self.query_one("#panes", TabbedContent).active = pane
            self.call_after_refresh(self._focus_pane, pane)

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.active_pane))

    def action_keys(self) -> None:
        """``?``: every key of every pane, read from the bindings themselves."""
        sections = [("Everywhere", self._key_rows(self.BINDINGS))]
        sections += [(spec.title, self._key_rows(spec.cls.BINDINGS)) for spec in PANES]
        self.push_screen(KeysScreen(sections))

    def _key_rows(self, bindings: Iterable[BindingType]) -> list[tuple[str, str]]:
        rows: list[tuple[str, str]] = []
        numbers: list[str] = []
        for item in bindings:
            if not isinstance(item, Binding):
                continue
            if item.group is PANE_KEYS:
                numbers.append(item.key)
                continue
            keys = " / ".join(
                self.get_key_display(Binding(k.strip(), item.action)) for k in item.key.split(",")
            )
            rows.append((keys, item.description or item.action))
        if numbers:
            titles = ", ".join(f"{n} {spec.title}" for n, spec in zip(numbers, PANES, strict=False))
            rows.insert(0, (f"{numbers[0]}-{numbers[-1]}", f"show a pane: {titles}"))
        return rows

    def action_toggle_theme(self) -> None:
        self.theme = "textual-light" if self.theme != "textual-light" else "textual-dark"

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for spec in PANES:
            yield SystemCommand(
                f"Go to {spec.title}",
                f"Show the {spec.title} pane",
                lambda p=spec.id: self.action_show_pane(p),
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

    def on_backlog(self, message: Backlog) -> None:
        """The evaluator stored a batch: show its progress, and let the Fires tail look now."""
        if self.screen_stack:  # the panes live on the base screen, under any modal
            base = self.screen_stack[0]
            for pane in base.query(RulesPane):
                pane.show_backlog(message.cursor, message.head)
            for fires in base.query(FiresPane):
                fires.poke()

    def on_show_error(self, message: ShowError) -> None:
        self.notify(message.message, title=message.title, severity="error", timeout=8)

    def show_error(self, exc: ConsoleError) -> None:
        self.notify(exc.message, title=exc.title, severity="error", timeout=8)


def run_console(options: ConsoleOptions) -> int:
    """Entry point used by ``harness console``; returns the process exit code."""
    app = HarnessConsole(ConsoleContext(options))
    try:
        result = app.run()
    finally:
        if options.temp_dir is not None:
            # --demo's store, policy and spec were temporary: leave nothing behind,
            # also when the terminal was closed under it
            shutil.rmtree(options.temp_dir, ignore_errors=True)
    return int(result or 0)
