"""The operator console: a Textual app over the engine's read models.

All logic lives in ``engine/`` (reached only through ``engine.views``); the app
composes panes, routes messages between them (a fire selected in Fires opens
Explain, a rule in Rules opens Backtest), and owns the cross-cutting
conventions: keys handled in the order typed (``console.keys``), the header
saying who acts, command palette, help built from the bindings, light/dark
theme, and file reload.
"""

from __future__ import annotations

import asyncio
import shutil
import threading
from collections.abc import Iterable
from typing import Any, ClassVar

from textual import events, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Input, TabbedContent, TabPane, TextArea

from console.context import ConsoleContext
from console.errors import ConsoleError
from console.help import HelpSection, KeysScreen, key_rows
from console.keys import (
    esc_then_digit_is_two_keys,
    focus_now,
    focus_soon,
    key_in_order,
    paste_in_order,
)
from console.layout import PANE_BY_ID as PANE_BY_ID
from console.layout import PANE_KEYS as PANE_KEYS
from console.layout import PANES as PANES
from console.messages import (
    Backlog,
    EvaluatorFault,
    OpenBacktest,
    OpenExplain,
    ShowError,
    ShowPane,
)
from console.panes.backtest import BacktestPane
from console.panes.base import about
from console.panes.decide import DecidePane
from console.panes.explain import ExplainPane
from console.panes.fires import FiresPane
from console.panes.proposals import ProposalsPane
from console.panes.rules import RulesPane
from console.panes.timeline import TimelinePane
from console.reload import FilesChanged, watch_files
from console.widgets.footer import QuietFooter
from console.widgets.header import ConsoleHeader
from console.widgets.tabs import PaneTabs
from engine.config import load_config
from engine.errors import HarnessError
from engine.views.demo import (
    DEMO_ENFORCE,
    demo_config,
    feed_live,
    mine_demo_apart,
    prepare_demo_store_apart,
)
from engine.views.live import run_evaluator
from engine.views.session import ConsoleOptions

#: How many panes Esc can step back through.
MAX_HISTORY = 20


