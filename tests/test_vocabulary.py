"""Each shared word has one home, and a test here fails when it is restated elsewhere (issue 20).

The scans read the code of ``engine/`` and ``console/`` (string constants and
calls, never docstrings or comments) and each is shown to catch a
restatement written into a throwaway tree, so a scan that silently stopped
looking would fail too:

- level words (``annotate``, ``notify``, ``hold``, ``stop``) come only from
  :mod:`engine.vocab`; a word that is spelled the same but is not a level is
  listed in :data:`NOT_LEVELS` with the reason;
- journal time is formatted only in :mod:`engine.timefmt` (one function per
  format): nothing else calls ``strftime``, ``fromtimestamp``, ``isoformat`` …;
- transactions begin, commit and roll back only in :mod:`engine.store.txn`: no
  other module passes ``BEGIN IMMEDIATE`` (or ``BEGIN``, ``COMMIT``, ``ROLLBACK``,
  ``SAVEPOINT``) to ``execute`` (docstrings may still explain them);
- a module name has one meaning: a name (give or take a plural ``s``) repeats
  only as a read model of the same thing (``engine/views/X.py`` importing the
  engine module or package ``X`` it shows, ``console/panes/X.py`` importing
  that view) or from :data:`SHARED_NAMES`, each entry with its reason.
"""

from __future__ import annotations

import ast
import re
import shutil
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

from engine.vocab import LEVELS
from tests.conftest import ROOT

SCANNED = ("engine", "console")


def _sources(root: Path) -> Iterator[tuple[str, ast.Module]]:
    for package in SCANNED:
        for path in sorted((root / package).rglob("*.py")):
            if "__pycache__" not in path.parts:
                yield path.relative_to(root).as_posix(), ast.parse(path.read_text("utf-8"))


def _docstrings(tree: ast.Module) -> set[int]:
    """The ids of every docstring node (module, class and function)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _identifier_lists(tree: ast.Module) -> set[int]:
    """Strings of ``__slots__``/``__match_args__``/``__all__``: attribute names, not words."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id in ("__slots__", "__match_args__", "__all__")
            for t in node.targets
        ):
            found.update(id(n) for n in ast.walk(node.value) if isinstance(n, ast.Constant))
    return found


