"""Records every distinct hook payload and an OTLP body from each real client into ``recorded/``.

    .venv/bin/python -m tests.e2e.record_payloads [claude] [codex] [gemini]

Each client runs three scripted sessions under ``/tmp/harness-e2e-record/<client>/`` (a
fixed place, so the recorded paths are stable): ``normal`` (a shell call printing a
marker, a whole-file write, a shell call exiting 3), ``deny`` (its pre-tool hook denies
the first call) and ``stop`` (it answers ``continue: false``). Marker strings
(``PROMPTMARK_``, ``CMDMARK_``, ``OUTMARK_``, ``WRITEMARK_``, ``FAILMARK_``, ``TEXTMARK_``,
``DENYMARK_``, ``STOPMARK_``) let a test assert that no agent text leaks.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

from tests.e2e import _npm
from tests.e2e._clients import CLIENTS, ClientKit
from tests.e2e._config import CLAUDE_EVENTS, Otlp, RecordingHook, command_hooks, http_hooks
from tests.e2e._drivers import RunResult
from tests.e2e._receiver import HookCall, OtlpBody, Receiver, decode_logs
from tests.e2e._script import Script, say, shell, write

RECORDED = Path(__file__).with_name("recorded")
SCRATCH = Path("/tmp/harness-e2e-record")
PROMPT = "Run the scripted steps. PROMPTMARK_7f3a"
PACKAGES = {"claude": _npm.CLAUDE, "codex": _npm.CODEX, "gemini": _npm.GEMINI}
FOLDERS = {"claude": "claude-code", "codex": "codex", "gemini": "gemini-cli"}
RESOURCE = {"harness.id": "h-rec", "harness.project": "proj-rec"}

NORMAL = Script.of(
    shell("printf 'OUT%s\\n' MARK_91c2  # CMDMARK_5e1d"),
    write("notes.txt", "WRITEMARK_2b7c\n"),
    shell("echo FAILMARK_c3d4; exit 3"),
    say("All done. TEXTMARK_8e9f"),
)
DENIED = Script.of(shell("printf D > denied.txt  # DENYMARK_4a1b"), say("ok TEXTMARK_8e9f"))
STOPPED = Script.of(shell("printf S > stopped.txt  # STOPMARK_6d2e"), say("ok TEXTMARK_8e9f"))


def _payload_name(payload: dict[str, Any]) -> str:
    """``PreToolUse-Bash``, ``AfterTool-run_shell_command-exit3``, ``SessionStart``…"""
    name = str(payload.get("hook_event_name"))
    if "tool_name" in payload:
        name += f"-{payload['tool_name']}"
        if "FAILMARK" in json.dumps(payload.get("tool_input")):
            name += "-exit3"
    return name


def _session(
    kit: ClientKit, variant: str, script: Script, hook_answer: dict[str, Any] | None
) -> tuple[RunResult, list[dict[str, Any]], list[HookCall], list[OtlpBody]]:
    """One recorded run: the result, the command-hook calls, the http-hook calls, the logs."""
    base = SCRATCH / kit.name / variant
    shutil.rmtree(base, ignore_errors=True)
    hook = RecordingHook.at(base / "hook")
    if hook_answer is not None:
        marker = "DENYMARK" if variant == "deny" else "STOPMARK"
        hook.set_rules([{"event": kit.pre_tool, "contains": marker, "answer": hook_answer}])
    with Receiver() as receiver:
        hooks = command_hooks(hook.command, kit.events)
        if kit.name == "claude":  # the same events over http, where Claude Code allows it
            receiver.rules = list(json.loads(hook.rules_file.read_text()))
            hooks += http_hooks(receiver.hook_url(), CLAUDE_EVENTS)
        otlp = Otlp(receiver.url, resource=RESOURCE)
        run = kit.run(script, base, hooks=hooks, otlp=otlp, prompt=PROMPT).check()
        return run, hook.calls(), list(receiver.hooks), receiver.log_bodies()


def record(name: str) -> Path:
    kit = CLIENTS[name]
    package = PACKAGES[name]
    _npm.install(package)
    target = RECORDED / f"{FOLDERS[name]}-{package.version}"
    shutil.rmtree(target, ignore_errors=True)
    (target / "hooks").mkdir(parents=True)
    index: list[dict[str, Any]] = []
    for variant, script, answer in (
        ("normal", NORMAL, None),
        ("deny", DENIED, kit.deny("held by rule DENYMARK_rule (hold 1): DENYMARK_msg")),
        ("stop", STOPPED, kit.stop("stopped by rule STOPMARK_rule")),
    ):
        run, calls, http_calls, bodies = _session(kit, variant, script, answer)
        for call in calls:
            _save_hook(target, index, variant, "command", call["payload"], call["answer"])
        for http_call in http_calls:
            _save_hook(target, index, variant, "http", http_call.payload, http_call.answer)
        if variant == "normal":
            _save_otlp(target, index, kit, bodies)
        index.append({"variant": variant, "exit": run.returncode, "files": _files(run.workdir)})
    (target / "index.json").write_text(json.dumps(index, indent=1) + "\n")
    return target


def _files(workdir: Path) -> list[str]:
    return sorted(p.name for p in workdir.iterdir())


def _save_hook(
    target: Path,
    index: list[dict[str, Any]],
    variant: str,
    transport: str,
    payload: dict[str, Any],
    answer: Any,
) -> None:
    """Keeps the first payload of each kind (per variant when it was answered non-empty);
    an http payload only when it differs from the command hook's of the same kind."""
    name = _payload_name(payload) + (f"-answered-{variant}" if answer else "")
    text = json.dumps(payload, indent=1, ensure_ascii=False) + "\n"
    path = target / "hooks" / f"{name}.json"
    if transport == "http":
        if path.exists() and _same_shape(path.read_text(), text):
            return
        path = path.with_name(f"http-{path.name}")
    if path.exists():
        return
    path.write_text(text)
    index.append(
        {"file": f"hooks/{path.name}", "variant": variant, "via": transport, "answer": answer}
    )


def _same_shape(first: str, second: str) -> bool:
    """Same keys all the way down (the values differ between sessions and calls)."""

    def shape(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: shape(v) for k, v in value.items()}
        if isinstance(value, list):
            return [shape(v) for v in value]
        return type(value).__name__

    return bool(shape(json.loads(first)) == shape(json.loads(second)))


def _save_otlp(
    target: Path, index: list[dict[str, Any]], kit: ClientKit, bodies: list[OtlpBody]
) -> None:
    """Every logs body of the normal run that holds a tool-result record."""
    number = 0
    for body in bodies:
        events = [r.event for r in decode_logs(body)]
        if kit.otlp_tool_event not in events:
            continue
        number += 1
        suffix = "json" if body.is_json else "pb"
        path = target / f"otlp-logs-{number}.{suffix}"
        path.write_bytes(body.raw)
        index.append(
            {
                "file": path.name,
                "content_type": body.content_type,
                "records": len(events),
                "tool_events": events.count(kit.otlp_tool_event),
            }
        )


def main(argv: list[str]) -> int:
    names = argv or sorted(CLIENTS)
    for name in names:
        print(record(name))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
