"""The plain-TOML reader agrees with tomllib on everything it accepts, and accepts real configs.

``engine.plaintoml`` spares the command hook the import of tomllib. It may
decline any document (the caller then asks tomllib), but a document it
accepts must come out exactly as tomllib reads it, types included, and it
must never accept a document tomllib refuses. Generated documents mix the
subset with what lies just outside it: escapes, floats, dates, dotted and
quoted keys, repeated keys and tables, multi-line values, control characters.
"""

from __future__ import annotations

import tomllib
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from engine import plaintoml
from engine.config_text import parse_config
from tests.conftest import ROOT

BARE = st.text(alphabet="abAB09_-", min_size=1, max_size=4)
KEYS = st.one_of(
    BARE,
    st.sampled_from(["serve", "store", "memory", "rules", "path", "enforce", "1", "-"]),
    st.sampled_from(['"q"', "'l'", "a.b", "a b", "", "a#", "é", "[x]"]),
)
STRING_CHARS = st.sampled_from(
    ["a", " ", "#", "=", "'", '"', "\\", "\t", "é", "]", ",", "\x00", "\x7f", "\r", "\\n", "€"]
)
INNER = st.lists(STRING_CHARS, max_size=6).map("".join)
VALUES = st.one_of(
    INNER.map(lambda s: f'"{s}"'),
    INNER.map(lambda s: f"'{s}'"),
    st.integers(min_value=-(10**20), max_value=10**20).map(str),
    st.sampled_from(
        [
            "true",
            "false",
            "truex",
            "0",
            "-0",
            "+1",
            "007",
            "1_000",
            "1.5",
            "1e3",
            "0x1F",
            "inf",
            "nan",
            "1979-05-27",
            "07:32:00",
            '"""a"""',
            "'''a'''",
            "{ a = 1 }",
            "",
            "[",
            "[1, 2]",
            '["a", 1]',
            "[[]]",
        ]
    ),
    st.lists(
        st.one_of(INNER.map(lambda s: f'"{s}"'), INNER.map(lambda s: f"'{s}'")), max_size=3
    ).map(lambda items: "[" + ", ".join(items) + "]"),
    st.lists(INNER.map(lambda s: f'"{s}"'), min_size=1, max_size=2).map(
        lambda items: "[" + ",".join(items) + ",]"
    ),
)
SPACE = st.sampled_from(["", " ", "\t", "  "])
COMMENT = st.sampled_from(["", " # note", "#x", " #", " # a = 1 [b]"])
HEADER = st.lists(st.one_of(BARE, st.sampled_from(["serve", "a", "b"])), min_size=1, max_size=3)
LINES = st.one_of(
    st.tuples(SPACE, KEYS, SPACE, SPACE, VALUES, COMMENT).map(
        lambda p: f"{p[0]}{p[1]}{p[2]}={p[3]}{p[4]}{p[5]}"
    ),
    st.tuples(SPACE, HEADER, COMMENT).map(lambda p: f"{p[0]}[{'.'.join(p[1])}]{p[2]}"),
    st.sampled_from(["", "  ", "# comment", "[[arr]]", "[ a ]", '["q"]', "[a..b]", "[]", "x"]),
)
DOCUMENTS = st.tuples(st.lists(LINES, max_size=8), st.sampled_from(["\n", "\r\n"])).map(
    lambda p: p[1].join(p[0]) + p[1]
)


def typed(value: Any) -> Any:
    """``value`` with every scalar tagged by its type (True must not equal 1)."""
    if isinstance(value, dict):
        return {k: typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [typed(v) for v in value]
    return (type(value).__name__, value)


def tomllib_reads(text: str) -> Any:
    try:
        return typed(tomllib.loads(text))
    except tomllib.TOMLDecodeError:
        return "refused"


@settings(max_examples=3000, deadline=None)
@given(DOCUMENTS)
@example('a = "x"\na = "y"\n')
@example("[a]\n[a]\n")
@example("[a.b]\n[a]\n")
@example('a = 1\n[a]\nb = ""\n')
@example("a = 1\n[a.b]\n")
@example("[a]\nb = 1\n[a.b]\n")
@example("\ufeffa = 1\n")
@example("a = 007\nb = -01\n")
@example('a = "x" y\n')
@example("[a] b\n")
@example('a = "x\\ty"\n')
@example('a = "\\u00e9"\n')
@example("a = true#c\nb = 1#c\n")
@example("a = 123456789012345678\n")
@example("a = 1234567890123456789012\n")
def test_an_accepted_document_reads_as_tomllib_reads_it(text: str) -> None:
    fast = plaintoml.loads(text)
    if fast is not None:
        assert tomllib_reads(text) == typed(fast)


PLAIN_VALUES = st.one_of(
    st.text(alphabet="ab #=,]é\t'", max_size=6).map(lambda s: f'"{s}"'),
    st.text(alphabet='ab #=,]é\t"\\', max_size=6).map(lambda s: f"'{s}'"),
    st.integers(min_value=-(10**17), max_value=10**17).map(str),
    st.booleans().map(lambda b: str(b).lower()),
    st.lists(st.text(alphabet="ab .-/", max_size=5).map(lambda s: f'"{s}"'), max_size=3).map(
        lambda items: "[" + ", ".join(items) + "]"
    ),
)


@st.composite
def plain_documents(draw: st.DrawFn) -> str:
    """Documents inside the subset: distinct keys per table, each table defined once, in order."""
    lines: list[str] = []
    for key in draw(st.lists(BARE, unique=True, max_size=3)):
        lines.append(f"{key} = {draw(PLAIN_VALUES)}{draw(COMMENT)}")
    for i, table in enumerate(draw(st.lists(BARE, unique=True, max_size=3))):
        lines.append(f"[t{i}.{table}]{draw(COMMENT)}")
        for key in draw(st.lists(BARE, unique=True, max_size=3)):
            lines.append(f"{draw(SPACE)}{key}{draw(SPACE)}={draw(SPACE)}{draw(PLAIN_VALUES)}")
        lines.append(draw(st.sampled_from(["", "# between tables"])))
    return "\n".join(lines) + "\n"


@settings(max_examples=500, deadline=None)
@given(plain_documents())
def test_a_plain_document_is_read_without_tomllib(text: str) -> None:
    fast = plaintoml.loads(text)
    assert fast is not None
    assert typed(fast) == tomllib_reads(text)


def test_the_configs_in_the_readme_and_the_tests_take_the_fast_path() -> None:
    serve = ROOT / "tests" / "serve" / "conftest.py"
    config = serve.read_text().split('CONFIG = """\\\n', 1)[1].split('"""', 1)[0]
    assert plaintoml.loads(config) == tomllib.loads(config)
    text = (
        '[store]\npath = "~/.local/state/harness/journal.db"\nretention_days = 45\n\n'
        '[memory.rules]\nenforce = ["restart_same_error@1a2b3c4d", "file_collision"]\n'
        'disable = []\nshadow_period = "72h"\n\n[serve]\nlisten = "127.0.0.1:4318"\n'
        "loop_guard = 8  # identical calls in a row\n"
    )
    assert plaintoml.loads(text) == tomllib.loads(text)
    assert parse_config(text).rules.enforce == ("restart_same_error@1a2b3c4d", "file_collision")
