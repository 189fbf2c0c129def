"""The two commands that must start fast import only what they use (issues 10 and 14).

``harness hook claude-code`` runs once per agent tool call and ``skillspec
validate`` from shells and pre-commit hooks, so their import sets are pinned
here: a later change that pulls argparse, the command registry, another
command's module, aiohttp, OpenTelemetry, protobuf or the CEL runtime into
them, PyYAML or tomllib (for a plain harness.toml) into the hook, sqlite3
into validate, or dataclasses (with inspect) into either, ``typing`` or the rest of PyYAML
(its constructors' datetime and base64) into validate or test, fails a test instead of
silently costing every call. The engine modules each path may load are listed
exactly; adding one to a path means adding it here, on purpose.

Their plain-argument fast paths are also checked against argparse: whatever
they accept, argparse reads the same way.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.cli import cmd_hook, skillspec
from engine.cli.registry import HARNESS, SKILLSPEC, Command, Program
from tests.cli.test_skillspec_check import VALID, write
from tests.conftest import ROOT

FIXTURES = ROOT / "tests" / "serve" / "fixtures"

#: Never on either fast path.
HEAVY = {
    "aiohttp",
    "argparse",
    "asyncio",
    "cel_expr_python",
    "celpy",
    "google",
    "opentelemetry",
    "prometheus_client",
    "rich",
    "textual",
}

#: What a PreToolUse call may load: config, the store, holds and stops, the handler.
HOOK_ENGINE = {
    "engine",
    "engine.capped",
    "engine.cli",
    "engine.cli.cmd_hook",
    "engine.cli.common",
    "engine.cli.harness",
    "engine.config",
    "engine.config_text",
    "engine.durations",
    "engine.errors",
    "engine.journal",
    "engine.journal.errors",
    "engine.journal.rows",
    "engine.journal.schema",
    "engine.plaintoml",
    "engine.policy",
    "engine.policy.schema",
    "engine.record",
    "engine.rules",
    "engine.rules.authority",
    "engine.rules.authority.holds",
    "engine.rules.authority.lifecycle_schema",
    "engine.rules.authority.stops",
    "engine.rules.evaluation",
    "engine.rules.evaluation.schema",
    "engine.serve",
    "engine.serve.agents",
    "engine.serve.calls",
    "engine.serve.canon",
    "engine.serve.derive",
    "engine.serve.direct",
    "engine.serve.forward",
    "engine.serve.handler",
    "engine.serve.ports",
    "engine.serve.recall",
    "engine.serve.tools",
    "engine.serve.verdict",
    "engine.store",
    "engine.store.db",
    "engine.store.migrations",
    "engine.timefmt",
    "engine.views",
    "engine.views.store_schema",
    # the config names its actions after the levels (constants only: it imports nothing)
    "engine.vocab",
}
#: A call that journals rows (PostToolUse) also loads the writer.
WRITER = {"engine.journal.lines", "engine.journal.writer", "engine.store.txn"}

VALIDATE_ENGINE = {
    "engine",
    "engine.capped",
    "engine.cli",
    "engine.cli.cmd_spec_check",
    "engine.cli.common",
    "engine.cli.skillspec",
    "engine.errors",
    "engine.libyaml",
    "engine.record",
    "engine.skillspec",
    "engine.skillspec.files",
    "engine.skillspec.imports",
    "engine.skillspec.load",
    "engine.skillspec.refwalk",
    "engine.skillspec.schema",
    "engine.skillspec.structure",
    "engine.skillspec.validate",
    "engine.yamlscalars",
    "engine.yamlsrc",
}

#: What only the rest of PyYAML (constructors, representers) imports: the checker loads its parser.
NOT_PYYAML_PARSER = {"datetime", "base64"}


#: ``skillspec test`` adds decide, its matcher and the scenario runner to the checker.
TEST_ENGINE = VALIDATE_ENGINE | {
    "engine.cli.cmd_spec_decide",
    "engine.skillspec.decide",
    "engine.skillspec.decision",
    "engine.skillspec.matching",
    "engine.skillspec.scenarios",
}


def loaded_after(code: str, env: dict[str, str] | None = None) -> tuple[int, set[str]]:
    """(exit code, top-level and engine module names) once ``code`` ran ``main`` in a new process.

    ``code`` leaves the exit code in ``rc``; the module names come back on
    stderr's last line because stdout is the command's own output.
    """
    script = (
        "import sys\n" + code + "\nnames = {m.split('.')[0] for m in sys.modules} | "
        "{m for m in sys.modules if m.startswith('engine')}\n"
        "import json\n"
        "print(json.dumps({'rc': rc, 'modules': sorted(names)}), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, env=env
    )
    report = json.loads(done.stderr.strip().splitlines()[-1])
    return report["rc"], set(report["modules"])


def hook_modules(tmp_path: Path, event: str) -> tuple[int, set[str]]:
    """The modules a hook call loads, in a run that has already started (its SessionStart ran)."""
    config = tmp_path / "harness.toml"
    config.write_text('[serve]\nloop_guard = 8\ncollision_window = "10m"\n')
    env = {"PATH": "/usr/bin:/bin", "HARNESS_CONFIG": str(config), "PYTHONPATH": str(ROOT)}
    argv = ["hook", "claude-code", "--harness", "h01", "--store", str(tmp_path / "j.db")]
    started = subprocess.run(
        [sys.executable, "-m", "engine.cli.harness", *argv],
        input=(FIXTURES / "SessionStart.json").read_bytes(),
        capture_output=True,
        cwd=ROOT,
        env=env,
    )
    assert started.returncode == 0, started.stderr
    code = (
        "import io\n"
        f"sys.stdin = io.TextIOWrapper(io.BytesIO({(FIXTURES / f'{event}.json').read_bytes()!r}))\n"
        "from engine.cli.harness import main\n"
        f"rc = main({argv!r})\n"
    )
    return loaded_after(code, env)


def test_a_pre_tool_use_hook_loads_only_the_gate_path(tmp_path: Path) -> None:
    rc, loaded = hook_modules(tmp_path, "PreToolUse")
    assert rc == 0
    assert not loaded & (HEAVY | {"yaml", "hashlib", "tomllib", "dataclasses", "inspect"})
    assert {m for m in loaded if m.startswith("engine")} <= HOOK_ENGINE


def test_a_post_tool_use_hook_adds_only_the_writer(tmp_path: Path) -> None:
    rc, loaded = hook_modules(tmp_path, "PostToolUse")
    assert rc == 0
    assert not loaded & (HEAVY | {"yaml", "tomllib", "dataclasses", "inspect"})
    engine = {m for m in loaded if m.startswith("engine")}
    assert engine <= HOOK_ENGINE | WRITER
    assert engine >= WRITER  # it did journal its row


def test_skillspec_validate_loads_only_the_checker(tmp_path: Path) -> None:
    # (This replaces the older check that the console script does not import Textual.)
    path = write(tmp_path, VALID)
    rc, loaded = loaded_after(
        f"from engine.cli.skillspec import main\nrc = main(['validate', {str(path)!r}])"
    )
    assert rc == 0
    assert not loaded & (HEAVY | {"sqlite3", "hashlib", "tomllib", "dataclasses", "inspect"})
    # PyYAML's parser half only (engine.libyaml), no ``typing`` at run time (engine.record)
    # and no json (its messages quote with it, once there is one)
    assert not loaded & (NOT_PYYAML_PARSER | {"typing", "json"})
    assert {m for m in loaded if m.startswith("engine")} <= VALIDATE_ENGINE


def test_skillspec_test_loads_only_the_checker_and_decide(tmp_path: Path) -> None:
    path = write(tmp_path, VALID)
    rc, loaded = loaded_after(
        f"from engine.cli.skillspec import main\nrc = main(['test', {str(path)!r}])"
    )
    assert rc == 0
    banned = {"sqlite3", "hashlib", "tomllib", "dataclasses", "inspect", "argparse"}
    assert not loaded & (HEAVY | banned | NOT_PYYAML_PARSER)
    # decide, its matcher and the scenario runner keep ``typing`` and json off the path too
    assert not loaded & {"typing", "json"}
    assert {m for m in loaded if m.startswith("engine")} <= TEST_ENGINE


# -- the plain-argument fast paths read what argparse reads ---------------------------------

WORDS = st.sampled_from(
    [
        "claude-code",
        "validate",
        "--harness",
        "--project",
        "--store",
        "--json",
        "--store=x",
        "--har",
        "--js",
        "-h",
        "--help",
        "--",
        "h1",
        "x.db",
        "-1",
        "",
        "spec.yml",
        "atlas",
    ]
)


def argparse_reads(program: Program, argv: list[str]) -> dict[str, object] | None:
    """What argparse makes of ``argv`` (handler dropped), or None when it refuses or prints help."""
    parser = program.build_parser()
    _quiet(parser)
    try:
        return {k: v for k, v in vars(parser.parse_args(argv)).items() if k != "handler"}
    except _Refused:
        return None


class _Refused(Exception):
    pass


def _no_exit(*_args: object, **_kwargs: object) -> None:
    raise _Refused


def _quiet(parser: argparse.ArgumentParser) -> None:
    """Make ``parser`` and its subparsers raise instead of exiting (help still prints)."""
    parser.exit = _no_exit  # type: ignore[method-assign]
    parser.error = _no_exit  # type: ignore[method-assign]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _quiet(sub)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(cmd_hook.AGENT_NAMES), st.lists(WORDS, max_size=7))
def test_the_hook_fast_path_reads_plain_arguments_as_argparse_does(
    agent: str, words: list[str]
) -> None:
    argv = ["hook", agent, *words[1:]] if words[:1] != ["--"] else ["hook", *words]
    quick = cmd_hook.plain_args(argv[1:])
    if quick is None:
        return
    assert quick.handler is cmd_hook.cmd_hook
    read = argparse_reads(HARNESS.only("hook"), argv)
    assert read == {k: v for k, v in vars(quick).items() if k != "handler"}


@settings(max_examples=300, deadline=None)
@given(st.lists(WORDS, max_size=4))
def test_the_validate_fast_path_reads_plain_arguments_as_argparse_does(words: list[str]) -> None:
    argv = ["validate", *words]
    quick = skillspec.plain_validate_args(argv)
    if quick is None:
        return
    assert quick.handler is not None
    read = argparse_reads(skillspec.program(), argv)
    assert read == {k: v for k, v in vars(quick).items() if k != "handler"}


SPEC_WORDS = st.sampled_from(
    [
        *("--json", "--coverage", "--inputs", "--input", "--inp", "--inputs=x", "-", "-h"),
        *("--help", "--", "--trace-dir", "d", "s.yml", "in.jsonl", "-1", "", "--json=1", "test"),
    ]
)


@settings(max_examples=500, deadline=None)
@given(st.sampled_from(["test", "decide", "validate"]), st.lists(SPEC_WORDS, max_size=6))
def test_the_test_and_decide_fast_paths_read_as_argparse_does(
    command: str, words: list[str]
) -> None:
    argv = [command, *words]
    quick = skillspec.plain_args(argv)
    if quick is None:
        return
    read = argparse_reads(skillspec.program(), argv)
    assert read == {k: v for k, v in vars(quick).items() if k != "handler"}


def test_the_fast_paths_take_the_usual_forms_and_leave_the_rest_to_argparse() -> None:
    hook = cmd_hook.plain_args
    assert vars(hook(["claude-code"]) or argparse.Namespace()) == {
        "harness": None,
        "project": None,
        "store": None,
        "agent": "claude-code",
        "handler": cmd_hook.cmd_hook,
    }
    assert hook(["claude-code", "--harness", "h1", "--store", "j.db"]) is not None
    assert getattr(hook(["gemini", "--harness", "g1"]), "agent", None) == "gemini"
    for argv in (
        ["claude-code", "--harness=h1"],
        ["claude-code", "--har", "h1"],
        ["claude-code", "--harness", "h1", "--harness", "h2"],
        ["claude-code", "--harness", "-h"],
        ["claude-code", "--help"],
        ["aider"],
        [],
    ):
        assert hook(argv) is None, argv
    validate = skillspec.plain_validate_args
    assert vars(validate(["validate", "--json", "s.yml"]) or argparse.Namespace())["json"]
    for argv in (["validate"], ["validate", "-s.yml"], ["validate", "a", "b"], ["test", "s"]):
        assert validate(argv) is None, argv
    plain = skillspec.plain_args
    assert vars(plain(["test", "s.yml", "--coverage"]) or argparse.Namespace())["coverage"]
    decide = vars(plain(["decide", "--json", "s.yml", "--inputs", "-"]) or argparse.Namespace())
    assert (decide["inputs"], decide["input"], decide["trace_dir"]) == ("-", None, None)
    for argv in (
        ["decide", "s.yml", "--input", "x"],
        ["decide", "s.yml", "--inputs", "f", "--trace-dir", "d"],
        ["decide", "s.yml", "--inputs=f"],
        ["decide", "s.yml"],
        ["test", "s.yml", "--cov"],
        ["explain", "s.yml", "--input", "x"],
    ):
        assert plain(argv) is None, argv


def test_the_fast_paths_run_the_handlers_the_command_table_names() -> None:
    """The fast paths name their handlers themselves (they may not load the registry)."""
    from importlib import import_module

    def handler(entry: object) -> object:
        assert isinstance(entry, Command)
        return getattr(import_module(entry.module), entry.handler)

    hook = HARNESS.commands["hook"]
    for agent in cmd_hook.AGENT_NAMES:
        quick = cmd_hook.plain_args([agent])
        assert quick is not None and quick.handler is handler(hook.commands[agent])  # type: ignore[union-attr]
    assert set(skillspec.PLAIN) == {"validate", "test", "decide"}
    for command, (_flags, module, name) in skillspec.PLAIN.items():
        entry = SKILLSPEC.commands[command]
        assert isinstance(entry, Command) and (entry.module, entry.handler) == (module, name)
    for argv in (["validate", "s.yml"], ["test", "s.yml"], ["decide", "s.yml", "--inputs", "-"]):
        quick = skillspec.plain_args(argv)
        assert quick is not None and quick.handler is handler(SKILLSPEC.commands[argv[0]])


# -- the console script exits without tearing the interpreter down ---------------------------

#: ``main`` as the console script used to run it, and ``run``, as the console script runs it now.
BY_MAIN = "import sys\nfrom engine.cli.skillspec import main\nsys.exit(main())\n"
BY_RUN = "from engine.cli.skillspec import run\nrun()\n"
#: An object whose finaliser writes to stderr when the interpreter tears its module down.
TEARDOWN_PROBE = (
    "import sys, types\n"
    "class Probe:\n"
    "    def __del__(self):\n"
    "        sys.stderr.write('torn down\\n')\n"
    "probe = types.ModuleType('probe')\n"
    "probe.it = Probe()\n"
    "sys.modules['probe'] = probe\n"
)


def _run(code: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, cwd=ROOT
    )


def test_the_console_script_says_and_exits_what_main_does(tmp_path: Path) -> None:
    valid = write(tmp_path, VALID)
    invalid = write(tmp_path, VALID.replace("schema: skillspec/v0", "schema: 7"), "bad.spec.yml")
    for argv in (
        ["validate", str(valid)],
        ["validate", "--json", str(invalid)],
        ["validate", str(tmp_path / "absent.spec.yml")],
        ["test", str(valid), "--json"],
        ["validate"],  # a usage error: argparse's SystemExit
    ):
        by_main, by_run = _run(BY_MAIN, *argv), _run(BY_RUN, *argv)
        assert (by_run.returncode, by_run.stdout, by_run.stderr) == (
            by_main.returncode,
            by_main.stdout,
            by_main.stderr,
        ), argv
    assert {_run(BY_RUN, "validate", str(p)).returncode for p in (valid, invalid)} == {0, 1}


def test_the_console_script_skips_the_teardown_unless_something_waits_for_the_exit(
    tmp_path: Path,
) -> None:
    valid = str(write(tmp_path, VALID))
    assert "torn down" in _run(TEARDOWN_PROBE + BY_MAIN, "validate", valid).stderr
    fast = _run(TEARDOWN_PROBE + BY_RUN, "validate", valid)
    assert fast.returncode == 0 and fast.stdout.startswith("ok: ")
    assert "torn down" not in fast.stderr
    # an atexit handler (a coverage tracer, logging) gets the ordinary exit, teardown and all
    waiting = _run(
        "import atexit, sys\natexit.register(sys.stderr.write, 'at exit\\n')\n"
        + TEARDOWN_PROBE
        + BY_RUN,
        "validate",
        valid,
    )
    assert waiting.returncode == 0 and waiting.stdout.startswith("ok: ")
    assert "at exit" in waiting.stderr and "torn down" in waiting.stderr
