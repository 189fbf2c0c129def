"""A hook handler and OTLP receiver on in-memory ports, for tests of what they decide.

The journal port keeps the rows it was given (or refuses them, when told to
fail); the gate port answers a fixed state and records what it was asked. So
a test sees exactly the rows and the answer the real sequence produces,
without a store or a server.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.journal.errors import StoreUnavailable
from engine.journal.rows import INSERT_COLUMNS, InsertRow
from engine.serve.calls import CallBook
from engine.serve.derive import Deriver
from engine.serve.handler import HookHandler
from engine.serve.ports import GateState
from engine.serve.receiver import OtlpReceiver


class MemoryJournal:
    """Keeps submitted rows; ``fail`` makes the next submissions refuse (the store is down)."""

    def __init__(self) -> None:
        self.rows: list[InsertRow] = []
        self.fail: str | None = None

    def submit(self, rows: Sequence[InsertRow]) -> object:
        if self.fail is not None:
            raise StoreUnavailable(self.fail)
        self.rows.extend(rows)
        return len(rows)

    def acknowledge(self, token: object) -> None:
        return None

    def dicts(self) -> list[dict[str, Any]]:
        return [
            {c: v for c, v in zip(INSERT_COLUMNS, r, strict=True) if v is not None}
            for r in self.rows
        ]


class FixedGate:
    """Answers one state (settable) and records every question."""

    def __init__(self, state: GateState | None = None, late: bool = False) -> None:
        self.answer = state or GateState()
        self.late = late
        self.asked: list[tuple[str, str | None, bool]] = []

    def state(self, harness: str, run: str | None, *, gated: bool) -> tuple[GateState, bool]:
        self.asked.append((harness, run, gated))
        return self.answer, self.late


class Rig:
    """One book shared by a hook handler and an OTLP receiver, on memory ports."""

    def __init__(self, *, loop_guard: int = 8, window_ms: int = 600_000) -> None:
        self.now = 1_000
        self.journal = MemoryJournal()
        self.gate = FixedGate()
        self.book = CallBook(Deriver(loop_guard=loop_guard, collision_window_ms=window_ms))
        self.hooks = HookHandler(self.book, self.journal, self.gate, clock=lambda: self.now)
        self.receiver = OtlpReceiver(self.book, self.journal, lambda: self.now)

    def hook(
        self,
        payload: object,
        agent: str = "claude-code",
        harness: str | None = "h01",
        project: str | None = "atlas",
    ) -> Any:
        return self.hooks.handle(agent, payload, harness=harness, project=project)

    def new_rows(self, start: int) -> list[dict[str, Any]]:
        return self.journal.dicts()[start:]
