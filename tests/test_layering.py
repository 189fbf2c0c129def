"""Layering: engine/ works without a screen, and the import contracts catch a floor pointing up."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def test_every_engine_module_imports_without_textual() -> None:
    code = (
        "import pkgutil, importlib, sys, engine\n"
        "for m in pkgutil.walk_packages(engine.__path__, 'engine.'):\n"
        "    importlib.import_module(m.name)\n"
        "bad = sorted(n for n in sys.modules if n.split('.')[0] in ('textual', 'console'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "", f"engine pulled in: {out.stdout.strip()}"


def test_cli_help_does_not_import_textual() -> None:
    for mod in ("engine.cli.harness", "engine.cli.skillspec"):
        code = (
            f"import sys, {mod} as m\n"
            "m.build_parser()\n"
            "print(any(n.split('.')[0] == 'textual' for n in sys.modules))\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
        )
        assert out.stdout.strip() == "False", mod


def test_no_engine_source_mentions_textual_import() -> None:
    offenders = []
    for path in (ROOT / "engine").rglob("*.py"):
        for line in path.read_text(encoding="utf-8").splitlines():
            stripped = line.strip()
            if stripped.startswith(
                ("import textual", "from textual", "import console", "from console")
            ):
                offenders.append(f"{path.relative_to(ROOT)}: {stripped}")
    assert offenders == []


def test_command_groups_without_subcommand_print_their_own_help() -> None:
    groups = ("policy", "holds", "journal", "rules")
    for argv in (
        ["skillspec", "trace"],
        ["skillspec", "imports"],
        *(["harness", g] for g in groups),
    ):
        mod = "engine.cli.skillspec" if argv[0] == "skillspec" else "engine.cli.harness"
        out = subprocess.run(
            [sys.executable, "-m", mod, *argv[1:]], cwd=ROOT, capture_output=True, text=True
        )
        assert out.returncode == 2
        assert f"usage: {argv[0]} {argv[1]}" in out.stderr


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).parent / "lint-imports"
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "importlinter.cli"]
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [*cmd, "--no-cache"], cwd=root, env=env, capture_output=True, text=True, timeout=300
    )


def test_import_contracts_fail_on_a_forbidden_import(tmp_path: Path) -> None:
    """The pyproject contracts hold on a copy of the tree and break when a floor points up.

    Each contract is broken once: the engine's floors (the store importing the
    rules), textual in the engine, and the rules' own sub-packages (the
    language importing evaluation, evaluation importing authority).
    """
    copy = tmp_path / "tree"
    copy.mkdir()
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    for package in ("engine", "console"):
        shutil.copytree(
            ROOT / package, copy / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    clean = _lint_imports(copy)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert " kept, 0 broken" in clean.stdout

    with (copy / "engine" / "store" / "db.py").open("a", encoding="utf-8") as f:
        f.write("\nfrom engine.rules.language import model as _model  # a floor pointing up\n")
    with (copy / "engine" / "errors.py").open("a", encoding="utf-8") as f:
        f.write("\nimport textual as _textual  # engine must never import textual\n")
    rules = copy / "engine" / "rules"
    with (rules / "language" / "model.py").open("a", encoding="utf-8") as f:
        f.write("\nfrom engine.rules.evaluation import fires as _fires  # the language evaluates\n")
    with (rules / "evaluation" / "fires.py").open("a", encoding="utf-8") as f:
        f.write("\nfrom engine.rules.authority import holds as _holds  # evaluation acts\n")
    broken = _lint_imports(copy)
    assert broken.returncode != 0
    assert " kept, 3 broken" in broken.stdout
    assert "engine.store.db -> engine.rules.language.model" in broken.stdout
    assert "engine.errors -> textual" in broken.stdout
    assert "Rules: authority over evaluation over language BROKEN" in broken.stdout
    assert "engine.rules.language.model -> engine.rules.evaluation.fires" in broken.stdout
    assert "engine.rules.evaluation.fires -> engine.rules.authority.holds" in broken.stdout
