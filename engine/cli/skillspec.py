"""Declare the ``skillspec`` program's arguments, argument for argument with the reference CLI.

This module only declares arguments; the program is built by the registry
``harness`` shares (:mod:`engine.cli.registry`). Handlers live in
``engine.cli.cmd_spec_check`` (validate, imports check, deps check) and
``engine.cli.cmd_spec_decide`` (decide, explain, test, trace) and are imported
inside the handler when their subcommand runs, so ``skillspec validate`` pays
only for what it uses and never imports Textual. ``skillspec validate SPEC
[--json]``, run from shells and pre-commit hooks, skips argparse altogether
(:func:`plain_args`), as do the usual forms of ``test`` and ``decide --inputs``.
"""

from __future__ import annotations

import sys
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

    from engine.cli.registry import ArgumentParser, Program


def _validate(args: argparse.Namespace) -> int:
    from engine.cli.cmd_spec_check import cmd_validate

    return cmd_validate(args)


def _imports_check(args: argparse.Namespace) -> int:
    from engine.cli.cmd_spec_check import cmd_imports_check

    return cmd_imports_check(args)


def _deps_check(args: argparse.Namespace) -> int:
    from engine.cli.cmd_spec_check import cmd_deps_check

    return cmd_deps_check(args)


def _test(args: argparse.Namespace) -> int:
    from engine.cli.cmd_spec_decide import cmd_test

    return cmd_test(args)


def _decide(args: argparse.Namespace) -> int:
    from engine.cli.cmd_spec_decide import cmd_decide

    return cmd_decide(args)


def _explain(args: argparse.Namespace) -> int:
    from engine.cli.cmd_spec_decide import cmd_explain

    return cmd_explain(args)


def _trace_compact(args: argparse.Namespace) -> int:
    from engine.cli.cmd_spec_decide import cmd_trace_compact

    return cmd_trace_compact(args)


def _trace_align(args: argparse.Namespace) -> int:
    from engine.cli.cmd_spec_decide import cmd_trace_align

    return cmd_trace_align(args)


def register(sub: Any) -> None:
    """Add every ``skillspec`` command to the program's subparsers."""
    from engine.cli.registry import group_help

    def spec_cmd(
        name: str,
        help_text: str,
        parent: Any = None,
    ) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = (parent or sub).add_parser(
            name, help=help_text, description=help_text
        )
        p.add_argument("spec", metavar="SPEC", help="path to a skill.spec.yml")
        p.add_argument("--json", action="store_true", help="machine-readable output")
        return p

    p = spec_cmd("validate", "Validate structure and every cross-reference of a spec.")
    p.set_defaults(handler=_validate)

    imports = sub.add_parser("imports", help="Import graph commands.")
    isub = imports.add_subparsers(title="imports commands", metavar="COMMAND")
    imports.set_defaults(handler=group_help(imports))
    p = spec_cmd("check", "Resolve imports, sections and the load order.", isub)
    p.set_defaults(handler=_imports_check)

    deps = sub.add_parser("deps", help="Dependency commands.")
    dsub = deps.add_subparsers(title="deps commands", metavar="COMMAND")
    deps.set_defaults(handler=group_help(deps))
    p = spec_cmd("check", "Check cli, file and env dependencies; list the rest.", dsub)
    p.set_defaults(handler=_deps_check)

    p = spec_cmd("test", "Run the spec's scenario tests through decide.")
    p.add_argument(
        "--coverage", action="store_true", help="report rules and routes no scenario test reaches"
    )
    p.set_defaults(handler=_test)

    p = spec_cmd("decide", "Decide one input (or many with --inputs) against the spec.")
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--input", metavar="TEXT", help="the user input to decide")
    group.add_argument(
        "--inputs", metavar="FILE", help="one JSON string per line in, one decision per line out"
    )
    p.add_argument("--trace-dir", metavar="DIR", help="write a decision trace under DIR")
    p.set_defaults(handler=_decide)

    p = spec_cmd("explain", "Explain, rule by rule, how an input is decided.")
    p.add_argument("--input", metavar="TEXT", required=True, help="the user input to explain")
    p.add_argument("--trace-dir", metavar="DIR", help="write a decision trace under DIR")
    p.set_defaults(handler=_explain)

    trace = sub.add_parser("trace", help="Decision trace commands.")
    tsub = trace.add_subparsers(title="trace commands", metavar="COMMAND")
    trace.set_defaults(handler=group_help(trace))
    p = tsub.add_parser("compact", help="Write trace.jsonl and summary.json for a run directory.")
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=_trace_compact)
    p = spec_cmd("align", "Re-decide a traced input and compare the deterministic facts.", tsub)
    p.add_argument("--decision-trace", metavar="RUN_DIR", required=True)
    p.add_argument("--summary", action="store_true", help="print only the summary")
    p.set_defaults(handler=_trace_align)


