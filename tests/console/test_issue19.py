"""Issue 19: the console an operator can trust at a glance, one pilot test per P1 and P2.

Each test failed on the main branch before the fix. Key bursts are posted to
the app without a pause between keys (``burst``), as a fast typist, a paste
or tmux's ``send-keys`` delivers them; ``pilot.press`` waits for the screen
after every key and would hide the race.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual import events
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Input, Static, TabbedContent, TextArea
from textual.widgets._footer import FooterKey

from console.app import HarnessConsole
from console.help import KeysScreen
from console.panes.backtest import BacktestPane
from console.panes.decide import DecidePane
from console.panes.fires import FiresPane
from console.panes.holds import HoldsPane
from console.panes.rules import RulesPane
from console.widgets.confirm import AskText
from engine.store.db import connect
from tests.console.conftest import START_MS, AppFactory, until

CHARS = {"slash": "/", "space": " ", "enter": "\r", "question_mark": "?"}


def burst(app: HarnessConsole, *keys: str) -> None:
    """Post ``keys`` to the app at once: none is handled before the last is queued."""
    for key in keys:
        char = CHARS.get(key, key if len(key) == 1 else None)
        app.post_message(events.Key(key, char))


def text(app: HarnessConsole, selector: str) -> str:
    return str(app.screen_stack[0].query_one(selector, Static).render())


def active(app: HarnessConsole) -> str:
    return str(app.screen_stack[0].query_one("#panes", TabbedContent).active)


def screen_text(app: HarnessConsole) -> str:
    """What the terminal shows now, as plain lines."""
    from tests.console.svgtext import svg_lines

    return "\n".join(svg_lines(app.export_screenshot()))


# -- P1.3: a key typed into a text field never reaches another widget ---------------------


async def test_a_filter_typed_in_one_burst_filters_fires(make_app: AppFactory) -> None:
    """``/h05⏎`` in one burst: the 5 is part of the filter, Decide does not open."""
    app = make_app(initial="fires")
    async with app.run_test(size=(120, 36)) as pilot:
        pane = app.query_one(FiresPane)
        await until(pilot, lambda: pane.window)
        burst(app, "slash", "h", "0", "5", "enter", "2")
        await until(pilot, lambda: pane.flt.words == ("h05",) and pane.loaded)
        await pilot.pause(0.2)
        assert active(app) == "fires"
        assert app.focused is app.query_one("#fires-table")  # Enter gave the keys back
        assert app.query_one("#fires-filter").has_class("hidden")
        assert all("h05" in f"{f.rule} {f.target} {f.status}" for f in pane.window)


async def test_pasted_filter_text_lands_in_the_filter(make_app: AppFactory) -> None:
    app = make_app(initial="fires")
    async with app.run_test(size=(120, 36)) as pilot:
        pane = app.query_one(FiresPane)
        await until(pilot, lambda: pane.window)
        burst(app, "slash")
        app.post_message(events.Paste("h05"))
        burst(app, "enter")
        await until(pilot, lambda: pane.flt.words == ("h05",))
        assert active(app) == "fires"


async def test_decide_bursts_type_into_the_input_and_esc_frees_the_numbers(
    make_app: AppFactory, spec_file: Path
) -> None:
    app = make_app(initial="fleet", specs=(str(spec_file),))
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: app.query_one(DecidePane).spec is not None)
        burst(app, "5", "i", *"fill 3 forms", "escape", "3")
        await until(pilot, lambda: active(app) == "rules")
        assert app.query_one("#decide-input", Input).value == "fill 3 forms"


async def test_esc_typed_fast_before_a_number_arrives_as_alt_and_still_works(
    make_app: AppFactory, spec_file: Path
) -> None:
    """A terminal reads Esc followed at once by ``3`` as Alt+3: both keys still happen."""
    app = make_app(initial="decide", specs=(str(spec_file),))
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: app.query_one(DecidePane).spec is not None)
        burst(app, "i", *"fill", "alt+3")
        await until(pilot, lambda: active(app) == "rules")
        assert app.query_one("#decide-input", Input).value == "fill"


async def test_tab_into_a_range_field_then_digits_type(make_app: AppFactory) -> None:
    app = make_app(initial="backtest")
    async with app.run_test(size=(120, 36)) as pilot:
        pane = app.query_one(BacktestPane)
        await until(pilot, lambda: pane.rules)
        burst(app, "tab", "7", "d")
        await until(pilot, lambda: app.query_one("#backtest-since", Input).value == "7d")
        assert active(app) == "backtest"


async def test_a_release_reason_typed_in_one_burst_is_recorded(
    make_app: AppFactory, store: Path
) -> None:
    app = make_app(initial="holds")
    async with app.run_test(size=(120, 36)) as pilot:
        pane = app.query_one(HoldsPane)
        await until(pilot, lambda: pane.rows)
        hold = pane.rows[0]
        burst(app, "x", *"disk 3 fixed", "enter", "1")
        await until(pilot, lambda: active(app) == "fleet")
        conn = connect(store)
        await until(
            pilot,
            lambda: (
                conn.execute(
                    "SELECT release_reason FROM rule_holds WHERE id = ?", (hold.id,)
                ).fetchone()[0]
                == "disk 3 fixed"
            ),
        )
        conn.close()
        assert not isinstance(app.screen, AskText)


# -- P1.2: a result always belongs to the spec and input shown beside it ----------------


async def test_a_missing_spec_path_clears_the_decision(
    make_app: AppFactory, spec_file: Path, tmp_path: Path
) -> None:
    app = make_app(initial="decide", specs=(str(spec_file),))
    async with app.run_test(size=(120, 36)) as pilot:
        pane = app.query_one(DecidePane)
        await until(pilot, lambda: pane.spec is not None)
        await pilot.press("i", *"fill the form")
        await until(pilot, lambda: pane.result is not None and pane.result.decision.route)
        assert "fill_pdf_form" in text(app, "#decide-decision-text")
        missing = tmp_path / "nope" / "gone.spec.yml"
        await pilot.press("escape", "ctrl+l", *str(missing), "enter")
        await until(pilot, lambda: "Spec not found" in pane.error)
        assert str(app.query_one("#decide-spec").value) == str(missing)  # the picker names it
        await pilot.press(*" release it now")
        await pilot.pause(0.3)
        assert pane.result is None
        shown = text(app, "#decide-decision-text")
        assert "fill_pdf_form" not in shown and "not loaded" in shown
        assert "does not validate" not in pane.error


async def test_a_decision_names_its_spec_version_and_input(
    make_app: AppFactory, spec_file: Path
) -> None:
    app = make_app(initial="decide", specs=(str(spec_file),))
    async with app.run_test(size=(120, 36)) as pilot:
        pane = app.query_one(DecidePane)
        await until(pilot, lambda: pane.spec is not None)
        await pilot.press("i", *"fill the form")
        await until(pilot, lambda: pane.result is not None and pane.result.decision.route)
        assert pane.spec is not None
        title = str(app.query_one("#decide-decision").border_title)
        assert "skill.spec.yml" in title and pane.spec.version in title
        assert "'fill the form'" in text(app, "#decide-decision-text")


# -- P1.1: numbers are shown whole or marked cut ----------------------------------------


@pytest.fixture(scope="module")
def six_digit_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A day of fleet rows numbered from 100,000 (so every seq has six digits)."""
    from engine.fleet.sim import write_fleet

    store = tmp_path_factory.mktemp("six") / "journal.db"
    conn = connect(store)
    conn.execute(
        "INSERT INTO rule_journal (seq, at, kind, type, source) VALUES (100000, ?, 'tick',"
        " 'tick', 'tick')",
        (START_MS - 1,),
    )
    write_fleet(conn, days=2, start_ms=START_MS, validate=False)
    conn.close()
    return store


