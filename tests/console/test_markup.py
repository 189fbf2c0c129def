"""Text put into Textual markup shows exactly as given (console.markup.escape)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from textual.content import Content
from textual.widgets import Static

from console.help import KeysScreen
from console.markup import escape
from tests.console.conftest import AppFactory


@given(st.text(alphabet=st.sampled_from("[]\\/ab =#@\n")) | st.text())
def test_escaped_text_renders_as_itself(text: str) -> None:
    # as the same text given as plain content (Textual drops control characters either way)
    assert Content.from_markup(escape(text)).plain == Content(text).plain


def test_brackets_a_line_apart_are_not_one_tag() -> None:
    # Rich's escape left these alone and Textual read "[ … ]" as one tag.
    text = "  [       Earlier\n  ]       Later"
    assert Content.from_markup(escape(text)).plain == text


async def test_the_keys_screen_shows_the_timeline_bracket_keys(make_app: AppFactory) -> None:
    app = make_app(initial="timeline", live=False)
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, KeysScreen)
        shown = "\n".join(str(s.render()) for s in app.screen.query(Static))
        lines = [line.strip() for line in shown.splitlines()]
        assert any(line.startswith("[") and line.endswith("Earlier") for line in lines)
        assert any(line.startswith("]") and line.endswith("Later") for line in lines)
