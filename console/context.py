"""What every pane shares: the options, the store path, the clock, poll pacing.

Passed to panes explicitly (not reached through ``self.app``) so a pane can be
tested in a tiny host app, and so tests can pin the clock for snapshots.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from engine.store.db import connect
from engine.views.session import ConsoleOptions


def _wall_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class ConsoleContext:
    options: ConsoleOptions
    clock: Callable[[], int] = field(default=_wall_ms)
    poll_interval: float = 0.15
    refresh_interval: float = 2.0
    live: bool = True
    #: Run the embedded evaluator (behind the store lease) and, with --demo, the fleet feed.
    evaluate: bool = True

    @property
    def store_path(self) -> Path:
        return self.options.store_path

    def connect(self) -> sqlite3.Connection:
        """A fresh connection for the calling worker thread (sqlite3 objects are per thread)."""
        return connect(self.store_path, check_same_thread=False)