class HarnessConsole(App[int]):
    """Tabbed panes over one store, one pane per use (see each pane's docstring for its keys).

    Keys: ``1``-``9`` show a pane, ``esc`` back (out of a text box first, then
    to the pane shown before), ``?`` every key (opened at this pane), ``F1``
    this pane's help, ``ctrl+t`` light/dark, ``ctrl+p`` command palette,
    ``ctrl+q`` quit.

    Messages: :class:`~console.messages.OpenExplain`,
    :class:`~console.messages.OpenBacktest`, :class:`~console.messages.ShowPane`
    route between panes; :class:`~console.messages.Backlog`,
    :class:`~console.messages.EvaluatorFault` and
    :class:`~console.messages.ShowError` come from workers;
    :class:`~console.reload.FilesChanged` from the file watcher.
    """

    CSS_PATH = "app.tcss"
    #: Focus goes to the pane's main widget (see PANES), not the tab strip.
    AUTO_FOCUS = None
    TITLE = "harness console"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark", "keys", "Keys", tooltip="every key, opened at this pane"),
        # in a text field `?` types, so the footer names F1 there (elsewhere `?` is shown)
        Binding("f1", "help_in_field", "Help", tooltip="what this pane shows, and its keys"),
        Binding("f1", "help", "Help", show=False, tooltip="what this pane shows, and its keys"),
        Binding("ctrl+t", "toggle_theme", "Theme", show=False, tooltip="light/dark"),
        Binding("ctrl+q", "quit", "Quit", priority=True),
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
        #: The store error the acting evaluator is waiting out, if any (said once, not per retry).
        self._eval_fault: str | None = None
        self._watch_stop = asyncio.Event()
        self.config_error = ""
        #: Panes shown before the current one, for Esc (newest last).
        self._history: list[str] = []

    async def on_event(self, event: events.Event) -> None:
        """Keys and pastes are handled whole, in the order typed (see ``console.keys``)."""
        if isinstance(event, events.Key) and not event.is_forwarded:
            self.app_focus = True
            if await key_in_order(self, event):
                return
        elif (
            isinstance(event, events.Paste)
            and not event.is_forwarded
            and await paste_in_order(self, event)
        ):
            return
        await super().on_event(event)

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
        self.base.query_one(ConsoleHeader).watch_store(self.context.store_path, self.sub_title)
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

    # -- the acting evaluator (--act) ------------------------------------------

    def _backlog(self, cursor: int, head: int) -> None:
        self.post_message(Backlog(cursor, head))

    def _evaluator_fault(self, why: str | None) -> None:
        self.post_message(EvaluatorFault(why))

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
                on_fault=self._evaluator_fault,
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
            rules = self.base.query_one(RulesPane)
            rules.reloading = True  # says what it loaded (a toast) when the read lands
            rules.action_refresh()
            self.base.query_one(BacktestPane).reload_rules()
            self._eval_reload.set()  # the acting evaluator (--act) reloads and records the digest
        if "spec" in message.kinds:
            self.base.query_one(DecidePane).specs_changed(message.paths)

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
            self.call_from_thread(self.base.query_one(ProposalsPane).action_refresh)

    def compose(self) -> ComposeResult:
        ctx = self.context
        yield ConsoleHeader()
        with PaneTabs(initial=self.initial, id="panes"):
            for spec in PANES:
                with TabPane(spec.title, id=spec.id):
                    yield spec.cls(ctx)
        yield QuietFooter()

    # -- navigation ----------------------------------------------------------

    @property
    def active_pane(self) -> str:
        return self.base.query_one("#panes", TabbedContent).active or self.initial

    def action_show_pane(self, pane: str) -> None:
        current = self.active_pane
        if pane != current:
            self._history = [*self._history[-(MAX_HISTORY - 1) :], current]
        if pane == "timeline":
            self.base.query_one(TimelinePane).prepare()  # its first load overlaps the tab switch
        self.base.query_one("#panes", TabbedContent).active = pane
        self._focus_pane(pane)

    @property
    def base(self) -> Screen[Any]:
        """The screen the panes live on (under any help or question shown over it)."""
        return self.screen_stack[0] if self.screen_stack else self.screen

    def _focus_pane(self, pane: str) -> None:
        """Focus the pane's main widget after its first frame, or before the next key typed."""
        spec = PANE_BY_ID.get(pane)
        if spec is not None:
            focus_soon(self.base.query_one(f"#{pane} {spec.focus}"))

    def action_go_back(self) -> None:
        """Esc: leave a text box for its pane, else return to the pane shown before."""
        focused = self.focused
        spec = PANE_BY_ID.get(self.active_pane)
        if isinstance(focused, Input | TextArea) and spec is not None:
            target = spec.home or spec.focus
            home = self.base.query_one(f"#{spec.id} {target}")
            if home is not focused:
                focus_now(home)
                return
        if self._history:
            pane = self._history.pop()
            self.base.query_one("#panes", TabbedContent).active = pane
            self._focus_pane(pane)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """F1's footer entry only while a text field has focus (where `?` types)."""
        if action == "help_in_field":
            return isinstance(self.focused, Input | TextArea)
        return True

    async def action_help_in_field(self) -> None:
        await self.action_help()

    async def action_help(self) -> None:
        """F1: this pane's help (what it shows, its keys), from its docstring and bindings."""
        await self.push_screen(KeysScreen(self.help_sections(), self.active_pane, only=True))

    async def action_keys(self) -> None:
        """``?``: every key of every pane, opened at the pane on screen."""
        await self.push_screen(KeysScreen(self.help_sections(), self.active_pane))

    def help_sections(self) -> list[HelpSection]:
        """One section per pane (its bindings and its parts'), and the keys that work everywhere."""
        display = self._key_display
        everywhere = key_rows(self.BINDINGS, display, skip=lambda b: b.group is PANE_KEYS)
        titles = ", ".join(f"{n} {spec.title}" for n, spec in enumerate(PANES, start=1))
        everywhere.insert(0, (f"1-{len(PANES)}", f"show a pane: {titles}"))
        everywhere.append(("ctrl+p", "command palette: panes, theme, help, quit"))
        sections = [HelpSection("everywhere", "Everywhere", "", tuple(everywhere))]
        for spec in PANES:
            bindings: list[BindingType] = list(spec.cls.BINDINGS)
            for part in spec.parts:
                bindings.extend(type(self.base.query_one(f"#{spec.id} {part}")).BINDINGS)
            rows = key_rows(bindings, display)
            sections.append(HelpSection(spec.id, spec.title, about(spec.cls), tuple(rows)))
        return sections

    def _key_display(self, key: str) -> str:
        return self.get_key_display(Binding(key, ""))

    def action_toggle_theme(self) -> None:
        self.theme = "textual-light" if self.theme != "textual-light" else "textual-dark"

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        # Textual's own "Keys" (its key panel) would sit beside this app's `?` and F1
        yield from (c for c in super().get_system_commands(screen) if c.title != "Keys")
        yield SystemCommand("Keys", "Every key, opened at this pane (?)", self.action_keys)
        for spec in PANES:
            yield SystemCommand(
                f"Go to {spec.title}",
                f"Show the {spec.title} pane",
                lambda p=spec.id: self.action_show_pane(p),
            )
        yield SystemCommand("Toggle light/dark", "Switch theme", self.action_toggle_theme)
        yield SystemCommand(
            "Help for this pane", "What it shows and its keys (F1)", self.action_help
        )

    # -- routing between panes ----------------------------------------------

    def on_open_explain(self, message: OpenExplain) -> None:
        self.base.query_one(ExplainPane).load_fire(message.fire_id)
        self.action_show_pane("explain")

    def on_open_backtest(self, message: OpenBacktest) -> None:
        self.base.query_one(BacktestPane).select_rule(message.rule)
        self.action_show_pane("backtest")

    def on_show_pane(self, message: ShowPane) -> None:
        self.action_show_pane(message.pane)

    def on_backlog(self, message: Backlog) -> None:
        """The evaluator stored a batch: show its progress, and let the Fires tail look now."""
        if not self.screen_stack:
            return  # closing
        for pane in self.base.query(RulesPane):
            pane.show_backlog(message.cursor, message.head)
        for fires in self.base.query(FiresPane):
            fires.poke()

    def on_evaluator_fault(self, message: EvaluatorFault) -> None:
        """Say once that the evaluator waits out a store error, and again when it works."""
        if message.why is None:
            if self._eval_fault is not None:
                self.notify("evaluating again", title="Evaluator resumed", timeout=5)
            self._eval_fault = None
            return
        if message.why != self._eval_fault:
            self.notify(
                f"{message.why}\n(retrying; the rows wait in the journal, nothing is lost)",
                title="Evaluator paused: store error",
                severity="error",
                timeout=10,
            )
        self._eval_fault = message.why

    def on_show_error(self, message: ShowError) -> None:
        self.notify(message.message, title=message.title, severity="error", timeout=8)

    def show_error(self, exc: ConsoleError) -> None:
        self.notify(exc.message, title=exc.title, severity="error", timeout=8)


def run_console(options: ConsoleOptions) -> int:
    """Entry point used by ``harness console``; returns the process exit code."""
    esc_then_digit_is_two_keys()
    app = HarnessConsole(ConsoleContext(options))
    try:
        result = app.run()
    finally:
        if options.temp_dir is not None:
            # --demo's store, policy and spec were temporary: leave nothing behind,
            # also when the terminal was closed under it
            shutil.rmtree(options.temp_dir, ignore_errors=True)
    return int(result or 0)