async def test_a_first_backtest_shows_six_digit_seqs_whole(
    make_app: AppFactory, six_digit_store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first frame after a run: every seq whole (before, columns were header-wide: ``100``)."""
    frames: list[str] = []
    real = BacktestPane.on_backtest_pane_finished

    def finished(self: BacktestPane, message: Any) -> None:
        real(self, message)
        frames.append(screen_text(self.app))  # what the next frame paints

    monkeypatch.setattr(BacktestPane, "on_backtest_pane_finished", finished)
    app = make_app(initial="backtest", store_path=six_digit_store)
    async with app.run_test(size=(160, 45)) as pilot:
        pane = app.query_one(BacktestPane)
        await until(pilot, lambda: pane.rules)
        pane.select_rule("verify_same_failure")
        await until(pilot, lambda: pane.candidate is not None)
        await pilot.press("ctrl+r")
        await until(pilot, lambda: frames, timeout=30)
        assert pane.last_run is not None
        seqs = [str(f.seq) for f in pane.last_run.result.fires]
        assert seqs and all(len(s) == 6 for s in seqs)
        shown = frames[0]
        rows = app.query_one("#backtest-fires", DataTable).size.height - 1  # under the header
        assert rows >= 3 and [s for s in seqs[:rows] if s not in shown] == []


async def test_cut_text_is_marked_and_numbers_stay_whole_at_80_columns(
    make_app: AppFactory,
) -> None:
    app = make_app(initial="rules")
    async with app.run_test(size=(80, 24)) as pilot:
        rules = app.query_one(RulesPane)
        await until(pilot, lambda: rules.rows)
        await pilot.pause(0.2)
        shown = screen_text(app)
        for row in rules.rows:  # the counts are on screen, whole
            line = next(ln for ln in shown.splitlines() if ln.strip().startswith(row.name[:8]))
            assert line.split()[-3:-1] == [f"{row.fires:,}", f"{row.suppressed:,}"], line
        longest = max(rules.rows, key=lambda r: len(r.name))
        assert longest.name not in shown and longest.name[:8] in shown and "…" in shown


# -- P2.10: every pane usable at 80x24 ----------------------------------------------------


async def test_resizing_from_160x45_to_80x24_keeps_every_pane_usable(
    make_app: AppFactory, spec_file: Path
) -> None:
    app = make_app(initial="fires", specs=(str(spec_file),))
    async with app.run_test(size=(160, 45)) as pilot:
        fires = app.query_one(FiresPane)
        await until(pilot, lambda: fires.window)
        await pilot.resize_terminal(80, 24)
        await pilot.pause(0.5)
        shown = screen_text(app)
        last = fires.window[-1]
        assert f" {last.id} " in shown  # the newest fire is on screen, not only "N shown"
        assert "? Keys" in shown  # the footer keeps the key that explains the others
        table = app.query_one("#fires-table", DataTable)
        assert table.virtual_size.width <= table.size.width  # nothing off to the right
        app.action_show_pane("holds")
        holds = app.query_one(HoldsPane)
        await until(pilot, lambda: holds.rows)
        await pilot.pause(0.3)
        hold = holds.rows[0]
        assert f"hold {hold.id} on {hold.harness}" in screen_text(app)  # its reason, in full
        assert hold.reason[:40] in " ".join(screen_text(app).split())
        app.action_show_pane("rules")
        await until(pilot, lambda: app.query_one(RulesPane).rows)
        await pilot.pause(0.3)
        rules_table = app.query_one("#rules-table", DataTable)
        assert rules_table.virtual_size.width <= rules_table.size.width
        app.action_show_pane("decide")
        await until(pilot, lambda: app.query_one(DecidePane).spec is not None)
        await pilot.pause(0.3)
        assert app.query_one("#decide-decision").size.height >= 8


# -- P2.1: the demo never suggests pasting what only its memory enforces -----------------


async def test_the_demo_promotion_line_grants_nothing_the_file_does_not(
    store: Path, policy_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from console.context import ConsoleContext
    from console.panes.promotion import PromotionScreen
    from engine.views.live import DEMO_ENFORCE
    from engine.views.session import ConsoleOptions

    monkeypatch.setenv("HARNESS_CONFIG", str(tmp_path / "absent.toml"))
    demo = ConsoleOptions.from_args(store=None, demo=True)
    options = ConsoleOptions(
        store_path=store,
        demo=True,
        policy_dir=policy_dir,
        config=demo.config,
        file_config=demo.file_config,
    )
    assert demo.temp_dir is not None
    app = HarnessConsole(
        ConsoleContext(options, live=False, evaluate=False, cursor_blink=False),
        initial="rules",
        watch_files=False,
    )
    async with app.run_test(size=(120, 36)) as pilot:
        rules = app.query_one(RulesPane)
        await until(pilot, lambda: rules.rows)
        index = [r.name for r in rules.rows].index("verify_same_failure")
        app.query_one("#rules-table", DataTable).move_cursor(row=index)
        await pilot.press("e")
        await until(pilot, lambda: isinstance(app.screen, PromotionScreen))
        screen = app.screen
        assert isinstance(screen, PromotionScreen)
        await until(pilot, lambda: screen.header is not None)
        assert screen.header is not None
        assert DEMO_ENFORCE not in screen.header.enforce_line
        assert screen.header.enforce_line == f'enforce = ["{screen.header.pin}"]'
    import shutil

    shutil.rmtree(demo.temp_dir)


# -- P2.4: `?` opens at the pane you are on, and moves at once --------------------------


async def test_keys_open_at_this_pane_and_scroll_without_tab(make_app: AppFactory) -> None:
    app = make_app(initial="holds")
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.query_one(HoldsPane).rows)
        await pilot.press("question_mark")
        assert isinstance(app.screen, KeysScreen)
        scroll = app.screen.query_one(VerticalScroll)
        assert app.focused is scroll
        holds = app.screen.query_one("#help-holds")
        await until(pilot, lambda: scroll.scroll_y > 0)
        assert (
            holds.region.y <= scroll.region.y + 3
        )  # the Holds section heads the view (border, margin)
        before = scroll.scroll_y
        await pilot.press("j", "j")
        await until(pilot, lambda: scroll.scroll_y > before)
        await pilot.press("end")
        await until(pilot, lambda: scroll.scroll_y == scroll.max_scroll_y)
        await pilot.press("g")
        await until(pilot, lambda: scroll.scroll_y == 0)


# -- P2.6: the Backtest editor's keys do what the footer says ------------------------------


async def test_reset_copy_works_in_the_editor_and_select_all_is_named(
    make_app: AppFactory,
) -> None:
    app = make_app(initial="backtest")
    async with app.run_test(size=(160, 45)) as pilot:
        pane = app.query_one(BacktestPane)
        await until(pilot, lambda: pane.rules)
        pane.select_rule("verify_same_failure")
        await until(pilot, lambda: pane.candidate is not None)
        editor = app.query_one("#backtest-editor", TextArea)
        source = editor.text
        editor.focus()
        await pilot.pause(0.1)
        editor.load_text(source.replace(">= 3", ">= 2"))
        await until(pilot, lambda: "will compare" in text(app, "#backtest-lint"))
        keys = {k.key: k.description for k in app.screen.query(FooterKey)}
        await until(pilot, lambda: {k.description for k in app.screen.query(FooterKey)})
        keys = {k.key: k.description for k in app.screen.query(FooterKey)}
        assert keys.get("f5") == "Reset copy" and keys.get("f7") == "Select all"
        await pilot.press("f5")
        await until(pilot, lambda: editor.text == source)
        await pilot.press("question_mark")  # in the editor `?` is text
        assert "?" in editor.text and not isinstance(app.screen, KeysScreen)
        await pilot.press("f5", "escape", "question_mark")
        assert isinstance(app.screen, KeysScreen)
        section = next(s for s in app.screen.sections if s.id == "backtest")
        assert ("f7", "Select all") in section.keys


# -- P2.8: a backtest result names its rule version, and goes when the text changes ----------


async def test_backtest_results_belong_to_the_version_beside_them(
    make_app: AppFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    import engine.views.backtest as views_backtest

    real = views_backtest.backtest_with_lifecycle
    gate = threading.Event()
    gate.set()

    def gated(*args: Any, **kwargs: Any) -> Any:
        gate.wait(30)
        return real(*args, **kwargs)

    monkeypatch.setattr(views_backtest, "backtest_with_lifecycle", gated)
    app = make_app(initial="backtest")
    async with app.run_test(size=(160, 45)) as pilot:
        pane = app.query_one(BacktestPane)
        await until(pilot, lambda: pane.rules)
        pane.select_rule("verify_same_failure")
        await until(pilot, lambda: pane.candidate is not None)
        assert pane.candidate is not None
        version = pane.candidate.rule.hash[:12]
        await pilot.press("ctrl+r")
        await until(pilot, lambda: pane.last_run is not None, timeout=30)
        summary = text(app, "#backtest-text")
        assert f"verify_same_failure @{version}…" in summary and "current version" in summary
        table = app.query_one("#backtest-fires", DataTable)
        assert table.row_count > 0
        editor = app.query_one("#backtest-editor", TextArea)
        editor.load_text(editor.text.replace("duration(", "nope("))  # a lint error
        await until(pilot, lambda: table.row_count == 0)
        assert "was cleared" in text(app, "#backtest-text")
        await pilot.press("f5")
        await until(pilot, lambda: pane.candidate is not None)
        pane.last_run = None
        gate.clear()  # the rerun waits: what is on screen while it runs?
        await pilot.press("ctrl+r")
        await until(pilot, lambda: pane.running)
        assert table.row_count == 0 and "running verify_same_failure" in text(app, "#backtest-text")
        gate.set()
        await until(pilot, lambda: pane.last_run is not None, timeout=30)
        assert table.row_count > 0


# -- P2.9: every broken rule file is counted, none silently missing --------------------------


async def test_the_rule_error_box_counts_every_broken_file(
    make_app: AppFactory, policy_dir: Path
) -> None:
    for i in range(5):
        (policy_dir / f"broken_{i}.yml").write_text(
            f"name: broken_{i}\non: run_event\nwhen: event.nope == 1\n", encoding="utf-8"
        )
    app = make_app(initial="rules")
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: app.query_one(RulesPane).rows)
        box = text(app, "#rules-errors")
        assert "5 rule files with errors" in box and "harness rules lint" in box
        listed = sum(f"broken_{i}.yml" in box for i in range(5))
        assert listed == 5 or f"and {5 - listed} more" in box


def test_a_terminal_esc_then_digit_reaches_the_console_as_two_keys() -> None:
    """In tmux, Esc then 3 typed fast arrived as ``£`` (typed into the box) instead of Esc, 3."""
    from textual._xterm_parser import XTermParser

    from console.keys import esc_then_digit_is_two_keys

    esc_then_digit_is_two_keys()  # run_console does this before the app starts
    parser = XTermParser()
    read = [*parser.feed("\x1b3"), *parser.feed("")]  # "" flushes a lone escape sequence
    keys = [(e.key, e.character) for e in read if isinstance(e, events.Key)]
    assert keys == [("alt+3", "3")]  # key_in_order turns it into Esc, then 3
    typed = [e.character for e in XTermParser().feed("£") if isinstance(e, events.Key)]
    assert typed == ["£"]  # a pound sign typed as one still types one
