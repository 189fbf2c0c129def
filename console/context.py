"""What every pane shares: the options, the store path, the clock, poll pacing.

Passed to panes explicitly (not reached through ``self.app``) so a pane can be
tested in a tiny host app, and so tests can pin the clock for snapshots.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path

from engine.config import HarnessConfig
from engine.views.session import ConsoleOptions, open_store, store_session


def _wall_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class ConsoleContext:
    """Mutable only in ``config``, which the reloader swaps for a newly valid harness.toml."""

    options: ConsoleOptions
    clock: Callable[[], int] = field(default=_wall_ms)
    poll_interval: float = 0.1
    refresh_interval: float = 2.0
    live: bool = True
    #: Run the background writers: the acting evaluator (only with ``--act``, behind the
    #: store lease) and, with ``--demo``, the fleet feed. Tests of the screen turn it off.
    evaluate: bool = True

    config: HarnessConfig | None = None
    #: What harness.toml itself grants (reloaded with it); see ``ConsoleOptions.granted``.
    file_config: HarnessConfig | None = None
    #: Tests turn blinking cursors off so snapshots are stable.
    cursor_blink: bool = True
    #: Shown as the header's subtitle (default: the store path).
    label: str | None = None

    def __post_init__(self) -> None:
        if self.config is None:
            self.config = self.options.config
        if self.file_config is None:
            self.file_config = self.options.granted

    @property
    def current_config(self) -> HarnessConfig:
        return self.config or self.options.config

    @property
    def granted_config(self) -> HarnessConfig:
        """What the operator's harness.toml grants (no ``--demo`` additions)."""
        return self.file_config or self.options.granted

    @property
    def policy_dir(self) -> Path | None:
        """``--policy`` (or the demo's policy directory)."""
        return self.options.policy_dir

    @property
    def store_path(self) -> Path:
        return self.options.store_path

    def connect(self) -> sqlite3.Connection:
        """A fresh connection for the calling worker thread (sqlite3 objects are per thread)."""
        return open_store(self.store_path)

    def session(self) -> AbstractContextManager[sqlite3.Connection]:
        """A fresh connection for one worker's work, closed after; store errors as HarnessError."""
        return store_session(self.store_path)
