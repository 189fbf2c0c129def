"""The ``skillspec`` program: its fast path for scripts, then the command table's parser.

The commands, their handlers and their arguments are entries of the command
table in :mod:`engine.cli.registry` (``SKILLSPEC_COMMANDS``), argument for
argument with the reference CLI; their code lives in
``engine.cli.cmd_spec_check`` (validate, imports check, deps check) and
``engine.cli.cmd_spec_decide`` (decide, explain, test, trace). ``skillspec
validate SPEC [--json]``, run from shells and pre-commit hooks, skips
argparse and the registry altogether (:func:`plain_args`), as do the usual
forms of ``test`` and ``decide --inputs``; tests/cli/test_cold_start.py
checks that they reach the handlers the table names.
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
from importlib import import_module

TYPE_CHECKING = False  # no ``typing`` at run time (see engine.record)
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from typing import NoReturn

    from engine.cli.parser import ArgumentParser
    from engine.cli.registry import Program


def __getattr__(name: str) -> Program:
    """``PROGRAM``: the registry's ``skillspec`` (imported on first use, not by the fast path)."""
    if name == "PROGRAM":
        return program()
    raise AttributeError(name)


def program() -> Program:
    """The ``skillspec`` program of the command table."""
    from engine.cli.registry import SKILLSPEC

    return SKILLSPEC


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


#: Per command the fast path reads: its flags, and the module and handler its table entry names.
PLAIN: dict[str, tuple[frozenset[str], str, str]] = {
    "validate": (frozenset({"--json"}), "engine.cli.cmd_spec_check", "cmd_validate"),
    "test": (frozenset({"--json", "--coverage"}), "engine.cli.cmd_spec_decide", "cmd_test"),
    "decide": (frozenset({"--json"}), "engine.cli.cmd_spec_decide", "cmd_decide"),
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
    if not argv or argv[0] not in PLAIN or len(argv) > 6:
        return None
    command = argv[0]
    flags, module, handler = PLAIN[command]
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

    return plain_namespace(spec=spec, handler=getattr(import_module(module), handler), **values)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    quick = plain_args(args)
    if quick is None:
        return program().main(args)
    from engine.cli.common import run_main

    # ``validate``, ``test`` and ``decide --inputs`` build the spec's values (tens of
    # thousands of objects, no cycles among them) and are done: the cycle collector's passes
    # over them free nothing and cost a twentieth of the command (~7M instructions of a
    # decide's start), so it is paused until the command returns (a batch also pauses it).
    collecting = gc.isenabled()
    gc.disable()
    try:
        return run_main(quick.handler, quick)
    finally:
        if collecting:
            gc.enable()


def run() -> NoReturn:
    """The ``skillspec`` console script: :func:`main`, then an exit that skips the teardown.

    After a command the interpreter would free every module and object and
    collect garbage a last time (~17M instructions, a twentieth of
    ``skillspec validate``), which serves nothing once the output is out. So
    once stdout and stderr are flushed the process ends there (``os._exit``)
    with main's exit code, unless something registered an ``atexit``
    handler (a coverage tracer, logging), which the ordinary exit then runs.
    Whatever main raises (a usage error's SystemExit, an interrupt) and a
    flush that fails (a closed pipe) take the ordinary exit, which reports
    them as it always did.
    """
    code = main()
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):  # a closed pipe or stream: the ordinary exit says so
        sys.exit(code)
    handlers = getattr(atexit, "_ncallbacks", None)  # CPython's count of atexit handlers
    if handlers is not None and handlers() == 0:
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    run()
