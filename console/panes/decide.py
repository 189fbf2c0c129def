"""Decide pane: pick a spec, type an input, see the decision and every rule as you type."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.widgets import Input, Select, Static

from console.context import ConsoleContext
from console.keys import Field, focus_now
from console.markup import escape
from console.panes.base import StorePane
from console.widgets.confirm import AskText, ConfirmDiff
from console.widgets.picker import PickSpec
from engine.errors import HarnessError
from engine.views.decide import (
    DecideResult,
    LoadedSpec,
    ScenarioSave,
    load_spec,
    prepare_scenario,
    scenario_results,
    try_input,
    write_scenario,
)
from engine.views.session import expand_globs

NO_SPEC = "no spec loaded: pick one above, ctrl+o browses, ctrl+l types a path"


def display_path(path: Path) -> str:
    """A spec path as the picker shows it: relative to the working directory when inside it."""
    try:
        return str(path.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


class DecidePane(StorePane[None]):
    """Pick a spec, type an input: the decision, route order and every rule, as you type.

    Each result names the spec file and version and the input it belongs to;
    a spec that cannot be loaded clears the result instead of leaving another
    spec's decision on screen (an edit that breaks the open spec keeps its
    last good version, and says so). The spec's scenario tests run with
    pass/fail.

    Keys: ``i`` (or ``enter``) type an input, ``esc`` leaves it so the number
    keys switch panes again, ``ctrl+o`` browse for a spec file, ``ctrl+l`` type
    a spec path or glob, ``ctrl+s`` save the input and decision as a scenario
    test (shows the path and the diff; ``y`` writes, ``n`` cancels).

    Messages: :class:`Loaded` (a spec load finished), :class:`Decided` (an
    input was decided).
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("i,enter", "focus_input", "Type", tooltip="an input to decide"),
        Binding("ctrl+s", "save_scenario", "Save test", tooltip="the input and decision"),
        Binding("ctrl+o", "pick_file", "Open", tooltip="browse for a spec file"),
        Binding("ctrl+l", "open_path", "Spec path", show=False, tooltip="type a path or glob"),
    ]
    DEFAULT_CSS = """
    DecidePane #decide-top { height: 3; }
    DecidePane #decide-spec { width: 1fr; }
    DecidePane #decide-path { width: 1fr; }
    DecidePane #decide-body { height: 1fr; min-height: 6; }
    DecidePane #decide-decision { width: 1fr; border: round $primary; padding: 0 1; }
    DecidePane #decide-rules { width: 1fr; border: round $secondary; padding: 0 1; }
    DecidePane #decide-tests { height: auto; max-height: 25%; border: round $accent;
        padding: 0 1; }
    """

    class Loaded(Message):
        """A spec load finished: ``spec`` or the ``error`` that refused it, for ``path``."""

        def __init__(self, spec: LoadedSpec | None, error: HarnessError | None, path: Path) -> None:
            super().__init__()
            self.spec = spec
            self.error = error
            self.path = path

    class Decided(Message):
        """``text`` was decided with ``spec``."""

        def __init__(self, spec: LoadedSpec, text: str, result: DecideResult) -> None:
            super().__init__()
            self.spec = spec
            self.text = text
            self.result = result

    def __init__(self, context: ConsoleContext) -> None:
        super().__init__(context)
        self.spec: LoadedSpec | None = None
        self.result: DecideResult | None = None
        self.error: str = ""
        #: The spec the operator chose (kept while it is broken, so a fix reloads it).
        self.loaded_path: Path | None = None

    def compose(self) -> ComposeResult:
        files = self.context.options.spec_files()
        with Horizontal(id="decide-top"):
            yield Select(
                [(display_path(f), str(f)) for f in files],
                prompt="pick a spec (from --spec / [console] specs)",
                id="decide-spec",
            )
            yield Field(
                placeholder="…or a spec path (enter loads)", id="decide-path", on_enter=self._path
            )
        yield Static("", id="decide-error", classes="error-box hidden")
        # coming back to the input goes on typing (it does not select the text to replace it)
        yield Field(
            placeholder="i: type an input to decide", id="decide-input", select_on_focus=False
        )
        with Horizontal(id="decide-body"):
            with VerticalScroll(id="decide-decision"):
                yield Static(NO_SPEC, id="decide-decision-text")
            with VerticalScroll(id="decide-rules"):
                yield Static("", id="decide-rules-text")
        with VerticalScroll(id="decide-tests"):
            yield Static("", id="decide-tests-text")

    def on_mount(self) -> None:
        files = self.context.options.spec_files()
        if files:
            self.query_one("#decide-spec", Select).value = str(files[0])

    # -- loading ---------------------------------------------------------------

    def open_spec(self, path: str | Path) -> None:
        """Load (or reload) a spec in a worker; a broken edit keeps the open spec's last good."""
        target = Path(path).expanduser().resolve()
        if self.loaded_path != target:
            self._clear_result()  # another spec's decision must not stay beside this one
            self.spec = None
        self.loaded_path = target
        self._name_in_picker(target)
        self._load(target)

    def _name_in_picker(self, target: Path) -> None:
        """The picker names the spec being shown (a typed path joins its options)."""
        select = self.query_one("#decide-spec", Select)
        options = [(display_path(f), str(f)) for f in self.context.options.spec_files()]
        if str(target) not in {value for _label, value in options}:
            options.append((display_path(target), str(target)))
        if select.value != str(target):
            with select.prevent(Select.Changed):
                select.set_options(options)
                select.value = str(target)

    @work(thread=True, exclusive=True, group="decide-load")
    def _load(self, path: Path) -> None:
        try:
            spec = load_spec(path)
        except HarnessError as exc:
            self.post_message(self.Loaded(None, exc, path))
            return
        self.post_message(self.Loaded(spec, None, path))

    def on_decide_pane_loaded(self, message: Loaded) -> None:
        if message.path != self.loaded_path:
            return  # the operator chose another spec meanwhile
        box = self.query_one("#decide-error", Static)
        if message.error is not None:
            kept = (
                f" (keeping the last good version, {self.spec.version})"
                if self.spec is not None
                else ""
            )
            self.error = f"{message.error.title}{kept}\n{message.error}"
            box.update(escape(self.error))
            box.remove_class("hidden")
            if self.spec is None:
                self._clear_result()
            return
        self.error = ""
        box.update("")
        box.add_class("hidden")
        self.spec = message.spec
        self._render_tests()
        self._decide(self.query_one("#decide-input", Field).value)

    def specs_changed(self, paths: list[Path]) -> None:
        """Spec files changed on disk: refresh the picker, reload the open spec if touched."""
        target = self.loaded_path
        if target is not None:
            self._name_in_picker(target)
        if target is not None and any(
            p.name == target.name and p.parent.resolve() == target.parent.resolve() for p in paths
        ):
            self.open_spec(target)

    def on_select_changed(self, event: Select.Changed) -> None:
        if event.select.id == "decide-spec" and isinstance(event.value, str):
            self.open_spec(event.value)

    def _path(self, text: str) -> None:
        """Enter in the path field: load it, and type inputs next."""
        if not text.strip():
            return
        matches = expand_globs([text.strip()])
        self.open_spec(matches[0] if matches else Path(text.strip()).expanduser())
        focus_now(self.query_one("#decide-input", Field))

    async def action_pick_file(self) -> None:
        """Browse for a spec file, starting at the open spec's directory (else the cwd)."""
        root = self.loaded_path.parent if self.loaded_path is not None else Path.cwd()

        def done(path: Path | None) -> None:
            if path is not None:
                self.open_spec(path)

        await self.app.push_screen(PickSpec(root), done)

    def action_focus_input(self) -> None:
        """``i``: into the input (Esc leaves it, so the number keys switch panes)."""
        focus_now(self.query_one("#decide-input", Field))

    def action_open_path(self) -> None:
        focus_now(self.query_one("#decide-path", Field))

    # -- deciding --------------------------------------------------------------

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "decide-input":
            self._decide(event.value)

    def _decide(self, text: str) -> None:
        if self.spec is None:
            self._clear_result()
            return
        self._run_decide(self.spec, text)

    @work(thread=True, exclusive=True, group="decide")
    def _run_decide(self, spec: LoadedSpec, text: str) -> None:
        self.post_message(self.Decided(spec, text, try_input(spec, text)))

    def _clear_result(self, why: str | None = None) -> None:
        if why is None:
            why = NO_SPEC
            if self.loaded_path is not None and self.error:
                why = f"no decision: {display_path(self.loaded_path)} is not loaded (see above)"
        self.result = None
        self.query_one("#decide-decision", VerticalScroll).border_title = None
        self.query_one("#decide-decision-text", Static).update(escape(why))
        self.query_one("#decide-rules-text", Static).update("")
        self.query_one("#decide-tests-text", Static).update("")

    def on_decide_pane_decided(self, message: Decided) -> None:
        if message.spec is not self.spec:
            return  # decided with a spec that is no longer the one shown
        if message.text != self.query_one("#decide-input", Field).value:
            return  # a newer keystroke is on its way
        self.result = message.result
        spec = message.spec
        box = self.query_one("#decide-decision", VerticalScroll)
        box.border_title = escape(f"{display_path(spec.path)} {spec.version}")
        d = message.result.decision
        sel = d.route_selection
        lines = [
            f"[dim]input[/dim]  {escape(repr(message.text))}",
            f"[b]route[/b]  {escape(d.route or '<none>')}",
        ]
        if sel is not None:
            rule = f" (rule {escape(sel.rule_id)})" if sel.rule_id else ""
            lines.append(f"[b]basis[/b]  {sel.basis}{rule}")
        lines.append(f"[b]route order[/b]  {escape(' > '.join(d.route_order) or '-')}")
        lines.append(f"[b]forbid[/b]  {escape(', '.join(d.forbid) or '-')}")
        allow = ", ".join(f"{k}={v}" for k, v in d.allow.items())
        lines.append(f"[b]allow[/b]  {escape(allow or '-')}")
        lines.append(f"[b]elicit[/b]  {escape(', '.join(d.elicit) or '-')}")
        lines.append(f"[b]after_success[/b]  {escape(', '.join(d.after_success) or '-')}")
        if d.reason:
            lines.append(f"[b]reason[/b]  {escape(d.reason)}")
        lines.append(f"[dim]{escape(message.result.route_choice)}[/dim]")
        self.query_one("#decide-decision-text", Static).update("\n".join(lines))
        rules = []
        for r in message.result.rules:
            if r.matched:
                held = "; ".join(c.detail for c in r.conditions if c.held)
                rules.append(f"[reverse green] ✓ {escape(r.id)} [/] {escape(held or r.why)}")
            else:
                rules.append(f"[dim]  · {escape(r.id)}  {escape(r.why)}[/dim]")
        self.query_one("#decide-rules-text", Static).update("\n".join(rules) or "no rules")

    def _render_tests(self) -> None:
        if self.spec is None:
            return
        run = scenario_results(self.spec)
        lines = [f"[b]scenario tests[/b]  {len(run.passed)} passed, {len(run.failed)} failed"]
        for t in run.results:
            mark = "[green]PASS[/]" if t.passed else "[red]FAIL[/]"
            why = "" if t.passed else f"  [dim]{escape(t.failures[0].message)}[/dim]"
            lines.append(f"{mark} {escape(t.name)}{why}")
        self.query_one("#decide-tests-text", Static).update("\n".join(lines))

    # -- saving ----------------------------------------------------------------

    async def action_save_scenario(self) -> None:
        """Ask for a name, show the full path and the diff, and only then write."""
        if self.spec is None or self.result is None:
            self.app.notify("load a spec and type an input first", severity="warning")
            return
        decision = self.result.decision
        spec = self.spec
        detail = (
            f"append to {spec.path}: input {decision.input!r} -> route "
            f"{decision.route or '<none>'}; you see the diff before anything is written"
        )

        async def named(name: str | None) -> None:
            if name is None:
                return
            try:
                save = prepare_scenario(spec, name, decision)
            except HarnessError as exc:
                self.report(exc)
                return

            def confirmed(ok: bool | None) -> None:
                if ok:
                    self._write(spec, save, name)

            await self.app.push_screen(
                ConfirmDiff(f"Write scenario {name!r} to this file?", str(spec.path), save.diff),
                confirmed,
            )

        await self.app.push_screen(
            AskText(
                "Save this input and decision as a scenario test?",
                detail=detail,
                placeholder="test name",
                ok_label="Preview",
            ),
            named,
        )

    def _write(self, spec: LoadedSpec, save: ScenarioSave, name: str) -> None:
        try:
            self.spec = write_scenario(spec, save)
        except HarnessError as exc:
            self.report(exc)
            return
        self._render_tests()
        self.app.notify(f"scenario {name!r} saved to {spec.path}")