def _strings(tree: ast.Module) -> Iterator[tuple[str, ast.Constant]]:
    """Every string constant of the code with the name of the function (or class) around it."""
    skip = _docstrings(tree) | _identifier_lists(tree)

    def walk(node: ast.AST, scope: str) -> Iterator[tuple[str, ast.Constant]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                yield from walk(child, child.name)
            elif isinstance(child, ast.Constant):
                if isinstance(child.value, str) and id(child) not in skip:
                    yield scope, child
            else:
                yield from walk(child, scope)

    yield from walk(tree, "<module>")


# -- level words --------------------------------------------------------------

LEVEL_HOME = "engine/vocab.py"
_QUOTED_LEVEL = re.compile(r"""['"](""" + "|".join(LEVELS) + r""")['"]""")

#: Strings spelled like a level that are not one: (path, function, word) -> why.
NOT_LEVELS: dict[tuple[str, str, str], str] = {
    # `harness holds release --json` prints {"ok": true, "hold": {...}}: the key names the row.
    ("engine/cli/cmd_holds.py", "cmd_release", "hold"): "the JSON key of the released hold",
    # The timeline's status line counts hold rows ("3 holds"), a noun.
    ("console/panes/timeline.py", "_status", "hold"): "the noun counted in the status line",
    # The gate's decisions (free, deny, block, stop) are metrics labels and agent verdicts:
    # a closed set of their own, not levels (a hold-level fire is a deny or a block, and the
    # loop guard stops a run without any rule level). Their one home is engine/serve/verdict.py.
    ("engine/serve/verdict.py", "<module>", "stop"): "the gate's decision label",
}


def level_restatements(root: Path) -> tuple[list[str], set[tuple[str, str, str]]]:
    """Level words written outside :data:`LEVEL_HOME`, and the allow-list entries that matched."""
    found: list[str] = []
    allowed: set[tuple[str, str, str]] = set()
    for path, tree in _sources(root):
        if path == LEVEL_HOME:
            continue
        for scope, node in _strings(tree):
            text = str(node.value)
            words = [text] if text in LEVELS else _QUOTED_LEVEL.findall(text)
            for word in words:
                key = (path, scope, word)
                if key in NOT_LEVELS:
                    allowed.add(key)
                else:
                    found.append(f"{path}:{node.lineno} ({scope}): {word!r}")
    return found, allowed


def test_level_words_come_only_from_the_vocabulary() -> None:
    found, allowed = level_restatements(ROOT)
    assert found == [], "import the level from engine.vocab instead:\n" + "\n".join(found)
    assert allowed == set(NOT_LEVELS), f"stale NOT_LEVELS entries: {set(NOT_LEVELS) - allowed}"


def test_the_level_scan_catches_a_restated_level(tmp_path: Path) -> None:
    _write(
        tmp_path / "engine" / "views" / "x.py",
        '"""A view."""\n'
        "def f(level, conn):\n"
        '    """The docstring may say hold."""\n'
        '    if level == "hold":\n'
        "        conn.execute(\"SELECT * FROM rule_fires WHERE effective_level = 'stop'\")\n",
    )
    _write(tmp_path / "engine" / "vocab.py", 'HOLD = "hold"\n')
    _write(tmp_path / "console" / "app.py", "class A:\n    __slots__ = ('stop',)\n")
    found, _ = level_restatements(tmp_path)
    assert found == ["engine/views/x.py:4 (f): 'hold'", "engine/views/x.py:5 (f): 'stop'"]


# -- date and time formats ------------------------------------------------------

TIME_HOME = "engine/timefmt.py"
#: The calls that turn an instant into text (or into the datetime that is then formatted).
FORMATTERS = frozenset(
    {"strftime", "fromtimestamp", "utcfromtimestamp", "isoformat", "ctime", "asctime"}
    | {"gmtime", "localtime"}
)


def time_formatting(root: Path) -> list[str]:
    """Calls of a formatter outside :data:`TIME_HOME`."""
    found = []
    for path, tree in _sources(root):
        if path == TIME_HOME:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in FORMATTERS:
                found.append(f"{path}:{node.lineno}: .{node.attr}")
            elif isinstance(node, ast.ImportFrom) and node.module in ("datetime", "time"):
                found.extend(
                    f"{path}:{node.lineno}: from {node.module} import {a.name}"
                    for a in node.names
                    if a.name in FORMATTERS
                )
    return found


def test_time_is_formatted_only_in_timefmt() -> None:
    found = time_formatting(ROOT)
    assert found == [], "add the format to engine/timefmt.py and call it:\n" + "\n".join(found)


def test_the_time_scan_catches_a_format_written_elsewhere(tmp_path: Path) -> None:
    _write(
        tmp_path / "engine" / "views" / "x.py",
        "from datetime import UTC, datetime\n"
        "from time import strftime\n"
        "def f(ms):\n"
        "    return datetime.fromtimestamp(ms / 1000, UTC).strftime('%H')\n"
        "def g(d):\n"
        "    return d.isoformat(), datetime.fromisoformat('2026-01-01')\n",
    )
    _write(tmp_path / "engine" / "timefmt.py", "import time\nX = time.strftime('%Y')\n")
    assert sorted(time_formatting(tmp_path)) == [
        "engine/views/x.py:2: from time import strftime",
        "engine/views/x.py:4: .fromtimestamp",
        "engine/views/x.py:4: .strftime",
        "engine/views/x.py:6: .isoformat",
    ]


# -- transactions ----------------------------------------------------------------

TXN_HOME = "engine/store/txn.py"
_TXN_STATEMENT = re.compile(r"^\s*(BEGIN|COMMIT|END|ROLLBACK|SAVEPOINT|RELEASE)\b", re.I)
_EXECUTE = frozenset({"execute", "executemany", "executescript"})


def _sql_text(node: ast.expr) -> str | None:
    """The text of a string constant, or the leading text of an f-string."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values:
        return _sql_text(node.values[0])
    return None


def hand_written_transactions(root: Path) -> list[str]:
    """``execute`` calls outside :data:`TXN_HOME` whose SQL begins or ends a transaction."""
    found = []
    for path, tree in _sources(root):
        if path == TXN_HOME:
            continue
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in _EXECUTE
                and node.args
                and (text := _sql_text(node.args[0])) is not None
                and (m := _TXN_STATEMENT.match(text))
            ):
                found.append(f"{path}:{node.lineno}: {m.group(1).upper()}")
    return found


def test_transactions_are_written_only_in_txn() -> None:
    found = hand_written_transactions(ROOT)
    assert found == [], "use engine.store.txn (immediate, snapshot …):\n" + "\n".join(found)


def test_the_transaction_scan_catches_a_hand_written_one(tmp_path: Path) -> None:
    _write(
        tmp_path / "engine" / "rules" / "x.py",
        '"""Docstrings may say BEGIN IMMEDIATE."""\n'
        "def f(conn, n):\n"
        "    conn.execute('BEGIN IMMEDIATE')\n"
        "    conn.execute(f'SAVEPOINT s{n}')\n"
        "    conn.execute('SELECT 1')\n"
        '    conn.execute("  commit")\n',
    )
    _write(tmp_path / "engine" / "store" / "txn.py", "def f(c):\n    c.execute('BEGIN')\n")
    assert sorted(hand_written_transactions(tmp_path)) == [
        "engine/rules/x.py:3: BEGIN",
        "engine/rules/x.py:4: SAVEPOINT",
        "engine/rules/x.py:6: COMMIT",
    ]


# -- module names --------------------------------------------------------------

VIEWS, PANES = "engine/views/", "console/panes/"

#: Names several modules carry on purpose, each meaning the same kind of thing in its package.
SHARED_NAMES: dict[str, str] = {
    # engine/{journal,policy,rules,skillspec}/schema.py: each package's own tables (or the
    # SkillSpec file's schema), registered with the store's migrations by their owner.
    "schema": "each package's own schema",
    # engine/errors.py, engine/journal/errors.py, console/errors.py: each layer's exceptions.
    "errors": "each package's own exception types",
    # engine/serve/metrics.py (serve's counters) and engine/rules/metrics.py (the store's
    # figures): the two halves of one /metrics page.
    "metrics": "the figures a process reports",
    # engine/serve/app.py (serve's aiohttp app) and console/app.py (the Textual app).
    "app": "a process's application object",
    # engine/cli/skillspec.py is the `skillspec` program, over the engine/skillspec package.
    "skillspec": "the SkillSpec checker and its program",
}

#: Read models that show their owner's rows by SQL instead of importing the owner's module.
READS_BY_SQL: dict[str, str] = {
    # Pages rule_fires, the rows engine/rules/evaluation/fires.py writes, keyset by keyset.
    "engine/views/fires.py": "engine/rules/evaluation/fires.py",
    # Summarises the harnesses of the fleet (engine/fleet simulates one) from the journal.
    "engine/views/fleet.py": "engine/fleet",
}


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports (``from a import b`` counts ``a`` and ``a.b``)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def _dotted(relative: str) -> str:
    return relative.removesuffix(".py").replace("/", ".")


def _name_groups(root: Path) -> dict[str, list[str]]:
    """Modules and packages of engine/ and console/ by name, a plural ``s`` dropped."""
    groups: dict[str, list[str]] = defaultdict(list)
    for package in SCANNED:
        for path in sorted((root / package).rglob("*")):
            if "__pycache__" in path.parts:
                continue
            if path.is_dir():
                name = path.name
            elif path.suffix == ".py" and path.name != "__init__.py":
                name = path.stem
            else:
                continue
            key = name[:-1] if name.endswith("s") else name
            groups[key].append(path.relative_to(root).as_posix())
    return groups


def _name_problems(root: Path, key: str, paths: list[str]) -> list[str]:
    owners = [p for p in paths if not p.startswith((VIEWS, PANES))]
    views = [p for p in paths if p.startswith(VIEWS)]
    problems = []
    if len(owners) > 1:
        problems.append(f"{key}: {' and '.join(sorted(owners))} mean different things")
    for view in views:
        shown = owners[0] if owners else None
        if shown is None or READS_BY_SQL.get(view) == shown:
            continue
        target = _dotted(shown)
        if not any(m == target or m.startswith(target + ".") for m in _imports(root / view)):
            problems.append(f"{key}: {view} does not import {target}, so it is not its view")
    for pane in (p for p in paths if p.startswith(PANES)):
        wanted = {_dotted(v) for v in views}
        if not wanted & _imports(root / pane):
            problems.append(f"{key}: {pane} does not import a view of its name")
    return problems


def name_clashes(root: Path) -> tuple[list[str], set[str]]:
    """Names with more than one meaning, and the :data:`SHARED_NAMES` entries that were used."""
    found: list[str] = []
    shared: set[str] = set()
    for key, paths in sorted(_name_groups(root).items()):
        if len(paths) < 2:
            continue
        if key.removesuffix("s") in {n.removesuffix("s") for n in SHARED_NAMES}:
            shared.update(n for n in SHARED_NAMES if n.removesuffix("s") == key)
            continue
        found.extend(_name_problems(root, key, paths))
    return found, shared


def test_each_module_name_has_one_meaning() -> None:
    found, shared = name_clashes(ROOT)
    assert found == [], "rename one of them:\n" + "\n".join(found)
    assert shared == set(SHARED_NAMES), f"stale SHARED_NAMES: {set(SHARED_NAMES) - shared}"


def _tree_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "tree"
    for package in SCANNED:
        shutil.copytree(
            ROOT / package, copy / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    return copy


def test_the_name_scan_catches_the_names_issue_20_fixed(tmp_path: Path) -> None:
    """gate/gates, hooks/hooks and live/live each fail again if they come back."""
    copy = _tree_copy(tmp_path)
    assert name_clashes(copy)[0] == []
    gates = next(p for p in _name_groups(copy)["gate"] if p.endswith("gates.py"))
    hooks = next(p for p in _name_groups(copy)["hook"] if p.endswith("hooks.py"))
    _write(copy / "engine" / "serve" / "gate.py", '"""Answers hooks."""\n')
    _write(copy / "engine" / "serve" / "hooks.py", '"""Claude Code payloads."""\n')
    _write(copy / "engine" / "fleet" / "live.py", '"""The fleet in real time."""\n')
    _write(copy / "console" / "panes" / "acting.py", '"""Not built on engine.views.acting."""\n')
    found, _ = name_clashes(copy)
    assert found == [
        "acting: console/panes/acting.py does not import a view of its name",
        f"gate: {' and '.join(sorted([gates, 'engine/serve/gate.py']))} mean different things",
        f"hook: {' and '.join(sorted([hooks, 'engine/serve/hooks.py']))} mean different things",
        "live: engine/views/live.py does not import engine.fleet.live, so it is not its view",
    ]


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
