"""What a fake model API plays (turns of portable tool calls) and what it records back."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Vendor = Literal["claude", "codex", "gemini"]
VENDORS: tuple[Vendor, ...] = ("claude", "codex", "gemini")

# Codex's unified exec returns as soon as the command exits, or after this long with the
# command still running; scripted commands are short, so this only bounds a hang.
CODEX_YIELD_MS = 10_000


@dataclass(frozen=True)
class Call:
    """One tool call a test asks for, written once and played to any of the three clients.

    ``kind`` is ``shell`` (a command line), ``write`` (a file's whole content) or ``raw``
    (a vendor's own tool name and input, the escape hatch for anything else).
    """

    kind: Literal["shell", "write", "raw"]
    command: str = ""
    path: str = ""
    content: str = ""
    name: str = ""
    input: Mapping[str, Any] = field(default_factory=dict)

    def for_vendor(self, vendor: Vendor, cwd: str) -> tuple[str, dict[str, Any]]:
        """The tool name and input this call is, in ``vendor``'s own tool set."""
        if self.kind == "raw":
            return self.name, dict(self.input)
        if self.kind == "shell":
            return _shell(vendor, self.command)
        path = self.path if os.path.isabs(self.path) else os.path.join(cwd, self.path)
        if vendor == "claude":
            return "Write", {"file_path": path, "content": self.content}
        if vendor == "gemini":
            return "write_file", {"file_path": path, "content": self.content}
        return "apply_patch", {"input": _add_file_patch(path, self.content)}


def _shell(vendor: Vendor, command: str) -> tuple[str, dict[str, Any]]:
    if vendor == "claude":
        return "Bash", {"command": command, "description": "e2e step"}
    if vendor == "gemini":
        return "run_shell_command", {"command": command, "description": "e2e step"}
    return "exec_command", {"cmd": command, "yield_time_ms": CODEX_YIELD_MS}


def _add_file_patch(path: str, content: str) -> str:
    lines = content.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    body = "".join(f"+{line}\n" for line in lines)
    return f"*** Begin Patch\n*** Add File: {path}\n{body}*** End Patch\n"


def shell(command: str) -> Call:
    """A shell command: Claude ``Bash``, Codex ``exec_command``, Gemini ``run_shell_command``."""
    return Call("shell", command=command)


def write(path: str, content: str) -> Call:
    """A whole-file write (a relative path is joined to the run's work dir).

    Claude ``Write``, Gemini ``write_file``, Codex ``apply_patch`` (an Add File patch).
    """
    return Call("write", path=path, content=content)


def raw(name: str, tool_input: Mapping[str, Any]) -> Call:
    """A vendor's own tool, as is: the test knows which client it plays to."""
    return Call("raw", name=name, input=tool_input)


@dataclass(frozen=True)
class Turn:
    """One assistant message: its tool calls (several run in one message), or a final text.

    ``delay_s`` is how long the model "thinks" before it answers this turn.
    """

    calls: tuple[Call, ...] = ()
    text: str = ""
    delay_s: float = 0.0


def turn(*calls: Call, delay_s: float = 0.0) -> Turn:
    """An assistant message holding ``calls`` (in this order)."""
    return Turn(calls=calls, delay_s=delay_s)


def say(text: str, delay_s: float = 0.0) -> Turn:
    """A final assistant message with no tool call: the client's turn ends."""
    return Turn(text=text, delay_s=delay_s)


@dataclass(frozen=True)
class Script:
    """The assistant turns a fake model API plays, in order.

    A main-conversation request past the last turn is answered ``done`` and counted in
    ``Recording.extra_requests``.
    """

    turns: tuple[Turn, ...]

    @classmethod
    def of(cls, *turns: Turn | Call) -> Script:
        """``Script.of(shell("a"), turn(shell("b"), shell("c")))``: a bare call is a turn of
        its own, and a final ``say("done")`` is added when the last turn has calls."""
        played = [t if isinstance(t, Turn) else Turn(calls=(t,)) for t in turns]
        if not played or played[-1].calls:
            played.append(say("done"))
        return cls(tuple(played))


@dataclass(frozen=True)
class ToolCallRecord:
    """A tool call the fake sent, and the result the client sent back for it.

    ``sent_at`` is when the fake finished sending the message that held it and ``result_at``
    when the request carrying its result arrived (both ``time.monotonic()``); the gap is the
    time the client (and its hooks) took to run it, as the model sees it. ``result`` is the
    result's text; ``None`` when no result ever came back.
    """

    turn: int
    index: int
    call_id: str
    name: str
    input: Mapping[str, Any]
    sent_at: float
    result_at: float | None
    result: str | None
    is_error: bool | None

    @property
    def latency_s(self) -> float | None:
        return None if self.result_at is None else self.result_at - self.sent_at


@dataclass(frozen=True)
class Exchange:
    """A request the fake received: main-conversation (plays a turn) or side (answered idly)."""

    at: float
    method: str
    path: str
    main: bool
    turn: int | None
    body: Any


@dataclass(frozen=True)
class Recording:
    """Everything a fake model API saw during one run."""

    exchanges: tuple[Exchange, ...]
    calls: tuple[ToolCallRecord, ...]
    turns_played: int
    extra_requests: int

    @property
    def main_requests(self) -> tuple[Exchange, ...]:
        return tuple(e for e in self.exchanges if e.main)

    @property
    def side_paths(self) -> tuple[str, ...]:
        return tuple(f"{e.method} {e.path}" for e in self.exchanges if not e.main)

    def results(self) -> tuple[str | None, ...]:
        """Each sent call's result text, in the order the fake sent the calls."""
        return tuple(c.result for c in self.calls)

    def result_of(self, needle: str) -> ToolCallRecord:
        """The first call whose input mentions ``needle``."""
        for call in self.calls:
            if needle in repr(call.input):
                return call
        raise AssertionError(f"no call mentions {needle!r}: {[c.input for c in self.calls]}")


def calls_of(script: Script) -> Sequence[Call]:
    return [c for t in script.turns for c in t.calls]