@cache
def program() -> Program:
    """The ``skillspec`` program, built by the registry ``harness`` shares."""
    from engine.cli.registry import Program

    return Program(
        prog="skillspec",
        description="Check SkillSpec v0 contracts (skill.spec.yml) and decide inputs against them.",
        commands=(register,),
    )


def __getattr__(name: str) -> Program:
    """``PROGRAM``, built on first use (module-level names stay cheap to import)."""
    if name == "PROGRAM":
        return program()
    raise AttributeError(name)


def build_parser() -> ArgumentParser:
    return program().build_parser()


def plain_validate_args(argv: Sequence[str]) -> argparse.Namespace | None:
    """``validate SPEC`` with an optional ``--json`` before or after it, read without argparse.

    Returns the namespace argparse would build, or None for anything else
    (a SPEC starting with ``-``, ``--help``, another option, a second
    argument), which then goes to the real parser so every usage error and
    help text stays argparse's own.
    """
    if not argv or argv[0] != "validate":
        return None
    return plain_args(argv)


#: Per command the fast path reads: its flags, and its handler.
_PLAIN: dict[str, tuple[frozenset[str], Any]] = {
    "validate": (frozenset({"--json"}), _validate),
    "test": (frozenset({"--json", "--coverage"}), _test),
    "decide": (frozenset({"--json"}), _decide),
}


def plain_args(argv: Sequence[str]) -> argparse.Namespace | None:
    """The usual forms of the commands run from scripts and hooks, read without argparse.

    ``validate SPEC [--json]``, ``test SPEC [--json] [--coverage]`` and
    ``decide SPEC --inputs FILE [--json]``, flags in any order: the namespace
    argparse would build, or None for anything else (an abbreviation,
    ``--opt=value``, ``--help``, ``--``, a value starting with ``-`` other
    than ``-`` itself, a second SPEC), which then goes to the real parser so
    every usage error and help text stays argparse's own. Sparing argparse,
    gettext and the command registry is a tenth of ``skillspec test``.
    """
    if not argv or argv[0] not in _PLAIN or len(argv) > 6:
        return None
    command = argv[0]
    flags, handler = _PLAIN[command]
    values: dict[str, object] = {name[2:]: False for name in sorted(flags)}
    spec: str | None = None
    inputs: str | None = None
    rest = iter(argv[1:])
    for word in rest:
        if word in flags:
            values[word[2:]] = True
        elif command == "decide" and word == "--inputs" and inputs is None:
            inputs = next(rest, None)
            if inputs is None or (inputs.startswith("-") and inputs != "-"):
                return None
        elif word.startswith("-") or spec is not None:
            return None
        else:
            spec = word
    if spec is None or (command == "decide" and inputs is None):
        return None
    from engine.capped import path_refusal

    if path_refusal(spec) is not None or (inputs not in (None, "-") and path_refusal(inputs)):
        return None  # argparse refuses it as a usage error naming the argument
    if command == "decide":
        values.update(input=None, inputs=inputs, trace_dir=None)
    from engine.cli.common import plain_namespace

    return plain_namespace(spec=spec, handler=handler, **values)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    quick = plain_args(args)
    if quick is not None:
        from engine.cli.common import run_main

        return run_main(quick.handler, quick)
    return program().main(args)


if __name__ == "__main__":
    sys.exit(main())
