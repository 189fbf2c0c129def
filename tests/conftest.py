"""Shared fixtures. ``SHARED`` is the read-only ``../shared`` folder beside the checkout."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.views.store_schema import register_full_schema

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
REFERENCE = SHARED / "conformance" / "reference"

# Tests open stores directly (engine.store.db.connect) and expect every table.
register_full_schema()


def shared_file(relative: str) -> Path:
    """A file of ``../shared``, or a skip that says why: a newcomer's clone has no ``../shared``."""
    path = SHARED / relative
    if not path.is_file():
        pytest.skip(
            f"{path} is absent: this test reads the shared design folder beside the checkout"
        )
    return path


@pytest.fixture(autouse=True)
def _isolated_config(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Never let a test read the developer's real harness.toml or state dir."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".local" / "state"))
    monkeypatch.delenv("HARNESS_CONFIG", raising=False)
