"""Regression tests for harness.toml bad input: devices, huge files, bad bytes, bad paths.

A config that cannot be used must be a clear error naming the file and
line:col or the field, never a MemoryError, a hang or a RuntimeError.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.config import MAX_CONFIG_BYTES, load_config, resolve_store
from engine.config_text import parse_config
from engine.errors import InputError


def _problems(exc: pytest.ExceptionInfo[InputError]) -> list[str]:
    return [str(d) for d in exc.value.diagnostics]


def test_a_device_is_refused_without_reading_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_CONFIG", "/dev/zero")
    with pytest.raises(InputError) as exc:
        load_config()
    assert "not a regular file" in exc.value.message and "/dev/zero" in exc.value.message


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "harness.toml"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="not a regular file"):
        load_config(fifo)


def test_a_file_over_the_cap_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "harness.toml"
    big.write_text("# " + "x" * MAX_CONFIG_BYTES + "\n")
    with pytest.raises(InputError, match="larger than"):
        load_config(big)


def test_a_file_at_the_cap_still_loads(tmp_path: Path) -> None:
    cfg = tmp_path / "harness.toml"
    body = "[store]\nretention_days = 9\n"
    cfg.write_text(body + "#" * (MAX_CONFIG_BYTES - len(body)))
    assert load_config(cfg).retention_days == 9


def test_a_bad_byte_is_reported_at_its_line_and_column(tmp_path: Path) -> None:
    cfg = tmp_path / "harness.toml"
    cfg.write_bytes(b"[store]\nretention_days = 3 # caf\xe9\n")
    with pytest.raises(InputError) as exc:
        load_config(cfg)
    assert f"{cfg}:2:25" in exc.value.message and "0xe9" in exc.value.message


def test_an_empty_store_path_is_an_error_naming_the_field(tmp_path: Path) -> None:
    cfg = tmp_path / "harness.toml"
    cfg.write_text('[store]\npath = ""\n')
    with pytest.raises(InputError) as exc:
        load_config(cfg)
    [diag] = exc.value.diagnostics
    assert diag.path == "store.path" and diag.location.line == 2


def test_an_unknown_user_in_a_path_is_a_config_error(tmp_path: Path) -> None:
    cfg = tmp_path / "harness.toml"
    cfg.write_text(
        '[store]\npath = "~no_such_user_zz/j.db"\n\n'
        '[policy_repo.team]\npath = "~no_such_user_zz/repo"\n'
    )
    with pytest.raises(InputError) as exc:
        load_config(cfg)
    fields = {d.path for d in exc.value.diagnostics}
    assert fields == {"store.path", "policy_repo.team.path"}
    assert all("no such user" in p for p in _problems(exc))


def test_an_unknown_user_in_store_flag_is_an_input_error() -> None:
    with pytest.raises(InputError, match="--store"):
        resolve_store("~no_such_user_zz/j.db")


def test_an_unknown_user_in_harness_config_does_not_crash(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HARNESS_CONFIG", "~no_such_user_zz/harness.toml")
    assert load_config().source is None  # a missing file: defaults, as before


def test_good_paths_still_expand(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    cfg = tmp_path / "harness.toml"
    cfg.write_text('[store]\npath = "~/j.db"\n')
    assert load_config(cfg).store_path == tmp_path / "j.db"


_TOML_VALUES = st.one_of(
    st.integers(-3, 3).map(str),
    st.sampled_from(['"x"', '"72h"', '""', "true", "[]", '["a"]', "[1, 2]", '"~nouser/x"', "{}"]),
)
_KEYS = {
    "store": ["path", "retention_days", "extra"],
    "memory.rules": ["enforce", "disable", "shadow_period", "cost_limit"],
    "memory.rules.actions": ["notify", "stop"],
    "memory": ["rule_miners"],
    "console": ["specs", "stale_after"],
    "serve": ["listen", "loop_guard", "gate_wait", "merge_wait", "max_connections", "token_file"],
    "policy_repo.p": ["path", "url", "branch"],
}


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(sorted(_KEYS)).flatmap(
            lambda table: st.tuples(st.just(table), st.sampled_from(_KEYS[table]), _TOML_VALUES)
        ),
        max_size=8,
        unique_by=lambda t: (t[0], t[1]),
    )
)
def test_any_value_of_any_known_key_is_a_config_or_a_located_error(
    entries: list[tuple[str, str, str]],
) -> None:
    tables: dict[str, list[str]] = {}
    for table, key, value in entries:
        tables.setdefault(table, []).append(f"{key} = {value}")
    text = "".join(f"[{t}]\n" + "\n".join(lines) + "\n" for t, lines in tables.items())
    try:
        parse_config(text, "h.toml")
    except InputError as exc:
        assert exc.diagnostics and all(d.location.file == "h.toml" for d in exc.diagnostics)
