"""engine/ must work without a screen: no Textual, no console, anywhere in it."""

from __future__ import annotations

import subprocess
import sys

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
    for argv in (["skillspec", "trace"], ["skillspec", "imports"], ["harness", "policy"]):
        mod = "engine.cli.skillspec" if argv[0] == "skillspec" else "engine.cli.harness"
        out = subprocess.run(
            [sys.executable, "-m", mod, *argv[1:]], cwd=ROOT, capture_output=True, text=True
        )
        assert out.returncode == 2
        assert f"usage: {argv[0]} {argv[1]}" in out.stderr
