"""Fixtures of the end-to-end suite: the three clients, a recording hook, a recording receiver."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e import _npm
from tests.e2e._clients import CLIENTS, ClientKit
from tests.e2e._config import RecordingHook
from tests.e2e._receiver import Receiver

PACKAGES = {"claude": _npm.CLAUDE, "codex": _npm.CODEX, "gemini": _npm.GEMINI}


def installed(name: str) -> ClientKit:
    """The client's kit, after its pinned package is installed (or the test skipped/failed)."""
    _npm.install(PACKAGES[name])
    return CLIENTS[name]


@pytest.fixture(params=sorted(CLIENTS))
def kit(request: pytest.FixtureRequest) -> ClientKit:
    """Each of the three clients in turn."""
    return installed(str(request.param))


@pytest.fixture
def hook(tmp_path: Path) -> RecordingHook:
    return RecordingHook.at(tmp_path / "hook")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as running:
        yield running
