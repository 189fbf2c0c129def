"""One error base class for the console, with a title, as the engine's errors have.

Workers catch engine ``HarnessError`` and anything they raise is turned into a
``ConsoleError`` so the app shows one kind of notification (title + located
message) instead of a traceback.
"""

from __future__ import annotations

from engine.errors import HarnessError


class ConsoleError(Exception):
    """A problem the operator can act on; ``title`` heads the notification."""

    def __init__(self, title: str, message: str) -> None:
        super().__init__(message)
        self.title = title
        self.message = message

    @classmethod
    def from_harness(cls, exc: HarnessError) -> ConsoleError:
        """Keep the engine's title and every located diagnostic line."""
        detail = str(exc) if exc.diagnostics else exc.message
        return cls(exc.title, detail)
