"""The command table is the one place that names a command's code (issue 20).

- every entry of ``HARNESS_COMMANDS`` and ``SKILLSPEC_COMMANDS`` names a module
  that has its handler and its arguments function, and every ``cmd_*``
  function of a command module is the handler of an entry;
- no function of ``engine/cli`` only imports a handler and calls it (a
  call-through: the table names the handler instead);
- no module of ``engine/cli`` imports a ``_private`` name from another, and
  their imports (at top level or inside functions) form no circle.

Each scan is also shown to catch what it forbids, in a throwaway tree.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from importlib import import_module
from pathlib import Path

from engine.cli.registry import HARNESS_COMMANDS, SKILLSPEC_COMMANDS, Command, Group
from tests.conftest import ROOT

CLI = Path("engine") / "cli"


def _entries(table: Mapping[str, Command | Group]) -> Iterator[Command]:
    for entry in table.values():
        if isinstance(entry, Group):
            yield from _entries(entry.commands)
        else:
            yield entry


def _modules(root: Path) -> dict[str, ast.Module]:
    """``engine.cli.X`` -> its syntax tree, for every module of ``root/engine/cli``."""
    return {
        f"engine.cli.{path.stem}": ast.parse(path.read_text("utf-8"))
        for path in sorted((root / CLI).glob("*.py"))
        if path.stem != "__init__"
    }


def _cli_imports(tree: ast.Module) -> Iterator[tuple[str, str | None, int]]:
    """(engine.cli module, imported name or None, line) for every import of one, anywhere."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("engine.cli."):
                    yield alias.name, None, node.lineno
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith("engine.cli."):
                for alias in node.names:
                    yield node.module, alias.name, node.lineno
            elif node.module == "engine.cli":
                for alias in node.names:
                    yield f"engine.cli.{alias.name}", None, node.lineno


def private_imports(root: Path) -> list[str]:
    """``from engine.cli.X import _name`` in another module of engine/cli."""
    found = []
    for name, tree in _modules(root).items():
        for module, imported, line in _cli_imports(tree):
            if module != name and imported is not None and imported.startswith("_"):
                found.append(f"{name}:{line} imports {module}.{imported}")
    return found


def import_cycles(root: Path) -> list[list[str]]:
    """Every circle of imports among the modules of engine/cli (each once, from its least name)."""
    modules = _modules(root)
    edges = {
        name: sorted({m for m, _n, _l in _cli_imports(tree) if m in modules and m != name})
        for name, tree in modules.items()
    }
    cycles: list[list[str]] = []

    def walk(path: list[str]) -> None:
        for nxt in edges[path[-1]]:
            if nxt == path[0]:
                cycles.append([*path, nxt])
            elif nxt not in path and nxt > path[0]:
                walk([*path, nxt])

    for start in sorted(edges):
        walk([start])
    return cycles


def call_throughs(root: Path) -> list[str]:
    """Functions whose body only imports an engine function and returns it called on its own
    parameters (``def _x(args): from engine.cli.cmd_y import cmd_y; return cmd_y(args)``)."""
    found = []
    for name, tree in _modules(root).items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef):
                continue
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                body = body[1:]
            *imports, last = body or [None]
            if not imports or not all(
                isinstance(s, ast.ImportFrom) and (s.module or "").startswith("engine")
                for s in imports
            ):
                continue
            imported = {a.asname or a.name for s in imports for a in s.names}  # type: ignore[attr-defined]
            params = [a.arg for a in node.args.args]
            call = last.value if isinstance(last, ast.Return | ast.Expr) else None
            if (
                params
                and isinstance(call, ast.Call)
                and isinstance(call.func, ast.Name)
                and call.func.id in imported
                and [a.id for a in call.args if isinstance(a, ast.Name)] == params
                and len(call.args) == len(params)
            ):
                found.append(f"{name}:{node.lineno} {node.name}")
    return found


def test_each_entry_names_a_handler_and_arguments_its_module_has() -> None:
    entries = [*_entries(HARNESS_COMMANDS), *_entries(SKILLSPEC_COMMANDS)]
    for entry in entries:
        module = import_module(entry.module)
        assert callable(getattr(module, entry.handler, None)), entry
        assert entry.arguments is None or callable(getattr(module, entry.arguments, None)), entry
    named = {(e.module, e.handler) for e in entries}
    for path in sorted((ROOT / CLI).glob("cmd_*.py")):
        module = f"engine.cli.{path.stem}"
        handlers = {
            n.name
            for n in ast.parse(path.read_text("utf-8")).body
            if isinstance(n, ast.FunctionDef) and n.name.startswith("cmd_")
        }
        assert handlers, f"{module} holds no command"
        assert {(module, h) for h in handlers} <= named, f"{module}: a handler no entry names"


def test_no_call_throughs_private_imports_or_circles_in_engine_cli() -> None:
    assert call_throughs(ROOT) == []
    assert private_imports(ROOT) == []
    assert import_cycles(ROOT) == []


def test_the_scans_catch_what_they_forbid(tmp_path: Path) -> None:
    """The shapes issue 20 found: cmd_rules' call-throughs, cmd_propose's `_load`, the circle."""
    cli = tmp_path / CLI
    cli.mkdir(parents=True)
    (cli / "cmd_rules.py").write_text(
        "import argparse\n"
        "def _backtest(args: argparse.Namespace) -> int:\n"
        '    """Run it."""\n'
        "    from engine.cli.cmd_propose import cmd_propose\n\n"
        "    return cmd_propose(args)\n"
        "def _load(args):\n"
        "    from engine.config import load_config\n\n"
        "    return load_config(args.policy)\n"
    )
    (cli / "cmd_propose.py").write_text(
        "def cmd_propose(args):\n    return 0\n"
        "def cmd_mine(args):\n"
        "    from engine.cli.cmd_rules import _load\n\n"
        "    return len(_load(args))\n"
    )
    assert call_throughs(tmp_path) == ["engine.cli.cmd_rules:2 _backtest"]
    assert private_imports(tmp_path) == [
        "engine.cli.cmd_propose:4 imports engine.cli.cmd_rules._load"
    ]
    assert import_cycles(tmp_path) == [
        ["engine.cli.cmd_propose", "engine.cli.cmd_rules", "engine.cli.cmd_propose"]
    ]
