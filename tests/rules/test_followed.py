"""The acting process follows its rule files and ``harness.toml``, and nothing else.

``harness.toml`` is polled, not watched: its directory often holds the store,
whose every write would otherwise wake the watcher (and cost the writer the
kernel's notification work).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from pathlib import Path

import pytest

from engine.config import load_config
from engine.rules.language import sources
from engine.rules.language.sources import FollowedRules, load_rule_set, rule_sources

CONFIG = "[memory.rules]\nenforce = []\n"


@pytest.fixture
def followed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FollowedRules]:
    config = tmp_path / "harness.toml"
    config.write_text(CONFIG, encoding="utf-8")
    monkeypatch.setenv("HARNESS_CONFIG", str(config))
    (tmp_path / "policy").mkdir()
    loaded_config = load_config()
    sources = rule_sources(loaded_config, [str(tmp_path / "policy")])
    rules = FollowedRules(
        loaded_config, load_rule_set(sources, loaded_config), [str(tmp_path / "policy")], say=print
    )
    stop = threading.Event()
    rules.watch(stop)
    assert rules.ready.is_set()
    yield rules
    stop.set()


def _changed_within(rules: FollowedRules, seconds: float) -> bool:
    return rules.changed.wait(seconds)


def test_an_edit_of_harness_toml_is_seen(followed: FollowedRules, tmp_path: Path) -> None:
    (tmp_path / "harness.toml").write_text(CONFIG + "# edited\n", encoding="utf-8")
    assert _changed_within(followed, 5)


def test_harness_toml_replaced_by_rename_is_seen(followed: FollowedRules, tmp_path: Path) -> None:
    """An editor's save: a new file renamed over the old one (same size, new inode)."""
    new = tmp_path / "harness.toml.new"
    new.write_text(CONFIG, encoding="utf-8")
    os.replace(new, tmp_path / "harness.toml")
    assert _changed_within(followed, 5)


def test_a_rule_file_is_seen(followed: FollowedRules, tmp_path: Path) -> None:
    (tmp_path / "policy" / "r.yml").write_text("name: r\n", encoding="utf-8")
    assert _changed_within(followed, 5)


def test_files_beside_harness_toml_are_neither_watched_nor_changes(
    followed: FollowedRules, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store's files (and any other) next to harness.toml: written all the time, no reload."""
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        (tmp_path / "journal.db-wal").write_bytes(os.urandom(64))
        (tmp_path / "notes.toml").write_bytes(os.urandom(8))
        time.sleep(0.02)
    assert not followed.changed.is_set()
    watched: list[list[str]] = []
    real = sources._changes

    def spy(roots: list[str], stop: threading.Event) -> Iterator[AbstractSet[tuple[object, str]]]:
        watched.append(roots)
        return real(roots, stop)

    monkeypatch.setattr(sources, "_changes", spy)
    stop = threading.Event()
    followed.ready.clear()
    followed.watch(stop)  # returns once the new watcher is in place
    stop.set()
    assert watched and str(tmp_path) not in watched[0]
    assert str(tmp_path / "policy") in watched[0]
