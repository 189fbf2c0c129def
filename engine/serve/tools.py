"""One tool vocabulary for every agent, so one rule covers Claude Code, Codex and Gemini CLI.

The three agents name the same tools differently: a shell command is Claude
Code's ``Bash``, Codex's ``exec_command`` (``shell``/``local_shell`` in older
releases) and Gemini CLI's ``run_shell_command``; writing a file is ``Write``
and ``write_file``. A rule that said ``event.tool == "Bash"`` would silently
miss two agents of three. So the journal names a tool by Claude Code's name
whenever the tool has a counterpart there, and by the agent's own name
otherwise; the arguments digest is always taken from the agent's own input.

This module is the vocabulary's one home: which names are the same tool,
which tools edit files (and where their input names the paths), and what of a
call's input its arguments digest covers. For a shell command that is the
command alone: Claude Code sends ``{command, description}``, Codex's hook
``{command}`` but its OTLP record ``{cmd, yield_time_ms}``, Gemini CLI
``{command, description}``; digesting the whole input would give one call
three digests, and the loop guard (same tool, same digest) would never see
a loop whose reports came from different sources. The description is the
model's prose about the command, not the command.
"""

from __future__ import annotations

from collections.abc import Mapping

#: Agent tool names -> the journal's (Claude Code's) name for the same tool.
CANONICAL: dict[str, str] = {
    # shell commands
    "exec_command": "Bash",
    "shell": "Bash",
    "local_shell": "Bash",
    "container.exec": "Bash",
    "run_shell_command": "Bash",
    # files
    "write_file": "Write",
    "replace": "Edit",
    "apply_patch": "Edit",
    "read_file": "Read",
    "read_many_files": "Read",
    "list_directory": "LS",
    "glob": "Glob",
    "search_file_content": "Grep",
    "grep_search": "Grep",
    "web_fetch": "WebFetch",
    "google_web_search": "WebSearch",
    "web_search": "WebSearch",
}
#: Tools whose input names the file it edits (by ``file_path`` or ``notebook_path``).
EDIT_TOOLS = frozenset({"Edit", "Write", "MultiEdit", "NotebookEdit", "write_file", "replace"})
#: Patch tools: the paths are in the patch text's headers.
PATCH_TOOLS = frozenset({"apply_patch"})
_PATH_KEYS = ("file_path", "notebook_path")
_PATCH_HEADERS = ("*** Update File: ", "*** Add File: ", "*** Delete File: ", "*** Move to: ")


#: The keys a shell tool's input holds its command under (Codex's OTLP says ``cmd``).
_COMMAND_KEYS = ("command", "cmd")


def digest_basis(tool: str, tool_input: object) -> object:
    """What a call's arguments digest is taken over: a shell call's command, else its input.

    ``tool`` is the journal's (canonical) name. An input is a dict (it comes
    from JSON or an OTLP kvlist), so no ABC check is paid for it per call.
    """
    if tool == "Bash" and isinstance(tool_input, dict):
        for key in _COMMAND_KEYS:
            command = tool_input.get(key)
            if isinstance(command, str):
                return {"command": command}
    return tool_input


def canonical(tool: str) -> str:
    """The journal's name for an agent's tool (its own name when it has no counterpart)."""
    return CANONICAL.get(tool, tool)


def named_paths(tool: str, tool_input: object) -> list[str]:
    """The raw paths an edit or patch tool's input names, in order, unique (not yet joined)."""
    found: list[str] = []
    if tool in EDIT_TOOLS and isinstance(tool_input, Mapping):
        for key in _PATH_KEYS:
            value = tool_input.get(key)
            if isinstance(value, str) and value and value not in found:
                found.append(value)
    elif tool in PATCH_TOOLS:
        texts = tool_input.values() if isinstance(tool_input, Mapping) else [tool_input]
        for text in texts:
            for path in patch_paths(text):
                if path not in found:
                    found.append(path)
    return found


def patch_paths(patch: object) -> list[str]:
    """File paths named by an ``apply_patch`` patch's headers (in order, unique)."""
    if not isinstance(patch, str):
        return []
    out: list[str] = []
    for line in patch.splitlines():
        for head in _PATCH_HEADERS:
            if line.startswith(head):
                path = line[len(head) :].strip()
                if path and path not in out:
                    out.append(path)
    return out
