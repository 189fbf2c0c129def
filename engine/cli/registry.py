"""The command table of both programs, ``harness`` and ``skillspec``, and the parser built from it.

Each program is a table (as pip's ``commands_dict``): one entry per command
and subcommand, naming the module under ``engine.cli`` that holds it, its
handler, its help, and the function of that module that adds its arguments.
Building a parser and dispatching both read the table; nothing else names a
handler, so no function exists only to import a handler and call it, and a
command module never imports another to reach its code (tests/cli/
test_command_table.py). Both programs share one parser class (exit 2 on bad
usage), one ``--version`` and one dispatch (:mod:`engine.cli.parser`) and,
through :func:`engine.cli.common.run_main`, one set of exit codes and JSON
errors.

Command modules import only argparse-level code at top level and defer heavy
imports to their handlers, so building a parser stays fast and never loads
Textual. The two commands that must start fastest (``harness hook AGENT``
and ``skillspec validate``/``test``/``decide --inputs``) skip this module
when their arguments are plain; tests/cli/test_cold_start.py checks that
their fast paths dispatch to the handlers the table names.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from engine.cli.cmd_hook import AGENT_NAMES
from engine.cli.common import EXIT_FAILED, EXIT_USAGE
from engine.cli.parser import ArgumentParser, VersionAction, dispatch, group_help


@dataclass(frozen=True)
class Command:
    """One command of a table (pip's ``CommandInfo``): where its code lives and what it is for.

    ``module`` holds the ``handler`` and, when the command takes arguments,
    the function ``arguments`` that adds them to its parser. ``description``
    is the longer text of ``COMMAND --help`` (argparse shows none without it);
    ``defaults`` are set on the parsed namespace (``hook``'s ``agent``).
    """

    module: str
    handler: str
    help: str
    arguments: str | None = None
    description: str | None = None
    defaults: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class Group:
    """A command with subcommands of its own (``harness rules``): its help and its table.

    Run without a subcommand it prints its own help on stderr and exits
    ``bare_exit`` (2, a usage error; ``hook`` 1, which an agent does not
    treat as a refusal of its tool call).
    """

    help: str
    commands: Table
    title: str | None = None
    metavar: str = "COMMAND"
    bare_exit: int = EXIT_USAGE


Table = Mapping[str, Command | Group]


def _spec(module: str, handler: str, text: str, arguments: str) -> Command:
    """A ``skillspec`` command: its help is also its description, as the reference CLI's."""
    return Command(module, handler, text, arguments, description=text)


_JOURNAL = "engine.cli.cmd_journal"
_RULES = "engine.cli.cmd_rules"
_HOLDS = "engine.cli.cmd_holds"
_CHECK = "engine.cli.cmd_spec_check"
_DECIDE = "engine.cli.cmd_spec_decide"

#: ``harness``, in help order.
HARNESS_COMMANDS: Table = {
    "console": Command(
        "engine.cli.cmd_console",
        "cmd_console",
        "Open the operator console (fleet, fires, rules, holds, decide, explain, backtest).",
        "arguments",
        description="Open the operator console on a store.",
    ),
    "demo": Command(
        "engine.cli.cmd_demo",
        "cmd_demo",
        "Write a simulated fleet history into the store (deterministic by seed).",
        "arguments",
        description=(
            "Write a deterministic simulated fleet history (runs, tool calls, verify failures, "
            "restarts, loop-guard trips, budgets, collisions, churn, facts, ticks) ending now; "
            "--live then keeps the fleet writing in real time until interrupted."
        ),
    ),
    "journal": Group(
        "Append to, import into, read and prune the journal.",
        {
            "append": Command(
                _JOURNAL,
                "cmd_append",
                "Admit JSON-lines rows from stdin now (bad lines are refused and counted).",
                "append_arguments",
                description=(
                    "Read one JSON object per line from stdin and admit it now; seq and at are "
                    "assigned at admission. Bad lines are refused with line and field; the good "
                    "lines are still admitted; exit 1 if any line was refused."
                ),
            ),
            "import": Command(
                _JOURNAL,
                "cmd_import",
                "Import history (JSON lines with their own at); all or nothing.",
                "import_arguments",
                description=(
                    "Import rows that carry their own `at` (ms since the epoch), non-decreasing "
                    "and not before the store's last at. One transaction: a bad line admits "
                    "nothing."
                ),
            ),
            "tail": Command(
                _JOURNAL,
                "cmd_tail",
                "Show the last rows; -f keeps following.",
                "tail_arguments",
            ),
            "stats": Command(
                _JOURNAL,
                "cmd_stats",
                "Rows by kind/type, first/last at, drops, refusals, size.",
                "stats_arguments",
            ),
            "prune": Command(
                _JOURNAL,
                "cmd_prune",
                "Delete rows older than the retention (default [store] retention_days, 45).",
                "prune_arguments",
                description=(
                    "Delete rows older than N days of journal time (before the last row's at) in "
                    "transactions of at most 5,000 rows, so writers never wait long."
                ),
            ),
        },
    ),
    "evaluate": Command(
        "engine.cli.cmd_evaluate",
        "cmd_evaluate",
        "Evaluate rules over the journal, headless.",
        "arguments",
    ),
    "rules": Group(
        "List, show, lint, backtest and explain rules.",
        {
            "list": Command(
                _RULES,
                "cmd_list",
                "Every loaded rule with its state and recent fires.",
                "list_arguments",
            ),
            "show": Command(
                _RULES,
                "cmd_show",
                "One rule: source, normalized when, hash, cost, fires.",
                "show_arguments",
            ),
            "lint": Command(
                _RULES,
                "cmd_lint",
                "Check rule files with the evaluator's loader (no store).",
                "lint_arguments",
            ),
            "backtest": Command(
                "engine.cli.cmd_backtest",
                "cmd_backtest",
                "Replay stored history through candidate rules.",
                "arguments",
            ),
            "explain": Command(
                "engine.cli.cmd_explain",
                "cmd_explain",
                "Why a fire happened, recomputed from the journal.",
                "arguments",
            ),
            "propose": Command(
                "engine.cli.cmd_propose",
                "cmd_propose",
                "Backtest a rule file and prepare a policy-repo change.",
                "propose_arguments",
            ),
            "mine": Command(
                "engine.cli.cmd_propose",
                "cmd_mine",
                "Find recurring journal patterns no active rule covers; propose rules (notify).",
                "mine_arguments",
            ),
        },
    ),
    "holds": Group(
        "List, check and release rule holds.",
        {
            "list": Command(
                _HOLDS,
                "cmd_list",
                "List active holds (--all: released ones too).",
                "list_arguments",
            ),
            "release": Command(
                _HOLDS,
                "cmd_release",
                "Release a hold by hand, with a reason.",
                "release_arguments",
            ),
            "check": Command(
                _HOLDS,
                "cmd_check",
                "Exit 0 if HARNESS may start a run, 3 if a rule hold refuses it.",
                "check_arguments",
            ),
        },
    ),
    "policy": Group(
        "Policy repo commands.",
        {
            "sync": Command(
                "engine.cli.cmd_policy",
                "cmd_sync",
                "Fetch and fast-forward each [policy_repo.*]; "
                "report rules added, changed, removed.",
                "sync_arguments",
                description=(
                    "Fetch and fast-forward each configured policy repo (git). Refuses local "
                    "changes, another branch, or a diverged history. Never touches harness.toml."
                ),
            ),
        },
    ),
    "doctor": Command(
        "engine.cli.cmd_doctor",
        "cmd_doctor",
        "Check config, store, evaluator, holds and retention.",
        "arguments",
    ),
    "metrics": Command(
        "engine.cli.cmd_metrics",
        "cmd_metrics",
        "Print store metrics in Prometheus text format.",
        "arguments",
    ),
    "serve": Command(
        "engine.cli.cmd_serve",
        "cmd_serve",
        "Take OTLP logs and Claude Code hooks in; gate; /metrics.",
        "arguments",
    ),
    "hook": Group(
        "An agent's command hook: payload on stdin, answer on stdout.",
        {
            agent: Command(
                "engine.cli.cmd_hook",
                "cmd_hook",
                f"Journal a {agent} hook event and answer its gate.",
                "arguments",
                defaults={"agent": agent},
            )
            for agent in AGENT_NAMES
        },
        title="agents",
        metavar="AGENT",
        bare_exit=EXIT_FAILED,
    ),
}

#: ``skillspec``, argument for argument with the reference CLI.
SKILLSPEC_COMMANDS: Table = {
    "validate": _spec(
        _CHECK,
        "cmd_validate",
        "Validate structure and every cross-reference of a spec.",
        "spec_arguments",
    ),
    "imports": Group(
        "Import graph commands.",
        {
            "check": _spec(
                _CHECK,
                "cmd_imports_check",
                "Resolve imports, sections and the load order.",
                "spec_arguments",
            ),
        },
    ),
    "deps": Group(
        "Dependency commands.",
        {
            "check": _spec(
                _CHECK,
                "cmd_deps_check",
                "Check cli, file and env dependencies; list the rest.",
                "spec_arguments",
            ),
        },
    ),
    "test": _spec(
        _DECIDE, "cmd_test", "Run the spec's scenario tests through decide.", "test_arguments"
    ),
    "decide": _spec(
        _DECIDE,
        "cmd_decide",
        "Decide one input (or many with --inputs) against the spec.",
        "decide_arguments",
    ),
    "explain": _spec(
        _DECIDE,
        "cmd_explain",
        "Explain, rule by rule, how an input is decided.",
        "explain_arguments",
    ),
    "trace": Group(
        "Decision trace commands.",
        {
            "compact": Command(
                _DECIDE,
                "cmd_trace_compact",
                "Write trace.jsonl and summary.json for a run directory.",
                "compact_arguments",
            ),
            "align": _spec(
                _DECIDE,
                "cmd_trace_align",
                "Re-decide a traced input and compare the deterministic facts.",
                "align_arguments",
            ),
        },
    ),
}


def _add_commands(
    parser: argparse.ArgumentParser, table: Table, title: str, metavar: str = "COMMAND"
) -> None:
    """Add ``table``'s commands (and, recursively, their subcommands) to ``parser``."""
    sub = parser.add_subparsers(title=title, metavar=metavar)
    for name, entry in table.items():
        if isinstance(entry, Group):
            group = sub.add_parser(name, help=entry.help)
            group.set_defaults(handler=group_help(group, entry.bare_exit))
            _add_commands(group, entry.commands, entry.title or f"{name} commands", entry.metavar)
            continue
        p = sub.add_parser(name, help=entry.help, description=entry.description)
        module = importlib.import_module(entry.module)
        if entry.arguments is not None:
            getattr(module, entry.arguments)(p)
        p.set_defaults(handler=getattr(module, entry.handler), **entry.defaults)


@dataclass(frozen=True)
class Program:
    """One command-line program: its name, what it is for, and its command table in help order."""

    prog: str
    description: str
    commands: Table

    def only(self, *names: str) -> Program:
        """The program with only the commands ``names`` (``harness hook`` parses with its own)."""
        return Program(self.prog, self.description, {n: self.commands[n] for n in names})

    def build_parser(self) -> ArgumentParser:
        parser = ArgumentParser(prog=self.prog, description=self.description)
        parser.add_argument("--version", action=VersionAction, help="print the version and exit")
        _add_commands(parser, self.commands, "commands")
        return parser

    def main(self, argv: Sequence[str] | None = None) -> int:
        return dispatch(self.build_parser(), argv)


HARNESS = Program(
    "harness",
    "Operate a fleet of agent harnesses: journal, rules, holds and the console.",
    HARNESS_COMMANDS,
)
SKILLSPEC = Program(
    "skillspec",
    "Check SkillSpec v0 contracts (skill.spec.yml) and decide inputs against them.",
    SKILLSPEC_COMMANDS,
)
